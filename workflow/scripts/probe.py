if __name__ == "__main__":  # rollout worker processes re-import this file: only the job runs the step
    import sys

    sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)

    from grpo_probe.provenance.inputs import refuse_changed_inputs

    refuse_changed_inputs(snakemake.input)  # a changed input is refused, not read

    from grpo_probe.probe_jobs.rollouts import probe_shard

    probe_shard(
        prereg_path=snakemake.input.prereg,
        cell=snakemake.wildcards.cell,
        seeds=snakemake.params.seeds,
        source=snakemake.input.source,
        checkpoint=snakemake.input.checkpoint,
        upstream=list(snakemake.input.upstream),
        table=snakemake.output.table,
        manifest=snakemake.output.manifest,
        workers=snakemake.threads,
        device=snakemake.params.device,
    )
