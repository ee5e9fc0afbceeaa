# Helpers of the phase-2 rules (workflow/rules/phase2.smk): where a stage's artifacts live, and what the plan that
# the phase2_plan checkpoint wrote asks for.
from grpo_probe.phase2.paths import StagePaths
from grpo_probe.phase2.gate import read_plan

P2 = f"{R}/phase2"
P2_ITERATIONS = 0 if PREREG.phase2 is None else PREREG.phase2.iterations
# Replicates beside each stage's own pilot, and whether the held-out evaluation scores the sampled policy
# (phase2.replicates, phase2.sampled_draws; a design that registers neither has the rules it had).
P2_REPLICATES = 1 if PREREG.phase2 is None else PREREG.phase2.replicates
P2_SAMPLED = PREREG.phase2 is not None and PREREG.phase2.sampled_draws is not None
# Snakemake patterns of one stage's artifacts ({arm} stays a wildcard); the report reads the same paths.
STAGE = StagePaths(P2, "{arm}", P2_ITERATIONS, P2_REPLICATES, P2_SAMPLED)


def stage_paths(arm):
    """One stage's artifacts, with the design's replicates and sampled score."""
    return StagePaths(P2, arm, P2_ITERATIONS, P2_REPLICATES, P2_SAMPLED)


def phase2_plan_file():
    """plan.json, once the phase2_plan checkpoint has run (Snakemake re-evaluates the DAG after it)."""
    return checkpoints.phase2_plan.get().output.plan


def phase2_rollouts_upstream(wildcards):
    """The plan, the arm, and (AR then flow) the earlier stage's evaluation: stages run in the registered order.

    An arm the plan does not train has no phase-2 jobs: asking for one fails here, naming the plan.
    """
    stage = read_plan(phase2_plan_file()).stage(wildcards.arm)
    upstream = [f"{P2}/plan.manifest.json", arm_manifest(wildcards)]
    if stage.after is not None:
        upstream.append(stage_paths(stage.after).eval_manifest)
    return upstream


def phase2_report_inputs(wildcards):
    """Every trained stage's artifacts and manifests, read from the plan (none on park)."""
    plan = read_plan(phase2_plan_file())
    files, upstream = [], [f"{P2}/plan.manifest.json"]
    for stage in plan.stages:
        paths = stage_paths(stage.arm)
        files += [
            paths.oracle_report,
            paths.metrics,
            paths.eval_initial,
            paths.eval_final,
            paths.eval_movement,
            *paths.extra_eval_tables().values(),
        ]
        upstream += [
            paths.first_rollouts_manifest,
            paths.train_manifest,
            paths.eval_manifest,
        ]
    return {
        **prereg_files(),
        "plan": f"{P2}/plan.json",
        "decision": design_page("decision")["json"],
        "files": files,
        "upstream": upstream,
    }
