"""The flow head's chunk_logprob: per chunk (the default, every shipped design) or per action dimension.

Under ``mean`` (Flow-GRPO's convention) the loss sees each SDE step's log-prob divided by the chunk's
D = chunk_length x action_dim dimensions, so its ratio and clip read per dimension, and the reported
approx KL is the chunk's k3 divided by D; under ``sum`` the loss sees the recorded sums, as before.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import torch

from grpo_probe.phase2 import trainer
from grpo_probe.phase2.losses import approx_kl_k3, clip_higher_loss, clipped_policy_loss
from grpo_probe.phase2.recompute import load_head_model
from grpo_probe.phase2.rollouts import read_batch, run_iteration, write_iteration_table
from grpo_probe.phase2.trainer import deterministic_torch, grpo_update, make_optimizer
from grpo_probe.prereg import Prereg, load_prereg
from grpo_probe.prereg.phase2 import Phase2Error
from shipped_files import named_designs, shipped_designs, study_named

from .conftest import PHASE2_SECTION, write_design

REPO = Path(__file__).resolve().parents[2]


def test_every_shipped_design_keeps_the_per_chunk_sum() -> None:
    """Designs locked before the field existed load against their locks and train as before; every member
    of the calibrated validation study registers the calibration's per-dimension recipe (lr 5e-5), with a
    flow head to train it on."""
    loaded = {p: load_prereg(p) for p in shipped_designs()}
    flows = {
        path: d.phase2.recipe("flow")
        for path, d in loaded.items()
        if d.phase2 is not None and "flow" in d.phase2.heads
    }
    members = named_designs(study_named("calibrated_validation"), "members")
    assert members and set(members) <= set(flows), "every member pilots a flow head"
    before = {p: r for p, r in flows.items() if p not in members}
    assert before and all(r.chunk_logprob == "sum" and not r.per_dimension for r in before.values())
    assert all(flows[p].per_dimension and flows[p].lr == 5e-5 for p in members)


def test_only_the_flow_head_reduces_a_chunk(tmp_path: Path) -> None:
    heads = {**PHASE2_SECTION["heads"], "ar": {**PHASE2_SECTION["heads"]["ar"], "chunk_logprob": "mean"}}
    with pytest.raises(Phase2Error, match=r"phase2\.heads\.ar\.chunk_logprob: only the flow head"):
        write_design(tmp_path / "d.yaml", heads=heads)


def test_the_k3_diagnostic_is_the_loss_s_own() -> None:
    new, old = torch.tensor([[-1.0, -2.5]]), torch.tensor([[-1.2, -2.0]])
    mask = torch.ones_like(new, dtype=torch.bool)
    ones = torch.ones_like(new)
    assert approx_kl_k3(new, old, mask) == clipped_policy_loss(new, old, ones, mask, 0.2, 0.2).approx_kl


def _first_step_inputs(
    design: Prereg, checkpoint: Path, table: Path, chunk_logprob: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[torch.Tensor, Any]:
    """The log-probs the loss saw at the first optimizer step, and the update's stats."""
    seen: list[torch.Tensor] = []

    def capture(logprob: torch.Tensor, old: torch.Tensor, *rest: Any) -> Any:
        seen.append(old.detach().clone())
        return clip_higher_loss(logprob, old, *rest)

    monkeypatch.setattr(trainer, "policy_loss", lambda name: capture)
    phase2 = design.phase2
    assert phase2 is not None
    recipe = dataclasses.replace(phase2.recipe("flow"), chunk_logprob=chunk_logprob)
    with deterministic_torch():
        policy = load_head_model(str(checkpoint))
        stats = grpo_update(
            policy, None, read_batch(table, design.run_key), recipe, phase2, make_optimizer(policy, recipe)
        )
    return seen[0], stats


def test_per_dimension_divides_the_ratio_s_log_probs_by_the_chunk_s_dimensions(
    design: Prereg, heads: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "rollouts.parquet"
    write_iteration_table(run_iteration(design, "flow_teacher", heads["flow"], 0, show_progress=False), table)
    summed, by_chunk = _first_step_inputs(design, heads["flow"], table, "sum", monkeypatch)
    averaged, by_dimension = _first_step_inputs(design, heads["flow"], table, "mean", monkeypatch)
    ratio = summed / averaged
    assert torch.allclose(ratio, torch.full_like(ratio, float(ratio.flatten()[0])))  # one D for every entry
    d = float(ratio.flatten()[0])
    assert d > 1 and d == round(d)  # D = chunk_length x action_dim
    assert by_chunk.updates == by_dimension.updates
