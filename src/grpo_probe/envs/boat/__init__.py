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

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        ".params": ("ACTION_DIMS", "SimParams"),
        ".record": ("EpisodeRecord",),
        ".simulator": ("OBS_DIM", "BoatPushEnv", "EnvState", "run_episode"),
    },
    globals(),
)
