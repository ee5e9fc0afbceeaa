if __name__ == "__main__":
    import sys

    sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)

    from grpo_probe.phase2.pilot_jobs import phase2_replay_oracle

    phase2_replay_oracle(
        prereg_path=snakemake.input.prereg,
        plan_json=snakemake.input.plan,
        arm=snakemake.wildcards.arm,
        source=snakemake.input.source,
        checkpoint=snakemake.input.checkpoint,
        table=snakemake.input.table,
        upstream=[snakemake.input.upstream],
        report=snakemake.output.report,
        manifest=snakemake.output.manifest,
    )
