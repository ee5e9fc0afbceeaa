"""``verify`` walks a manifest chain back to the prereg and names the first broken link."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from grpo_probe.cli import main
from grpo_probe.prereg import load_prereg, lock_prereg
from grpo_probe.provenance import BrokenLinkError, verify_chain, write_manifest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """prereg check -> anchors -> decision, as the workflow chains them, under ``tmp_path``."""
    monkeypatch.chdir(tmp_path)
    Path("prereg").mkdir()
    shutil.copy(REPO / "prereg/smoke.yaml", "prereg/smoke.yaml")
    lock_prereg("prereg/smoke.yaml", date="2026-08-12T00:00:00Z")
    assert main(["prereg", "check", "prereg/smoke.yaml", "--manifest", "results/prereg.manifest.json"]) == 0
    sha = load_prereg("prereg/smoke.yaml").sha256
    Path("results/anchors").mkdir(parents=True)
    Path("results/anchors/ar.parquet").write_bytes(b"anchor rows " * 100)
    write_manifest(
        "results/anchors/ar.manifest.json",
        ["results/anchors/ar.parquet"],
        ["results/prereg.manifest.json"],
        sha,
        "anchors",
    )
    Path("results/decision.md").write_text("# decision\n")
    Path("results/decision.json").write_text("{}\n")
    write_manifest(
        "results/decision.manifest.json",
        ["results/decision.md", "results/decision.json"],
        ["results/anchors/ar.manifest.json"],
        sha,
        "decision",
    )
    return tmp_path


def test_manifest_chain_verifies_back_to_the_prereg(chain: Path, capsys) -> None:
    report = verify_chain("results/decision.manifest.json")
    assert report.manifests == [
        "results/decision.manifest.json",
        "results/anchors/ar.manifest.json",
        "results/prereg.manifest.json",
    ]
    assert report.artifacts == 5  # decision.md, decision.json, ar.parquet, smoke.yaml, smoke.yaml.lock
    assert report.prereg_path == "prereg/smoke.yaml"
    assert report.notes == []  # same code and machine
    assert main(["verify", "results/decision.manifest.json"]) == 0
    assert "verify: ok: 3 manifests, 5 artifacts" in capsys.readouterr().out


def test_verify_resolves_paths_against_root(chain: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(chain.parent)
    report = verify_chain(chain / "results/decision.manifest.json", root=chain)
    assert len(report.manifests) == 3


def test_one_tampered_byte_of_an_intermediate_is_named(chain: Path, capsys) -> None:
    table = Path("results/anchors/ar.parquet")
    data = bytearray(table.read_bytes())
    data[17] ^= 0x01
    table.write_bytes(bytes(data))
    with pytest.raises(BrokenLinkError) as info:
        verify_chain("results/decision.manifest.json")
    err = info.value
    assert (err.file, err.manifest, err.problem) == (
        "results/anchors/ar.parquet",
        "results/anchors/ar.manifest.json",
        "output changed",
    )
    assert err.expected != err.found and err.found in str(err) and err.expected in str(err)
    assert main(["verify", "results/decision.manifest.json"]) == 1
    assert "broken link: results/anchors/ar.parquet (listed in results/anchors/ar.manifest.json)" in (
        capsys.readouterr().err
    )


def test_deleted_input_manifest_is_named(chain: Path) -> None:
    Path("results/anchors/ar.manifest.json").unlink()
    with pytest.raises(BrokenLinkError) as info:
        verify_chain("results/decision.manifest.json")
    assert (info.value.file, info.value.manifest, info.value.problem) == (
        "results/anchors/ar.manifest.json",
        "results/decision.manifest.json",
        "input manifest is missing",
    )


def test_edited_input_manifest_is_named(chain: Path) -> None:
    path = Path("results/anchors/ar.manifest.json")
    path.write_text(path.read_text().replace('"anchors"', '"anchorz"'))
    with pytest.raises(BrokenLinkError, match=r"results/anchors/ar\.manifest\.json \(listed in "):
        verify_chain("results/decision.manifest.json")


def test_prereg_edited_after_the_run_is_named(chain: Path) -> None:
    path = Path("prereg/smoke.yaml")
    path.write_text(path.read_text().replace("signal_bar_cm: 0.25", "signal_bar_cm: 0.3"))
    with pytest.raises(BrokenLinkError) as info:
        verify_chain("results/decision.manifest.json")
    assert (info.value.file, info.value.manifest) == ("prereg/smoke.yaml", "results/prereg.manifest.json")


def test_manifest_of_another_design_breaks_the_chain(chain: Path) -> None:
    write_manifest(
        "results/other.manifest.json",
        ["results/decision.md"],
        ["results/decision.manifest.json"],
        "cd" * 32,
        "x",
    )
    with pytest.raises(BrokenLinkError, match="prereg hash differs from the target's"):
        verify_chain("results/other.manifest.json")


def test_chain_that_never_reaches_the_prereg_is_refused(chain: Path) -> None:
    sha = load_prereg("prereg/smoke.yaml").sha256
    write_manifest("results/orphan.manifest.json", ["results/decision.md"], [], sha, "orphan")
    with pytest.raises(BrokenLinkError, match="never reaches the prereg"):
        verify_chain("results/orphan.manifest.json")


_HERE = {
    "python": "3.11.9",
    "python_implementation": "CPython",
    "system": "Linux",
    "machine": "x86_64",
    "cpu": {"model": "AMD EPYC 7B13", "flags": "avx avx2"},
    "packages": {"mujoco": "4.0.0", "numpy": "2.3.0", "torch": "2.13.0"},
    "lock_sha256": "a" * 64,
    "numerics": {"setting": "x86-64-v3", "variables": {}},
    "libc": "glibc 2.36",
}


def _record_environment(environment: dict) -> None:
    """Rewrite the target manifest's environment (nothing vouches for the target's own bytes)."""
    path = Path("results/decision.manifest.json")
    manifest = json.loads(path.read_text())
    manifest["environment"] = environment
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def test_verify_notes_lead_with_whether_the_environment_is_byte_compatible(
    chain: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("grpo_probe.provenance.chain.environment", lambda: json.loads(json.dumps(_HERE)))
    recorded = json.loads(json.dumps(_HERE))
    recorded["lock_sha256"] = "b" * 64
    recorded["packages"]["torch"] = "2.12.1"
    recorded["packages"]["numpy"] = "2.2.0"
    _record_environment(recorded)
    notes = verify_chain("results/decision.manifest.json").notes
    target = [note for note in notes if note.startswith("results/decision.manifest.json: ")]
    assert target[0] == (
        "results/decision.manifest.json: environment: another environment (differs in: lock_sha256); "
        "a rerun here need not give the recorded bytes"
    )
    packages = [note.partition(": ")[2] for note in target if "packages" in note]
    assert packages == [  # one note per differing package; mujoco is the same
        "environment.packages.numpy: recorded '2.2.0', this machine '2.3.0'",
        "environment.packages.torch: recorded '2.12.1', this machine '2.13.0'",
    ]


def test_verify_says_same_environment_when_only_a_package_differs(
    chain: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = {**_HERE, "packages": {**_HERE["packages"], "matplotlib": "3.10.0"}}
    monkeypatch.setattr("grpo_probe.provenance.chain.environment", lambda: json.loads(json.dumps(here)))
    _record_environment({**_HERE, "packages": {**_HERE["packages"], "torch": "2.12.1"}})
    notes = [
        note.removeprefix("results/decision.manifest.json: ")
        for note in verify_chain("results/decision.manifest.json").notes
        if note.startswith("results/decision.manifest.json: ")
    ]
    assert notes[0].startswith("environment: same environment (machine, python, libc, lock_sha256")
    assert notes[1:] == [
        "environment.packages.torch: recorded '2.12.1', this machine '2.13.0'",
        "environment.packages: 1 installed here but not in the record",
    ]
