"""The camera-fed design (prereg/designs/smoke/vision_smoke.yaml) end to end, from a fresh copy of the
repository.

Why: a vision-language-action policy acts from frames, and the probe is only as good as its oracles. The
design's arm reads the 96 x 96 overhead frame (a CNN flow head trained on demos that record frames);
both oracles must pass with the frames the policy saw compared per replan, and the VLA-shaped example
adapter (examples/my_vla_adapter.py, which also reads the registered task) must pass them too when
bound to the same arm, as the README shows.

It runs when asked (``GRPO_PROBE_LONG_RUNS=1``, which `.ci/run` sets): it takes two to three minutes on
2 cores, which a newcomer's ``bin/test`` leaves to CI.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from asked_tools import long_run

pytestmark = [pytest.mark.e2e, pytest.mark.slow, long_run]

REPO = Path(__file__).resolve().parents[2]
RESULTS = Path("results/vision_smoke")
VLA = "examples.my_vla_adapter:load_my_vla"


def test_the_vision_design_runs_end_to_end_with_frames_in_both_oracles(
    fresh_copy: Path, snakemake, grpo_probe, workflow_tools
):
    run = workflow_tools.run_design(fresh_copy, "prereg/designs/smoke/vision_smoke.yaml")
    assert (run / "decision.md").read_text().startswith("# GRPO signal probe: decision")

    with np.load(run / "demos/demos.npz") as demos:
        frames = demos["images.overhead"]
        assert frames.dtype == np.uint8 and frames.shape == (len(demos["obs"]), 96, 96, 3)

    reports = workflow_tools.oracle_reports(run)
    assert len(reports) == 3  # parallel + one draw-0 report per cell
    for report in reports:
        body = json.loads(report.read_text())
        assert body["pass"] is True, report
        assert body["counts"]["frames"] > 0, report  # the frames were compared, not skipped
        assert "frames" in body, report
    parallel = json.loads(reports[0].read_text())
    digests = parallel["frames"]["sequential_sha256_per_replan"]
    assert all(
        len(d["sha256"]) == 3 and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in d["sha256"]) for d in digests
    )

    probe = pq.read_table(next((run / "probe").rglob("*.parquet")), columns=["replan_frame_sha256"])
    assert all(len(v) == 3 for v in probe.column("replan_frame_sha256").to_pylist())
    # The unperturbed replays saw the draws' frames, byte for byte; the perturbed ones saw their own.
    replay_oracles = sorted((run / "oracles/replay").glob("*.json"))
    assert len(replay_oracles) == len(reports) - 1  # one per cell
    for report in replay_oracles:
        body = json.loads(report.read_text())
        assert body["pass"] is True and body["counts"]["frames"] > 0, report
    replays = pq.read_table(next((run / "replay").rglob("*.parquet")), columns=["replan_frame_sha256"])
    assert all(len(v) == 3 for v in replays.column("replan_frame_sha256").to_pylist())
    verify = grpo_probe(fresh_copy, "verify", str(RESULTS / "decision.manifest.json"))
    assert verify.returncode == 0, verify.stdout + verify.stderr

    # The VLA-shaped adapter bound to the same arm, as the README's "Camera-fed policies" shows.
    weights = fresh_copy / "my_vla.pt"
    weights.write_bytes(b"stand-in: the example adapter draws its weights from a keyed stream\n")
    bound = {"arms": {"flow_vision": {"source": "checkpoint", "path": str(weights), "adapter": VLA}}}
    config = fresh_copy / "my_vla.yaml"
    config.write_text(yaml.safe_dump(bound))
    results = "results/vision_vla"
    # the draw-0 oracle of the arm's cell runs in the arm's anchors job, into oracles/draw0/<arm>/
    targets = [
        f"{results}/vision_smoke/oracles/parallel.json",
        f"{results}/vision_smoke/oracles/draw0/flow_vision",
    ]
    proc = snakemake(
        fresh_copy,
        *targets,
        "--cores",
        "2",
        "--configfile",
        str(config),
        "--config",
        "prereg=prereg/designs/smoke/vision_smoke.yaml",
        f"results={results}",
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(fresh_copy)},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "rule train:" not in proc.stdout + proc.stderr  # the arm is bound: nothing was trained
    for report in (targets[0], f"{targets[1]}/c1_vision_ode.json"):
        body = json.loads((fresh_copy / report).read_text())
        assert body["pass"] is True and body["counts"]["frames"] > 0, report


def test_the_readme_shows_the_vla_adapter_file() -> None:
    readme = (REPO / "docs/your-policy.md").read_text()
    section = readme.split("### Camera-fed policies", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    source = (REPO / "examples/my_vla_adapter.py").read_text()
    assert blocks == [source.split('"""', 2)[2].lstrip("\n")]
