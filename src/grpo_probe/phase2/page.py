"""phase2.md's words, from phase2.json alone: the answer, the registered pilot, each stage, provenance.

Why from the record alone: the design's page and its copy at the repository root
(:func:`render_root_page`) are rendered from the same phase2.json, links relative to each page's folder,
so the two cannot disagree and neither reads an artifact the record does not name.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from grpo_probe.atomic_io import atomic_write_json, atomic_write_text
from grpo_probe.phase2.guard_variance import GuardCheck
from grpo_probe.sampling import SamplingMode, mode_params

__all__ = ["phase2_markdown", "render_root_page"]


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _rate(value: float, n: int) -> str:
    """A trip rate with its count: ``0.033 (1/30)``."""
    return f"{value:.3f} ({round(value * n)}/{n})"


def _movement_markdown(movement: dict[str, Any]) -> str:
    moved = "moved" if movement["moved"] else "**did not move**"
    sampling_only = not movement["moved"] and movement["kl_to_initial"] > movement["kl_floor"]
    caveat = (
        " Here the sampling distribution moved (KL above its floor) but the anchor, the policy the held-out "
        "evaluation runs, moved by less than its floor: training changed what the pilot samples, not what "
        "the held-out comparison sees."
        if sampling_only
        else ""
    )
    return (
        f"**How far the policy moved** (final against initial checkpoint): the anchor sampler's actions on "
        f"{movement['action_observations']} held-out observations moved by mean |delta a| "
        f"{movement['action_change']:.3g} (normalized units, range {movement['action_range']:g}; floor "
        f"{movement['action_floor']:.3g} = {movement['action_movement_tol']:g} of the range): the pilot "
        f"{moved} the anchor. Beside it, KL(pi_0 || pi_N) {movement['kl_to_initial']:.3g} "
        f"{movement['kl_unit']} on the {movement['kl_entries']} recorded entries of iteration 0's rollouts "
        f"(k3 estimate on the initial policy's own samples; floor 1/2 x replay tolerance^2 = "
        f"{movement['kl_floor']:.3g}). A pilot whose anchor actions moved less than their floor is not "
        "tested, whatever its KL or its held-out interval: the held-out evaluation runs the anchor."
        f"{caveat}"
    )


def _detectable_markdown(ev: dict[str, Any]) -> str:
    detectable = ev["detectable"]
    n = detectable["seeds"]
    if detectable["mde"] is None:
        return (
            "**What the held-out seeds can detect**: the paired differences (final - initial) in held-out "
            f"progress have no spread over {n} seed(s), so no detectable change is stated."
        )
    rule_out = (
        "a held-out interval inside +-MDE rules a change that large out at the same confidence (a true "
        "change that large would lie outside the interval). The MDE is the paired t-test's approximation: "
        "the bootstrap-t interval the verdict reads has no closed-form power."
    )
    return (
        f"**What the held-out seeds can detect**: MDE = (t_{{1-alpha/2, n-1}} "
        f"{detectable['t_confidence']:.2f} + t_{{1-beta, n-1}} {detectable['t_power']:.2f}) x s_d "
        f"{detectable['diff_sd']:.3g} cm / sqrt({n}) = **{detectable['mde']:.3g} cm** of held-out progress, "
        f"at {detectable['confidence']:.0%} confidence and {detectable['power']:.0%} power (s_d: the "
        "standard deviation of the per-seed paired differences final - initial, from the held-out pairs "
        f"themselves; t quantiles with n - 1 = {n - 1} degrees of freedom). A change smaller than that is "
        f"one these seeds would mostly miss; {rule_out}"
    )


def _end(value: float | None) -> str:
    """An interval end in the held-out table; null in phase2.json is an end the seeds cannot bound."""
    return "unbounded" if value is None else f"{value:+.3f}"


def _test_name(ev: dict[str, Any]) -> str:
    """The held-out interval's name; a record written before the bootstrap-t names none (the t interval)."""
    if ev.get("interval") == "paired_t":
        return "paired Student t (mean +- t_{n-1} x s_d / sqrt(n))"
    return f"{ev['test']} ({ev['resamples']} keyed resamples of the seeds' paired differences)"


def _error_rate_markdown(ev: dict[str, Any]) -> str:
    """The false-call rate the verdict carries: nominal, what skew does to it, and the rare jump no test on
    n seeds can rule out (docs/phase2.md has the simulated rates this quotes)."""
    n, c = ev["seeds"], ev["confidence"]
    if ev.get("interval") == "paired_t":
        return (
            f"**The rate this verdict carries**: {1 - c:.0%} false calls at a true zero change for normal "
            "paired differences (the paired t-test's); more for skewed ones (docs/phase2.md)."
        )
    skew = ev.get("skewness")
    measured = "no spread to measure skew by" if skew is None else f"measured skewness g1 = {skew:+.2f}"
    return (
        f"**The rate this verdict carries**: each false call (held or did not hold at a true zero change) "
        f"is nominally {(1 - c) / 2:.1%}, {1 - c:.0%} in all. Simulated at 95 % (docs/phase2.md), the "
        "verdict holds it for normal and symmetric heavy-tailed paired differences at 10 and 30 seeds, "
        "and for exponential ones (skewness 2) at 30; at 10 it errs 4.3 % on the short side (the t-test "
        "alone: 9.7 %), for lognormal ones (skewness 6) 8.3 % (15.5 %); at 3 seeds it makes no call. "
        f"The held-out progress differences here: {measured}. No test on {n} seeds can rule out a rare "
        f"jump none of them drew: one with per-seed probability 3/n = {3 / n:.2g} goes unseen in {n} seeds "
        "about one time in twenty (the rule of three), and it can move any verdict (Bahadur & Savage, "
        "1956; a jump of 10 SDs with probability 0.05: 15 % false calls at 10 and 30 seeds)."
    )


def _stage_markdown(number: int, record: dict[str, Any], figures_rel: str) -> list[str]:
    oracle = record["replay_oracle"]
    recipe = record["recipe"]
    mode = recipe["mode"]
    guards = record["guards"]
    shown = mode_params(SamplingMode.from_dict(mode))  # the parameters the kind takes
    sampler = ", ".join([mode["kind"], *(f"{k}={v}" for k, v in shown.items())])
    guard_head = "".join(f" {g} |" for g in guards)
    lines = [
        f"## Stage {number}: {'token-GRPO' if record['head'] == 'ar' else 'Flow-GRPO (SDE)'} on arm "
        f"{record['arm']}",
        "",
        f"**Verdict: {record['verdict']}.** {record['sentence'][0].upper()}{record['sentence'][1:]}.",
        "",
        f"Rollouts sample with {sampler}; Adam lr {recipe['lr']:g}; ratio clipped to "
        f"[{1 - recipe['clip_ratio_low']:g}, {1 + recipe['clip_ratio_high']:g}]; KL weight "
        f"{recipe['kl_beta']:g}; gradient-norm clip {recipe['grad_clip']:g}. Trained with policy loss "
        f"`{record['policy_loss']}` and advantage estimator `{record['advantage']}`.",
        "",
        f"**Replay oracle** (before the first update): {oracle['entries']} recorded log-probs of "
        f"{oracle['replans']} replans recomputed {oracle['compared']}; max |recomputed - recorded| "
        f"{oracle['max_abs_diff_nats']:.3g} nats against the registered {oracle['tolerance_nats']:g}: "
        f"{'passed' if oracle['passed'] else 'FAILED'}. Every later iteration's rollouts are replayed the "
        "same way before its update.",
        "",
        "Per iteration (guard columns: share of the iteration's episodes that tripped the guard):",
        "",
        "| iteration | mean reward | mean progress (cm) | median group std | groups kept | clip fraction | "
        f"approx KL | KL to initial |{guard_head} entropy |",
        "|---|---|---|---|---|---|---|---|" + "---|" * len(guards) + "---|",
    ]
    for r in record["iterations"]:
        rates = "".join(f" {_fmt(r[f'{g}_rate'], 2)} |" for g in guards)
        lines.append(
            f"| {r['iteration']} | {_fmt(r['mean_reward'])} | {_fmt(r['mean_progress_cm'])} | "
            f"{_fmt(r['median_group_std'])} | {_fmt(r['kept_fraction'], 2)} | {_fmt(r['clip_fraction'])} | "
            f"{_fmt(r['approx_kl'], 5)} | {_fmt(r['kl_to_reference'], 5)} |{rates} "
            f"{_fmt(r['token_entropy'])} |"
        )
    ev = record["eval"]
    lines += [
        "",
        "(KL to initial: the weighted KL term of the loss on each iteration's own batch, when the KL weight "
        "is above 0.)",
        "",
        _movement_markdown(record["movement"]),
        "",
        f"**Held-out evaluation**: the initial and the final policy on {ev['seeds']} held-out seeds with "
        f"the arm's anchor sampler ({ev['sampler']['kind']}), paired by seed; change = final - initial, "
        f"mean over seeds with its {ev['confidence']:.0%} {_test_name(ev)} interval (up or down when it "
        "excludes zero; unbounded where the seeds are too few to reach the confidence). A guard row is the "
        "share of held-out episodes that tripped the guard (count/n).",
        "",
        _error_rate_markdown(ev),
        "",
        "| read | n | initial | final | change | interval | |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in ev["changes"]:
        n = c["seeds"]
        before = _rate(c["initial"], n) if c["guard"] else f"{c['initial']:.3f}"
        after = _rate(c["final"], n) if c["guard"] else f"{c['final']:.3f}"
        lines.append(
            f"| {c['label']} | {n} | {before} | {after} | {c['delta']:+.3f} | "
            f"[{_end(c['ci_low'])}, {_end(c['ci_high'])}] | {c['verdict']} |"
        )
    lines += ["", _detectable_markdown(ev), *_held_out_markdown(record.get("held_out"))]
    lines += [
        "",
        f"Final checkpoint sha256 `{record['final_checkpoint_sha256']}`.",
        "",
        *[f"![{name}]({figures_rel}/{name})" for name in record["figures"]],
        "",
    ]
    return lines


_POLICY_TEXT = {
    "anchor": "anchor (greedy / ODE: what a lab deploys)",
    "sampled": "sampled policy (the phase-2 sampler: what GRPO trains)",
}


def _held_out_markdown(held_out: dict[str, Any] | None) -> list[str]:
    """Both policies' gains over the replicates (:mod:`grpo_probe.phase2.held_out`); nothing for a design
    that registers neither replicates nor the sampled score."""
    if not held_out:
        return []
    replicates = held_out["replicates"]
    lines = [
        "",
        f"**Held-out gain by policy and replicate** ({replicates} replicate(s): each trained from the same "
        "initial policy on training spawns of its own, each final policy scored on the same held-out "
        "seeds; a sampled seed's score is the mean of its keyed draws). Per replicate: mean over seeds of "
        "final - initial with its paired t interval; mean: the replicates' mean gain with the paired t "
        "interval of their mean per-seed difference (held-out noise only), and se = s_r / sqrt(R) from "
        "the replicates' spread (training luck and held-out noise: the error a study's reliability reads).",
        "",
        "| policy | read | draws | per replicate: gain [interval] | mean [interval] | replicate sd | se |",
        "|---|---|---|---|---|---|---|",
    ]
    for g in held_out["gains"]:
        each = "; ".join(
            f"r{r['replicate']} {r['gain']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"
            for r in g["replicates"]
        )
        lines.append(
            f"| {_POLICY_TEXT[g['policy']]} | {g['read']} | {g['draws']} | {each} | {g['gain']:+.3f} "
            f"[{g['ci_low']:+.3f}, {g['ci_high']:+.3f}] | {_fmt(g['replicate_sd'])} | {_fmt(g['se'])} |"
        )
    return lines


def _guard_checks_markdown(checks: list[dict[str, Any]]) -> list[str]:
    """The guard-variance check of each arm the decision had trained, as counted before training."""
    if not checks:
        return []
    lines = [
        "## Can the guard penalties act?",
        "",
        "A penalty charged in every episode of a group lowers every reward of the group alike and cancels "
        "from GRPO's normalised advantage; it pushes against its guard only in groups where some but not "
        "all episodes trip it. Counted before training, in the probe's groups of the cell that samples "
        f"each arm. Phase 2 refuses an arm when a penalised guard varies in fewer than a share of "
        f"{checks[0]['min_share']:g} of the groups (phase2.reward.min_guard_variance_share) and trips in "
        "every episode of more of the other groups than it spares.",
        "",
        "| arm | cell | guard | penalty (cm) | trips | groups: some trip | every episode | none | share "
        "varying | |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for check in map(GuardCheck.from_dict, checks):
        if check.cell is None:
            lines.append(f"| {check.arm} | no enabled cell samples it | | | | | | | | not checked |")
            continue
        for g in check.guards:
            lines.append(
                f"| {check.arm} | {check.cell} | {g.guard} | {g.penalty_cm:g} | {g.trips}/{g.episodes} | "
                f"{g.varying}/{g.groups} | {g.always} | {g.never} | {g.share:.3f} | "
                f"{'**refused**' if g.saturated(check.min_share) else 'acts'} |"
            )
    return [*lines, ""]


def phase2_markdown(record: dict[str, Any], page_dir: str | os.PathLike[str]) -> str:
    """phase2.md from phase2.json alone, links relative to ``page_dir`` (the design folder or the root)."""
    design = record["design"]
    figures_rel = Path(os.path.relpath(record["figures_dir"], page_dir)).as_posix()
    decision = record["decision"]
    lines = [
        f"# Phase 2: the GRPO pilot of {design['name']}",
        "",
        f"**Did the probe's prediction hold?** {record['prediction']['text']}",
        "",
        f"The probe's decision ({decision['outcome']}): {decision['headline']} Phase 2: {record['reason']}.",
        "",
        f"Design `{design['path']}` sha256 `{design['prereg_sha256']}`, locked {design['lock_date']}; "
        f"artifacts under `{design['folder']}`.",
        "",
    ]
    reg = record["registered"]
    if reg is not None:
        charged = [g for g in reg["guards"] if g["penalty_cm"] is not None]
        penalties = "".join(f" - {g['penalty_cm']:g} x [{g['name']}]" for g in charged)
        lines += [
            f"*{reg['description'].strip()}*",
            "",
            "## The registered pilot",
            "",
            f"- {reg['iterations']} iterations x {reg['seeds_per_iteration']} training seeds x K = "
            f"{reg['rollouts_per_seed']} rollouts (seeds {reg['train_seeds']['first']}.."
            f"{reg['train_seeds']['last']}, fresh spawns every iteration); held-out seeds "
            f"{reg['eval_seeds']['first']}.."
            f"{reg['eval_seeds']['last']} ({reg['eval_seeds']['count']})",
            *(
                [
                    "- on every arm an enabled cell uses, each at this compute, whatever the decision "
                    "(phase2.pilot: every_arm, a validation design)"
                ]
                if reg.get("pilot") == "every_arm"
                else []
            ),
            f"- reward = progress_final_cm{penalties} (cm; [g] is 1 when the episode trips guard g, once "
            "per episode; guards of the environment not named cost nothing)",
            f"- policy loss `{reg['policy_loss']}` (phase2.policy_loss) and advantage estimator "
            f"`{reg['advantage']}` (phase2.advantage), registered in grpo_probe.phase2.losses and "
            "grpo_probe.phase2.reward",
            f"- advantage epsilon {reg['advantage_epsilon']:g}; groups with reward std (ddof 1) <= "
            f"{reg['min_group_std']:g} dropped; {reg['epochs']} epoch(s) x {reg['minibatches']} "
            "minibatch(es) per iteration",
            f"- compute gate: {reg['cpu_hours']:g} CPU-hours (measured use: phase2.compute.md beside the "
            "design's pages)",
            "",
            f"Guards of environment `{reg['environment']}`, which the reward charges and the held-out "
            "evaluation counts:",
            "",
            *[
                f"- `{g['name']}`"
                + ("" if g["penalty_cm"] is None else f" ({g['penalty_cm']:g} cm)")
                + f": {g['meaning']}"
                for g in reg["guards"]
            ],
            "",
        ]
    lines += _guard_checks_markdown(record.get("guard_checks", []))
    for number, stage_record in enumerate(record["stages"], start=1):
        lines += _stage_markdown(number, stage_record, figures_rel)
    lines += ["## Provenance", "", "| artifact | sha256 |", "|---|---|"]
    lines += [f"| {e['path']} | `{e['sha256']}` |" for e in record["provenance"]]
    lines.append("")
    return "\n".join(lines)


def render_root_page(
    record_json: str | os.PathLike[str], out_md: str | os.PathLike[str], out_json: str | os.PathLike[str]
) -> None:
    """The design's phase2.md again at ``out_md`` (the repository root), links rendered for that folder."""
    record = json.loads(Path(record_json).read_text())
    atomic_write_json(out_json, record)
    atomic_write_text(out_md, phase2_markdown(record, Path(out_md).parent))
