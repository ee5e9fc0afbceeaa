"""Before a run, ``prereg check`` says when the registered sizes cannot hold the false-go target at any
levels (the share's bar with normal chaos, both spreads far above the signal bar)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from grpo_probe.analysis.error_rates.size_check import size_check
from grpo_probe.prereg.design import load_prereg

ROOT = Path(__file__).resolve().parents[2]


def test_a_design_of_two_seeds_cannot_hold_five_percent_and_the_default_can() -> None:
    smoke = size_check(load_prereg(ROOT / "prereg/smoke.yaml"), runs=200)
    assert smoke is not None and smoke.cannot_hold and smoke.rate.low > 0.05
    assert smoke.sizes == "2 seeds x K = 2, 2 replayed x R = 2"
    default = size_check(load_prereg(ROOT / "prereg/grpo_signal_probe.yaml"), runs=200)
    assert default is not None and not default.cannot_hold and default.rate.value <= 0.05


def test_a_design_without_replays_has_nothing_to_check(tmp_path: Path) -> None:
    from dataclasses import replace

    prereg = load_prereg(ROOT / "prereg/smoke.yaml")
    assert size_check(replace(prereg, replay=None)) is None


def test_prereg_check_warns_naming_the_file_the_sizes_and_the_field() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "grpo_probe.cli", "prereg", "check", "prereg/smoke.yaml"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "valid and locked" in done.stdout
    warning = " ".join(done.stderr.split())
    assert warning.startswith("prereg/smoke.yaml: warning: at the registered sizes (2 seeds x K = 2")
    assert "analysis.operating_characteristics.false_go_target" in warning
    assert 'will read "not decided at this size"' in warning
