"""A worked example: Gymnasium's Reacher-v5 as a probe environment, through the Gymnasium adapter.

A design names it as ``env: {id: "examples.my_gym_env:make_reacher", params: {...}}``; every job calls
``make_reacher(**params)``, so this module must be importable there (``PYTHONPATH=$PWD`` from the
repository root, or installed). The registered metric is the fingertip-to-target distance in the table
plane: Reacher's fingertip is the "object" moved toward the goal. Manifests record the sha256 of this
file (and of the other files of its package) beside the environment's id and version.
"""

from grpo_probe.envs.gym_adapter import GymnasiumAdapter, GymnasiumParams


def make_reacher(
    replans: int = 4, chunk_length: int = 50, executed_actions: int = 10, success_radius_m: float = 0.01
) -> GymnasiumAdapter:
    """Reacher-v5 (a 2-joint arm reaches a random target) stepped in chunks of normalized torques."""
    params = GymnasiumParams(
        gym_id="Reacher-v5",
        replans=replans,
        chunk_length=chunk_length,
        executed_actions=executed_actions,
        object_body="fingertip",
        goal_body="target",
        success_radius_m=success_radius_m,
    )
    return GymnasiumAdapter(params, env_id="examples.my_gym_env:make_reacher")
