if __name__ == "__main__":  # rollout worker processes re-import this file: only the job runs the step
    import sys

    sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)

    from grpo_probe.provenance.inputs import refuse_changed_inputs

    refuse_changed_inputs(snakemake.input)  # a changed input is refused, not read

    from grpo_probe.probe_jobs.rollouts import anchors

    anchors(
        prereg_path=snakemake.input.prereg,
        arm=snakemake.wildcards.arm,
        source=snakemake.input.source,
        checkpoint=snakemake.input.checkpoint,
        upstream=list(snakemake.input.upstream),
        table=snakemake.output.table,
        draw0_dir=snakemake.output.draw0,
        manifest=snakemake.output.manifest,
        workers=snakemake.threads,
        device=snakemake.params.device,
    )
