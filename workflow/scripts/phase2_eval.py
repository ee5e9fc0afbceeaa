if __name__ == "__main__":  # rollout worker processes re-import this file: only the job runs the step
    import sys

    sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)

    from grpo_probe.provenance.inputs import refuse_changed_inputs

    refuse_changed_inputs(snakemake.input)  # a changed input is refused, not read

    from grpo_probe.phase2.pilot_jobs import phase2_eval

    phase2_eval(
        prereg_path=snakemake.input.prereg,
        plan_json=snakemake.input.plan,
        arm=snakemake.wildcards.arm,
        source=snakemake.input.source,
        checkpoint=snakemake.input.checkpoint,
        final_checkpoint=snakemake.input.final,
        first_table=snakemake.input.first,
        upstream=[snakemake.input.upstream],
        initial_table=snakemake.output.initial,
        final_table=snakemake.output.final,
        movement_json=snakemake.output.movement,
        manifest=snakemake.output.manifest,
        workers=snakemake.threads,
        device=snakemake.params.device,
    )
