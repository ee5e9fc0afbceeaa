if __name__ == "__main__":
    import sys

    sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)

    from grpo_probe.provenance.inputs import refuse_changed_inputs

    refuse_changed_inputs(snakemake.input)  # a changed input is refused, not read

    from grpo_probe.phase2.pilot_jobs import phase2_compute

    phase2_compute(
        prereg_path=snakemake.input.prereg,
        benchmarks=snakemake.params.benchmarks,
        out_md=snakemake.output.md,
        out_json=snakemake.output.json,
    )
