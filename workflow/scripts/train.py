if __name__ == "__main__":  # rollout worker processes re-import this file: only the job runs the step
    import sys

    sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)

    from grpo_probe.provenance.inputs import refuse_changed_inputs

    refuse_changed_inputs(snakemake.input)  # a changed input is refused, not read

    from grpo_probe.probe_jobs.prepare import train_reference_arm

    train_reference_arm(
        prereg_path=snakemake.input.prereg,
        arm=snakemake.wildcards.arm,
        demos_npz=snakemake.input.demos,
        upstream=[snakemake.input.upstream],
        checkpoint=snakemake.output.checkpoint,
        source=snakemake.output.source,
        manifest=snakemake.output.manifest,
    )
