"""``grpo-probe audit``: one job rerun in a scratch directory, its bytes compared with its manifest."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from grpo_probe.prereg.canonical import read_yaml
from grpo_probe.provenance import environment, file_sha256, same_numerics_environment, write_manifest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RESULTS = Path("results/smoke")


def _audit(workflow_tools, workdir: Path, path: str, *extra: str):
    return workflow_tools.grpo_probe(workdir, "audit", path, "--cores", "2", *extra)


def _tree_hashes(workdir: Path) -> dict[str, str]:
    return {
        str(p.relative_to(workdir)): file_sha256(p)
        for p in sorted((workdir / RESULTS).rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize(
    ("path", "rule", "outputs"),
    [
        ("results/smoke/arms/ar/policy.pt", "train", 2),
        ("results/smoke/decision.md", "decision", None),
    ],
)
def test_audit_of_a_recorded_output_reruns_its_rule_and_prints_identical(
    smoke_run: Path, workflow_tools, path: str, rule: str, outputs: int | None
) -> None:
    before = _tree_hashes(smoke_run)
    proc = _audit(workflow_tools, smoke_run, path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"(rule {rule})" in proc.stdout
    assert f"--allowed-rules {rule}" in proc.stdout
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("IDENTICAL")
    manifest = next(line for line in proc.stdout.splitlines() if line.startswith("manifest: "))
    recorded = json.loads((smoke_run / manifest.split()[1]).read_text())["outputs"]
    assert len(recorded) == (outputs or len(recorded)) and f"all {len(recorded)} outputs" in last
    for entry in recorded:
        assert f"same     {entry['path']}  sha256 {entry['sha256']}" in proc.stdout
    assert _tree_hashes(smoke_run) == before, "the audited tree must not be touched"


def test_kept_scratch_holds_the_rerun_and_a_tampered_tree_file_is_noted(
    run_copy: Path, workflow_tools, tmp_path: Path
) -> None:
    """The rerun is compared with the manifest, not with the tree, which may have been edited since."""
    table = run_copy / RESULTS / "probe/c1_ar_t1_0/shard-0.parquet"
    recorded = file_sha256(table)
    table.write_bytes(table.read_bytes()[:-100])
    scratch_parent = tmp_path / "scratch"
    scratch_parent.mkdir()
    proc = _audit(workflow_tools, run_copy, str(table), "--keep", "--scratch", str(scratch_parent))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1].startswith("IDENTICAL")
    assert "(rule probe)" in proc.stdout
    assert re.search(
        r"note: results/smoke/probe/c1_ar_t1_0/shard-0\.parquet: the file in the audited tree no "
        r"longer matches its manifest",
        proc.stdout,
    )
    scratch = Path(re.search(r"^scratch: (.+)$", proc.stdout, flags=re.M).group(1))
    assert scratch.parent == scratch_parent
    assert file_sha256(scratch / RESULTS / "probe/c1_ar_t1_0/shard-0.parquet") == recorded


def test_a_forged_table_is_reported_with_hashes_sizes_and_first_differing_cell(
    run_copy: Path, workflow_tools
) -> None:
    """A table edited together with its manifest passes verify; only the rerun shows the forgery."""
    joined = run_copy / RESULTS / "join/c1_ar_t1_0.parquet"
    original = file_sha256(joined)
    table = pq.read_table(joined)
    column = table.schema.get_field_index("std_progress_cm")
    table = table.set_column(column, "std_progress_cm", pc.add(table.column(column), 1.0))
    pq.write_table(table, joined)
    manifest_path = run_copy / RESULTS / "join/c1_ar_t1_0.manifest.json"
    manifest = json.loads(manifest_path.read_text())
    entry = next(e for e in manifest["outputs"] if e["path"].endswith("join/c1_ar_t1_0.parquet"))
    entry.update(sha256=file_sha256(joined), size=joined.stat().st_size)
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    assert workflow_tools.grpo_probe(run_copy, "verify", str(manifest_path)).returncode == 0

    proc = _audit(workflow_tools, run_copy, "results/smoke/join/c1_ar_t1_0.parquet")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    assert "DIFFERS  results/smoke/join/c1_ar_t1_0.parquet" in out
    assert f"expected sha256 {entry['sha256']}  {entry['size']} bytes" in out
    assert f"found    sha256 {original}" in out
    assert "first difference: column 'std_progress_cm', row 0: expected" in out
    assert "same     results/smoke/cells/c1_ar_t1_0.parquet" in out
    last = out.strip().splitlines()[-1]
    if same_numerics_environment(manifest["environment"], environment()) == []:  # a finding, plainly
        assert last == "DIFFERS: 1 of 2 outputs"
        assert "another environment" not in out
    else:  # a manifest that does not record what promises bytes reads as from another environment
        assert last.startswith("DIFFERS: 1 of 2 outputs, in another environment (differs in: ")
        assert out.index("another environment (differs in: ") < out.index("DIFFERS  ")


def test_audit_refuses_a_file_no_manifest_lists(smoke_run: Path, workflow_tools) -> None:
    proc = _audit(workflow_tools, smoke_run, "results/smoke/compute.md")
    assert proc.returncode == 2
    assert "results/smoke/compute.md: no manifest under" in proc.stderr


def test_audit_refuses_to_rerun_from_an_input_that_changed(run_copy: Path, workflow_tools) -> None:
    anchors = run_copy / RESULTS / "anchors/ar.parquet"
    data = bytearray(anchors.read_bytes())
    data[len(data) // 2] ^= 0x01
    anchors.write_bytes(bytes(data))
    proc = _audit(workflow_tools, run_copy, "results/smoke/join/c1_ar_t1_0.parquet")
    assert proc.returncode == 2
    assert (
        "results/smoke/anchors/ar.parquet (listed in results/smoke/anchors/ar.manifest.json): output changed"
        in (proc.stderr)
    )
    assert "rerun:" not in proc.stdout


def test_a_rerun_is_staged_with_the_shared_rule_files_its_design_extends(tmp_path: Path) -> None:
    """A design that ``extends:`` a shared rule file is read merged with it by every job, so the audit's
    scratch copy must hold the file: each shipped design that extends one was otherwise unauditable."""
    from grpo_probe.audit.locate import JobRecord, upstream_files

    repo = Path(__file__).resolve().parents[2]
    design = "prereg/designs/smoke/reacher_smoke.yaml"
    for name in (design, f"{design}.lock", "prereg/rules/signal_and_competence.yaml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text((repo / name).read_text())
    assert "extends:" in (tmp_path / design).read_text()
    record = JobRecord("results/x/probe.manifest.json", "probe", design, (), (), {})
    staged = upstream_files(record, tmp_path, "results")
    # found in the folders enclosing the design up to prereg/, as the design names it (rules/...)
    assert "prereg/rules/signal_and_competence.yaml" in staged
    assert {design, f"{design}.lock"} <= set(staged)


def test_a_job_of_a_design_that_moved_since_is_staged_from_where_it_lies_now(tmp_path: Path) -> None:
    """A results folder made before its design moved (prereg/MOVED.yaml) records the old path, as
    ``prereg_path`` and among the root job's outputs: the rerun must run and stage the design where it lies
    now, or an audit of any result older than the move fails on a file that was only moved."""
    from grpo_probe.audit.locate import job_record, upstream_files

    repo = Path(__file__).resolve().parents[2]
    old, new = "prereg/reacher_smoke.yaml", "prereg/designs/smoke/reacher_smoke.yaml"
    assert read_yaml(repo / "prereg/MOVED.yaml")["moved"][old] == new
    for name in (new, f"{new}.lock", "prereg/rules/signal_and_competence.yaml", "prereg/MOVED.yaml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text((repo / name).read_text())
    root_job = tmp_path / "results/x/prereg/check.manifest.json"
    root_job.parent.mkdir(parents=True)
    manifest = write_manifest(
        root_job,
        [tmp_path / new, tmp_path / f"{new}.lock"],
        [],
        "ab" * 32,
        "prereg_check",
        root=tmp_path,
        prereg_path=tmp_path / new,
    )
    recorded = json.loads(root_job.read_text())
    recorded["prereg_path"] = old  # as written before the move
    for entry in recorded["outputs"]:
        entry["path"] = entry["path"].replace(new, old)
    root_job.write_text(json.dumps(recorded))
    assert manifest["outputs"][0]["path"] == new
    record = job_record("results/x/prereg/check.manifest.json", tmp_path)
    assert record.prereg_path == new
    assert {new, f"{new}.lock"} <= set(upstream_files(record, tmp_path, "results"))
    assert not {old, f"{old}.lock"} & set(upstream_files(record, tmp_path, "results"))
