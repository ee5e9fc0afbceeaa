"""The smoke design runs to decision.md with its AR arm served by another process, oracles passing.

The smoke run's trained AR checkpoint is served by ``grpo-probe serve`` and the arm rebound to the
server in a copy of the finished run: Snakemake binds it again (``bind_server``: the contract checked
over the wire) and reruns what reads the arm, with every worker on its own connection. The parallel and
draw-0 oracles must pass, and the decision must read the numbers of the in-process run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from serve_processes import serve_checkpoint

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_the_smoke_design_decides_the_same_with_its_ar_arm_served(
    run_copy: Path, smoke_run: Path, tmp_path: Path, snakemake
) -> None:
    checkpoint = shutil.copy(run_copy / "results/smoke/arms/ar/policy.pt", tmp_path / "ar.pt")
    with serve_checkpoint(Path(checkpoint), tmp_path / "server.log") as address:
        config = run_copy / "served.yaml"
        config.write_text(yaml.safe_dump({"arms": {"ar": {"source": "server", "address": address}}}))
        options = ["--cores", "2", "--configfile", str(config), "--config", "prereg=prereg/smoke.yaml"]
        proc = snakemake(run_copy, "decision.md", *options)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "rule bind_server:" in proc.stderr + proc.stdout
    results = run_copy / "results/smoke"
    source = json.loads((results / "arms/ar/source.json").read_text())
    assert source["address"] == address and source["server"]["checkpoint_sha256"]
    served = json.loads((results / "decision.json").read_text())
    trained = json.loads((smoke_run / "results/smoke/decision.json").read_text())
    assert served["cells"] == trained["cells"]
    assert served["outcome"] == trained["outcome"]
    # the server's own CPU (which no benchmark sees) is a line of compute.md, counted in the total
    compute = json.loads((results / "compute.json").read_text())
    (server,) = compute["servers"]
    assert (server["role"], server["address"], server["note"]) == ("policy of arm ar", address, "")
    assert server["cpu_s"] > 0
    assert f"| server: policy of arm ar ({address}) |" in (results / "compute.md").read_text()
