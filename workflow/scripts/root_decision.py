if __name__ == "__main__":  # rollout worker processes re-import this file: only the job runs the step
    import sys

    sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)

    from grpo_probe.provenance.inputs import refuse_changed_inputs

    refuse_changed_inputs(snakemake.input)  # a changed input is refused, not read

    from grpo_probe.probe_jobs.decision import root_decision

    root_decision(
        prereg_path=snakemake.input.prereg,
        record=snakemake.input.record,
        out_md=snakemake.output.md,
        out_json=snakemake.output.json,
    )
