# Phase 2: the GRPO pilot the decision names (memo section 5), behind a checkpoint on decision.json.
# plan -> per trained arm: rollouts (iteration 0, then their replay oracle) -> train -> eval -> phase2.md.
# On park, or for a design without a phase2 section, phase2.md says that nothing was trained and why.
include: "phase2_common.smk"


checkpoint phase2_plan:
    input:
        **prereg_files(),
        decision=design_page("decision")["json"],
        # the probe's cell tables: the guard-variance check reads the trained arm's groups
        cells=list(decision_cell_tables().values()),
        upstream=f"{R}/decision.manifest.json",
    output:
        plan=f"{P2}/plan.json",
        manifest=f"{P2}/plan.manifest.json",
    log:
        f"{R}/logs/phase2/plan.log",
    benchmark:
        f"{R}/benchmarks/phase2_plan.tsv"
    # Bookkeeping: runs where Snakemake runs, not as a cluster job.
    localrule: True
    conda:
        "../envs/grpo-probe.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    params:
        cells=decision_cell_tables(),
    script:
        "../scripts/phase2_plan.py"


rule phase2_rollouts:
    input:
        **prereg_files(),
        plan=f"{P2}/plan.json",
        source=arm_source,
        checkpoint=arm_checkpoint,
        upstream=phase2_rollouts_upstream,
    output:
        table=STAGE.rollouts(0),
        oracle=STAGE.oracle_report,
        manifest=STAGE.first_rollouts_manifest,
    log:
        f"{R}/logs/phase2/{{arm}}/rollouts.log",
    benchmark:
        f"{R}/benchmarks/phase2_rollouts/{{arm}}.tsv"
    conda:
        "../envs/grpo-probe.yaml"
    threads: RUN.workers
    resources:
        mem_mb=3000,
        runtime=60,
    script:
        "../scripts/phase2_rollouts.py"


rule phase2_train:
    input:
        **prereg_files(),
        plan=f"{P2}/plan.json",
        source=arm_source,
        checkpoint=arm_checkpoint,
        first=STAGE.rollouts(0),
        upstream=[STAGE.first_rollouts_manifest],
    output:
        checkpoints=STAGE.trained_checkpoints(),
        rollouts=STAGE.trained_rollouts(),
        iterations=STAGE.iteration_manifests(),
        metrics=STAGE.metrics,
        manifest=STAGE.train_manifest,
    log:
        f"{R}/logs/phase2/{{arm}}/train.log",
    benchmark:
        f"{R}/benchmarks/phase2_train/{{arm}}.tsv"
    conda:
        "../envs/grpo-probe.yaml"
    # rollout worker processes; the update itself runs on one thread
    threads: RUN.workers
    resources:
        mem_mb=4000,
        runtime=60,
    script:
        "../scripts/phase2_train.py"


# Replicate r >= 1 of a stage (phase2.replicates): GRPO from theta_0 on training seeds of its own, beside
# the stage's own pilot (it reads what that pilot's rollouts read, so a cluster runs them side by side and
# the phase2_arm group has no way out and back in); only its final policy and metrics are kept. None for
# a design without replicates.
rule phase2_replicate:
    input:
        **prereg_files(),
        plan=f"{P2}/plan.json",
        source=arm_source,
        checkpoint=arm_checkpoint,
        upstream=phase2_rollouts_upstream,
    output:
        final=STAGE.replicate_final("{replicate}"),
        metrics=STAGE.replicate_metrics("{replicate}"),
        manifest=STAGE.replicate_manifest("{replicate}"),
    log:
        f"{R}/logs/phase2/{{arm}}/replicate-{{replicate}}.log",
    benchmark:
        f"{R}/benchmarks/phase2_replicate/{{arm}}-{{replicate}}.tsv"
    wildcard_constraints:
        replicate=r"[1-9][0-9]*",
    conda:
        "../envs/grpo-probe.yaml"
    threads: RUN.workers
    resources:
        mem_mb=4000,
        runtime=60,
    script:
        "../scripts/phase2_replicate.py"


# The held-out evaluation; with phase2.replicates or phase2.sampled_draws it also reads the replicates'
# final policies and manifests and writes their tables and the sampled policy's (none by default).
rule phase2_eval:
    input:
        **prereg_files(),
        **STAGE.replicate_finals(),
        **STAGE.replicate_manifests(),
        plan=f"{P2}/plan.json",
        source=arm_source,
        checkpoint=arm_checkpoint,
        final=STAGE.final_checkpoint,
        # iteration 0's rollouts: the KL to the initial policy is measured on theta_0's own samples
        first=STAGE.rollouts(0),
        upstream=STAGE.train_manifest,
    output:
        **STAGE.extra_eval_tables(),
        initial=STAGE.eval_initial,
        final=STAGE.eval_final,
        movement=STAGE.eval_movement,
        manifest=STAGE.eval_manifest,
    log:
        f"{R}/logs/phase2/{{arm}}/eval.log",
    benchmark:
        f"{R}/benchmarks/phase2_eval/{{arm}}.tsv"
    conda:
        "../envs/grpo-probe.yaml"
    threads: RUN.workers
    resources:
        mem_mb=3000,
        runtime=30,
    params:
        device=RUN.device,
    script:
        "../scripts/phase2_eval.py"


rule phase2_report:
    input:
        unpack(phase2_report_inputs),
    output:
        md=design_page("phase2")["md"],
        json=design_page("phase2")["json"],
        figures=directory(f"{R}/phase2_figures"),
        manifest=f"{R}/phase2.manifest.json",
    log:
        f"{R}/logs/phase2/report.log",
    benchmark:
        f"{R}/benchmarks/phase2_report.tsv"
    conda:
        "../envs/grpo-probe.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/phase2_report.py"


rule phase2_compute:
    input:
        **prereg_files(),
        phase2=rules.phase2_report.output.md,
    output:
        md=f"{R}/phase2.compute.md",
        json=f"{R}/phase2.compute.json",
    log:
        f"{R}/logs/phase2/compute.log",
    # Bookkeeping: runs where Snakemake runs, not as a cluster job.
    localrule: True
    conda:
        "../envs/grpo-probe.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    params:
        benchmarks=f"{R}/benchmarks",
    script:
        "../scripts/phase2_compute.py"


# The configured design's phase2.md again at the repository root, rendered for that folder.
rule phase2_root:
    input:
        **prereg_files(),
        record=design_page("phase2")["json"],
        # pages the copy links to, built first so that every link resolves
        linked=f"{R}/phase2.compute.md",
    output:
        **root_page("phase2"),
    log:
        f"{R}/logs/phase2/root.log",
    # Bookkeeping: runs where Snakemake runs, not as a cluster job.
    localrule: True
    conda:
        "../envs/grpo-probe.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    script:
        "../scripts/phase2_root.py"
