rule decision:
    input:
        **prereg_files(),
        cells=list(decision_cell_tables().values()),
        joined=[f"{R}/join/{cell}.parquet" for cell in CELLS],
        anchors=list(decision_anchor_tables().values()),
        upstream=decision_upstream(),
    output:
        md=f"{R}/decision.md",
        json=f"{R}/decision.json",
        figures=directory(f"{R}/figures"),
        manifest=f"{R}/decision.manifest.json",
    log:
        f"{R}/logs/decision.log",
    benchmark:
        f"{R}/benchmarks/decision.tsv"
    conda:
        "../environment.yml"
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        prereg=RUN.prereg,
        cells=decision_cell_tables(),
        joined={cell: f"{R}/join/{cell}.parquet" for cell in CELLS},
        anchors=decision_anchor_tables(),
    script:
        "../workflow/scripts/decision.py"


rule compute:
    input:
        **prereg_files(),
        decision=rules.decision.output.md,
    output:
        md=f"{R}/compute.md",
        json=f"{R}/compute.json",
    log:
        f"{R}/logs/compute.log",
    conda:
        "../environment.yml"
    resources:
        mem_mb=500,
        runtime=5,
    params:
        prereg=RUN.prereg,
        benchmarks=f"{R}/benchmarks",
    script:
        "../workflow/scripts/compute.py"
