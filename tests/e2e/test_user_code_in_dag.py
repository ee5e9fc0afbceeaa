"""A lab's own code and checkpoint folder are inputs of the jobs that run them, and verify names an edit.

Why: Snakemake plans reruns from declared inputs only. A lab that edits its environment module or the
``config.json`` of its ``save_pretrained`` checkpoint must see the affected jobs planned again, and an
auditor running ``grpo-probe verify`` on the old results must be told which file no longer matches.
The lab here is the smallest that exercises both: its own package wrapping the boat scene (with a scripted
expert, so the workflow records demos on it) and the example ``transformers`` adapter bound to a folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

LAB_SCENE = '''"""A lab's scene: the boat, built by the lab's own factory."""

from grpo_probe.envs.boat.environment import BoatPush
from grpo_probe.envs.boat.expert import ScriptedExpert
from grpo_probe.envs.boat.params import SimParams


class LabBoat(BoatPush):
    def expert(self, noise):
        return ScriptedExpert(self.params, noise=noise)


def make_boat(**params):
    return LabBoat(SimParams.from_dict(params))
'''

RESULTS = Path("results/lab")
ARM = RESULTS / "arms/flow_teacher/arm.manifest.json"
DEMOS = RESULTS / "demos/demos.manifest.json"


def _env(workdir: Path) -> dict[str, str]:
    """The lab's packages importable from its folder (as its README would say: PYTHONPATH=$PWD)."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(workdir), os.environ.get("PYTHONPATH")])),
    }


def _run(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=workdir,
        env=_env(workdir),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def _planned(workdir: Path, options: list[str]) -> str:
    proc = _run(workdir, "snakemake", "-n", str(DEMOS), str(ARM), *options)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def _lab(workdir: Path) -> list[str]:
    """Write the lab's package, design (the smoke design on the lab's scene) and checkpoint folder."""
    (workdir / "labcode").mkdir()
    (workdir / "labcode/__init__.py").write_text("")
    (workdir / "labcode/scene.py").write_text(LAB_SCENE)
    design = yaml.safe_load((workdir / "prereg/smoke.yaml").read_text())
    design["amendments"] = []
    design["name"] = "lab"
    design["env"] = {"id": "labcode.scene:make_boat", "params": design.pop("sim")}
    (workdir / "prereg/lab.yaml").write_text(yaml.safe_dump(design, sort_keys=False))
    lock = _run(workdir, "grpo_probe.cli", "prereg", "lock", "prereg/lab.yaml")
    assert lock.returncode == 0, lock.stderr
    save = "from examples.my_hf_adapter import save_tiny_flow; save_tiny_flow('checkpoints/tiny_flow', 17)"
    proc = subprocess.run([sys.executable, "-c", save], cwd=workdir, env=_env(workdir), check=False)
    assert proc.returncode == 0
    bound = {
        "arms": {
            "flow_teacher": {
                "source": "checkpoint",
                "path": "checkpoints/tiny_flow",
                "adapter": "examples.my_hf_adapter:load_tiny_flow",
            }
        }
    }
    (workdir / "lab.yaml").write_text(yaml.safe_dump(bound))
    return ["--cores", "2", "--configfile", "lab.yaml", "--config", "prereg=prereg/lab.yaml"]


@pytest.mark.e2e
def test_edits_to_a_labs_scene_and_checkpoint_folder_plan_reruns_and_fail_verify(fresh_copy: Path) -> None:
    options = _lab(fresh_copy)
    ran = _run(fresh_copy, "snakemake", str(DEMOS), str(ARM), *options)
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-4000:]
    assert "Nothing to be done" in _planned(fresh_copy, options)

    arm = yaml.safe_load((fresh_copy / ARM).read_text())
    recorded = {entry["path"] for entry in arm["sources"]}
    assert {"checkpoints/tiny_flow/config.json", "checkpoints/tiny_flow/model.safetensors"} <= recorded
    assert {"labcode/scene.py", "examples/my_hf_adapter.py"} <= recorded
    verify = _run(fresh_copy, "grpo_probe.cli", "verify", str(ARM))
    assert verify.returncode == 0, verify.stderr

    # The checkpoint folder's config.json: the binding is planned again, the demos are not.
    config = fresh_copy / "checkpoints/tiny_flow/config.json"
    original, stat = config.read_bytes(), config.stat()
    config.write_text(config.read_text().replace('"hidden": 32', '"hidden": 32, "note": "edited"'))
    planned = _planned(fresh_copy, options)
    assert "rule bind_checkpoint:" in planned and "rule demos:" not in planned, planned
    verify = _run(fresh_copy, "grpo_probe.cli", "verify", str(ARM))
    assert verify.returncode == 1
    assert "checkpoints/tiny_flow/config.json" in verify.stderr and "source changed" in verify.stderr

    # The edit undone, bytes and time (instead of binding again): the run is as it was.
    config.write_bytes(original)
    os.utime(config, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert "Nothing to be done" in _planned(fresh_copy, options)

    # The lab's scene module: every job of the design loads it, so the demos are planned again too.
    scene = fresh_copy / "labcode/scene.py"
    scene.write_text(scene.read_text() + "\n# retuned friction\n")
    planned = _planned(fresh_copy, options)
    assert "rule demos:" in planned and "rule bind_checkpoint:" in planned, planned
    verify = _run(fresh_copy, "grpo_probe.cli", "verify", str(DEMOS))
    assert verify.returncode == 1
    assert "labcode/scene.py" in verify.stderr and "source changed" in verify.stderr
