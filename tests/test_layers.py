"""What importing a layer really loads: the facts the import-linter contracts cannot see.

Why in a fresh interpreter: the contracts in pyproject.toml read the import statements, but a module
imported from inside a package first runs that package's ``__init__`` (and whatever it imports), and this
test process has long since loaded torch, MuJoCo and the trainer. So each check starts a new Python,
imports one thing, and lists what ``sys.modules`` then holds.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "mujoco")


def loaded_after(statement: str) -> set[str]:
    """Names in ``sys.modules`` of a fresh interpreter after it runs ``statement``."""
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{statement!r} failed:\n{done.stderr}"
    return set(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize(
    ("statement", "reader"),
    [
        ("import grpo_probe.policies.checkpoint", "grpo_probe.policies.checkpoint"),
        ("from grpo_probe.policies import load_policy", "grpo_probe.policies.checkpoint"),
        ("from grpo_probe.rollout import run_group", "grpo_probe.rollout.engine"),
    ],
)
def test_loading_a_policy_for_inference_does_not_import_the_trainer(statement: str, reader: str) -> None:
    loaded = loaded_after(statement)
    assert reader in loaded
    assert "grpo_probe.policies.train" not in loaded


@pytest.mark.parametrize(
    "statement",
    [
        "from grpo_probe.rollout import merge_shards, read_rollout_table",
        "import grpo_probe.analysis.page.report",
        "from grpo_probe.rollout.replay import read_replay_table",
    ],
)
def test_the_jobs_that_read_tables_load_without_torch(statement: str) -> None:
    """A cell's join and the decision read rollout tables and run no episode: importing torch would cost
    each of them more than its work (rollout/__init__.py imports its names lazily)."""
    loaded = loaded_after(statement)
    assert "torch" not in loaded
    assert "grpo_probe.rollout.engine" not in loaded


def test_the_policy_protocol_loads_without_torch() -> None:
    """A user's adapter imports ``PolicyOutput`` from the package; that alone must not need torch."""
    loaded = loaded_after("from grpo_probe.policies import PolicyOutput, RowDiagnostics, SamplingMode")
    assert not {m for m in loaded if m.split(".")[0] in HEAVY}
    assert "grpo_probe.policies.checkpoint" not in loaded


@pytest.mark.parametrize("module", ["grpo_probe.prereg", "grpo_probe.sampling"])
def test_the_prereg_loads_without_torch_or_mujoco(module: str) -> None:
    """The workflow reads the design when Snakemake parses its rules (workflow/rules/common.smk), without
    torch."""
    loaded = loaded_after(f"import {module}")
    ours = sorted(m for m in loaded if m.startswith("grpo_probe"))
    assert sorted(m for m in HEAVY if m in loaded) == [], f"import {module} loads {ours}"


def test_the_sampling_type_imports_nothing_of_the_package_but_the_registry() -> None:
    """Its registries are name_registry's (the floor, which imports nothing of the package)."""
    loaded = loaded_after("import grpo_probe.sampling")
    assert sorted(m for m in loaded if m.startswith("grpo_probe")) == [
        "grpo_probe",
        "grpo_probe.name_registry",
        "grpo_probe.sampling",
    ]
    assert sorted(m for m in loaded_after("import grpo_probe.name_registry") if m.startswith("grpo_p")) == [
        "grpo_probe",
        "grpo_probe.name_registry",
    ]


def test_the_policy_server_loads_nothing_of_the_package_but_itself() -> None:
    """A lab installs grpo_probe.serve alone (serve/pyproject.toml): it must need nothing else of ours."""
    loaded = loaded_after("import grpo_probe.serve, grpo_probe.serve.__main__")
    ours = sorted(m for m in loaded if m.startswith("grpo_probe"))
    assert all(m == "grpo_probe" or m.startswith("grpo_probe.serve") for m in ours), ours
    assert not {m for m in loaded if m.split(".")[0] in (*HEAVY, "pyarrow", "scipy", "pandas", "yaml")}


def test_the_environment_server_loads_only_itself_and_the_camera_setup_it_ships_with() -> None:
    """The environment server draws frames with grpo_probe.render_setup, which serve/pyproject.toml ships
    beside it; nothing else of ours may load, nor MuJoCo before a factory imports it (MuJoCo reads
    MUJOCO_GL once, and the server picks the backend when it is imported)."""
    loaded = loaded_after("import grpo_probe.serve.env_server, grpo_probe.serve.env_cameras")
    ours = sorted(m for m in loaded if m.startswith("grpo_probe"))
    assert "grpo_probe.render_setup" in ours
    beside = ("grpo_probe", "grpo_probe.render_setup")
    assert all(m in beside or m.startswith("grpo_probe.serve") for m in ours), ours
    assert not {m for m in loaded if m.split(".")[0] in (*HEAVY, "pyarrow", "scipy", "pandas", "yaml")}
