"""A truncated table, a corrupted checkpoint and a malformed config each fail with an error naming the file.

The table and checkpoint cases call the rule's step function, which is what its job runs, in a copy of
a finished run; the config case runs Snakemake itself, since the config is read before any job.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grpo_probe.probe_jobs.decision import join
from grpo_probe.probe_jobs.rollouts import anchors

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RESULTS = "results/smoke"
PREREG = "prereg/smoke.yaml"
CELL = "c1_ar_t1_0"


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _join_cell(shard: str) -> None:
    join(
        prereg_path=PREREG,
        cell=CELL,
        shards=[shard],
        anchor_table=f"{RESULTS}/anchors/ar.parquet",
        upstream=[f"{RESULTS}/anchors/ar.manifest.json"],
        cell_table=f"{RESULTS}/cells/{CELL}.parquet",
        joined=f"{RESULTS}/join/{CELL}.parquet",
        manifest=f"{RESULTS}/join/{CELL}.manifest.json",
    )


@pytest.mark.parametrize("table", ["anchors/ar.parquet", "probe/c1_ar_t1_0/shard-0.parquet"])
def test_a_truncated_table_fails_the_join_naming_the_file(
    run_copy: Path, monkeypatch: pytest.MonkeyPatch, table: str
) -> None:
    monkeypatch.chdir(run_copy)
    _truncate(run_copy / RESULTS / table)
    manifest = run_copy / RESULTS / "join" / f"{CELL}.manifest.json"
    before = manifest.read_bytes()
    with pytest.raises(ValueError, match=re.escape(f"{RESULTS}/{table}")):
        _join_cell(f"{RESULTS}/probe/{CELL}/shard-0.parquet")
    assert manifest.read_bytes() == before, "a failed join must not vouch for anything"


@pytest.mark.parametrize("damage", ["flipped byte", "truncated"])
def test_a_corrupted_checkpoint_fails_the_anchor_job_naming_the_file(
    run_copy: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    monkeypatch.chdir(run_copy)
    checkpoint = run_copy / RESULTS / "arms/ar/policy.pt"
    if damage == "truncated":
        _truncate(checkpoint)
    else:
        data = bytearray(checkpoint.read_bytes())
        data[len(data) // 2] ^= 0xFF
        checkpoint.write_bytes(bytes(data))
    table = run_copy / RESULTS / "anchors/ar.parquet"
    (run_copy / RESULTS / "anchors/ar.manifest.json").unlink()
    table.unlink()
    with pytest.raises(ValueError, match=re.escape(f"{RESULTS}/arms/ar/policy.pt")):
        anchors(
            prereg_path=PREREG,
            arm="ar",
            source=f"{RESULTS}/arms/ar/source.json",
            upstream=[f"{RESULTS}/arms/ar/arm.manifest.json", f"{RESULTS}/oracles/parallel.manifest.json"],
            table=f"{RESULTS}/anchors/ar.parquet",
            draw0_dir=f"{RESULTS}/oracles/draw0/ar",
            manifest=f"{RESULTS}/anchors/ar.manifest.json",
            workers=2,
        )
    assert sorted(p.name for p in table.parent.iterdir()) == [
        "flow_teacher.manifest.json",
        "flow_teacher.parquet",
    ]


@pytest.mark.parametrize(
    ("new", "message"),
    [
        ("\nworkers: [2\n", "config/config.yaml: not valid YAML"),
        ("\nworkers: two\n", "config/config.yaml: workers: 'two' is not of type 'integer'"),
        (
            "\nwrokers: 2\n",
            "config/config.yaml: (top level): 'wrokers' was unexpected; did you mean 'workers'?",
        ),
    ],
    ids=["yaml syntax", "wrong type", "misspelt key"],
)
def test_a_malformed_config_is_refused_naming_the_file_and_field(
    workflow_only: Path, workflow_tools, new: str, message: str
) -> None:
    config = workflow_only / "config" / "config.yaml"
    text = config.read_text()
    assert "\nworkers: 2\n" in text
    config.write_text(text.replace("\nworkers: 2\n", new))
    proc = workflow_tools.snakemake(workflow_only, "-n", *workflow_tools.SMOKE)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr
    assert not (workflow_only / "results").exists()


def test_a_deleted_shard_and_figure_are_rebuilt_with_the_same_bytes(run_copy: Path, workflow_tools) -> None:
    """Every file a job writes is a declared output the default target asks for: a deleted probe shard and
    a deleted figure are rebuilt by a plain rerun (not passed over because the pages after them exist),
    byte for byte, and the chain verifies again."""
    results = run_copy / RESULTS
    deleted = [results / "probe" / CELL / "shard-0.parquet", results / "figures" / "rule_all-cells.png"]
    kept = [*deleted, results / "decision.json", results / "cells" / f"{CELL}.parquet"]
    before = {path: path.read_bytes() for path in kept}
    for path in deleted:
        path.unlink()
    proc = workflow_tools.snakemake(run_copy, "--cores", "2", *workflow_tools.SMOKE)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert {path: path.read_bytes() for path in kept} == before
    verify = workflow_tools.grpo_probe(run_copy, "verify", f"{RESULTS}/decision.manifest.json")
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_a_table_changed_after_its_job_is_refused_by_the_job_that_reads_it(
    run_copy: Path, workflow_tools
) -> None:
    """A flipped byte gives the table a newer time, so Snakemake plans the jobs that read it; the first of
    them refuses the table against the hash its writer's manifest recorded, before reading it."""
    table = run_copy / RESULTS / "cells" / f"{CELL}.parquet"
    data = bytearray(table.read_bytes())
    data[len(data) // 2] ^= 0xFF
    table.write_bytes(bytes(data))
    proc = workflow_tools.snakemake(run_copy, "--cores", "1", *workflow_tools.SMOKE)
    assert proc.returncode != 0
    said = proc.stdout + proc.stderr
    assert f"{RESULTS}/cells/{CELL}.parquet: its bytes changed after the job that wrote it ran" in said
    assert f"{RESULTS}/join/{CELL}.manifest.json recorded" in said
