rule prereg_check:
    input:
        **prereg_files(record=False),
    output:
        manifest=prereg_manifest(),
        served_env=SERVED_ENV_RECORD,
    log:
        f"{R}/logs/prereg_check.log",
    benchmark:
        f"{R}/benchmarks/prereg_check.tsv"
    # Bookkeeping: runs where Snakemake runs, not as a cluster job.
    localrule: True
    conda:
        "../envs/grpo-probe.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    script:
        "../scripts/prereg_check.py"


rule demos:
    input:
        **prereg_files(),
        upstream=prereg_manifest(),
    output:
        demos=f"{R}/demos/demos.npz",
        manifest=f"{R}/demos/demos.manifest.json",
    log:
        f"{R}/logs/demos.log",
    benchmark:
        f"{R}/benchmarks/demos.tsv"
    conda:
        "../envs/grpo-probe.yaml"
    resources:
        mem_mb=1000,
        runtime=20,
    script:
        "../scripts/demos.py"
