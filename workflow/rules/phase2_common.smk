# Helpers of the phase-2 rules (workflow/rules/phase2.smk): where a stage's artifacts live, and what the plan that
# the phase2_plan checkpoint wrote asks for.
from grpo_probe.phase2.paths import StagePaths
from grpo_probe.phase2.gate import read_plan

P2 = f"{R}/phase2"
P2_ITERATIONS = 0 if PREREG.phase2 is None else PREREG.phase2.iterations
# Snakemake patterns of one stage's artifacts ({arm} stays a wildcard); the report reads the same paths.
STAGE = StagePaths(P2, "{arm}", P2_ITERATIONS)


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
        upstream.append(StagePaths(P2, stage.after, P2_ITERATIONS).eval_manifest)
    return upstream


def phase2_report_inputs(wildcards):
    """Every trained stage's artifacts and manifests, read from the plan (none on park)."""
    plan = read_plan(phase2_plan_file())
    files, upstream = [], [f"{P2}/plan.manifest.json"]
    for stage in plan.stages:
        paths = StagePaths(P2, stage.arm, P2_ITERATIONS)
        files += [
            paths.oracle_report,
            paths.metrics,
            paths.eval_initial,
            paths.eval_final,
            paths.eval_movement,
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
