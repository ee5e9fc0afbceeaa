"""A camera-fed arm on a Gymnasium scene (prereg/designs/smoke/pusher_camera_smoke.yaml) end to end, from a
fresh copy.

Why: camera-fed policies must be probed on the scenes their authors ship, not only on the reference boat.
The design's arm reads Pusher-v5's ``default`` camera at 64 x 64 through the Gymnasium adapter; the demos
record those frames, and both oracles must pass with the frames the policy saw compared per replan.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RESULTS = Path("results/pusher_camera_smoke")


def test_a_camera_fed_arm_on_pusher_runs_to_its_decision_with_frames_in_both_oracles(
    headless_gl: None, fresh_copy: Path, grpo_probe, workflow_tools
) -> None:
    run = workflow_tools.run_design(fresh_copy, "prereg/designs/smoke/pusher_camera_smoke.yaml")
    assert (run / "decision.md").read_text().startswith("# GRPO signal probe: decision")

    with np.load(run / "demos/demos.npz") as demos:
        frames = demos["images.default"]
        assert frames.dtype == np.uint8 and frames.shape == (len(demos["obs"]), 64, 64, 3)
        assert frames.std() > 0

    reports = workflow_tools.oracle_reports(run)
    assert len(reports) == 2  # parallel + the one cell's draw-0 report
    for report in reports:
        body = json.loads(report.read_text())
        assert body["pass"] is True, report
        assert body["counts"]["frames"] > 0, report  # the frames were compared, not skipped
    parallel = json.loads(reports[0].read_text())
    digests = parallel["frames"]["sequential_sha256_per_replan"]
    assert digests and all(
        len(d["sha256"]) == 2 and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in d["sha256"]) for d in digests
    )
    verify = grpo_probe(fresh_copy, "verify", str(RESULTS / "decision.manifest.json"))
    assert verify.returncode == 0, verify.stdout + verify.stderr
