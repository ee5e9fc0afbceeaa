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
        "../envs/grpo-probe.yaml"
    threads: PREREG.oracles.parallel.workers
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        sources=oracle_sources(),
        checkpoints=oracle_checkpoints(),
        device=RUN.device,
    script:
        "../scripts/parallel_oracle.py"
