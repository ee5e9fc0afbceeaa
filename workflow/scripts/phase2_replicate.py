if __name__ == "__main__":  # rollout worker processes re-import this file: only the job runs the step
    import sys

    sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)

    from grpo_probe.provenance.inputs import refuse_changed_inputs

    refuse_changed_inputs(snakemake.input)  # a changed input is refused, not read

    from grpo_probe.phase2.replicate_jobs import phase2_replicate

    phase2_replicate(
        prereg_path=snakemake.input.prereg,
        plan_json=snakemake.input.plan,
        arm=snakemake.wildcards.arm,
        replicate=int(snakemake.wildcards.replicate),
        source=snakemake.input.source,
        checkpoint=snakemake.input.checkpoint,
        upstream=list(snakemake.input.upstream),
        final=snakemake.output.final,
        metrics=snakemake.output.metrics,
        manifest=snakemake.output.manifest,
        workers=snakemake.threads,
    )
