rule anchors:
    input:
        **prereg_files(),
        source=arm_source,
        checkpoint=arm_checkpoint,
        upstream=anchor_upstream,
        policy_code=arm_code,
    output:
        table=f"{R}/anchors/{{arm}}.parquet",
        draw0=directory(f"{R}/oracles/draw0/{{arm}}"),
        manifest=f"{R}/anchors/{{arm}}.manifest.json",
    log:
        f"{R}/logs/anchors/{{arm}}.log",
    benchmark:
        f"{R}/benchmarks/anchors/{{arm}}.tsv"
    conda:
        "../envs/grpo-probe.yaml"
    threads: RUN.workers
    resources:
        mem_mb=3000,
        runtime=60,
    params:
        device=RUN.device,
    script:
        "../scripts/anchors.py"


rule probe:
    input:
        **prereg_files(),
        source=cell_source,
        checkpoint=cell_checkpoint,
        upstream=cell_upstream,
        policy_code=cell_code,
    output:
        table=f"{R}/probe/{{cell}}/{{shard}}.parquet",
        manifest=f"{R}/probe/{{cell}}/{{shard}}.manifest.json",
    log:
        f"{R}/logs/probe/{{cell}}/{{shard}}.log",
    benchmark:
        f"{R}/benchmarks/probe/{{cell}}/{{shard}}.tsv"
    conda:
        "../envs/grpo-probe.yaml"
    threads: RUN.workers
    resources:
        mem_mb=3000,
        runtime=120,
    params:
        seeds=shard_seeds,
        device=RUN.device,
    script:
        "../scripts/probe.py"


rule join:
    input:
        **prereg_files(),
        shards=cell_shard_tables,
        anchors=cell_anchor_table,
        upstream=cell_join_upstream,
    output:
        cell_table=f"{R}/cells/{{cell}}.parquet",
        joined=f"{R}/join/{{cell}}.parquet",
        manifest=f"{R}/join/{{cell}}.manifest.json",
    log:
        f"{R}/logs/join/{{cell}}.log",
    benchmark:
        f"{R}/benchmarks/join/{{cell}}.tsv"
    conda:
        "../envs/grpo-probe.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/join.py"


rule replay:
    input:
        **prereg_files(),
        source=cell_source,
        checkpoint=cell_checkpoint,
        cell_table=f"{R}/cells/{{cell}}.parquet",
        probe_tables=replay_probe_tables,
        upstream=replay_upstream,
        policy_code=cell_code,
    output:
        oracle=f"{R}/oracles/replay/{{cell}}.json",
        tables=cell_replay_tables("{cell}"),
        manifest=f"{R}/replay/{{cell}}.manifest.json",
    log:
        f"{R}/logs/replay/{{cell}}.log",
    benchmark:
        f"{R}/benchmarks/replay/{{cell}}.tsv"
    conda:
        "../envs/grpo-probe.yaml"
    threads: RUN.workers
    resources:
        mem_mb=3000,
        runtime=120,
    params:
        seeds=REPLAY_SHARD_SEEDS,
        device=RUN.device,
    script:
        "../scripts/replay.py"
