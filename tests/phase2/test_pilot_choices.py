"""The policy loss and advantage estimator a design names are the ones phase 2 runs.

A name is refused twice over before it can mean two things (a second registration under a taken name)
or nothing (a design naming an unregistered one, refused by the workflow's first rule with the file and
the field); a toy loss and estimator registered here and named in a tiny design are what the rollouts
score with and the trainer minimises, and phase2.json and phase2.md say so. That the default names
reproduce the pilot's numbers is the rest of tests/phase2, unchanged, and
tests/phase2/test_loss_registry.py's bit-for-bit checks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from grpo_probe.phase2 import losses, reward
from grpo_probe.phase2.losses import (
    PolicyLoss,
    clip_higher_loss,
    register_policy_loss,
    token_mean,
)
from grpo_probe.phase2.pilot_choices import check_pilot_choices
from grpo_probe.phase2.recompute import load_head_model
from grpo_probe.phase2.reward import (
    GroupAdvantages,
    grpo_outcome_advantages,
    register_adv_est,
)
from grpo_probe.phase2.rollouts import read_batch, run_iteration, write_iteration_table
from grpo_probe.phase2.trainer import deterministic_torch, grpo_update, make_optimizer
from grpo_probe.prereg import PreregError, load_prereg
from grpo_probe.prereg.phase2 import DEFAULT_ADVANTAGE, DEFAULT_POLICY_LOSS
from grpo_probe.probe_jobs.prepare import prereg_check

from .conftest import write_design
from .test_stage import run_stage


class Toys:
    """A toy loss and estimator, registered for one test, and what the trainer passed the loss."""

    def __init__(self) -> None:
        self.losses: list[float] = []


@pytest.fixture
def toys(monkeypatch: pytest.MonkeyPatch) -> Toys:
    """``vanilla_pg`` and ``mean_baseline`` registered in copies of the registries (undone after)."""
    monkeypatch.setattr(losses, "POLICY_LOSSES", losses.POLICY_LOSSES.copy())
    monkeypatch.setattr(reward, "ADV_ESTIMATORS", reward.ADV_ESTIMATORS.copy())
    seen = Toys()

    @register_policy_loss("vanilla_pg")
    def vanilla_pg(
        logprob: torch.Tensor, old: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, recipe: object
    ) -> PolicyLoss:
        """REINFORCE's -A log pi, token-mean (Williams 1992, Eq. 11 with the group advantage)."""
        loss = token_mean(-adv * logprob, mask)
        seen.losses.append(float(loss.detach()))
        return PolicyLoss(loss, 0.0, 0.0, 1.0)

    @register_adv_est("mean_baseline")
    def mean_baseline(rewards: Sequence[float], groups: Sequence[int], phase2: object) -> GroupAdvantages:
        """A_i = r_i - mean of its group (no std): every group kept."""
        r, g = np.asarray(rewards, dtype=np.float64), np.asarray(groups)
        mean = np.array([r[g == group].mean() for group in g])
        return GroupAdvantages(mean, np.ones_like(r), r - mean, np.ones(r.shape, dtype=bool))

    return seen


def test_the_default_names_are_registered_to_the_pilots_functions() -> None:
    assert losses.policy_loss(DEFAULT_POLICY_LOSS) is clip_higher_loss
    assert reward.adv_estimator(DEFAULT_ADVANTAGE) is grpo_outcome_advantages
    assert (losses.PILOT_POLICY_LOSS, reward.PILOT_ADV_ESTIMATOR) == (DEFAULT_POLICY_LOSS, DEFAULT_ADVANTAGE)


def test_a_second_function_under_a_taken_name_is_refused_naming_both(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(losses, "POLICY_LOSSES", losses.POLICY_LOSSES.copy())
    monkeypatch.setattr(reward, "ADV_ESTIMATORS", reward.ADV_ESTIMATORS.copy())

    def impostor(*args: object) -> PolicyLoss:
        raise AssertionError("never called")

    with pytest.raises(
        ValueError, match=r"policy loss 'clip_higher' is already registered \(<function clip_higher_loss"
    ) as info:
        register_policy_loss("clip_higher")(impostor)
    assert "cannot register <function" in str(info.value) and "impostor" in str(info.value)
    with pytest.raises(ValueError, match=r"advantage estimator 'grpo_outcome' is already registered"):
        register_adv_est("grpo_outcome")(impostor)  # type: ignore[arg-type]
    assert losses.policy_loss("clip_higher") is clip_higher_loss  # the registered one is untouched
    assert register_policy_loss("clip_higher")(clip_higher_loss) is clip_higher_loss  # a re-import is fine
    assert (
        losses.POLICY_LOSSES.names().count("clip_higher") == 1
        and "impostor" not in reward.ADV_ESTIMATORS.names()
    )


@pytest.mark.parametrize(
    ("field", "name", "message"),
    [
        ("policy_loss", "ppo_kl", "phase2.policy_loss: no policy loss 'ppo_kl' is registered (registered: "),
        ("advantage", "rloo", "phase2.advantage: no advantage estimator 'rloo' is registered (registered: "),
    ],
)
def test_a_design_naming_an_unregistered_choice_is_refused_by_the_first_rule_naming_file_and_field(
    tmp_path: Path, field: str, name: str, message: str
) -> None:
    path = write_design(tmp_path / "typo.yaml", **{field: name})
    with pytest.raises(PreregError) as checked:
        check_pilot_choices(load_prereg(path))
    assert str(checked.value).startswith(f"{path}: {message}")
    registered = losses.POLICY_LOSSES.names() if field == "policy_loss" else reward.ADV_ESTIMATORS.names()
    assert f"(registered: {', '.join(registered)})" in str(checked.value)
    manifest = tmp_path / "prereg.manifest.json"
    with pytest.raises(PreregError, match=f"^{path}: phase2.{field}: "):
        prereg_check(path, manifest)  # the workflow's root rule: nothing downstream of it runs
    assert not manifest.exists()


def test_the_registered_names_a_design_gives_are_the_estimator_and_loss_phase2_runs(
    toys: Toys, heads: dict[str, Path], tmp_path: Path
) -> None:
    """Unit level: iteration 0's table is scored by the named estimator, and the update calls the named
    loss once per optimizer step and reports its value."""
    design = load_prereg(
        write_design(tmp_path / "toy.yaml", policy_loss="vanilla_pg", advantage="mean_baseline")
    )
    phase2 = design.phase2
    assert phase2 is not None and (phase2.policy_loss, phase2.advantage) == ("vanilla_pg", "mean_baseline")
    check_pilot_choices(design)  # both registered: no error
    table_path = tmp_path / "rollouts.parquet"
    write_iteration_table(run_iteration(design, "ar", heads["ar"], 0, show_progress=False), table_path)
    table = pq.read_table(table_path, columns=["seed", "reward", "advantage", "kept"]).to_pydict()
    r, seeds = np.asarray(table["reward"]), np.asarray(table["seed"])
    group_mean = np.array([r[seeds == s].mean() for s in seeds])
    assert table["advantage"] == (r - group_mean).tolist() and all(table["kept"])
    with deterministic_torch():
        policy = load_head_model(str(heads["ar"]))
        recipe = phase2.recipe("ar")
        before = {k: v.detach().clone() for k, v in policy.model.state_dict().items()}
        stats = grpo_update(
            policy,
            None,
            read_batch(table_path, design.run_key),
            recipe,
            phase2,
            make_optimizer(policy, recipe),
        )
    assert stats.updates == phase2.epochs * phase2.minibatches == len(toys.losses)
    assert stats.policy_loss == float(np.mean(toys.losses)) and stats.clip_fraction == 0.0
    assert any(not torch.equal(before[k], v) for k, v in policy.model.state_dict().items())


@pytest.mark.slow
def test_phase2_json_and_md_state_the_loss_and_estimator_that_ran(
    toys: Toys, heads: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    design = write_design(tmp_path / "toy.yaml", policy_loss="vanilla_pg", advantage="mean_baseline")
    run_stage(tmp_path, "ar", heads["ar"], design=design)
    assert toys.losses, "the stage trained with the toy loss"
    record = json.loads((tmp_path / "phase2.json").read_text())
    assert (record["registered"]["policy_loss"], record["registered"]["advantage"]) == (
        "vanilla_pg",
        "mean_baseline",
    )
    stage = record["stages"][0]
    assert (stage["policy_loss"], stage["advantage"]) == ("vanilla_pg", "mean_baseline")
    page = (tmp_path / "phase2.md").read_text()
    assert "- policy loss `vanilla_pg` (phase2.policy_loss) and advantage estimator `mean_baseline`" in page
    assert "Trained with policy loss `vanilla_pg` and advantage estimator `mean_baseline`." in page
