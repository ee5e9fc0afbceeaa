if __name__ == "__main__":  # rollout worker processes re-import this file: only the job runs the step
    import sys

    sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)

    from grpo_probe.provenance.inputs import refuse_changed_inputs

    refuse_changed_inputs(snakemake.input)  # a changed input is refused, not read

    from grpo_probe.probe_jobs.rollouts import ReplayShardFiles, replay

    replay(
        prereg_path=snakemake.input.prereg,
        cell=snakemake.wildcards.cell,
        source=snakemake.input.source,
        checkpoint=snakemake.input.checkpoint,
        cell_table=snakemake.input.cell_table,
        upstream=list(snakemake.input.upstream),
        oracle_report=snakemake.output.oracle,
        shards=[
            ReplayShardFiles(tuple(seeds), probe, table)
            for seeds, probe, table in zip(
                snakemake.params.seeds,
                snakemake.input.probe_tables,
                snakemake.output.tables,
                strict=True,
            )
        ],
        manifest=snakemake.output.manifest,
        workers=snakemake.threads,
        device=snakemake.params.device,
    )
