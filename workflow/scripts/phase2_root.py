if __name__ == "__main__":
    import sys

    sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)

    from grpo_probe.provenance.inputs import refuse_changed_inputs

    refuse_changed_inputs(snakemake.input)  # a changed input is refused, not read

    from grpo_probe.phase2.pilot_jobs import phase2_root

    phase2_root(
        prereg_path=snakemake.input.prereg,
        record=snakemake.input.record,
        out_md=snakemake.output.md,
        out_json=snakemake.output.json,
    )
