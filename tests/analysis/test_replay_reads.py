"""The replay reads on decision.json, reads.tsv and decision.md, from constructed tables.

Why constructed: the numbers are then known by hand. Seeds 1000-1003, K = 4; each draw is replayed twice.
The AR cell's replays land at the draw's reward +/- 1 cm (chaos V_w = 2 cm^2, much less than its draws'
spread); the flow cell's draws never differ while their replays do, so its chaos fraction is undefined.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_probe.analysis.page.report import build_decision, reads_tsv_text
from grpo_probe.analysis.rule.glossary import number
from grpo_probe.envs.episode_table import EPISODE_SCHEMA
from grpo_probe.rollout.replay import replay_schema

from .rollout_factory import anchor_rows, as_prereg, probe_rows, write_table

SEEDS = (1000, 1001, 1002, 1003)
AR_DRAWS = [0.0, 4.0, 8.0, 12.0]
FLAT = [5.0, 5.0, 5.0, 5.0]

REPLAY = {
    "replays_per_draw": 1,
    "seeds": "all",
    "perturbations": [{"kind": "action", "std": 0.001}, {"kind": "state", "scale_m": 0.0001}],
    "divergence_m": 0.001,
    "oracle": {"seeds": [1000]},
}


def _replay_rows(rows: list[dict], offsets: tuple[float, float]) -> list[dict]:
    out = []
    for row in rows:
        for slot, (kind, scale) in enumerate((("action", 0.001), ("state", 0.0001))):
            progress = row["progress_final_cm"] + offsets[slot]
            replay = dict(row) | {
                "progress_final_cm": progress,
                "d_final_cm": row["d0_cm"] - progress,
                "perturbation_index": slot,
                "perturbation": kind,
                "perturbation_scale": scale,
                "replay": 1,
                "divergence_tick": 3,
                "first_contact_tick": 2,
                "replan_frame_sha256": None,
            }
            out.append(replay)
    return out


def _write_replays(path: Path, rows: list[dict]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows, schema=replay_schema(EPISODE_SCHEMA)), path)
    return path


@pytest.fixture
def decision(tmp_path: Path, prereg) -> dict:
    prereg = dict(prereg) | {"replay": REPLAY}
    prereg["decision_rule"] = json.loads(json.dumps(prereg["decision_rule"]))
    prereg["decision_rule"]["criteria"]["clears_signal_bar"]["all_of"] = [
        {"read": "median_choice_std_cm", "op": ">=", "threshold": {"analysis": "signal_bar_cm"}},
        {"read": "chaos_fraction", "op": "<=", "threshold": 0.5},
    ]
    c1 = probe_rows("c1", "ar_arm", "ar", {s: AR_DRAWS for s in SEEDS})
    c3 = probe_rows("c3", "teacher", "flow", {s: FLAT for s in SEEDS}, contact=True)
    probes = {"c1": write_table(tmp_path / "c1.parquet", c1), "c3": write_table(tmp_path / "c3.parquet", c3)}
    anchors = {
        "ar_arm": write_table(
            tmp_path / "a_ar.parquet", anchor_rows("ar_arm", "ar", {s: 6.0 for s in SEEDS})
        ),
        "teacher": write_table(
            tmp_path / "a_fl.parquet", anchor_rows("teacher", "flow", {s: 5.0 for s in SEEDS}, contact=True)
        ),
    }
    replays = {
        "c1": [_write_replays(tmp_path / "r1.parquet", _replay_rows(c1, (1.0, -1.0)))],
        "c3": [_write_replays(tmp_path / "r3.parquet", _replay_rows(c3, (1.0, -1.0)))],
    }
    out = tmp_path / "out"
    return build_decision(
        probes,
        anchors,
        as_prereg(prereg),
        out / "decision.md",
        out / "decision.json",
        out / "figures",
        [(str(p), "0" * 64) for p in (*probes.values(), *anchors.values())],
        replay_tables=replays,
    ) | {"_out": str(out)}


def test_the_replay_reads_are_the_hand_computed_decomposition(decision: dict) -> None:
    ar = decision["cells"][0]
    group_var = 80.0 / 3.0  # var(0, 4, 8, 12), ddof 1: (36 + 4 + 4 + 36) / 3
    # each draw's two replays are reward + 1 and reward - 1: var 2 (ddof 1)
    assert ar["reads"]["replay_std_cm"] == pytest.approx(2.0**0.5, abs=1e-4)
    assert ar["reads"]["chaos_fraction"] == pytest.approx(2.0 / group_var, abs=1e-4)
    assert ar["reads"]["median_choice_std_cm"] == pytest.approx((group_var - 2.0) ** 0.5, abs=1e-4)
    assert ar["reads"]["rank_stability"] == 1.0
    # the decomposition of all three rewards of each draw (the draw, reward + 1, reward - 1): draw means
    # 0, 4, 8, 12, so MS_b = 3 x 80 / 3 = 80 and MS_w = (0 + 1 + 1) x 4 / 8 = 1 on every seed
    assert ar["reads"]["chaos_std_cm"] == pytest.approx(1.0, rel=1e-12)
    assert ar["reads"]["choice_std_cm"] == pytest.approx(((80.0 - 1.0) / 3) ** 0.5, rel=1e-12)
    assert ar["reads"]["chaos_share"] == pytest.approx(1.0 / (1.0 + 79.0 / 3), rel=1e-12)
    assert ar["reads"]["median_divergence_tick"] == 3.0 and ar["reads"]["median_first_contact_tick"] == 2.0
    assert ar["replay"]["replayed_seeds"] == 4 and ar["replay"]["replays"] == 2
    assert [p["median_abs_change_cm"] for p in ar["replay"]["perturbations"]] == [1.0, 1.0]


def test_draws_without_spread_leave_the_chaos_fraction_null_and_the_signal_criterion_failing(
    decision: dict,
) -> None:
    flow = decision["cells"][1]
    assert flow["reads"]["chaos_fraction"] is None and flow["reads"]["rank_stability"] is None
    assert flow["reads"]["median_choice_std_cm"] == 0.0
    assert flow["verdict"]["criteria"]["clears_signal_bar"]["passed"] is False
    assert flow["verdict"]["qualifies"] is False


def test_the_page_and_the_reads_table_show_the_split(decision: dict) -> None:
    md = (Path(decision["_out"]) / "decision.md").read_text()
    ar = decision["cells"][0]
    total = number(ar["replay"]["total_std_cm"])
    assert (
        f"cell c1: pooled over its 4 replayed seeds, a reward's spread of {total} cm splits into "
        f"{number(ar['reads']['choice_std_cm'])} cm [" in md
    )
    assert f"[group std against replay std]({ar['figures']['chaos']})" in md
    n = decision["replay"]["replays_per_draw"]
    again = "once" if n == 1 else f"{n} times"
    assert f"was run again {again} under each registered perturbation" in " ".join(md.split())
    # the signal criterion's chaos condition is stated in words in the cell's reasons, in short at the top
    top, below = md.split("\n---\n", 1)
    assert "chaos fraction is undefined for this cell: fails" in below
    assert "chaos fraction undefined" in " ".join(top.split())
    record = {k: v for k, v in decision.items() if k != "_out"}
    tsv = reads_tsv_text(record).splitlines()
    chaos = next(line for line in tsv if line.startswith("chaos fraction"))
    assert chaos.split("\t")[2] == "n/a"
    assert (Path(decision["_out"]) / ar["figures"]["chaos"]).is_file()


def test_a_design_with_replays_needs_every_cells_replay_tables(tmp_path: Path, prereg) -> None:
    prereg = dict(prereg) | {"replay": REPLAY}
    c1 = probe_rows("c1", "ar_arm", "ar", {s: AR_DRAWS for s in SEEDS})
    c3 = probe_rows("c3", "teacher", "flow", {s: FLAT for s in SEEDS})
    probes = {"c1": write_table(tmp_path / "c1.parquet", c1), "c3": write_table(tmp_path / "c3.parquet", c3)}
    anchors = {
        "ar_arm": write_table(
            tmp_path / "a_ar.parquet", anchor_rows("ar_arm", "ar", {s: 6.0 for s in SEEDS})
        ),
        "teacher": write_table(
            tmp_path / "a_fl.parquet", anchor_rows("teacher", "flow", {s: 5.0 for s in SEEDS})
        ),
    }
    with pytest.raises(
        ValueError, match=r"every enabled cell needs its replay tables .*tables given for: \['c1'\]"
    ):
        build_decision(
            probes,
            anchors,
            as_prereg(prereg),
            tmp_path / "decision.md",
            tmp_path / "decision.json",
            tmp_path / "figures",
            [],
            replay_tables={"c1": [_write_replays(tmp_path / "r1.parquet", _replay_rows(c1, (1.0, -1.0)))]},
        )
