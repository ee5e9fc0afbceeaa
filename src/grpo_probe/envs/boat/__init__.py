"""The reference environment: a MuJoCo boat-push tabletop stepped in policy action chunks.

One folder holds all of it: the scene (``scene.xml``), its physics and measurements (``simulator``,
``params``, ``spawn``, ``record``, ``render``), the scripted expert (``expert``, ``demos``), its
declaration under the environment protocol (``spec``, ``environment``), its Gymnasium registration
(``gym_registration``) and the ``grpo-probe sim demo`` command (``demo_command``).

The names below load on first use, so reading the registered numbers (:mod:`grpo_probe.envs.boat.params`,
which the prereg needs) does not import MuJoCo. Importing :mod:`grpo_probe.envs`, which this package
does first, picks a headless OpenGL backend for camera frames before MuJoCo can be imported.
"""

from __future__ import annotations

from grpo_probe.lazy_exports import lazy_exports

_WHERE = {
    "ACTION_DIMS": "grpo_probe.envs.boat.params",
    "SimParams": "grpo_probe.envs.boat.params",
    "OBS_DIM": "grpo_probe.envs.boat.simulator",
    "BoatPushEnv": "grpo_probe.envs.boat.simulator",
    "EnvState": "grpo_probe.envs.boat.simulator",
    "run_episode": "grpo_probe.envs.boat.simulator",
    "EpisodeRecord": "grpo_probe.envs.boat.record",
}
"""Each exported name and the module it is imported from on first use."""

__getattr__ = lazy_exports(__name__, _WHERE, globals())

__all__ = sorted(_WHERE)
