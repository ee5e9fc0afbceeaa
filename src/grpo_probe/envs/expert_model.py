"""A scripted expert's own MuJoCo model: the model file a Gymnasium environment loads, opened privately.

Why one function: the Pusher and Reacher experts each plan in a private copy of the model their
environment steps (the same bodies, joints and gears, and state they may overwrite freely), found where
Gymnasium installs it. Why a module of its own: it loads MuJoCo, and :mod:`grpo_probe.envs.gym_setup`,
where Gymnasium is found, is read with a design, which must not.
"""

from __future__ import annotations

from pathlib import Path

import mujoco

from grpo_probe.envs.gym_setup import import_gymnasium

__all__ = ["gymnasium_model"]


def gymnasium_model(file: str) -> tuple[mujoco.MjModel, mujoco.MjData]:
    """A private ``MjModel`` and its ``MjData`` of a model file Gymnasium installs with its MuJoCo
    environments (``pusher_v5.xml``): the file the environment itself loads, so an expert plans in the
    same model without touching the environment's own state."""
    path = Path(import_gymnasium().__file__).parent / "envs" / "mujoco" / "assets" / file
    model = mujoco.MjModel.from_xml_path(str(path))
    return model, mujoco.MjData(model)
