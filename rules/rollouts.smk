rule anchors:
    input:
        **prereg_files(),
        source=arm_source,
        checkpoint=arm_checkpoint,
        upstream=anchor_upstream,
        policy_code=arm_code,
    output:
        table=f"{R}/anchors/{{arm}}.parquet",
        manifest=f"{R}/anchors/{{arm}}.manifest.json",
    log:
        f"{R}/logs/anchors/{{arm}}.log",
    benchmark:
        f"{R}/benchmarks/anchors/{{arm}}.tsv"
    conda:
        "../environment.yml"
    threads: RUN.workers
    resources:
        mem_mb=3000,
        runtime=60,
    params:
        device=RUN.device,
    script:
        "../workflow/scripts/anchors.py"


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
        "../environment.yml"
    threads: RUN.workers
    resources:
        mem_mb=3000,
        runtime=120,
    params:
        seeds=shard_seeds,
        device=RUN.device,
    script:
        "../workflow/scripts/probe.py"


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
        "../environment.yml"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../workflow/scripts/join.py"


rule replay_oracle:
    input:
        **prereg_files(),
        source=cell_source,
        checkpoint=cell_checkpoint,
        probe=f"{R}/cells/{{cell}}.parquet",
        upstream=replay_oracle_upstream,
        policy_code=cell_code,
    output:
        report=f"{R}/oracles/replay/{{cell}}.json",
        manifest=f"{R}/oracles/replay/{{cell}}.manifest.json",
    log:
        f"{R}/logs/replay_oracle/{{cell}}.log",
    benchmark:
        f"{R}/benchmarks/replay_oracle/{{cell}}.tsv"
    conda:
        "../environment.yml"
    threads: RUN.workers
    resources:
        mem_mb=3000,
        runtime=60,
    params:
        device=RUN.device,
    script:
        "../workflow/scripts/replay_oracle.py"


rule replay:
    input:
        **prereg_files(),
        source=cell_source,
        checkpoint=cell_checkpoint,
        probe=f"{R}/probe/{{cell}}/{{shard}}.parquet",
        upstream=replay_upstream,
        policy_code=cell_code,
    output:
        table=f"{R}/replay/{{cell}}/{{shard}}.parquet",
        manifest=f"{R}/replay/{{cell}}/{{shard}}.manifest.json",
    log:
        f"{R}/logs/replay/{{cell}}/{{shard}}.log",
    benchmark:
        f"{R}/benchmarks/replay/{{cell}}/{{shard}}.tsv"
    conda:
        "../environment.yml"
    threads: RUN.workers
    resources:
        mem_mb=3000,
        runtime=120,
    params:
        seeds=replay_shard_seeds,
        device=RUN.device,
    script:
        "../workflow/scripts/replay.py"
