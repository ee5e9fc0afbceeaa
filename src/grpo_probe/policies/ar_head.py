"""The AR head: a small transformer decoder over FAST tokens, conditioned on the observation.

The observation (normalized with demo statistics) becomes ``n_prefix`` prefix embeddings; BOS follows,
then the action tokens. Training and the phase-2 recomputation run :class:`ARTransformer` on whole
sequences; decoding runs it one position at a time through :class:`BlockDecoder` (the same network and
weights in few fused calls, with a KV cache) and walks all rows of a fixed-shape block in lockstep, so
every row goes through the same tensor shapes alone or among others (rows never mix: attention, softmax
and the grammar mask are per row). As rows finish, those still decoding move to smaller blocks
(:func:`shrinking_sizes`), but only where this process's kernels give a row the same bytes at every one
of those sizes (:func:`rows_keep_their_bytes`), so a row's bytes stay those of the registered block.
Masking, noise, log-probs and entropies run in numpy in float32, the logits' precision, for all rows of
the block at once (:func:`sample_step`; the grammar mask is a precomputed table, the per-row bookkeeping
lives in arrays).

Sampling (DESIGN.md, "The two heads"):

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

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from grpo_probe.keyed_rng import CounterStreams, counter_uniforms, stream_key, tag
from grpo_probe.policies.fast_tokenizer import FastTokenizer
from grpo_probe.policies.protocol import PolicyOutput, RowDiagnostics, RowKey, SamplingMode, check_obs_batch

__all__ = [
    "MASKED",
    "MIN_SHRUNK_ROWS",
    "ROW_BLOCK",
    "ARPolicy",
    "ARTransformer",
    "BlockDecoder",
    "grammar_mask_table",
    "gumbel_noise",
    "gumbel_noise_on",
    "gumbel_rows",
    "masked_step_distribution",
    "row_stream_key",
    "rows_keep_their_bytes",
    "sample_step",
    "shrinking_sizes",
    "tempered_logits",
]

ROW_BLOCK = 8
"""Rows per forward pass; smaller batches are padded to it so a row's arithmetic never depends on B."""

_AR_GUMBEL = tag("ar_gumbel")


class _CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, cache: torch.Tensor | None, start: int) -> torch.Tensor:
        b, s, d = x.shape
        dh = d // self.n_heads
        q, k, v = (t.view(b, s, self.n_heads, dh).transpose(1, 2) for t in self.qkv(x).split(d, dim=-1))
        if cache is not None:
            cache[0][:, :, start : start + s] = k
            cache[1][:, :, start : start + s] = v
            k = cache[0][:, :, : start + s]
            v = cache[1][:, :, : start + s]
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(dh)  # [b, h, s, start + s]
        query_pos = torch.arange(start, start + s, device=x.device)[:, None]
        key_pos = torch.arange(start + s, device=x.device)[None, :]
        scores = scores.masked_fill(key_pos > query_pos, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, s, d))


class _Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = _CausalSelfAttention(d_model, n_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x: torch.Tensor, cache: torch.Tensor | None, start: int) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), cache, start)
        return x + self.mlp(self.ln2(x))


class ARTransformer(nn.Module):
    """Pre-LN decoder: [obs prefix (n_prefix), BOS, t_1 .. t_n] -> next-token logits over ``n_ids``."""

    def __init__(
        self,
        obs_dim: int,
        n_ids: int,
        d_model: int,
        n_layers: int,
        n_heads: int,
        n_prefix: int,
        max_tokens: int,
    ) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be a multiple of n_heads ({n_heads})")
        self.n_prefix = n_prefix
        self.n_heads = n_heads
        self.d_model = d_model
        self.max_len = n_prefix + 1 + max_tokens
        self.obs_proj = nn.Sequential(
            nn.Linear(obs_dim, d_model), nn.GELU(), nn.Linear(d_model, n_prefix * d_model)
        )
        self.tok_emb = nn.Embedding(n_ids, d_model)
        self.pos_emb = nn.Parameter(torch.zeros(self.max_len, d_model))
        self.blocks = nn.ModuleList(_Block(d_model, n_heads) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_ids)

    def _prefix(self, obs: torch.Tensor) -> torch.Tensor:
        return self.obs_proj(obs).view(obs.shape[0], self.n_prefix, self.d_model)

    def forward(self, obs: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: ``tokens`` [B, L] starting with BOS -> logits [B, L, n_ids] (next token)."""
        x = torch.cat([self._prefix(obs), self.tok_emb(tokens)], dim=1)
        x = x + self.pos_emb[: x.shape[1]]
        for block in self.blocks:
            x = block(x, None, 0)
        return self.head(self.ln_f(x[:, self.n_prefix :]))


class _Linear(NamedTuple):
    """An ``nn.Linear`` for ``addmm(bias, x, weight)``: its weight as a contiguous [in, out] copy.

    ``nn.Linear`` multiplies by the transposed view of its [out, in] weight; at a block's 8 rows the BLAS
    takes a markedly slower path for that view than for the contiguous [in, out] matrix.
    """

    weight: torch.Tensor
    bias: torch.Tensor

    @classmethod
    def of(cls, layer: nn.Module) -> _Linear:
        assert isinstance(layer, nn.Linear)
        return cls(layer.weight.detach().t().contiguous(), layer.bias.detach().clone())

    def __call__(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        return torch.addmm(self.bias, x, self.weight, out=out)


class _Norm(NamedTuple):
    """An ``nn.LayerNorm``'s parameters, applied with ``torch.layer_norm`` (the module's own kernel)."""

    weight: torch.Tensor
    bias: torch.Tensor
    eps: float

    @classmethod
    def of(cls, layer: nn.Module) -> _Norm:
        assert isinstance(layer, nn.LayerNorm)
        return cls(layer.weight.detach().clone(), layer.bias.detach().clone(), layer.eps)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


class _Weights(NamedTuple):
    """The parameters :class:`BlockDecoder` runs, copied once from the model; every resized copy of a decoder
    (:meth:`BlockDecoder.sized`) runs these same tensors."""

    obs_in: _Linear
    obs_out: _Linear
    tok_emb: torch.Tensor
    pos_emb: tuple[torch.Tensor, ...]
    """one view per position"""
    ln_f: _Norm
    head: _Linear
    blocks: tuple[tuple[_Norm, _Linear, _Linear, _Norm, _Linear, _Linear], ...]
    """per decoder block: ln1, qkv, proj, ln2, up, down"""
    n_prefix: int
    d_model: int
    n_heads: int
    max_len: int
    n_ids: int

    @classmethod
    def of(cls, model: ARTransformer) -> _Weights:
        pos_emb = model.pos_emb.detach().clone()
        return cls(
            _Linear.of(model.obs_proj[0]), _Linear.of(model.obs_proj[2]),
            model.tok_emb.weight.detach().clone(), tuple(pos_emb[p] for p in range(model.max_len)),
            _Norm.of(model.ln_f), _Linear.of(model.head),
            tuple(
                (
                    _Norm.of(b.ln1), _Linear.of(b.attn.qkv), _Linear.of(b.attn.proj), _Norm.of(b.ln2),
                    _Linear.of(b.mlp[0]), _Linear.of(b.mlp[2]),
                )
                for b in model.blocks
            ),
            model.n_prefix, model.d_model, model.n_heads, model.max_len, model.head.out_features,
        )  # fmt: skip


class _DecodeLayer(NamedTuple):
    """One decoder block as :class:`BlockDecoder` runs it: parameters, output buffer and cache views.

    The block's keys and values live in one cache tensor, [rows, 2 (key, value), heads, position, d_head],
    seen only through views made once, so a decode step indexes nothing: ``q`` and ``kv`` view
    ``qkv_out``, which each step's q, k, v product overwrites; ``slots[p]`` is the cache entry of position
    p ([rows, 2, heads, d_head]); ``keys[p]`` and ``values[p]`` are the cached positions 0 .. p
    ([rows, heads, p + 1, d_head]).
    """

    ln1: _Norm
    qkv: _Linear
    proj: _Linear
    ln2: _Norm
    up: _Linear
    down: _Linear
    cache: torch.Tensor
    qkv_out: torch.Tensor
    q: torch.Tensor
    kv: torch.Tensor
    slots: tuple[torch.Tensor, ...]
    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]


class BlockDecoder:
    """:class:`ARTransformer` one position at a time for a fixed block of rows, with its own KV cache.

    The decode loop's network. Why not the modules: at a block of 8 rows a decode step is dozens of tensor
    calls on tiny tensors, and their per-call overhead, not arithmetic, was most of its cost. This is the
    same network in 12 calls per block: layer norm; one ``addmm`` for q, k and v; one copy of this
    position's key and value into the cache; ``scaled_dot_product_attention`` of the one new query over
    the cached positions 0 .. p (causal by construction: the cache holds nothing later); the output
    projection and the residual; layer norm, the two MLP layers with exact GELU, the residual. Why torch
    and not numpy, whose calls are cheaper: numpy has no fused layer norm, attention or GELU (nor a fast
    erf), so it needs several times the calls, and its BLAS multiplies these shapes more slowly (and
    multithreads them above a size threshold); measured, this version decodes faster. The observation
    prefix and BOS run through the same :meth:`_advance` as the action tokens (positions 0 .. n_prefix),
    so one code path computes every position.

    The parameters are copied when the decoder is built (a snapshot: later in-place updates of the model
    do not show; build a new decoder, as every freshly loaded policy does). Its logits agree with
    :meth:`ARTransformer.forward` over the same tokens up to float32 rounding (tested), not bit for bit.
    Rows never mix (every call is row-wise or per row and head) and every call has the block's shape, so a
    row's logits are the same bytes whichever rows share the block. :meth:`sized` makes a decoder of
    another block size on the same parameters, and :meth:`take` moves rows that are still decoding into
    it (the AR policy's shrinking block; :func:`rows_keep_their_bytes`). Not for concurrent use: the cache
    and buffers are the decoder's own.
    """

    def __init__(self, model: ARTransformer, rows: int) -> None:
        self._setup(_Weights.of(model), rows, model.pos_emb.device)

    def sized(self, rows: int) -> BlockDecoder:
        """A decoder of ``rows`` rows on this one's parameters (shared, not copied), with its own buffers."""
        other = object.__new__(BlockDecoder)
        other._setup(self._weights, rows, self._ids.device)
        return other

    def _setup(self, weights: _Weights, rows: int, device: torch.device) -> None:
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
            raise ValueError(f"BlockDecoder: rows must be a positive integer, got {rows!r}")
        self.rows = rows
        self._weights = weights
        self.n_prefix, self.max_len = weights.n_prefix, weights.max_len
        self._d, self._heads = weights.d_model, weights.n_heads
        self._obs_in, self._obs_out = weights.obs_in, weights.obs_out
        self._tok_emb, self._pos_emb = weights.tok_emb, weights.pos_emb
        self._ln_f, self._head = weights.ln_f, weights.head
        d, h = self._d, self._heads
        positions = range(self.max_len)
        layers = []
        for ln1, qkv, proj, ln2, up, down in weights.blocks:
            qkv_out = torch.zeros((rows, 3 * d), device=device)
            cache = torch.zeros((rows, 2, h, self.max_len, d // h), device=device)
            layers.append(
                _DecodeLayer(
                    ln1, qkv, proj, ln2, up, down, cache, qkv_out,
                    q=qkv_out[:, :d].view(rows, h, 1, d // h),
                    kv=qkv_out[:, d:].view(rows, 2, h, d // h),
                    slots=tuple(cache[:, :, :, p] for p in positions),
                    keys=tuple(cache[:, 0, :, : p + 1] for p in positions),
                    values=tuple(cache[:, 1, :, : p + 1] for p in positions),
                )
            )  # fmt: skip
        self._layers = tuple(layers)
        self._ids = torch.zeros(rows, dtype=torch.long, device=device)
        self._logits = torch.zeros((rows, weights.n_ids), device=device)
        # On the CPU the token ids go in, and the logits come out, through numpy views of these buffers.
        on_cpu = device.type == "cpu"
        self._ids_host = self._ids.numpy() if on_cpu else None
        self._logits_host = self._logits.numpy() if on_cpu else None
        self._position = 0

    def take(self, source: BlockDecoder, rows: np.ndarray) -> None:
        """Go on decoding rows ``rows`` (indices into ``source``'s block) as this decoder's first
        ``len(rows)`` rows: their cached keys and values at every position ``source`` has run, and its
        position. The next :meth:`step` feeds their next tokens. This decoder's other rows keep whatever
        they held (finite values of earlier blocks): feed them any id and read nothing of theirs.
        """
        index = np.ascontiguousarray(rows, dtype=np.int64)
        if index.ndim != 1 or len(index) > self.rows:
            raise ValueError(f"take: at most {self.rows} row indices in a 1-d array, got shape {index.shape}")
        if source._weights is not self._weights:
            raise ValueError("take: the source decoder runs other parameters")
        n, position = len(index), source._position
        picked = torch.from_numpy(index).to(self._ids.device)
        for mine, theirs in zip(self._layers, source._layers, strict=True):
            mine.cache[:n, :, :, :position] = theirs.cache[:, :, :, :position].index_select(0, picked)
        self._position = position

    def prefill(self, obs: np.ndarray, bos_id: int) -> np.ndarray:
        """Start the block: its ``n_prefix`` observation embeddings, then BOS. ``obs`` is normalized, float32
        [rows, obs_dim]; returns the logits [rows, n_ids] of the first action token (as :meth:`step`)."""
        hidden = F.gelu(self._obs_in(torch.from_numpy(obs).to(self._ids.device)))
        prefix = self._obs_out(hidden).view(self.rows, self.n_prefix, self._d)
        for position in range(self.n_prefix):
            self._advance(prefix[:, position] + self._pos_emb[position], position, logits=False)
        self._position = self.n_prefix
        return self.step(np.full(self.rows, bos_id, dtype=np.int64))

    def step(self, ids: np.ndarray) -> np.ndarray:
        """Feed one token per row (int64 [rows]) at the next position; the logits [rows, n_ids] of the token
        after it, float32, in a buffer that the next call overwrites (the caller may overwrite it too)."""
        position = self._position
        if position >= self.max_len:
            raise ValueError(f"the decoder holds {self.max_len} positions; all are used")
        self._position += 1
        if self._ids_host is not None:
            self._ids_host[...] = ids
        else:
            self._ids.copy_(torch.from_numpy(ids))
        x = torch.embedding(self._tok_emb, self._ids) + self._pos_emb[position]
        self._advance(x, position)
        return self._logits_host if self._logits_host is not None else self._logits.cpu().numpy()

    def _advance(self, x: torch.Tensor, position: int, logits: bool = True) -> None:
        """Run embeddings ``x`` [rows, d] at ``position`` through the blocks, caching its keys and values, and
        with ``logits`` the next-token logits into the logits buffer.

        Without ``logits`` (the observation prefix, whose next-token logits nothing reads) the last block
        stops once its keys and values are cached: its attention output, MLP and the head feed only the
        logits. (A separate one-pass prefill measured no faster than this one code path.)
        """
        rows, d = self.rows, self._d
        last = len(self._layers) - 1
        for i, layer in enumerate(self._layers):
            layer.qkv(layer.ln1(x), out=layer.qkv_out)
            layer.slots[position].copy_(layer.kv)
            if i == last and not logits:
                return
            # softmax(q k^T / sqrt(d_head)) v over positions 0 .. position: [rows, heads, 1, d_head]
            y = F.scaled_dot_product_attention(layer.q, layer.keys[position], layer.values[position])
            x = x + layer.proj(y.view(rows, d))
            x = x + layer.down(F.gelu(layer.up(layer.ln2(x))))
        self._head(self._ln_f(x), out=self._logits)


MIN_SHRUNK_ROWS = 4
"""The smallest block a decode shrinks to. Below 4 rows the CPU BLAS multiplies by other kernels (a row's
product changed bytes at 1 to 3 rows of 32 and at none of 4 to 32, measured), so smaller blocks would only
make :func:`rows_keep_their_bytes` fail."""


def shrinking_sizes(row_block: int) -> tuple[int, ...]:
    """The block sizes a decode of ``row_block`` rows steps down through as its rows finish: halving (rounded
    up) while the half has at least :data:`MIN_SHRUNK_ROWS` rows, e.g. 20 -> (20, 10, 5), 16 -> (16, 8, 4)."""
    sizes = [row_block]
    while (half := -(-sizes[-1] // 2)) >= MIN_SHRUNK_ROWS and half < sizes[-1]:
        sizes.append(half)
    return tuple(sizes)


def rows_keep_their_bytes(decoders: Sequence[BlockDecoder], obs_dim: int, bos_id: int) -> bool:
    """Whether a row's logits are the same bytes in each of ``decoders`` (sizes descending, one parameter set)
    as in the first: started there by :meth:`BlockDecoder.prefill`, and moved there mid-decode by
    :meth:`BlockDecoder.take`.

    A shrinking block is only sound on kernels for which this holds: a row's arithmetic must not depend on
    how many rows share a call. That is a property of the kernels at these shapes (their blocking and code
    paths), not of the numbers multiplied, so one decode of fixed pseudo-random rows shows it: a product
    whose order of operations changed with the row count would round differently on them. The AR policy
    runs this once per intra-op thread count and decodes in its fixed block wherever it fails, so either way
    a row's bytes are those of the registered block.
    """
    big = decoders[0]
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((big.rows, obs_dim)).astype(np.float32)
    n_ids = big._weights.n_ids
    ids = rng.integers(0, n_ids, size=(3, big.rows), dtype=np.int64)
    reference = [big.prefill(obs, bos_id).copy()]
    reference += [big.step(ids[k]).copy() for k in range(len(ids))]
    for small in decoders[1:]:
        m = small.rows
        started = [small.prefill(obs[:m], bos_id).copy()] + [small.step(ids[k, :m]).copy() for k in range(2)]
        if any(a.tobytes() != b[:m].tobytes() for a, b in zip(started, reference, strict=False)):
            return False
        moved = np.arange(big.rows)[::-1][:m]  # the last rows, reversed: a take that reorders
        big.prefill(obs, bos_id)
        big.step(ids[0])
        small.take(big, moved)
        for k in (1, 2):
            if small.step(ids[k, moved]).tobytes() != reference[k + 1][moved].tobytes():
                return False
    return True


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


def gumbel_noise_on(mode: SamplingMode) -> bool:
    """Whether a decode adds Gumbel noise: kind ``temperature`` with ``mode.noise`` on.

    The one switch between sampling at T and its noise-off twin, which the draw-0 oracle runs against the
    greedy anchor (a broken switch makes that oracle fail).
    """
    return mode.kind == "temperature" and mode.noise


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

    @property
    def _decoder(self) -> BlockDecoder:
        """The decoder of the registered block."""
        return self._decoders[self.row_block]

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
        if mode.kind not in ("greedy", "temperature"):
            raise ValueError(f"the AR head samples with kind 'greedy' or 'temperature', got {mode.kind!r}")
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
        temperature = 1.0 if mode.kind == "greedy" else float(mode.temperature)  # type: ignore[arg-type]
        rows = _Rows(
            ids=np.zeros((self.row_block, n_coef), dtype=np.int64),
            logps=np.zeros((self.row_block, n_coef), dtype=np.float64),
            entropies=np.zeros((self.row_block, n_coef), dtype=np.float64),
            n_tokens=np.zeros(self.row_block, dtype=np.int64),
        )
        # Decoder row i holds block row live[i] (i < len(live)); the rows after those are padding.
        live = np.arange(n_rows)
        keys_now = np.zeros(size, dtype=np.uint64)  # a padded row's stream is drawn and never used
        keys_now[:n_rows] = [row_stream_key(k) for k in keys]
        remaining = np.zeros(size, dtype=np.int64)
        remaining[:n_rows] = n_coef
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
