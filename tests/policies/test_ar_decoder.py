"""The AR decoder: the network one position at a time, and the shrinking block (rows that are still
decoding move to smaller blocks, with the bytes of the registered block, and only where the kernels keep
a row's bytes at every size)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from grpo_probe.policies import RowKey, SamplingMode, ar_decoder, load_policy
from grpo_probe.policies.ar_decoder import BlockDecoder, rows_keep_their_bytes, shrinking_sizes
from grpo_probe.policies.ar_head import ROW_BLOCK, ARPolicy
from grpo_probe.policies.protocol import PolicyOutput
from grpo_probe.policies.synthetic_demos import SyntheticDemos

MODES = [SamplingMode("greedy"), SamplingMode("temperature", temperature=1.6)]
SAMPLED = [SamplingMode("temperature", temperature=1.0), SamplingMode("temperature", temperature=1.6)]


def _keys(n: int) -> list[RowKey]:
    return [RowKey(run_key=5, seed=200 + i, replan=1, draw=i % 3) for i in range(n)]


def _policy(checkpoint: Path, row_block: int, shrinks: bool) -> ARPolicy:
    policy = load_policy(checkpoint, row_block=row_block)
    assert isinstance(policy, ARPolicy)
    if not shrinks:
        policy._shrinks[torch.get_num_threads()] = False
    return policy


def _row_bytes(out: PolicyOutput) -> list[bytes]:
    return [
        d.token_ids.tobytes() + d.token_logprobs.tobytes() + d.entropy.tobytes() + a.tobytes()
        for d, a in zip(out.diagnostics, out.actions, strict=True)
    ]


@pytest.fixture
def takes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Every :meth:`BlockDecoder.take` of the test, as (rows of the source, rows of the target)."""
    calls: list[tuple[int, int]] = []
    take = BlockDecoder.take

    def counted(self: BlockDecoder, source: BlockDecoder, rows: np.ndarray) -> None:
        calls.append((source.rows, self.rows))
        take(self, source, rows)

    monkeypatch.setattr(BlockDecoder, "take", counted)
    return calls


@pytest.fixture
def starts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The block size of every :meth:`BlockDecoder.prefill` of the test."""
    calls: list[int] = []
    prefill = BlockDecoder.prefill

    def watched(self: BlockDecoder, obs: np.ndarray, bos_id: int) -> np.ndarray:
        calls.append(self.rows)
        return prefill(self, obs, bos_id)

    monkeypatch.setattr(BlockDecoder, "prefill", watched)
    return calls


def test_block_decoder_is_the_networks_forward_one_position_at_a_time(
    ar_checkpoint: Path, demos: SyntheticDemos
) -> None:
    """The decoder's logits at every position against teacher forcing through the modules (float32)."""
    policy = _policy(ar_checkpoint, ROW_BLOCK, shrinks=False)
    model = policy.model
    obs = ((demos.obs[:ROW_BLOCK] - policy.obs_mean) / policy.obs_std).astype(np.float32)
    ids = (np.arange(ROW_BLOCK)[:, None] * 7 + np.arange(12)[None, :]) % policy.tokenizer.vocab_size
    decoder = BlockDecoder(model, ROW_BLOCK)
    stepped = [decoder.prefill(obs, policy.tokenizer.bos_id).copy()]
    stepped += [decoder.step(ids[:, k]).copy() for k in range(ids.shape[1])]
    tokens = torch.from_numpy(np.concatenate([np.full((ROW_BLOCK, 1), policy.tokenizer.bos_id), ids], axis=1))
    with torch.no_grad():
        forward = model(torch.from_numpy(obs), tokens).numpy()
    np.testing.assert_allclose(np.stack(stepped, axis=1), forward, rtol=0, atol=1e-5)


def test_a_block_steps_down_four_rows_at_a_time_to_eight() -> None:
    assert shrinking_sizes(20) == (20, 16, 12, 8)
    assert shrinking_sizes(16) == (16, 12, 8)
    assert shrinking_sizes(9) == (9, 8)
    assert shrinking_sizes(8) == (8,)
    assert shrinking_sizes(7) == (7,)
    assert shrinking_sizes(4) == (4,)
    assert shrinking_sizes(1) == (1,)


def test_a_row_alone_starts_in_the_smallest_block(
    ar_checkpoint: Path, demos: SyntheticDemos, takes: list[tuple[int, int]], starts: list[int]
) -> None:
    """One row decodes in the 8-row block from its first position, with its bytes in a full block of 20."""
    mode = SamplingMode("temperature", temperature=1.6)
    policy = _policy(ar_checkpoint, 20, shrinks=True)
    assert policy.shrinks()
    del starts[:], takes[:]
    alone = _row_bytes(policy.act(demos.obs[7:8], _keys(20)[7:8], mode))
    assert starts == [8] and not takes
    batch = _row_bytes(policy.act(demos.obs[:20], _keys(20), mode))
    assert alone[0] == batch[7]


def _kernels_by_row_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """A linear layer whose product rounds differently below 12 rows, as a BLAS with another kernel for
    small row counts would."""

    def linear(self: ar_decoder._Linear, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        y = torch.addmm(self.bias, x, self.weight)
        if x.shape[0] < 12:
            y = y * (1.0 + 2.0**-20)
        if out is None:
            return y
        return out.copy_(y)

    monkeypatch.setattr(ar_decoder._Linear, "__call__", linear)


@pytest.mark.parametrize("mode", MODES)
def test_kernels_that_change_a_rows_bytes_with_the_row_count_keep_the_fixed_block(
    ar_checkpoint: Path,
    demos: SyntheticDemos,
    mode: SamplingMode,
    monkeypatch: pytest.MonkeyPatch,
    takes: list[tuple[int, int]],
) -> None:
    """The check catches kernels whose rounding depends on the row count, and the policy then decodes in
    its registered block alone: a row alone gets the bytes it gets among 20 others."""
    _kernels_by_row_count(monkeypatch)
    policy = _policy(ar_checkpoint, 20, shrinks=True)
    assert not rows_keep_their_bytes(list(policy._decoders.values()), policy.obs_dim, policy.tokenizer.bos_id)
    assert not policy.shrinks()
    del takes[:]
    batch = _row_bytes(policy.act(demos.obs[:20], _keys(20), mode))
    alone = _row_bytes(policy.act(demos.obs[13:14], _keys(20)[13:14], mode))
    assert not takes
    assert alone[0] == batch[13]


def test_the_check_runs_once_per_thread_count(ar_checkpoint: Path) -> None:
    policy = _policy(ar_checkpoint, 16, shrinks=True)
    threads = torch.get_num_threads()
    assert policy.shrinks() and set(policy._shrinks) == {threads}
    other = 1 if threads > 1 else 2
    torch.set_num_threads(other)
    try:
        policy.shrinks()
    finally:
        torch.set_num_threads(threads)
    assert set(policy._shrinks) == {threads, other}


def test_take_refuses_more_rows_than_it_holds_and_other_parameters(ar_checkpoint: Path) -> None:
    policy = _policy(ar_checkpoint, 16, shrinks=True)
    big, small = policy._decoders[16], policy._decoders[8]
    with pytest.raises(ValueError, match=r"take: at most 8 row indices in a 1-d array, got shape \(9,\)"):
        small.take(big, np.arange(9))
    stranger = BlockDecoder(policy.model, 8)
    with pytest.raises(ValueError, match="take: the source decoder runs other parameters"):
        stranger.take(big, np.arange(4))
