if __name__ == "__main__":  # rollout worker processes re-import this file: only the job runs the step
    import sys

    sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)

    from grpo_probe.probe_jobs import draw0_oracle

    draw0_oracle(
        prereg_path=snakemake.input.prereg,
        cell=snakemake.wildcards.cell,
        source=snakemake.input.source,
        checkpoint=snakemake.input.checkpoint,
        anchor_table=snakemake.input.anchors,
        upstream=list(snakemake.input.upstream),
        report=snakemake.output.report,
        manifest=snakemake.output.manifest,
        workers=snakemake.threads,
        device=snakemake.params.device,
    )
