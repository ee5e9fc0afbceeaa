"""Snakemake's report of the smoke run, opened in headless Chromium as a reader would open it.

Why a browser: the report is a single HTML page that draws itself with JavaScript from embedded data, so
only a browser shows whether the categories and figures are there. The test builds the report for the
shared smoke run, opens a cell's category and its group-spread figure (a small script appended to a
copy of the page presses what a reader presses), and checks the DOM and a screenshot. It runs when asked
(``GRPO_PROBE_BROWSER=1``, which `.ci/run` sets), never merely because a browser is installed, and then
installs Debian's chromium itself if it is missing (tools/browser/install-chromium.sh, as root).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image as mpimg

from asked_tools import asked_tool

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SMOKE = ["--config", "prereg=prereg/smoke.yaml"]
CELL = "c1_ar_t1_0"
_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=15000",
]


def _chromium() -> str:
    return asked_tool("GRPO_PROBE_BROWSER", "chromium", "tools/browser/install-chromium.sh", "browser test")


def _browse(browser: str, page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [browser, *_FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_the_report_opens_in_chromium_with_its_categories_and_figures(
    run_copy: Path, tmp_path: Path, snakemake
) -> None:
    browser = _chromium()
    proc = snakemake(run_copy, *SMOKE, "--report", "results/smoke/report.html")  # as docs/workflow.md says
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = run_copy / "results/smoke/report.html"
    assert report.stat().st_size > 100_000  # self-contained: scripts and figures embedded
    script = (Path(__file__).parent / "report_view.js").read_text().replace("CELL", CELL)
    text = report.read_text(encoding="utf-8")
    end = text.rfind("</body>")
    viewed = tmp_path / "viewed.html"
    viewed.write_text(text[:end] + script + text[end:], encoding="utf-8")

    dom = _browse(browser, viewed, tmp_path / "profile", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    categories = re.search(r'data-probe-categories="([^"]*)"', dom.stdout)
    assert categories is not None, "the report's navigation did not render"
    assert {"Decision", CELL, "c3_teacher_ode", "all-cells"} <= set(categories.group(1).split("|"))
    images = re.search(r'data-probe-images="([^"]*)"', dom.stdout)
    assert images is not None and images.group(1), "no figure was shown after pressing its eye"
    width, height = (int(v) for v in images.group(1).split(",")[0].split("x"))
    assert width > 100 and height > 100  # a decoded PNG, not a broken image

    shot = tmp_path / "report.png"
    proc = _browse(browser, viewed, tmp_path / "profile2", "--window-size=1400,1000", f"--screenshot={shot}")
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-2000:]
    pixels = mpimg.imread(shot)[..., :3]
    figure_area = pixels[200:750, 450:1300]  # right of the navigation, where the figure is drawn
    drawn = np.mean(np.any(figure_area < 0.6, axis=-1))
    assert drawn > 0.01, f"the figure area of the screenshot is blank ({drawn:.4f} of pixels drawn)"
