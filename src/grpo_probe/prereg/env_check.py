"""The design against the environment it builds: what both ``grpo-probe prereg check`` and the workflow's
first rule refuse once the environment's spec is known.

Why a module of its own: a user's environment (a ``module:factory``, a Gymnasium env, a served simulator)
declares its guards and its named state entries only once it is built, so reading the design cannot
check what the design asks of them. The command a lab runs by hand and the workflow's ``prereg_check``
rule must refuse the same designs with the same words, so both call :func:`check_built_environment`.
"""

from __future__ import annotations

from grpo_probe.envs.observation import split_problems
from grpo_probe.envs.protocol import EnvSpec
from grpo_probe.envs.registry import env_spec
from grpo_probe.prereg.cross_field import camera_problems, environment_problems
from grpo_probe.prereg.design import Prereg, PreregError

__all__ = ["built_environment_problems", "check_built_environment"]


def built_environment_problems(prereg: Prereg, spec: EnvSpec) -> list[str]:
    """What the design reads that the built environment ``spec`` lacks, each as ``"<field>: <problem>"``:
    guards the decision rule or the phase-2 reward reads, the replay's perturbation, the state entries a
    LeRobot split names (``observation.state``, ``observation.environment_state``) and the cameras the
    design registers (``observation.cameras``)."""
    penalties = prereg.phase2.penalties if prereg.phase2 is not None else None
    problems = environment_problems(prereg.decision_rule, penalties, spec, prereg.replay)
    problems += split_problems(prereg.observation, spec.state_entries, prereg.env.id)
    problems += camera_problems(prereg.observation, spec.cameras)
    return problems


def check_built_environment(prereg: Prereg) -> EnvSpec:
    """Build the design's environment and return its spec; a :class:`PreregError` names the design file
    and each field the environment cannot serve (an environment that cannot be built raises its own
    error, naming ``env``)."""
    spec = env_spec(prereg.env)
    problems = built_environment_problems(prereg, spec)
    if problems:
        raise PreregError("\n".join(f"{prereg.path}: {p}" for p in problems))
    return spec
