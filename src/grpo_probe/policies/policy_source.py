"""Where a rollout worker gets its policy from: a checkpoint path or an importable factory, plus a device;
or the address of a policy server (:mod:`grpo_probe.policies.served`).

Why a recipe and not a model: workers are started with ``spawn``/``forkserver`` (forking a process that
has touched torch is unsafe), and a pickled model would tie the rollout to whatever state the parent
held. Every process (the sequential path and each worker) builds its own policy from the same recipe,
so all of them hold the same bytes of weights. A served policy's recipe is its address: every process
opens its own connection to the one server that holds the weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from grpo_probe.policies.protocol import Policy
from grpo_probe.user_code import load_callable

if TYPE_CHECKING:
    from grpo_probe.policies.served import RecordedCheckpoint

__all__ = ["PolicySource", "resolve_device"]


def resolve_device(requested: str) -> str:
    """Check a torch device name for policies: ``cpu``, or ``cuda``/``cuda:N`` when CUDA is present.

    Raises ``ValueError`` saying what was asked and what this machine has, so a run configured for a GPU
    node fails at start on a CPU node instead of falling back silently to a different device.
    """
    if requested == "cpu":
        return "cpu"
    if requested == "cuda" or requested.startswith("cuda:"):
        index_text = requested.partition(":")[2]
        if requested != "cuda" and not index_text.isdigit():
            raise ValueError(f"device {requested!r}: expected 'cpu', 'cuda' or 'cuda:N' with N a GPU index")
        if not torch.cuda.is_available():
            raise ValueError(
                f"device {requested!r} was requested but CUDA is not available "
                f"(torch {torch.__version__}, built with CUDA {torch.version.cuda}); use device 'cpu'"
            )
        if index_text and int(index_text) >= torch.cuda.device_count():
            raise ValueError(
                f"device {requested!r} was requested but this machine has "
                f"{torch.cuda.device_count()} CUDA device(s)"
            )
        return requested
    raise ValueError(f"device {requested!r}: expected 'cpu', 'cuda' or 'cuda:N'")


@dataclass(frozen=True)
class PolicySource:
    """A recipe for building a policy in any process.

    ``checkpoint`` alone is read with :func:`grpo_probe.policies.load_policy`; with a ``factory``
    (``"package.module:function"``, a user adapter or a test policy) the factory builds the policy and is
    called as ``function(checkpoint=checkpoint, device=device, **options)``, the call config/config.yaml
    and the README document for adapters (without ``checkpoint=`` when no checkpoint is given, as for a
    test policy). ``options`` must hold picklable values; they travel to every worker.

    ``address`` alone (``ws://HOST:PORT``) is a policy served by another process
    (:class:`~grpo_probe.policies.served.ServedPolicy`), waited on for at most ``timeout_s`` per
    reply; the server chooses its own device, so ``device`` stays ``cpu`` (the probe's side).
    """

    checkpoint: str | None = None
    factory: str | None = None
    device: str = "cpu"
    options: Mapping[str, Any] = field(default_factory=dict)
    row_block: int | None = None
    """The arm's registered AR row block (``arms.<id>.row_block``), given to this package's own
    checkpoints (no factory); a user's adapter computes its rows its own way and never receives it."""
    address: str | None = None
    timeout_s: float | None = None
    recorded: RecordedCheckpoint | None = None
    """A served policy's checkpoint sha256 as the arm's binding recorded it: a server declaring another
    is refused at connect."""

    def __post_init__(self) -> None:
        if self.address is not None:
            from grpo_probe.policies.served import check_address

            check_address(self.address)
            if (
                self.checkpoint is not None
                or self.factory is not None
                or self.options
                or self.device != "cpu"
            ):
                raise ValueError(
                    f"policy source: a served policy ({self.address}) takes no checkpoint, factory, options "
                    "or device: the server loads and places its own model"
                )
            return
        if self.timeout_s is not None or self.recorded is not None:
            raise ValueError("policy source: timeout_s and recorded are for a served policy (address=...)")
        if self.checkpoint is None and self.factory is None:
            raise ValueError(
                "policy source: give a checkpoint path, a factory 'module:function' or a server address"
            )
        if self.factory is not None:
            module_name, sep, attr = self.factory.partition(":")
            if not sep or not module_name or not attr:
                raise ValueError(
                    f"policy source: factory must look like 'package.module:function', got {self.factory!r}"
                )
        if self.checkpoint is None and self.options.get("checkpoint") is not None:
            raise ValueError("policy source: pass the checkpoint as PolicySource.checkpoint, not in options")

    def describe(self) -> str:
        """Short human-readable name used in messages and reports."""
        if self.address is not None:
            return f"the policy served at {self.address}"
        parts = [p for p in (self.factory, self.checkpoint) if p is not None]
        return f"{' '.join(parts)} on {self.device}"

    def build(self) -> Policy:
        """Build the policy in this process (checks the device first, then loads; or connects)."""
        if self.address is not None:
            from grpo_probe.policies.served import DEFAULT_TIMEOUT_S, ServedPolicy

            timeout = DEFAULT_TIMEOUT_S if self.timeout_s is None else self.timeout_s
            return ServedPolicy(self.address, timeout, self.recorded)
        device = resolve_device(self.device)
        if self.factory is None:
            from grpo_probe.policies.checkpoint import load_policy

            path = Path(str(self.checkpoint))
            if not path.is_file():
                raise FileNotFoundError(f"{path}: policy checkpoint not found")
            policy = load_policy(path, device=device, row_block=self.row_block)
        else:
            function = load_callable(self.factory, "policy source")
            given = {} if self.checkpoint is None else {"checkpoint": self.checkpoint}
            policy = function(**given, device=device, **self.options)
        for name in ("head", "obs_dim", "act"):
            if not hasattr(policy, name):
                raise ValueError(
                    f"policy source {self.describe()}: the policy has no {name!r} (see policies.protocol)"
                )
        return policy
