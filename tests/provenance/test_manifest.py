"""Manifests record what a rule wrote and read, deterministically, with the code and machine."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from grpo_probe import numerics
from grpo_probe.provenance import ManifestError, read_manifest, sources_sha256, write_manifest
from grpo_probe.provenance.machine import cpu_info

PREREG_SHA = "ab" * 32


def _write(root: Path, rel: str, data: bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_manifest_records_hash_and_size_of_each_output_and_each_input_manifest(tmp_path: Path) -> None:
    upstream = _write(tmp_path, "results/up.manifest.json", b"{}")
    table = _write(tmp_path, "results/table.parquet", b"rows")
    manifest = write_manifest(
        tmp_path / "results/table.manifest.json", [table], [upstream], PREREG_SHA, "probe", root=tmp_path
    )
    assert manifest["outputs"] == [
        {"path": "results/table.parquet", "sha256": hashlib.sha256(b"rows").hexdigest(), "size": 4}
    ]
    assert manifest["inputs"] == [
        {"path": "results/up.manifest.json", "sha256": hashlib.sha256(b"{}").hexdigest()}
    ]
    assert read_manifest(tmp_path / "results/table.manifest.json") == manifest


def _locked_versions() -> dict[str, str]:
    """name -> version of every package requirements.lock pins (``name==version``, local labels kept)."""
    lock = Path(__file__).resolve().parents[2] / "requirements.lock"
    pins = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", lock.read_text(encoding="utf-8"), flags=re.M)
    return {name.lower().replace("_", "-").replace(".", "-"): version for name, version in pins}


def test_manifest_names_versions_code_and_cpu(tmp_path: Path) -> None:
    out = _write(tmp_path, "a.bin", b"a")
    manifest = write_manifest(tmp_path / "a.manifest.json", [out], [], PREREG_SHA, "r", root=tmp_path)
    env = manifest["environment"]
    # every installed package, not a chosen few: each locked one at its locked version, and the project
    locked = _locked_versions()
    assert {name: env["packages"].get(name) for name in locked} == locked
    assert env["packages"]["grpo-probe"] == "0.1.0" and env["packages"]["mujoco"] == "4.0.0"
    assert (
        env["lock_sha256"]
        == hashlib.sha256(
            (Path(__file__).resolve().parents[2] / "requirements.lock").read_bytes()
        ).hexdigest()
    )
    assert env["numerics"]["setting"] == numerics.SETTING  # the suite runs under the setting (conftest)
    assert env["libc"].startswith("glibc ")
    assert env["python"].startswith("3.11")
    assert "model" in env["cpu"] and isinstance(env["cpu"]["flags"], str)
    assert manifest["code"]["version"] == "0.1.0"
    assert manifest["code"]["sources_sha256"] == sources_sha256()


def test_rewriting_a_manifest_gives_the_same_bytes(tmp_path: Path) -> None:
    out = _write(tmp_path, "a.bin", b"a")
    target = tmp_path / "a.manifest.json"
    write_manifest(target, [out], [], PREREG_SHA, "r", {"shard": 1}, root=tmp_path)
    first = target.read_bytes()
    write_manifest(target, [out], [], PREREG_SHA, "r", {"shard": 1}, root=tmp_path)
    assert target.read_bytes() == first
    assert json.loads(first)["extra"] == {"shard": 1}


def test_missing_output_is_named(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"a\.manifest\.json: output gone\.bin does not exist"):
        write_manifest(
            tmp_path / "a.manifest.json", [tmp_path / "gone.bin"], [], PREREG_SHA, "r", root=tmp_path
        )
    assert not (tmp_path / "a.manifest.json").exists()


def test_an_output_outside_the_root_is_stored_relative_to_it(tmp_path: Path) -> None:
    """A results folder beside the workflow: its paths climb out of the root, so the pair moves as one."""
    root = tmp_path / "root"
    root.mkdir()
    out = _write(tmp_path / "results", "elsewhere.bin", b"x")
    manifest = write_manifest(tmp_path / "results/a.manifest.json", [out], [], PREREG_SHA, "r", root=root)
    assert manifest["outputs"][0]["path"] == "../results/elsewhere.bin"
    assert (root / manifest["outputs"][0]["path"]).resolve() == out.resolve()


def test_malformed_prereg_hash_is_refused(tmp_path: Path) -> None:
    out = _write(tmp_path, "a.bin", b"a")
    with pytest.raises(ManifestError, match="prereg_sha256 must be 64 lower-case hex digits"):
        write_manifest(tmp_path / "a.manifest.json", [out], [], "abc", "r", root=tmp_path)


def test_sources_hash_follows_file_content_and_ignores_bytecode(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    _write(pkg, "a.py", b"x = 1\n")
    _write(pkg, "sub/b.xml", b"<mujoco/>")
    before = sources_sha256(pkg)
    _write(pkg, "__pycache__/a.cpython-311.pyc", b"\0")
    assert sources_sha256(pkg) == before
    lines = "".join(
        f"{hashlib.sha256((pkg / rel).read_bytes()).hexdigest()}  {rel}\n" for rel in ("a.py", "sub/b.xml")
    )
    assert (
        before == hashlib.sha256(lines.encode()).hexdigest()
    )  # the sha256sum-format recipe in the docstring
    _write(pkg, "a.py", b"x = 2\n")
    assert sources_sha256(pkg) != before


def test_cpu_info_reads_the_first_processor_and_survives_a_missing_file(tmp_path: Path) -> None:
    cpuinfo = _write(
        tmp_path,
        "cpuinfo",
        b"processor\t: 0\nmodel name\t: Test CPU @ 3GHz\nflags\t\t: sse2 avx2 fma\n\n"
        b"processor\t: 1\nmodel name\t: Other\nflags\t\t: sse2\n",
    )
    assert cpu_info(cpuinfo) == {"model": "Test CPU @ 3GHz", "flags": "avx2 fma sse2"}
    assert set(cpu_info(tmp_path / "absent")) == {"model", "flags"}


def test_every_step_of_a_design_records_its_hash_file_and_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One manifest writer for the probe's steps and phase 2's: the design's sha256 and file, and the
    environment it runs in (phase 2's manifests used to leave the environment out)."""
    from grpo_probe.envs.registry import env_provenance
    from grpo_probe.prereg import load_prereg
    from grpo_probe.provenance import write_design_manifest

    repo = Path(__file__).resolve().parents[2]
    for name in ("smoke.yaml", "smoke.yaml.lock"):
        _write(tmp_path, f"prereg/{name}", (repo / "prereg" / name).read_bytes())
    monkeypatch.chdir(tmp_path)
    prereg = load_prereg("prereg/smoke.yaml")
    out = _write(tmp_path, "results/plan.json", b"{}")
    manifest = write_design_manifest(
        prereg, tmp_path / "results/plan.manifest.json", "phase2_plan", [out], []
    )
    assert manifest["prereg_sha256"] == prereg.sha256 and manifest["rule"] == "phase2_plan"
    assert manifest["prereg_path"] == "prereg/smoke.yaml"
    assert manifest["env"] == env_provenance(prereg.env)
    assert manifest["env"]["id"] == "boat_push"
    assert read_manifest(tmp_path / "results/plan.manifest.json") == manifest
