"""Binding a user's policy to a registered arm: a checkpoint with its adapter, or a policy server.

Each binding checks the policy against the act() contract and its declared capabilities before any
episode runs, and records in source.json what every later job builds the arm's policy from.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from grpo_probe.atomic_io import atomic_write_json
from grpo_probe.compute.servers import server_reading
from grpo_probe.policies.protocol import declared_capabilities, policy_name
from grpo_probe.prereg import ArmBinding, Prereg, load_prereg
from grpo_probe.probe_jobs.sources import PathLike
from grpo_probe.provenance import write_design_manifest
from grpo_probe.user_code import checkpoint_files, factory_files, tree_sha256

__all__ = ["bind_checkpoint", "bind_server", "check_pin"]


def bind_checkpoint(
    prereg_path: PathLike,
    arm: str,
    checkpoint: PathLike,
    adapter: str | None,
    upstream: Sequence[PathLike],
    source: PathLike,
    manifest: PathLike,
    device: str = "cpu",
) -> None:
    """Bind a user's checkpoint (a file, or a ``save_pretrained`` folder) and adapter to a registered arm.

    The prereg may pin the checkpoint's sha256 (a folder's: :func:`grpo_probe.user_code.tree_sha256`).
    The bound policy must keep the act() contract for every mode the design runs it in
    (:func:`grpo_probe.policies.check.check_arm`, seconds): a policy that breaks it is refused here, with
    each broken rule's cause and fix, before any episode runs. So is a policy whose declared capabilities
    (:class:`grpo_probe.policies.PolicyCapabilities`) lack a sampling kind the arm's anchor, cells or
    oracles need (``capability-missing``, naming the arm, the policy's ``module:Class``, the kind and what
    needs it). source.json records the policy's class and declaration, which phase 2 reads to refuse an
    arm it cannot train. Every file of the checkpoint and of the adapter's package is recorded among the
    manifest's sources, so ``verify`` names one edited later.
    """
    prereg = load_prereg(prereg_path)
    if arm not in prereg.arms:
        raise ValueError(f"{prereg.path}: no arm {arm!r} is registered")
    if not Path(checkpoint).exists():
        raise FileNotFoundError(f"{checkpoint}: checkpoint bound to arm {arm!r} not found")
    if Path(checkpoint).is_dir() and not checkpoint_files(checkpoint):
        raise FileNotFoundError(f"{checkpoint}: checkpoint folder bound to arm {arm!r} holds no file")
    sha = tree_sha256(checkpoint)
    check_pin(prereg, arm, checkpoint, sha)
    report, policy = _check_bound_policy(prereg, arm, checkpoint, adapter, device)
    bound = {"policy": policy_name(policy), "head": policy.head, "capabilities": _declared(policy)}
    atomic_write_json(source, {"arm": arm, "checkpoint": str(checkpoint), "factory": adapter, **bound})
    # The checkpoint lives outside the results tree, so it is recorded by hash rather than as an output.
    extra = {
        "arm": arm,
        "checkpoint": str(checkpoint),
        "checkpoint_sha256": sha,
        "policy_check": {"passed": report.passed, "checks": len(report.checks)},
        **bound,
    }
    sources = [*checkpoint_files(checkpoint), *factory_files(adapter)]
    write_design_manifest(prereg, manifest, "bind_checkpoint", [source], upstream, extra, sources)


def bind_server(
    prereg_path: PathLike,
    arm: str,
    address: str,
    upstream: Sequence[PathLike],
    source: PathLike,
    manifest: PathLike,
    timeout_s: float | None = None,
) -> None:
    """Bind a registered arm to the policy served at ``address`` (:mod:`grpo_probe.serve`).

    The served policy is checked as a bound checkpoint is (:func:`bind_checkpoint`): the act() contract
    for every mode the design runs the arm in, and its declared capabilities, over the wire, before any
    episode runs. A design that pins the arm's ``checkpoint_sha256`` needs the server to declare the same
    one in its hello's metadata (``grpo-probe serve`` declares the sha256 of the checkpoint it serves):
    the probe cannot read a served checkpoint's bytes, so the server's word is what is recorded and
    checked. source.json records the address, the served policy's class and declaration and the
    server's metadata; phase 2 refuses a served arm (its trainer updates checkpoints it holds).
    """
    from grpo_probe.rollout import PolicySource

    prereg = load_prereg(prereg_path)
    if arm not in prereg.arms:
        raise ValueError(f"{prereg.path}: no arm {arm!r} is registered")
    recipe = PolicySource(address=address, timeout_s=timeout_s)
    policy: Any = recipe.build()
    try:
        declared_sha = policy.metadata.get("checkpoint_sha256")
        pinned = prereg.arms[arm].checkpoint_sha256
        if pinned is not None and declared_sha is None:
            raise ValueError(
                f"policy server {address}: arms.{arm}.checkpoint_sha256 is pinned in {prereg.path}, but the "
                "server declares no checkpoint_sha256 in its metadata (grpo-probe serve declares it; "
                "serve_policy(..., metadata={'checkpoint_sha256': ...}))"
            )
        if pinned is not None:
            check_pin(prereg, arm, f"policy server {address}", str(declared_sha))
        report = _check_policy_of(prereg, arm, policy, f"the policy served at {address}")
    finally:
        policy.close()
    bound = {
        "policy": policy.served_name,
        "head": policy.head,
        "capabilities": _declared(policy),
        "server": policy.metadata,
    }
    served = {"address": address, "timeout_s": timeout_s, "checkpoint": None, "factory": None}
    atomic_write_json(source, {"arm": arm, **served, **bound})
    extra = {
        "arm": arm,
        "address": address,
        "checkpoint_sha256": declared_sha,
        "policy_check": {"passed": report.passed, "checks": len(report.checks)},
        **bound,
        # the server's CPU so far: compute.md counts the server's own CPU from here to its report
        "server_cpu": server_reading(f"policy of arm {arm}", address, timeout_s),
    }
    write_design_manifest(prereg, manifest, "bind_server", [source], upstream, extra)


def _check_policy_of(prereg: Prereg, arm: str, policy: Any, bound: str) -> Any:  # -> PolicyReport
    """Check a built policy against the act() contract for the arm; print the report, raise on a failure."""
    from grpo_probe.policies.check import check_arm

    binding = ArmBinding(arm, "server", address=getattr(policy, "address", None))
    run = SimpleNamespace(arms={arm: binding}, device="cpu", results="results")
    report = check_arm(prereg, run, arm, policy=policy, device="cpu")
    print(report.format(), flush=True)
    report.raise_if_failed()
    return report


def _declared(policy: Any) -> dict[str, Any] | None:
    """The capabilities a bound policy declares, as source.json records them (None: it declares none)."""
    declared = declared_capabilities(policy)  # the check has refused a malformed declaration
    return None if declared is None else declared.to_dict()


def _check_bound_policy(
    prereg: Prereg, arm: str, checkpoint: PathLike, adapter: str | None, device: str
) -> tuple[Any, Any]:  # -> (PolicyReport, Policy)
    """Build the bound policy as every rollout process will, and check it against the act() contract and
    its declared capabilities against what the design needs of the arm; returns the report and the policy."""
    # Local: the check costs about 13 ms and the policy source loads torch (about 1.4 s): binding only.
    from grpo_probe.policies.check import check_arm
    from grpo_probe.rollout import PolicySource

    binding = ArmBinding(arm, "checkpoint", str(checkpoint), adapter)
    run = SimpleNamespace(arms={arm: binding}, device=device, results="results")
    policy = PolicySource(checkpoint=str(checkpoint), factory=adapter, device=device).build()
    report = check_arm(prereg, run, arm, policy=policy, device=device)
    print(report.format(), flush=True)
    report.raise_if_failed()
    return report, policy


def check_pin(prereg: Prereg, arm: str, checkpoint: PathLike, found: str) -> None:
    """``found`` (the checkpoint's :func:`~grpo_probe.user_code.tree_sha256`) must be the pinned one."""
    pinned = prereg.arms[arm].checkpoint_sha256
    if pinned is None:
        return
    if found != pinned:
        raise ValueError(
            f"{checkpoint}: sha256 {found} differs from arms.{arm}.checkpoint_sha256 {pinned} "
            f"pinned in {prereg.path}"
        )
