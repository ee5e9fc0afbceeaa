rule decision:
    input:
        **prereg_files(),
        cells=list(decision_cell_tables().values()),
        joined=[f"{R}/join/{cell}.parquet" for cell in CELLS],
        anchors=list(decision_anchor_tables().values()),
        replays=[p for paths in decision_replay_tables().values() for p in paths],
        gradients=list(decision_gradient_files().values()),
        upstream=[*decision_upstream(), *decision_gradient_manifests()],
    output:
        md=report(
            f"{R}/decision.md",
            caption="../report/decision.rst",
            category="Decision",
        ),
        json=f"{R}/decision.json",
        reads=report(
            f"{R}/reads.tsv",
            caption="../report/reads.rst",
            category="Decision",
        ),
        # Every figure declared (a deleted one is rebuilt), filed in the report by cell, labelled by kind.
        figures=[
            report(
                f"{R}/figures/{figure.name}",
                caption="../report/cell_figure.rst",
                category=figure.cell,
                labels={"figure": figure.kind},
            )
            for figure in figure_files(PREREG)
        ],
        manifest=f"{R}/decision.manifest.json",
    log:
        f"{R}/logs/decision.log",
    benchmark:
        f"{R}/benchmarks/decision.tsv"
    conda:
        "../envs/grpo-probe.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        prereg=RUN.prereg,
        cells=decision_cell_tables(),
        joined={cell: f"{R}/join/{cell}.parquet" for cell in CELLS},
        anchors=decision_anchor_tables(),
        replays=decision_replay_tables(),
        gradients=decision_gradient_files(),
    script:
        "../scripts/decision.py"


rule compute:
    input:
        **prereg_files(),
        decision=rules.decision.output.md,
    output:
        md=f"{R}/compute.md",
        json=f"{R}/compute.json",
    log:
        f"{R}/logs/compute.log",
    # Bookkeeping: runs where Snakemake runs, not as a cluster job.
    localrule: True
    conda:
        "../envs/grpo-probe.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    params:
        prereg=RUN.prereg,
        benchmarks=f"{R}/benchmarks",
    script:
        "../scripts/compute.py"
