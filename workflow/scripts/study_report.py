if __name__ == "__main__":
    import sys

    sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)

    from grpo_probe.provenance.inputs import refuse_changed_inputs

    refuse_changed_inputs(snakemake.input)  # a changed input is refused, not read

    from grpo_probe.study.jobs import study_report

    study_report(
        study_path=snakemake.input.study,
        decisions=list(snakemake.input.decisions),
        phase2s=list(snakemake.input.phase2s),
        upstream=list(snakemake.input.upstream),
        out_md=snakemake.output.md,
        out_json=snakemake.output.json,
        out_table=snakemake.output.table,
        out_figure=snakemake.output.figure,
        manifest=snakemake.output.manifest,
    )
