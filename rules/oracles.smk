rule parallel_oracle:
    input:
        **prereg_files(),
        upstream=oracle_arm_manifests(),
        sources=list(oracle_sources().values()),
        checkpoints=list(oracle_checkpoints().values()),
        policy_code=oracle_code(),
    output:
        report=f"{R}/oracles/parallel.json",
        manifest=f"{R}/oracles/parallel.manifest.json",
    log:
        f"{R}/logs/parallel_oracle.log",
    benchmark:
        f"{R}/benchmarks/parallel_oracle.tsv"
    conda:
        "../environment.yml"
    threads: PREREG.oracles.parallel.workers
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        sources=oracle_sources(),
        checkpoints=oracle_checkpoints(),
        device=RUN.device,
    script:
        "../workflow/scripts/parallel_oracle.py"


rule draw0_oracle:
    input:
        **prereg_files(),
        source=cell_source,
        checkpoint=cell_checkpoint,
        anchors=cell_anchor_table,
        upstream=cell_upstream,
        policy_code=cell_code,
    output:
        report=f"{R}/oracles/draw0/{{cell}}.json",
        manifest=f"{R}/oracles/draw0/{{cell}}.manifest.json",
    log:
        f"{R}/logs/draw0_oracle/{{cell}}.log",
    benchmark:
        f"{R}/benchmarks/draw0_oracle/{{cell}}.tsv"
    conda:
        "../environment.yml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        device=RUN.device,
    script:
        "../workflow/scripts/draw0_oracle.py"
