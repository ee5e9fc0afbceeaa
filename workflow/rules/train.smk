rule train:
    input:
        **prereg_files(),
        demos=rules.demos.output.demos,
        upstream=rules.demos.output.manifest,
    output:
        checkpoint=f"{R}/arms/{{arm}}/policy.pt",
        source=f"{R}/arms/{{arm}}/source.json",
        manifest=f"{R}/arms/{{arm}}/arm.manifest.json",
    log:
        f"{R}/logs/train/{{arm}}.log",
    benchmark:
        f"{R}/benchmarks/train/{{arm}}.tsv"
    wildcard_constraints:
        arm=_alternatives(REFERENCE_ARMS),
    conda:
        "../envs/grpo-probe.yaml"
    threads: 1
    resources:
        mem_mb=3000,
        runtime=60,
    script:
        "../scripts/train.py"


rule bind_checkpoint:
    input:
        **prereg_files(),
        checkpoint=bound_checkpoint,
        upstream=prereg_manifest(),
        policy_code=arm_code,
    output:
        source=f"{R}/arms/{{arm}}/source.json",
        manifest=f"{R}/arms/{{arm}}/arm.manifest.json",
    log:
        f"{R}/logs/bind_checkpoint/{{arm}}.log",
    wildcard_constraints:
        arm=_alternatives(CHECKPOINT_ARMS),
    conda:
        "../envs/grpo-probe.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    params:
        adapter=bound_adapter,
        device=RUN.device,
    script:
        "../scripts/bind_checkpoint.py"


rule bind_server:
    input:
        **prereg_files(),
        upstream=prereg_manifest(),
    output:
        source=f"{R}/arms/{{arm}}/source.json",
        manifest=f"{R}/arms/{{arm}}/arm.manifest.json",
    log:
        f"{R}/logs/bind_server/{{arm}}.log",
    wildcard_constraints:
        arm=_alternatives(SERVED_ARMS),
    conda:
        "../envs/grpo-probe.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    params:
        address=served_address,
        timeout_s=served_timeout,
    script:
        "../scripts/bind_server.py"
