if __name__ == "__main__":  # rollout worker processes re-import this file: only the job runs the step
    import sys

    sys.stderr = open(snakemake.log[0], "w", buffering=1)  # tracebacks and progress bars land in the log

    from grpo_probe.probe_jobs.prepare import prereg_check

    record = list(snakemake.output.served_env)  # a served simulator's record, or none
    prereg_check(
        prereg_path=snakemake.input.prereg,
        manifest=snakemake.output.manifest,
        served_env=record[0] if record else None,
    )
