"""The AR head: FAST-token sampling from :class:`~grpo_probe.policies.ar_model.ARTransformer`, the policy.

Decoding runs the network one position at a time through
:class:`~grpo_probe.policies.ar_decoder.BlockDecoder` and walks all rows of a fixed-shape block in
lockstep, so every row goes through the same tensor shapes alone or among others (rows never mix:
attention, softmax and the grammar mask are per row). As rows finish, those still decoding move to
smaller blocks (:func:`~grpo_probe.policies.ar_decoder.shrinking_sizes`), but only where this process's
kernels give a row the same bytes at every one of those sizes
(:func:`~grpo_probe.policies.ar_decoder.rows_keep_their_bytes`), so a row's bytes stay those of the
registered block. Masking, noise, log-probs and entropies run in numpy in float32, the logits'
precision, for all rows of the block at once (:func:`sample_step`; the grammar mask is a precomputed
table, the per-row bookkeeping lives in arrays).

Sampling (docs/reference.md, "The two heads"):

- the grammar mask admits only tokens whose coefficients keep the decoded count <= 300; a row ends when
  the count reaches exactly 300, where EOS is the only admissible token (forced, log-prob 0, so it is not
  recorded);
- greedy: argmax of the masked logits; the recorded log-prob and entropy are those of
  softmax(masked logits) (T = 1);
- temperature T: Gumbel-max, argmax(masked_logits / T + g) with g ~ Gumbel(0, 1), which samples exactly
  softmax(masked_logits / T) (Gumbel 1954; Maddison et al. 2014, arXiv:1411.0030v2, Sec. 2), computed in
  its exponential-race form (:func:`sample_step`). The uniforms behind ``g`` come from each row's own
  counter-based stream keyed by (run_key, tag("ar_gumbel"), seed, replan, draw) at counter (position, id)
  (:func:`grpo_probe.keyed_rng.counter_uniforms`, float32), so ids do not depend on batch composition, and
  the noise of all rows for a few positions at a time is one set of numpy calls
  (:class:`grpo_probe.keyed_rng.CounterStreams`);
- temperature with ``SamplingMode.noise`` off: the same code without ``g``, the argmax of the masked
  logits, which picks greedy's ids (the draw-0 oracle's check of the sampling path).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from grpo_probe.keyed_rng import CounterStreams, counter_uniforms, stream_key, tag
from grpo_probe.policies.ar_decoder import BlockDecoder, rows_keep_their_bytes, shrinking_sizes
from grpo_probe.policies.ar_model import ARTransformer
from grpo_probe.policies.fast_tokenizer import FastTokenizer
from grpo_probe.policies.protocol import PolicyOutput, RowDiagnostics, RowKey, SamplingMode, check_obs_batch
from grpo_probe.sampling import kinds_of_head, register_sampler_entry, sampler_entry

__all__ = [
    "MASKED",
    "ROW_BLOCK",
    "ARDecode",
    "ARPolicy",
    "ar_decode",
    "grammar_mask_table",
    "gumbel_noise",
    "gumbel_noise_on",
    "gumbel_rows",
    "masked_step_distribution",
    "row_stream_key",
    "sample_step",
    "tempered_logits",
]

ROW_BLOCK = 8
"""Rows per forward pass; smaller batches are padded to it so a row's arithmetic never depends on B."""

_AR_GUMBEL = tag("ar_gumbel")


def grammar_mask_table(counts: np.ndarray, n_coefficients: int, eos_id: int) -> np.ndarray:
    """bool [n_coefficients + 1, n_ids]: row r = ids admissible with r coefficients still to emit.

    A token is admissible iff it emits at least one coefficient and no more than remain; with none
    remaining only EOS is admissible. Precomputed once per policy, so a decode step's mask for all rows is
    one gather ``table[remaining]``.
    """
    counts_a = np.asarray(counts, dtype=np.int64)
    remaining = np.arange(n_coefficients + 1)[:, None]
    table = (counts_a[None, :] >= 1) & (counts_a[None, :] <= remaining)
    table[0, :] = False
    table[0, eos_id] = True
    return table


def tempered_logits(logits: np.ndarray, admissible: np.ndarray, temperature: float) -> np.ndarray:
    """masked_logits / T in float64: inadmissible ids get -inf, so they have probability 0 and never win."""
    tempered = np.where(admissible, logits, np.float64(-np.inf))
    if temperature != 1.0:
        tempered /= temperature
    return tempered


MASKED = np.float32(-1e30)
"""What the decode loop writes for an inadmissible id's logit: finite, so that its term p_i s_i in the
entropy is 0 * MASKED = 0 rather than 0 * -inf = nan, and so negative that exp(MASKED - max) is exactly 0
and it can never win an argmax, as with -inf. (Holds while |logits / T| stays far below 1e30.)"""


def sample_step(
    logits: np.ndarray, inadmissible: np.ndarray, temperature: float, log_uniforms: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One decode step of a block's rows: per row the id, log p(id) and the entropy of
    p = softmax(masked_logits / T). ``logits`` (float32 [rows, n_ids]) is overwritten.

    In float32, the logits' own precision, with s = (masked_logits - max) / T, e = exp(s), z = sum_i e_i:

    - the id: with noise, the Gumbel-max draw argmax_i (s_i + g_i), g_i = -log(-log U_i), in its
      exponential-race form: exp(s_i + g_i) = e_i / E_i with E_i = -log U_i, so the id is
      argmax_i e_i / E_i = argmin_i e_i / log U_i. ``log_uniforms`` holds log U (the rows' keyed uniforms at
      this position) and is overwritten. One division on the e that the log-probs need anyway replaces two
      logarithms and an addition. Without noise, argmax_i s_i: the argmax of the masked logits themselves
      (subtracting the max and dividing by T > 0 keep the maximum where it is), so at any T the same id as
      greedy;
    - log p(id) = s_id - log z; H = -sum_i p_i log p_i = log z - sum_i e_i s_i / z.

    Inadmissible ids hold :data:`MASKED`: e_i = 0 exactly, so they have probability 0, add nothing to z or
    H, and are never drawn (e_i / log U_i = -0.0, while the max's 1 / log U is negative). Neither is an
    admissible id whose e_i underflows to 0 (s_i < -103), of probability below 1e-44. Against the float64
    references, :func:`masked_step_distribution` and argmax(tempered + :func:`gumbel_rows`): the same ids,
    log-probs and entropies to float32 rounding (tested). Reductions are the ufuncs' own (``np.add.reduce``
    rather than the ``ndarray.sum`` wrapper): this runs once per token.
    """
    s = logits
    np.copyto(s, MASKED, where=inadmissible)
    s -= np.maximum.reduce(s, axis=-1, keepdims=True)
    if temperature != 1.0:
        s /= np.float32(temperature)
    e = np.exp(s)
    z = np.add.reduce(e, axis=-1)
    log_z = np.log(z)
    if log_uniforms is None:
        choice = s.argmax(axis=-1)
    else:
        choice = np.divide(e, log_uniforms, out=log_uniforms).argmin(axis=-1)
    logp = s[np.arange(len(choice)), choice] - log_z
    e *= s
    return choice, logp, log_z - np.add.reduce(e, axis=-1) / z


def masked_step_distribution(
    logits: np.ndarray, admissible: np.ndarray, temperature: float
) -> tuple[np.ndarray, np.ndarray]:
    """log-probs [B, n_ids] and entropy [B] of the sampling distribution softmax(masked_logits / T).

    The float64 reference the decode loop's :func:`sample_step` is tested against (and phase 2's replay).
    """
    tempered = tempered_logits(np.asarray(logits), np.asarray(admissible), temperature)
    shifted = tempered - tempered.max(axis=-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    p_logp = np.exp(logp) * np.where(np.isneginf(logp), 0.0, logp)  # p log p -> 0 as p -> 0
    return logp, -p_logp.sum(axis=-1)


def gumbel_rows(stream_keys: np.ndarray, position: int, n_ids: int) -> np.ndarray:
    """Standard Gumbel noise float64 [len(stream_keys), n_ids], g = -log(-log(U)), one row per stream.

    ``stream_keys[r]`` is :func:`row_stream_key` of a row; U ``[r, i]`` is number ``i`` at ``position`` of
    that row's counter-based stream in float32 (:func:`grpo_probe.keyed_rng.counter_uniforms`), the
    uniforms the decode loop draws with (:func:`sample_step`, in exponential-race form), so a row's noise is
    the same bytes whichever rows are drawn with it. The reference the loop is tested against.
    """
    u = counter_uniforms(stream_keys, position, n_ids, np.float32).astype(np.float64)
    return -np.log(-np.log(u))


def row_stream_key(key: RowKey) -> int:
    """The 64-bit key of a row's Gumbel stream: (run_key, tag("ar_gumbel"), seed, replan, draw)."""
    return stream_key(key.run_key, _AR_GUMBEL, key.seed, key.replan, key.draw)


def gumbel_noise(key: RowKey, position: int, n_ids: int) -> np.ndarray:
    """The Gumbel noise float64 [n_ids] of one row at one token position (a row of :func:`gumbel_rows`)."""
    return gumbel_rows(np.array([row_stream_key(key)], dtype=np.uint64), position, n_ids)[0]


@dataclass(frozen=True)
class ARDecode:
    """How the AR decode samples a kind: the softmax temperature and whether Gumbel noise is added
    (an AR kind's sampling entry, :func:`grpo_probe.sampling.register_sampler_entry`, returns one)."""

    temperature: float
    gumbel: bool


@register_sampler_entry("greedy")
def _greedy(mode: SamplingMode) -> ARDecode:
    return ARDecode(temperature=1.0, gumbel=False)


@register_sampler_entry("temperature")
def _temperature(mode: SamplingMode) -> ARDecode:
    return ARDecode(temperature=float(mode.temperature), gumbel=mode.noise)  # type: ignore[arg-type]


def ar_decode(mode: SamplingMode) -> ARDecode:
    """The decode settings of ``mode`` from its kind's registered entry; a non-AR kind is an error."""
    if mode.head != "ar":
        known = " or ".join(repr(k) for k in kinds_of_head("ar"))
        raise ValueError(f"the AR head samples with kind {known}, got {mode.kind!r}")
    decode: ARDecode = sampler_entry(mode.kind)(mode)
    return decode


def gumbel_noise_on(mode: SamplingMode) -> bool:
    """Whether a decode adds Gumbel noise: kind ``temperature`` with ``mode.noise`` on.

    The one switch between sampling at T and its noise-off twin, which the draw-0 oracle runs against the
    greedy anchor (a broken switch makes that oracle fail).
    """
    return ar_decode(mode).gumbel


@dataclass
class _Rows:
    """Per-row decode state of one block, as arrays (no per-row Python in the token loop)."""

    ids: np.ndarray
    """int64 [row_block, n_coefficients]: token ids, the first ``n_tokens[r]`` of row r are valid."""
    logps: np.ndarray
    """float64 [row_block, n_coefficients]: log-prob of each sampled id under the sampling distribution (the
    float32 values :func:`sample_step` computes)."""
    entropies: np.ndarray
    """float64 [row_block, n_coefficients]: entropy of each step's sampling distribution (likewise)."""
    n_tokens: np.ndarray
    """int64 [row_block]."""


class ARPolicy:
    """FAST-token AR policy; implements :class:`grpo_probe.policies.protocol.Policy`.

    Decodes through a :class:`BlockDecoder` built once, from the model's parameters as they are when the
    policy is made. ``row_block`` is the fixed number of rows decoded together (a design registers it as
    ``arms.<id>.row_block``; :data:`ROW_BLOCK` by default): fewer rows are padded to it, so a row's
    arithmetic never depends on how many others share its call. A larger block spreads the per-token
    Python and dispatch cost over more rows; whether a row's bytes stay the same under another block
    size depends on the kernels, which is why the size is registered rather than a run setting. Where
    the kernels pass :func:`rows_keep_their_bytes`, a decode also steps down through smaller blocks as
    its rows finish (:meth:`shrinks`), which changes its time and none of its bytes.
    """

    head = "ar"

    def __init__(
        self,
        model: ARTransformer,
        tokenizer: FastTokenizer,
        obs_mean: np.ndarray,
        obs_std: np.ndarray,
        device: str = "cpu",
        row_block: int = ROW_BLOCK,
    ) -> None:
        if isinstance(row_block, bool) or not isinstance(row_block, int) or row_block < 1:
            raise ValueError(f"ARPolicy: row_block must be a positive integer, got {row_block!r}")
        self.row_block = row_block
        self.device = torch.device(device)
        self.model = model.eval().to(self.device)
        self.tokenizer = tokenizer
        self.obs_mean = np.asarray(obs_mean, dtype=np.float32)
        self.obs_std = np.asarray(obs_std, dtype=np.float32)
        self.obs_dim = int(self.obs_mean.shape[0])
        self._counts = np.asarray(tokenizer.coefficient_counts, dtype=np.int64)
        self._mask_table = grammar_mask_table(self._counts, tokenizer.n_coefficients, tokenizer.eos_id)
        self._inadmissible = ~self._mask_table
        block = BlockDecoder(self.model, row_block)
        self._decoders = {
            size: block if size == row_block else block.sized(size) for size in shrinking_sizes(row_block)
        }
        self._shrinks: dict[int, bool] = {}

    def shrinks(self) -> bool:
        """Whether a decode steps down to smaller blocks as its rows finish (:func:`shrinking_sizes`): where
        :func:`rows_keep_their_bytes` holds for this process's kernels at its current intra-op thread count
        (checked once per count). Either way a row's bytes are those of the registered block."""
        threads = torch.get_num_threads()
        if threads not in self._shrinks:
            with torch.inference_mode():
                decoders = list(self._decoders.values())
                self._shrinks[threads] = len(decoders) > 1 and rows_keep_their_bytes(
                    decoders, self.obs_dim, self.tokenizer.bos_id
                )
        return self._shrinks[threads]

    def act(self, obs: np.ndarray, keys: Sequence[RowKey], mode: SamplingMode) -> PolicyOutput:
        ar_decode(mode)  # refuses a kind of another head
        obs = check_obs_batch(obs, keys, self.obs_dim)
        actions = np.zeros(
            (len(keys), self.tokenizer.chunk_length, self.tokenizer.action_dims), dtype=np.float32
        )
        diagnostics: list[RowDiagnostics] = []
        block = self.row_block
        for start in range(0, len(keys), block):
            block_keys = list(keys[start : start + block])
            rows = self._generate_block(obs[start : start + block], block_keys, mode)
            for i in range(len(block_keys)):
                n = int(rows.n_tokens[i])
                ids = rows.ids[i, :n]
                logps = rows.logps[i, :n].copy()
                actions[start + i] = np.clip(self.tokenizer.decode(ids), -1.0, 1.0).astype(np.float32)
                diagnostics.append(
                    RowDiagnostics(
                        logprob=float(logps.sum()),
                        token_ids=ids.astype(np.int32),
                        token_logprobs=logps,
                        entropy=rows.entropies[i, :n].copy(),
                    )
                )
        return PolicyOutput(actions=actions, diagnostics=diagnostics)

    @torch.inference_mode()
    def _generate_block(self, obs: np.ndarray, keys: list[RowKey], mode: SamplingMode) -> _Rows:
        """Decode up to ``row_block`` rows in lockstep; padded rows start finished and only ever take EOS.

        Each step, for every row of the block: mask = table[remaining], then :func:`sample_step` (the id,
        its log-prob and the entropy of softmax(masked_logits / T); with noise, each row's keyed
        log-uniforms at this position). A row stops when its coefficients reach exactly 300; from then on
        it can only take EOS. The network and the sampler run on every row of the current block each step,
        so their calls always have one of its fixed shapes.

        Where the policy :meth:`shrinks`, a decode starts in the smallest of :func:`shrinking_sizes` that
        holds its rows, and whenever its unfinished rows fit the next smaller size it moves them there
        (:meth:`BlockDecoder.take`; their noise streams are rebuilt on the same keys, so they draw the same
        numbers). Rows of one block finish at very different steps (on the registered arm at T = 1.6, blocks
        of 16 ran 69 steps for 46 tokens a row on average), and a step of a small block costs less.
        """
        n_rows = len(keys)
        n_coef, n_ids, eos = self.tokenizer.n_coefficients, self.tokenizer.n_ids, self.tokenizer.eos_id
        sizes = shrinking_sizes(self.row_block) if self.shrinks() else (self.row_block,)
        size = min(m for m in sizes if m >= n_rows)
        temperature = ar_decode(mode).temperature
        rows = _Rows(
            ids=np.zeros((self.row_block, n_coef), dtype=np.int64),
            logps=np.zeros((self.row_block, n_coef), dtype=np.float64),
            entropies=np.zeros((self.row_block, n_coef), dtype=np.float64),
            n_tokens=np.zeros(self.row_block, dtype=np.int64),
        )
        # Decoder row i holds block row live[i] (i < len(live)); the rows after those are padding.
        live = np.arange(n_rows)
        # a padded row's stream is drawn and never used; it has no coefficients to emit
        keys_now = _padded(np.array([row_stream_key(k) for k in keys], dtype=np.uint64), size, 0)
        remaining = _padded(np.full(n_rows, n_coef, dtype=np.int64), size, 0)
        noise = CounterStreams(keys_now, n_ids, log=True, dtype=np.float32) if gumbel_noise_on(mode) else None
        decoder = self._decoders[size]
        padded = np.zeros((size, self.obs_dim), dtype=np.float32)
        padded[:n_rows] = (obs - self.obs_mean) / self.obs_std
        logits = decoder.prefill(padded, self.tokenizer.bos_id)
        for step in range(n_coef):
            choice, logp, entropy = sample_step(
                logits, self._inadmissible[remaining], temperature, None if noise is None else noise(step)
            )
            # A finished row takes EOS, which emits no coefficient; its entries past n_tokens are never read.
            n = len(live)
            rows.ids[live, step] = choice[:n]
            rows.logps[live, step] = logp[:n]
            rows.entropies[live, step] = entropy[:n]
            remaining -= self._counts[choice]
            n_left = np.count_nonzero(remaining)
            if n_left < n:
                finished = live[(remaining[:n] == 0) & (rows.n_tokens[live] == 0)]
                rows.n_tokens[finished] = step + 1
            if not n_left:
                break
            smaller = min(m for m in sizes if m >= n_left)
            if smaller < decoder.rows:
                kept = np.flatnonzero(remaining)
                moved = self._decoders[smaller]
                moved.take(decoder, kept)
                decoder, live = moved, live[kept]
                keys_now = _padded(keys_now[kept], smaller, 0)
                remaining = _padded(remaining[kept], smaller, 0)
                choice = _padded(choice[kept], smaller, eos)
                if noise is not None:
                    noise = CounterStreams(keys_now, n_ids, log=True, dtype=np.float32)
            logits = decoder.step(choice)
        return rows


def _padded(values: np.ndarray, size: int, fill: int) -> np.ndarray:
    """``values`` [n <= size] followed by ``fill`` up to ``size`` entries, same dtype."""
    out = np.full(size, fill, dtype=values.dtype)
    out[: len(values)] = values
    return out
