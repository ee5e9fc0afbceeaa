"""A full disk fails the job that hits it cleanly: an error, and no partial artifact left behind.

Where this machine lets the tests mount a size-limited tmpfs (root with CAP_SYS_ADMIN), the probe's
output directory lives on one that is nearly full, and the real workflow runs into it. The injected
ENOSPC test runs everywhere: the same write path, made to fail half way through in-process.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from grpo_probe.probe_jobs.rollouts import probe_shard

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

FREE_BYTES = 8192
"""Room left on the tmpfs: a manifest fits, a probe shard table (about 15 kB) does not."""


@contextlib.contextmanager
def _nearly_full_tmpfs(folder: Path) -> Iterator[Path]:
    """Mount a tmpfs over ``folder`` holding its former files, with ``FREE_BYTES`` left; unmount after."""
    saved = folder.with_name(folder.name + ".saved")
    folder.rename(saved)
    folder.mkdir()
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mount.returncode != 0:
        folder.rmdir()
        saved.rename(folder)
        pytest.skip(
            f"cannot mount a tmpfs here ({mount.stderr.strip()}); the injected ENOSPC test covers this"
        )
    try:
        shutil.copytree(saved, folder, dirs_exist_ok=True)
        stats = os.statvfs(folder)
        (folder / ".filler").write_bytes(b"\0" * (stats.f_bavail * stats.f_frsize - FREE_BYTES))
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_probe_job_on_a_full_disk_fails_cleanly_with_no_partial_artifact(
    run_copy: Path, workflow_tools
) -> None:
    shard = workflow_tools.SHARD
    for suffix in (".parquet", ".manifest.json"):
        (run_copy / f"{shard}{suffix}").unlink()
    probe_dir = run_copy / shard.parent.parent
    with _nearly_full_tmpfs(probe_dir):
        before = _files(probe_dir)
        proc = workflow_tools.snakemake(
            run_copy, f"{shard}.manifest.json", "--cores", "2", *workflow_tools.SMOKE
        )
        after = _files(probe_dir)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "Error in rule probe" in out and "No space left on device" in out
    assert after == before, "no table, manifest or temporary file may survive"


def test_injected_enospc_mid_write_leaves_no_table_manifest_or_temporary(
    run_copy: Path, workflow_tools, monkeypatch: pytest.MonkeyPatch
) -> None:
    shard = workflow_tools.SHARD
    manifest = json.loads((run_copy / f"{shard}.manifest.json").read_text())
    for suffix in (".parquet", ".manifest.json"):
        (run_copy / f"{shard}{suffix}").unlink()
    monkeypatch.chdir(run_copy)
    real_write_bytes = Path.write_bytes

    def half_then_enospc(self: Path, data: bytes) -> int:
        real_write_bytes(self, bytes(data)[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(Path, "write_bytes", half_then_enospc)
    with pytest.raises(OSError) as raised:
        probe_shard(
            prereg_path="prereg/smoke.yaml",
            cell="c1_ar_t1_0",
            seeds=manifest["extra"]["seeds"],
            source="results/smoke/arms/ar/source.json",
            upstream=[entry["path"] for entry in manifest["inputs"]],
            table=f"{shard}.parquet",
            manifest=f"{shard}.manifest.json",
            workers=0,
        )
    assert raised.value.errno == errno.ENOSPC
    assert sorted(p.name for p in (run_copy / shard.parent).iterdir()) == []
