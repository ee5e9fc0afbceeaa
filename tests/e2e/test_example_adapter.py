"""The README's adapter (examples/my_flow_adapter.py) is the code the README shows, and passes both oracles.

Why a file and not only prose: text no test reads drifts. The adapter is bound to the flow teacher for
the smoke run's trained checkpoint, exactly as the README says (a --configfile and PYTHONPATH), and only
the oracle targets run: the parallel oracle (sequential against parallel rollouts, bit for bit) and the
draw-0 oracle of the flow cell (the probe path with stochasticity off against the anchor rows). It runs
in a copy of the finished smoke run, as a lab that ran the smoke design binds its own policy next: the
check of the design and the AR arm are done there, so only the binding and the two oracles run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ADAPTER = "examples.my_flow_adapter:load_my_flow"
RESULTS = Path("results/smoke")


def _readme_adapter_block() -> str:
    readme = (REPO / "docs/your-policy.md").read_text()
    section = readme.split("### Bring your own checkpoint", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the section shows one python block: the example adapter"
    return blocks[0]


def test_readme_shows_the_example_adapter_file() -> None:
    source = (REPO / "examples/my_flow_adapter.py").read_text()
    code = source.split('"""', 2)[2].lstrip("\n")  # the file after its module docstring
    assert _readme_adapter_block() == code


@pytest.mark.e2e
@pytest.mark.slow
def test_example_adapter_passes_both_oracles_on_the_smoke_design(smoke_run: Path, run_copy: Path) -> None:
    bound = {
        "arms": {
            "flow_teacher": {
                "source": "checkpoint",
                "path": str(smoke_run / RESULTS / "arms/flow_teacher/policy.pt"),
                "adapter": ADAPTER,
            },
        }
    }
    config = run_copy / "my_flow.yaml"
    config.write_text(yaml.safe_dump(bound))
    # the draw-0 oracle of the arm's cell runs in the arm's anchors job, into oracles/draw0/<arm>/
    targets = [str(RESULTS / "oracles/parallel.json"), str(RESULTS / "oracles/draw0/flow_teacher")]
    snakemake = Path(sys.executable).parent / "snakemake"
    options = ["--cores", "2", "--configfile", str(config), "--config", "prereg=prereg/smoke.yaml"]
    proc = subprocess.run(
        [str(snakemake), *targets, *options],
        cwd=run_copy,
        env={**os.environ, "PYTHONPATH": str(run_copy)},  # as the README says: the adapter is importable
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    said = proc.stdout + proc.stderr
    assert all(f"rule {rule}:" in said for rule in ("bind_checkpoint", "parallel_oracle", "anchors")), said
    assert "rule train:" not in said  # the flow arm is bound, the AR arm's training is done
    source = json.loads((run_copy / RESULTS / "arms/flow_teacher/source.json").read_text())
    assert source["factory"] == ADAPTER
    draw0 = RESULTS / "oracles/draw0/flow_teacher/c3_teacher_ode.json"
    for report in (RESULTS / "oracles/parallel.json", draw0):
        assert json.loads((run_copy / report).read_text())["pass"] is True, report
        # the adapter's own report (its Euler steps draw other actions), not the trained arm's kept one
        assert (run_copy / report).read_bytes() != (smoke_run / report).read_bytes(), report
