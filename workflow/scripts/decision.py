if __name__ == "__main__":  # rollout worker processes re-import this file: only the job runs the step
    import os
    import sys

    sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)

    from grpo_probe.provenance.inputs import refuse_changed_inputs

    refuse_changed_inputs(snakemake.input)  # a changed input is refused, not read

    from grpo_probe.probe_jobs.decision import decision

    decision(
        prereg_path=snakemake.params.prereg,
        cell_tables=snakemake.params.cells,
        join_tables=snakemake.params.joined,
        anchor_tables=snakemake.params.anchors,
        upstream=list(snakemake.input.upstream),
        out_md=snakemake.output.md,
        out_json=snakemake.output.json,
        out_tsv=snakemake.output.reads,
        figures_dir=os.path.dirname(snakemake.output.figures[0]),
        figures=list(snakemake.output.figures),
        manifest=snakemake.output.manifest,
        replay_tables=snakemake.params.replays,
        gradient_files=snakemake.params.gradients,
    )
