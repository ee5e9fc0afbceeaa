"""Small deterministic policies implementing the policy protocol, keyed exactly like the real heads.

Why: the engine's determinism properties (parallel == sequential, draw keying, batch-order invariance,
kill and rerun) must be testable in well under a second per episode. Each row's output is computed from
that row's observation and its own keyed generator only, so rows never influence each other.
Workers import these by ``module:function`` (see ``factory_name``).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from grpo_probe.envs.boat.simulator import OBS_DIM
from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.policies.protocol import PolicyOutput, RowDiagnostics, RowKey, SamplingMode

CHUNK_SHAPE = (50, 6)
N_TOKENS = 12
VOCAB = 16


def factory_name(function: Callable[..., Any]) -> str:
    """``module:function`` of a factory defined here, whatever name pytest imported this module under."""
    return f"{function.__module__}:{function.__qualname__}"


def _kill_if_asked(keys: Sequence[RowKey], kill_at: tuple[int, int] | None) -> None:
    """SIGKILL this process when a row of ``kill_at = (seed, replan)`` comes up, in a worker process only."""
    if kill_at is None or multiprocessing.parent_process() is None:
        return
    if any((k.seed, k.replan) == tuple(kill_at) for k in keys):
        os.kill(os.getpid(), signal.SIGKILL)


class KeyedLinearFlowPolicy:
    """'flow' head: chunk = tanh(obs W + keyed noise); SDE mode adds a-scaled keyed noise and a log-prob."""

    head = "flow"
    obs_dim = OBS_DIM

    def __init__(self, kill_at: tuple[int, int] | None = None) -> None:
        size = CHUNK_SHAPE[0] * CHUNK_SHAPE[1]
        self.weights = numpy_generator(tag("test_flow_weights")).standard_normal((OBS_DIM, size)) * 0.3
        self.kill_at = kill_at

    def act(self, obs: np.ndarray, keys: Sequence[RowKey], mode: SamplingMode) -> PolicyOutput:
        if mode.kind not in ("flow_ode", "flow_sde"):
            raise ValueError(f"test flow policy: unsupported mode {mode.kind!r}")
        _kill_if_asked(keys, self.kill_at)
        actions = np.zeros((len(keys), *CHUNK_SHAPE), dtype=np.float32)
        diagnostics = []
        for row, key in enumerate(keys):
            noise = numpy_generator(key.run_key, tag("test_flow_noise"), key.seed, key.replan, key.draw)
            pre = obs[row].astype(np.float64) @ self.weights + 0.5 * noise.standard_normal(
                self.weights.shape[1]
            )
            logprob = None
            if mode.kind == "flow_sde" and mode.sde_a:
                step_noise = numpy_generator(
                    key.run_key, tag("test_sde_noise"), key.seed, key.replan, key.draw
                )
                eps = step_noise.standard_normal(pre.shape)
                pre = pre + float(mode.sde_a) * eps
                logprob = float(np.sum(-0.5 * eps**2 - 0.5 * np.log(2 * np.pi)))
            actions[row] = np.tanh(pre).reshape(CHUNK_SHAPE).astype(np.float32)
            diagnostics.append(RowDiagnostics(logprob=logprob))
        return PolicyOutput(actions=actions, diagnostics=diagnostics)


class KeyedCategoricalPolicy:
    """'ar' head: 12 tokens over 16 ids, greedy or keyed Gumbel-max at T (``mode.noise`` off: no Gumbel
    noise, so greedy's ids with the temperature-T log-probs); chunk = tanh(basis @ values)."""

    head = "ar"
    obs_dim = OBS_DIM

    def __init__(self, kill_at: tuple[int, int] | None = None) -> None:
        gen = numpy_generator(tag("test_ar_weights"))
        self.logit_weights = gen.standard_normal((OBS_DIM, N_TOKENS * VOCAB))
        self.basis = gen.standard_normal((CHUNK_SHAPE[0] * CHUNK_SHAPE[1], N_TOKENS)) * 0.4
        self.kill_at = kill_at

    def act(self, obs: np.ndarray, keys: Sequence[RowKey], mode: SamplingMode) -> PolicyOutput:
        if mode.kind not in ("greedy", "temperature"):
            raise ValueError(f"test AR policy: unsupported mode {mode.kind!r}")
        _kill_if_asked(keys, self.kill_at)
        temperature = 1.0 if mode.temperature is None else float(mode.temperature)
        actions = np.zeros((len(keys), *CHUNK_SHAPE), dtype=np.float32)
        diagnostics = []
        for row, key in enumerate(keys):
            logits = (obs[row].astype(np.float64) @ self.logit_weights).reshape(N_TOKENS, VOCAB) / temperature
            log_probs = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
            scores = logits  # Gumbel-max: argmax(logits / T + g); without noise, greedy's argmax
            if mode.kind == "temperature" and mode.noise:
                scores = logits + np.stack(
                    [
                        numpy_generator(
                            key.run_key, tag("test_ar_gumbel"), key.seed, key.replan, key.draw, p
                        ).gumbel(size=VOCAB)
                        for p in range(N_TOKENS)
                    ]
                )
            ids = np.argmax(scores, axis=1).astype(np.int32)
            token_logprobs = log_probs[np.arange(N_TOKENS), ids]
            entropy = -np.sum(np.exp(log_probs) * log_probs, axis=1)
            values = (ids.astype(np.float64) - (VOCAB - 1) / 2) / VOCAB
            actions[row] = np.tanh(self.basis @ values).reshape(CHUNK_SHAPE).astype(np.float32)
            diagnostics.append(
                RowDiagnostics(
                    logprob=float(token_logprobs.sum()),
                    token_ids=ids,
                    token_logprobs=token_logprobs,
                    entropy=entropy,
                )
            )
        return PolicyOutput(actions=actions, diagnostics=diagnostics)


def make_flow_policy(device: str = "cpu", kill_at: tuple[int, int] | None = None) -> KeyedLinearFlowPolicy:
    """Factory for :class:`PolicySource` (``device`` is accepted and ignored: numpy only)."""
    del device
    return KeyedLinearFlowPolicy(kill_at=kill_at)


def make_ar_policy(device: str = "cpu", kill_at: tuple[int, int] | None = None) -> KeyedCategoricalPolicy:
    """Factory for :class:`PolicySource` (``device`` is accepted and ignored: numpy only)."""
    del device
    return KeyedCategoricalPolicy(kill_at=kill_at)
