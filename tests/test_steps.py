"""The work behind the rules, called directly: what a rule refuses before it writes anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_probe import steps
from grpo_probe.prereg import lock_prereg

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def pinned_smoke(tmp_path: Path) -> Path:
    """The smoke design with arm ar pinned to a checkpoint hash that no file has."""
    path = tmp_path / "smoke.yaml"
    text = (REPO / "prereg" / "smoke.yaml").read_text()
    head, sep, tail = text.partition("  ar:\n")
    assert sep, "smoke.yaml registers arm ar"
    pinned = tail.replace("checkpoint_sha256: null", "checkpoint_sha256: " + "ab" * 32, 1)
    path.write_text(head + sep + pinned)
    lock_prereg(path)
    return path


def test_a_bound_checkpoint_must_match_the_pinned_sha256(pinned_smoke: Path, tmp_path: Path) -> None:
    checkpoint = tmp_path / "er60k.pt"
    checkpoint.write_bytes(b"not the pinned bytes")
    source, manifest = tmp_path / "out" / "source.json", tmp_path / "out" / "arm.manifest.json"
    with pytest.raises(
        ValueError, match=r"er60k\.pt: sha256 [0-9a-f]{64} differs from arms\.ar\.checkpoint_sha256"
    ):
        steps.bind_checkpoint(pinned_smoke, "ar", checkpoint, None, [], source, manifest)
    assert not source.exists() and not manifest.exists()


def test_a_shard_of_unregistered_seeds_is_refused(tmp_path: Path) -> None:
    table = tmp_path / "shard.parquet"
    with pytest.raises(ValueError, match=r"shard seeds \[5\] are not registered seeds"):
        steps.probe_shard(
            REPO / "prereg" / "smoke.yaml",
            "c1_ar_t1_0",
            [5],
            tmp_path / "source.json",
            [],
            table,
            tmp_path / "shard.manifest.json",
            workers=0,
        )
    assert not table.exists()
