"""The design's false go at the bar, from a finished run, under the confidence splits a design may register.

Run by hand (a few minutes a variant on 2 cores; not in CI), after the design ran:

    .venv/bin/python benchmarks/false_go_at_the_bar.py [--prereg prereg/grpo_signal_probe.yaml]
        [--confidence 0.95,0.98,0.99] [--split none,bonferroni] [--simulations 1000]

For each variant of ``analysis.bootstrap`` (its confidence and split) the run's own tables are analysed
again (:func:`grpo_probe.analysis.page.report.decision_record`, in a temporary folder: nothing under results/
is written) and the table prints the outcome, the design's false go at the bar with normal chaos and
with chaos resampled from the run's residuals, under pure chaos, and the go and arm rates at the
measured levels. It is how a design's registered confidence is sized for its false-go target, and how
the power that costs is read.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

from grpo_probe.analysis.page.report import decision_record
from grpo_probe.prereg import load_prereg

REPO = Path(__file__).resolve().parents[1]


def _pct(rate: dict | None) -> str:
    return (
        "-"
        if rate is None
        else f"{rate['percent']:.1f} [{rate['low_percent']:.1f}, {rate['high_percent']:.1f}]"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prereg", default="prereg/grpo_signal_probe.yaml")
    parser.add_argument("--confidence", default="0.95,0.98,0.99")
    parser.add_argument("--split", default="none,bonferroni")
    parser.add_argument("--simulations", type=int, default=None)
    args = parser.parse_args()
    prereg = load_prereg(REPO / args.prereg)
    results = REPO / "results" / prereg.name
    cells = prereg.enabled_cells
    probe = {c.id: results / "cells" / f"{c.id}.parquet" for c in cells}
    joins = {c.id: results / "join" / f"{c.id}.parquet" for c in cells}
    anchors = {a: results / "anchors" / f"{a}.parquet" for a in sorted({c.arm for c in cells})}
    replays = {c.id: sorted((results / "replay" / c.id).glob("shard-*.parquet")) for c in cells}
    missing = [str(p) for p in [*probe.values(), *joins.values(), *anchors.values()] if not p.is_file()]
    if missing:
        raise SystemExit(f"{prereg.name} has not finished: missing {missing[0]} (run snakemake first)")
    print(
        "| confidence | split | per interval | outcome | false go at the bar: worst | normal "
        f"| from the data | pure chaos | go at measured | arm at measured | s |\n|{'---|' * 11}"
    )
    for confidence in (float(c) for c in args.confidence.split(",")):
        for split in args.split.split(","):
            boot = dataclasses.replace(
                prereg.analysis.bootstrap, confidence=confidence, split=None if split == "none" else split
            )
            analysis = dataclasses.replace(prereg.analysis, bootstrap=boot)
            if args.simulations:
                operating = dataclasses.replace(analysis.operating, simulations=args.simulations)
                analysis = dataclasses.replace(analysis, operating=operating)
            variant = dataclasses.replace(prereg, analysis=analysis)
            start = time.perf_counter()
            with tempfile.TemporaryDirectory() as tmp:
                record = decision_record(
                    probe_tables=probe,
                    anchor_tables=anchors,
                    prereg=variant,
                    page_dir=tmp,
                    figures_dir=Path(tmp) / "figures",
                    provenance=[],
                    join_tables=joins,
                    replay_tables=replays if prereg.replay is not None else None,
                )
            design = record["operating"]["design"]
            outcome = record["outcome"]
            arms = "+".join(a for a in (outcome["ar_arm"], outcome["flow_arm"]) if a) or "-"
            print(
                f"| {confidence:g} | {split} | {boot.interval_confidence:.4g} | {outcome['kind']} ({arms}) | "
                f"{_pct(design['at_bar_worst'])} | {_pct(design['at_bar'])} | "
                f"{_pct(design['at_bar_data'])} | "
                f"{_pct(design['false_go'])} | {_pct(design['go_at_measured'])} | "
                f"{_pct(design['same_arm_at_measured'])} | {time.perf_counter() - start:.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
