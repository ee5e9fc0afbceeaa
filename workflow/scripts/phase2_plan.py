if __name__ == "__main__":
    import sys

    sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)

    from grpo_probe.provenance.inputs import refuse_changed_inputs

    refuse_changed_inputs(snakemake.input)  # a changed input is refused, not read

    from grpo_probe.phase2.pilot_jobs import phase2_plan

    phase2_plan(
        prereg_path=snakemake.input.prereg,
        decision_json=snakemake.input.decision,
        upstream=[snakemake.input.upstream],
        plan=snakemake.output.plan,
        manifest=snakemake.output.manifest,
        cell_tables=snakemake.params.cells,
    )
