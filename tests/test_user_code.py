"""Which of a lab's files a job reads: its packages' sources, a checkpoint folder's files, nothing of ours."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_probe.user_code import (
    checkpoint_files,
    env_code_files,
    factory_files,
    module_files,
    policy_files,
    tree_sha256,
)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A lab package (``labpkg``) with a scene and a cache folder, importable, as the working directory."""
    package = tmp_path / "labpkg"
    (package / "__pycache__").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "scene.py").write_text("def make(**params):\n    raise RuntimeError('never run')\n")
    (package / "scene.xml").write_text("<mujoco/>\n")
    (package / "notes.txt").write_text("not code\n")
    (package / "__pycache__" / "scene.cpython-311.pyc").write_bytes(b"\0")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return package


def test_a_factorys_package_is_its_sources_and_scenes_found_without_running_it(lab: Path) -> None:
    files = factory_files("labpkg.scene:make")
    assert [p.as_posix() for p in files] == ["labpkg/__init__.py", "labpkg/scene.py", "labpkg/scene.xml"]


def test_our_own_and_installed_packages_and_builtin_ids_are_not_listed(lab: Path) -> None:
    assert factory_files("grpo_probe.envs.gym_adapter:make_gymnasium_env") == ()
    assert factory_files("gymnasium.envs:registry") == ()  # installed: its version identifies it
    assert factory_files("no_such_lab_package:make") == ()
    assert env_code_files("boat_push", {}) == ()


def test_callables_in_an_envs_params_bring_their_packages(lab: Path) -> None:
    params = {"gym_id": "Reacher-v5", "wrappers": ["labpkg.scene:make"], "expert": "labpkg.scene:make"}
    files = env_code_files("grpo_probe.envs.gym_adapter:make_gymnasium_env", params)
    assert [p.as_posix() for p in files] == ["labpkg/__init__.py", "labpkg/scene.py", "labpkg/scene.xml"]


def test_a_designs_sampler_modules_bring_their_packages_once(lab: Path) -> None:
    """``samplers: ["labpkg.scene"]`` and the entry module its kind names: one package, listed once."""
    files = module_files(["labpkg.scene", "labpkg.math", "grpo_probe.policies.flow_sde"])
    assert [p.as_posix() for p in files] == ["labpkg/__init__.py", "labpkg/scene.py", "labpkg/scene.xml"]
    assert module_files([]) == ()


def test_a_scene_function_and_a_gym_ids_registering_module_are_the_jobs_inputs(
    lab: Path, tmp_path: Path
) -> None:
    (tmp_path / "labscene.py").write_text("class Scene:\n    pass\n")  # a module alone, not a package
    params = {
        "gym_id": "labpkg.scene:LabPush-v0",
        "scene": "labscene:Scene",
        "gym_kwargs": {"obs_type": "state"},
    }
    files = env_code_files("grpo_probe.envs.gym_adapter:make_gymnasium_env", params)
    assert [p.as_posix() for p in files] == [
        "labpkg/__init__.py",
        "labpkg/scene.py",
        "labpkg/scene.xml",
        "labscene.py",
    ]
    installed = {"gym_id": "gym_pusht:gym_pusht/PushT-v0", "scene": "grpo_probe.envs.pusht:PushTScene"}
    assert env_code_files("grpo_probe.envs.gym_adapter:make_gymnasium_env", installed) == ()


def test_a_checkpoint_folder_is_every_visible_file_and_its_hash_follows_each(tmp_path: Path) -> None:
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "config.json").write_text('{"hidden": 32}')
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / ".lock").write_text("")
    assert [p.name for p in checkpoint_files(folder)] == ["config.json", "model.safetensors"]
    before = tree_sha256(folder)
    (folder / "config.json").write_text('{"hidden": 33}')
    assert tree_sha256(folder) != before
    single = folder / "model.safetensors"
    assert checkpoint_files(single) == (single,) and policy_files(None, single) == ()
    assert [p.name for p in policy_files(None, folder)] == ["config.json", "model.safetensors"]
