"""The policy protocol: the one interface the rollout engine calls and a user implements.

Why a protocol and not a base class: a user bringing their own checkpoint writes a small adapter with a
``head`` name, an ``obs_dim`` and an ``act`` method; nothing else of this package needs to be inherited.
Every random draw of a row is keyed by its :class:`RowKey`, and rows never influence each other, so a
row's actions, token ids and log-probs are the same bytes alone or inside any batch.

A worked adapter for a user's own deterministic flow checkpoint (``my_model`` maps a float32
observation batch and a float32 noise batch to chunks in [-1, 1]; (50, 6) is the boat scene's chunk,
another environment's is ``[spec.chunk_length, spec.action_dims]`` of its spec)::

    import numpy as np
    from grpo_probe.keyed_rng import numpy_generator, tag
    from grpo_probe.policies import PolicyCapabilities, PolicyOutput, RowDiagnostics

    class MyFlowAdapter:
        head = "flow"
        obs_dim = 17
        capabilities = PolicyCapabilities(kinds=("flow_ode",))  # samples the ODE only; nothing to train

        def __init__(self, my_model):
            self.my_model = my_model

        def act(self, obs, keys, mode):
            if mode.kind != "flow_ode":
                raise ValueError(f"MyFlowAdapter samples only 'flow_ode', got {mode.kind!r}")
            streams = [numpy_generator(k.run_key, tag("flow_noise"), k.seed, k.replan, k.draw) for k in keys]
            noise = np.stack([g.standard_normal((50, 6)) for g in streams]).astype(np.float32)
            actions = np.stack([self.my_model(o[None], n[None])[0] for o, n in zip(obs, noise)])  # row by row
            return PolicyOutput(actions=actions.astype(np.float32),
                                diagnostics=[RowDiagnostics(logprob=None) for _ in keys])

Noise comes from the row's key (never a global RNG) and each row is computed on its own, so the
adapter passes the probe's draw-0 and parallel oracles. Its :class:`PolicyCapabilities` say what it can do
(the sampling kinds, the log-probs phase 2 reads, trainable parameters), so a design that needs more, an
SDE cell say, is refused when the arm is bound rather than after rollouts. Every rule of the contract is
listed in docs/your-policy.md ("The act() contract, in full"); ``grpo-probe check-policy`` and
:func:`grpo_probe.policies.check.check_policy` check an adapter against them in seconds.

This module is the bottom of the policies package and imports none of it: the heads and checkpoints build
on it, and :func:`grpo_probe.policies.checkpoint.load_policy` reads this package's own checkpoints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from grpo_probe.sampling import HEAD_OF_MODE, SAMPLING_KINDS, SamplingMode
from grpo_probe.serve.contract import PolicyCapabilities as ServedCapabilities
from grpo_probe.serve.contract import PolicyOutput, RowDiagnostics
from grpo_probe.serve.contract import RowKey as ServedRowKey

__all__ = [
    "CHUNK_LENGTH",
    "LOGPROBS_OF_HEAD",
    "SAMPLING_KINDS",
    "Policy",
    "PolicyCapabilities",
    "PolicyOutput",
    "RowDiagnostics",
    "RowKey",
    "SamplingMode",
    "check_obs_batch",
    "declared_capabilities",
    "policy_capabilities",
    "policy_name",
]

CHUNK_LENGTH = 50
"""Actions per chunk of the boat scene's registered ``sim.chunk_length``. A policy returns the chunk of the
environment it runs in, ``EnvSpec.chunk_length`` x ``EnvSpec.action_dims``, which need not be this."""


@dataclass(frozen=True)
class RowKey(ServedRowKey):
    """Everything a row's random draws are keyed by (plus a stream tag chosen by the head): the served
    contract's fields (``run_key``, ``seed``, ``replan``, ``draw``), each checked to be a non-negative
    integer."""

    def __post_init__(self) -> None:
        for name in ("run_key", "seed", "replan", "draw"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"RowKey.{name} must be a non-negative integer, got {value!r}")


LOGPROBS_OF_HEAD: dict[str, Literal["per_token", "per_step"]] = {"ar": "per_token", "flow": "per_step"}
"""The log-probs each head's phase-2 loss divides by: the AR head's per token (``token_logprobs``), the
flow head's per step of the SDE sampler (``step_logprobs`` of ``flow_sde`` rows)."""

_LOGPROB_WORDS = {"per_token": "per-token log-probs", "per_step": "per-step log-probs of the SDE sampler"}


@dataclass(frozen=True)
class PolicyCapabilities:
    """What a policy declares it can do, read before a design runs it.

    Why declared and not discovered: a design runs an arm under the modes of its anchor, cells and oracles,
    and phase 2 trains it under its head's mode; a policy that cannot do one of these is refused when the
    arm is bound (:func:`grpo_probe.probe_jobs.binding.bind_checkpoint`) or when phase 2 starts, naming
    the arm, the policy and what it lacks, instead of failing after rollouts. The policy checker samples
    every kind declared here, so a declaration that is not true is a finding of its own
    (``capability-false``).

    A policy declares it as a ``capabilities`` attribute. One that declares nothing is taken at its word
    for sampling (every kind of its head: the checker samples each mode the design runs before any
    episode, and refuses one that fails) but not for training: it has no log-probs for phase 2 and no
    trainable parameters (:func:`policy_capabilities`). The heads read from this package's checkpoints
    declare every kind of their head, their head's log-probs and trainable parameters.
    """

    kinds: tuple[str, ...]
    """The sampling kinds ``act`` samples (``SamplingMode.kind``), all of one head; kept in the order of
    :data:`~grpo_probe.sampling.SAMPLING_KINDS`."""
    logprobs: Literal["per_token", "per_step"] | None = None
    """The log-probs phase 2's loss reads, recorded on every row sampled under the head's stochastic kinds:
    ``per_token`` (AR: ``token_logprobs`` summing to ``logprob``) or ``per_step`` (flow: ``flow_sde`` rows
    carry ``step_logprobs`` summing to ``logprob``, which needs ``flow_sde`` among ``kinds``); None: none
    that phase 2 can use."""
    trainable: bool = False
    """Whether phase 2 may update the weights the policy samples with. Phase 2's trainer reads and writes
    this package's checkpoint format, so a policy bound through a user's adapter that declares it is still
    refused there, with that reason."""

    def __post_init__(self) -> None:
        kinds = self.kinds
        if isinstance(kinds, str) or not isinstance(kinds, Iterable):
            raise ValueError(f"PolicyCapabilities.kinds must be a sequence of sampling kinds, got {kinds!r}")
        kinds = tuple(kinds)
        unknown = [k for k in kinds if k not in SAMPLING_KINDS]
        if unknown or not kinds:
            raise ValueError(
                f"PolicyCapabilities.kinds must name at least one of {', '.join(SAMPLING_KINDS)}, "
                f"got {list(kinds)!r}"
            )
        heads = sorted({HEAD_OF_MODE[k] for k in kinds})
        if len(heads) > 1:
            raise ValueError(
                f"PolicyCapabilities.kinds mixes the kinds of heads {' and '.join(heads)}: a policy has one "
                f"head, got {list(kinds)!r}"
            )
        object.__setattr__(self, "kinds", tuple(k for k in SAMPLING_KINDS if k in kinds))
        if self.logprobs is not None:
            if self.logprobs not in LOGPROBS_OF_HEAD.values():
                raise ValueError(
                    "PolicyCapabilities.logprobs must be 'per_token', 'per_step' or None, got "
                    f"{self.logprobs!r}"
                )
            if LOGPROBS_OF_HEAD[heads[0]] != self.logprobs:
                raise ValueError(
                    f"PolicyCapabilities.logprobs {self.logprobs!r} are not the {heads[0]} head's "
                    f"(its loss reads {LOGPROBS_OF_HEAD[heads[0]]!r})"
                )
            if self.logprobs == "per_step" and "flow_sde" not in self.kinds:
                raise ValueError(
                    "PolicyCapabilities.logprobs 'per_step' are recorded by the SDE sampler: declare "
                    "'flow_sde' among the kinds"
                )
        if not isinstance(self.trainable, bool):
            raise ValueError(f"PolicyCapabilities.trainable must be True or False, got {self.trainable!r}")

    @property
    def head(self) -> str:
        """The head of the declared kinds."""
        return HEAD_OF_MODE[self.kinds[0]]

    @classmethod
    def of_head(cls, head: str, *, logprobs: bool = False, trainable: bool = False) -> PolicyCapabilities:
        """Every kind of ``head``, with its head's log-probs when ``logprobs``: this package's heads."""
        kinds = tuple(k for k in SAMPLING_KINDS if HEAD_OF_MODE[k] == head)
        if not kinds:
            raise ValueError(f"no sampling kind belongs to head {head!r} (heads: ar, flow)")
        return cls(kinds, LOGPROBS_OF_HEAD[head] if logprobs else None, trainable)

    def lacks(
        self,
        kinds: Iterable[str] = (),
        logprobs: Literal["per_token", "per_step"] | None = None,
        trainable: bool = False,
    ) -> list[str]:
        """What of ``kinds``, ``logprobs`` and ``trainable`` is not declared, each as the error names it."""
        missing = [f"sampling kind {k!r}" for k in dict.fromkeys(kinds) if k not in self.kinds]
        if logprobs is not None and self.logprobs != logprobs:
            missing.append(f"{_LOGPROB_WORDS[logprobs]} (capabilities.logprobs {logprobs!r})")
        if trainable and not self.trainable:
            missing.append("trainable parameters (capabilities.trainable)")
        return missing

    def describe(self) -> str:
        """``samples flow_ode; no log-probs for phase 2; no trainable parameters``."""
        logprobs = _LOGPROB_WORDS[self.logprobs] if self.logprobs else "no log-probs for phase 2"
        trainable = "trainable parameters" if self.trainable else "no trainable parameters"
        return f"samples {', '.join(self.kinds)}; {logprobs}; {trainable}"

    def to_dict(self) -> dict[str, Any]:
        """The declaration as JSON values (what an arm's ``source.json`` records)."""
        return {"kinds": list(self.kinds), "logprobs": self.logprobs, "trainable": self.trainable}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], where: str = "capabilities") -> PolicyCapabilities:
        """A declaration from :meth:`to_dict`'s mapping; a ``ValueError`` naming ``where`` otherwise."""
        if not isinstance(values, Mapping) or set(values) != {"kinds", "logprobs", "trainable"}:
            raise ValueError(f"{where}: must be a mapping of kinds, logprobs and trainable, got {values!r}")
        try:
            return cls(values["kinds"], values["logprobs"], values["trainable"])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None


def policy_name(policy: object) -> str:
    """``module:Class`` of a policy object, as a refusal names it."""
    kind = type(policy)
    return f"{kind.__module__}:{kind.__qualname__}"


def declared_capabilities(policy: object) -> PolicyCapabilities | None:
    """The policy's own ``capabilities``, or None when it declares none; a ``ValueError`` for a value that
    is not a :class:`PolicyCapabilities` of the policy's head (this package's, or the serve distribution's
    class that a policy written to be served declares)."""
    declared = getattr(policy, "capabilities", None)
    if declared is None:
        return None
    if isinstance(declared, ServedCapabilities):
        # A policy written for ``grpo-probe-serve`` declares the serve distribution's class (it cannot import
        # this one); bound in process, the same declaration is read through the hello's mapping.
        declared = PolicyCapabilities.from_dict(declared.to_dict(), f"{policy_name(policy)}.capabilities")
    if not isinstance(declared, PolicyCapabilities):
        raise ValueError(
            f"{policy_name(policy)}.capabilities is a {type(declared).__name__}, not a "
            "grpo_probe.policies.PolicyCapabilities"
        )
    head = getattr(policy, "head", None)
    if declared.head != head:
        raise ValueError(
            f"{policy_name(policy)}.capabilities declares kinds of the {declared.head} head "
            f"({', '.join(declared.kinds)}), but the policy's head is {head!r}"
        )
    return declared


def policy_capabilities(policy: object) -> PolicyCapabilities:
    """What the policy declares, or for one that declares nothing, every kind of its head, no log-probs
    for phase 2 and no trainable parameters (see :class:`PolicyCapabilities`)."""
    declared = declared_capabilities(policy)
    return declared if declared is not None else PolicyCapabilities.of_head(str(getattr(policy, "head", "")))


@runtime_checkable
class Policy(Protocol):
    """Observation batch + per-row keys + a sampling mode -> action chunks and per-row diagnostics.

    A policy may also declare ``capabilities`` (a :class:`PolicyCapabilities`); it is not a member of the
    protocol, so a policy that declares none still is one.
    """

    head: str
    obs_dim: int

    def act(self, obs: np.ndarray, keys: Sequence[RowKey], mode: SamplingMode) -> PolicyOutput:
        """``obs`` float32 [B, obs_dim] (an ``ObservationBatch`` for a policy declaring ``input_keys``);
        ``keys`` has length B; returns actions float32 [B, chunk_length, action_dims] of the environment's
        spec."""
        ...


def check_obs_batch(obs: np.ndarray, keys: Sequence[RowKey], obs_dim: int) -> np.ndarray:
    """Validate an ``act`` call's inputs; returns ``obs`` as float32 [B, obs_dim]."""
    obs = np.asarray(obs, dtype=np.float32)
    if obs.ndim != 2 or obs.shape[1] != obs_dim:
        raise ValueError(f"obs must have shape [B, {obs_dim}], got {obs.shape}")
    if len(keys) != obs.shape[0]:
        raise ValueError(f"got {len(keys)} keys for {obs.shape[0]} observation rows")
    if not np.all(np.isfinite(obs)):
        bad = int(np.argwhere(~np.isfinite(obs))[0][0])
        raise ValueError(f"obs row {bad} contains a non-finite value")
    return obs
