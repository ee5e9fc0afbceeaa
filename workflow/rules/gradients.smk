# The gradient reads (a design with `analysis.gradient_reads: true`): per cell, the probe's episodes run
# again with the recording policy (checked against the probe shards bit for bit), and each episode's GRPO
# gradient A_e grad log pi(actions_e | obs_e) is sketched to a few thousand coordinates; the decision
# reads the Gram matrix (grpo_probe.phase2.gradients, grpo_probe.analysis.cells.gradient_noise). A design that
# does not register them has no gradients job, and its decision reads nothing from here (the helpers,
# GRADIENT_CELLS and decision_gradient_files, are in common.smk).
rule gradients:
    input:
        **prereg_files(),
        source=cell_source,
        checkpoint=cell_checkpoint,
        shards=cell_shard_tables,
        upstream=gradient_upstream,
        policy_code=cell_code,
    output:
        gradients=f"{R}/gradients/{{cell}}.json",
        manifest=f"{R}/gradients/{{cell}}.manifest.json",
    log:
        f"{R}/logs/gradients/{{cell}}.log",
    benchmark:
        f"{R}/benchmarks/gradients/{{cell}}.tsv"
    conda:
        "../envs/grpo-probe.yaml"
    threads: RUN.workers
    resources:
        mem_mb=3000,
        runtime=120,
    script:
        "../scripts/gradients.py"
