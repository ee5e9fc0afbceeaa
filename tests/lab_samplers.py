"""The example lab's sampling kinds (``examples/labpolicies``) registered for one test, then taken out.

Why a helper and not a plain import: importing ``labpolicies.ddim`` registers the kind ``ddim`` in this
process's registry, and a test file shares its process with the next one (pytest-xdist runs files one
after another on a worker), whose checks of the schema's enum expect the built-in kinds alone. So the
kind, its entry and the lab's modules go again when the test ends.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from grpo_probe.prereg.canonical import read_yaml
from grpo_probe.sampling import unregister_sampler
from grpo_probe.sampling.lab_modules import load_sampler_module

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
"""The folder the example lab's package lives in: its ``PYTHONPATH``."""
DDIM_MODULE = "labpolicies.ddim"


@contextlib.contextmanager
def registered(module: str, path: Path) -> Iterator[tuple[str, ...]]:
    """``module`` (found under ``path``) loaded as a design loads it; its kinds and modules removed after."""
    sys.path.insert(0, str(path))
    kinds: tuple[str, ...] = ()
    try:
        kinds = load_sampler_module(module)
        yield kinds
    finally:
        forget(kinds, module.partition(".")[0])
        sys.path.remove(str(path))


def forget(kinds: tuple[str, ...], package: str) -> None:
    """Take ``kinds`` out of the registry and the lab's ``package`` out of ``sys.modules``."""
    for kind in kinds:
        unregister_sampler(kind)
    for name in [m for m in sys.modules if m == package or m.startswith(f"{package}.")]:
        del sys.modules[name]


def ddim_cell(eta: float = 0.5, steps: int = 10) -> dict[str, Any]:
    """A required cell of the smoke design's flow arm sampling the lab's DDIM at ``eta``."""
    return {
        "id": "c5_teacher_ddim",
        "arm": "flow_teacher",
        "mode": {"kind": "ddim", "sde_a": eta, "steps": steps},
        "optional": False,
        "enabled": True,
        "description": f"flow arm, the lab's DDIM at eta {eta}",
    }


def ddim_design(path: Path, *, name: str = "lab_ddim", replay: bool = True) -> Path:
    """The smoke design on its flow arm alone, with the lab's DDIM as its one cell and in the parallel
    oracle beside the arm's ODE sampler, naming ``labpolicies.ddim`` in ``samplers:``; written (unlocked)
    to ``path``. (The ODE cell would add its probe, replay and join jobs and show nothing of the lab's.)"""
    raw = read_yaml(REPO / "prereg" / "smoke.yaml")
    raw["name"] = name
    raw["samplers"] = [DDIM_MODULE]
    raw["cells"] = [ddim_cell()]
    raw["oracles"]["parallel"]["arms"] = ["flow_teacher"]
    raw["oracles"]["parallel"]["modes"] = [{"kind": "flow_ode", "steps": 10}, ddim_cell()["mode"]]
    raw.pop("phase2")
    if not replay:
        raw.pop("replay")
    raw["amendments"] = []
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path
