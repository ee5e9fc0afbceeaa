if __name__ == "__main__":
    import sys

    sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)

    from grpo_probe.provenance.inputs import refuse_changed_inputs

    refuse_changed_inputs(snakemake.input)  # a changed input is refused, not read

    from grpo_probe.study.calibration import load_calibration
    from grpo_probe.study.calibration_report import build_calibration_report, read_records

    build_calibration_report(
        load_calibration(snakemake.input.calibration),
        read_records(list(snakemake.input.records)),
        snakemake.output.md,
        snakemake.output.json,
        snakemake.output.iterations,
        snakemake.output.candidates,
        snakemake.output.figure,
    )
