if __name__ == "__main__":
    import sys

    sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)

    from grpo_probe.provenance.inputs import refuse_changed_inputs

    refuse_changed_inputs(snakemake.input)  # a changed input is refused, not read

    from grpo_probe.study.calibration import load_calibration
    from grpo_probe.study.calibration_run import run_candidate

    calibration = load_calibration(snakemake.input.calibration)
    run_candidate(
        calibration,
        calibration.candidate(snakemake.wildcards.candidate),
        snakemake.input.checkpoint,
        snakemake.params.work,
        snakemake.output.record,
    )
