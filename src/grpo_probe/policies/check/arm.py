"""The policy check of one arm of a design, as ``grpo-probe check-policy`` runs it: the modes the design
runs the arm under, the policy its run config binds, observations from the design's environment, and
whether phase 2 could train the arm as bound.

The design is read by attribute only: the policies package sits beside the prereg in the package layers
and does not import it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from grpo_probe.envs.observation import camera_of, image_key
from grpo_probe.policies.check.determinism import draw0_twins_of
from grpo_probe.policies.check.policy import check_policy
from grpo_probe.policies.check.report import CheckResult, PolicyReport
from grpo_probe.policies.protocol import (
    LOGPROBS_OF_HEAD,
    Policy,
    PolicyCapabilities,
    SamplingMode,
    declared_capabilities,
    policy_name,
)
from grpo_probe.sampling import mode_text
from grpo_probe.user_code import load_callable

__all__ = ["arm_modes", "check_arm", "phase2_refusal", "served_refusal"]

_OWN_FORMAT_ADAPTERS = (None, "grpo_probe.policies.checkpoint:load_policy")
"""Bindings whose checkpoint is in this package's format, which phase 2 can train."""


def arm_modes(
    prereg: Any, arm_id: str, *, phase2: bool = True
) -> tuple[dict[SamplingMode, str], tuple[SamplingMode, ...]]:
    """The modes the design runs arm ``arm_id`` under, each with why, and those phase 2 trains under.

    ``prereg`` is a :class:`grpo_probe.prereg.Prereg`: the anchor, the enabled cells of the arm, the
    parallel oracle's modes of its head (when the oracle runs the arm), each cell's draw-0 twins, and with
    ``phase2`` (the arm's binding is a checkpoint phase 2 can train) the phase-2 mode of its head.
    """
    arm = prereg.arms[arm_id]
    why: dict[SamplingMode, list[str]] = {}

    def add(mode: SamplingMode, reason: str) -> None:
        why.setdefault(mode, []).append(reason)

    add(arm.anchor, "the anchor")
    cells = [c for c in prereg.enabled_cells if c.arm == arm_id]
    for cell in cells:
        add(cell.mode, f"cell {cell.id}")
    if arm_id in prereg.oracles.parallel.arms:
        for mode in prereg.oracles.parallel.modes:
            if mode.head == arm.head:
                add(mode, "the parallel oracle")
    for cell in cells:
        for twin in draw0_twins_of(cell.mode):
            add(twin, f"the draw-0 oracle of {cell.id}")
    trained: tuple[SamplingMode, ...] = ()
    section = getattr(prereg, "phase2", None)
    if phase2 and section is not None and arm.head in section.heads:
        mode = section.heads[arm.head].mode
        add(mode, "phase 2")
        trained = (mode,)
    return {mode: ", ".join(dict.fromkeys(reasons)) for mode, reasons in why.items()}, trained


def phase2_refusal(
    arm: str, head: str, adapter: str | None, policy: str, capabilities: PolicyCapabilities | None
) -> str | None:
    """Why phase 2 cannot train arm ``arm`` (of ``head``) bound through ``adapter`` to a policy of class
    ``policy`` (``module:Class``) that declares ``capabilities`` (None: declares none); None when it can.

    Phase 2 needs trainable parameters and the log-probs its head's loss divides by
    (:data:`~grpo_probe.policies.protocol.LOGPROBS_OF_HEAD`); its trainer reads and writes this package's
    checkpoint format, so an adapter that declares both is refused too, for that reason. The binding
    step reports it and phase 2 raises it, in the same words.
    """
    if adapter in _OWN_FORMAT_ADAPTERS:
        return None
    bound = f"arm {arm!r} is bound through adapter {adapter} to {policy}"
    effective = capabilities if capabilities is not None else PolicyCapabilities.of_head(head)
    lacking = effective.lacks(logprobs=LOGPROBS_OF_HEAD[head], trainable=True)
    if lacking:
        declares = "which declares no capabilities and so lacks" if capabilities is None else "which lacks"
        return f"{bound}, {declares} what phase 2 needs to train a {head} arm: {', '.join(lacking)}"
    return (
        f"{bound}, which declares trainable parameters and {effective.logprobs} log-probs, but phase 2's "
        "trainer reads and writes only checkpoints in grpo-probe's own format (bind the arm with source: "
        "reference or adapter grpo_probe.policies.checkpoint:load_policy)"
    )


def _phase2_readiness(prereg: Any, arm_id: str, adapter: str | None, policy: Any) -> CheckResult | None:
    """Whether phase 2 could train the arm as bound, for a design whose phase 2 trains its head (a note:
    phase 2 refuses it when it starts, not the binding)."""
    head = prereg.arms[arm_id].head
    section = getattr(prereg, "phase2", None)
    if section is None or head not in section.heads:
        return None
    try:
        declared = declared_capabilities(policy)
    except ValueError:
        return None  # the capabilities check reports it
    refusal = phase2_refusal(arm_id, head, adapter, policy_name(policy), declared)
    mode = mode_text(section.heads[head].mode)
    if refusal is None:
        return CheckResult("phase 2", "ok", f"phase 2 can train this checkpoint under {mode}")
    return CheckResult("phase 2", "skip", f"phase 2 will refuse to train it: {refusal}")


def _served_phase2(prereg: Any, arm_id: str, address: str) -> CheckResult | None:
    """The phase-2 note of a served arm, for a design whose phase 2 trains its head: it will refuse."""
    section = getattr(prereg, "phase2", None)
    if section is None or prereg.arms[arm_id].head not in section.heads:
        return None
    refusal = served_refusal(arm_id, address)
    return CheckResult("phase 2", "skip", f"phase 2 will refuse to train it: {refusal}")


def served_refusal(arm: str, address: str) -> str:
    """Why phase 2 cannot train an arm bound to a policy server (the binding step and phase 2 say it)."""
    return (
        f"arm {arm!r} is bound to the policy served at {address}; phase 2's trainer updates the weights "
        "of a checkpoint in grpo-probe's own format that it holds (bind the arm with source: reference or "
        "a checkpoint to train it)"
    )


def _build(adapter: str | None, checkpoint: str, device: str, row_block: int | None) -> Policy:
    """The bound policy, built the way the workflow's ``PolicySource`` builds it."""
    if adapter is None:
        from grpo_probe.policies.checkpoint import load_policy

        return load_policy(checkpoint, device=device, row_block=row_block)
    return load_callable(adapter, "adapter")(checkpoint=checkpoint, device=device)


def _design_states(prereg: Any, n: int) -> tuple[np.ndarray, list[int]]:
    """First observations of ``n`` spawns of the design's environment: its seeds, then the ones after."""
    from grpo_probe.envs.registry import make_env

    seeds = list(prereg.seeds[:n])
    while len(seeds) < n:
        seeds.append(max(seeds, default=-1) + 1)
    env = make_env(prereg.env)
    return np.stack([np.asarray(env.reset(s), dtype=np.float32) for s in seeds]), seeds


def check_arm(
    prereg: Any,
    run_config: Any,
    arm_id: str,
    *,
    policy: Policy | None = None,
    device: str | None = None,
    batch: int = 4,
) -> PolicyReport:
    """Check the policy bound to ``arm_id`` against everything the design asks of it.

    ``prereg`` is a :class:`grpo_probe.prereg.Prereg`, ``run_config`` a
    :class:`grpo_probe.prereg.RunConfig` (its binding of the arm and its device; None: the arm's reference
    checkpoint on the CPU). The modes come from :func:`arm_modes` (phase 2's only for a checkpoint in this
    package's format, the only kind phase 2 trains), the chunk shape and observation width from the
    environment's spec, the observations from resets of the design's environment on its seeds. ``policy``
    replaces building the bound one (a caller holding a ``PolicySource`` passes ``source.build()``).
    A mode whose kind the policy's capabilities lack is a ``capability-missing`` finding naming the arm,
    the policy's class and the cells, anchor or oracles that need it; for a design with a phase 2 a last
    check says whether phase 2 could train the arm as bound (:func:`phase2_refusal`).

    A reference arm (trained by the workflow) is checked once its checkpoint exists under the run's
    results folder; before that the report says it skipped. Raises ``ValueError`` for an arm the design
    does not register and ``FileNotFoundError`` for a bound checkpoint that is missing.
    """
    from grpo_probe.envs.registry import env_spec

    if arm_id not in prereg.arms:
        raise ValueError(f"{prereg.path}: no arm {arm_id!r} is registered (arms: {', '.join(prereg.arms)})")
    arm = prereg.arms[arm_id]
    binding = None if run_config is None else run_config.arms.get(arm_id)
    device = device or (run_config.device if run_config is not None else "cpu")
    spec = env_spec(prereg.env)
    # Frames are keyed noise here, so a camera the environment cannot render would pass every check and
    # fail the first rollout: refuse it now (for a user's environment prereg check cannot build it).
    env_cameras = [c for c in (camera_of(k) for k in arm.inputs) if c is not None and c not in spec.cameras]
    if env_cameras:
        keys, names = ", ".join(repr(image_key(c)) for c in env_cameras), ", ".join(map(repr, env_cameras))
        raise ValueError(
            f"{prereg.path}: arms.{arm_id}.inputs reads {keys}, but environment {spec.id!r} renders no "
            f"camera {names} (its cameras: {', '.join(spec.cameras) or 'none'})"
        )
    served = binding is not None and binding.source == "server"
    if served:
        checkpoint, adapter = "", None
        bound = f"the policy served at {binding.address}"
        device = "cpu"  # the server places its own model
    elif binding is None or binding.source == "reference":
        results = Path(run_config.results if run_config is not None else "results")
        checkpoint, adapter = str(results / prereg.name / "arms" / arm_id / "policy.pt"), None
        bound = f"reference checkpoint {checkpoint}"
    else:
        checkpoint, adapter = str(binding.path), binding.adapter
        bound = f"{checkpoint} through {adapter}" if adapter else checkpoint
    subject = (
        f"check-policy: arm {arm_id!r} of {prereg.path} (head {arm.head!r}), {bound} on {device}; "
        f"environment {spec.id!r}: actions [B, {spec.chunk_length}, {spec.action_dims}], "
        f"observations of {spec.obs_dim}"
    )
    if policy is None and served:
        # local: the client's websockets and msgpack, for the arms that are served
        from grpo_probe.policies.served import DEFAULT_TIMEOUT_S, ServedPolicy, ServedPolicyError

        try:
            policy = ServedPolicy(binding.address, binding.timeout_s or DEFAULT_TIMEOUT_S)
        except ServedPolicyError as exc:
            raise ValueError(str(exc)) from None
    if policy is None:
        if not Path(checkpoint).exists():
            if binding is None or binding.source == "reference":
                report = PolicyReport(subject)
                reason = "the workflow trains it; check it after training, or bind a checkpoint of your own"
                report.checks.append(
                    CheckResult("reference checkpoint", "skip", f"{checkpoint} does not exist: {reason}")
                )
                return report
            raise FileNotFoundError(f"{checkpoint}: checkpoint bound to arm {arm_id!r} not found")
        policy = _build(adapter, checkpoint, device, arm.row_block if adapter is None else None)
    modes, trained = arm_modes(prereg, arm_id, phase2=not served and adapter in _OWN_FORMAT_ADAPTERS)
    states, seeds = _design_states(prereg, batch - 1)
    try:
        split = prereg.observation.split(spec.state_entries, spec.id)
    except ValueError as exc:
        raise ValueError(f"{prereg.path}: {exc}") from None
    report = check_policy(
        policy,
        action_shape=(spec.chunk_length, spec.action_dims),
        modes=modes,
        states=states,
        seeds=seeds,
        obs_dim=spec.obs_dim,
        head=arm.head,
        inputs=arm.inputs,
        observation=prereg.observation,
        needs_token_diagnostics=arm.head == "ar",
        needs_logprobs=trained,
        draw0_twins=False,  # arm_modes lists them, with the cells they belong to
        batch=batch,
        run_key=prereg.run_key,
        subject=subject,
        arm=arm_id,
        split=split,
    )
    if served:
        readiness = _served_phase2(prereg, arm_id, str(binding.address))
    else:
        readiness = _phase2_readiness(prereg, arm_id, adapter, policy)
    if readiness is not None and report.checks[-1].name != "sampling modes":
        report.checks.append(readiness)
    return report
