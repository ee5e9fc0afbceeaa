if __name__ == "__main__":
    import sys

    sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)

    from grpo_probe.phase2.pilot_jobs import phase2_plan

    phase2_plan(
        prereg_path=snakemake.input.prereg,
        decision_json=snakemake.input.decision,
        upstream=[snakemake.input.upstream],
        plan=snakemake.output.plan,
        manifest=snakemake.output.manifest,
        cell_tables=snakemake.params.cells,
    )
