if __name__ == "__main__":  # rollout worker processes re-import this file: only the job runs the step
    import sys

    sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)

    from grpo_probe.provenance.inputs import refuse_changed_inputs

    refuse_changed_inputs(snakemake.input)  # a changed input is refused, not read

    from grpo_probe.probe_jobs.binding import bind_server

    bind_server(
        prereg_path=snakemake.input.prereg,
        arm=snakemake.wildcards.arm,
        address=snakemake.params.address,
        timeout_s=snakemake.params.timeout_s,
        upstream=[snakemake.input.upstream],
        source=snakemake.output.source,
        manifest=snakemake.output.manifest,
    )
