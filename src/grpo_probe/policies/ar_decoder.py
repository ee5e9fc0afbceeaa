"""The AR network one position at a time, for a fixed block of rows with its own KV cache, and the
smaller blocks a decode moves its unfinished rows to.

Why a module of its own: the decode loop's cost is this network's, and what keeps a row's bytes
independent of the rows beside it (fixed shapes, row-wise calls, the check that shrinking a block
changes no row) lives here, apart from the sampler (:mod:`grpo_probe.policies.ar_head`) and from the
modules training runs (:mod:`grpo_probe.policies.ar_model`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from grpo_probe.policies.ar_model import ARTransformer

__all__ = ["MIN_SHRUNK_ROWS", "SHRINK_STEP", "BlockDecoder", "rows_keep_their_bytes", "shrinking_sizes"]


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


SHRINK_STEP = 4
"""A shrinking decode's blocks are multiples of four rows: under the numerics setting
(:mod:`grpo_probe.numerics`, MKL's compatible path) a row's product keeps its bytes at every multiple of
four from 8 to 32 rows and at no other count (measured against 32 rows: it changed at 1 to 7 rows and at
every count not a multiple of four)."""

MIN_SHRUNK_ROWS = 8
"""The smallest block a decode shrinks to. Below 8 rows MKL's compatible path multiplies by other kernels
(its AVX2 path, below 4), so smaller blocks would only make :func:`rows_keep_their_bytes` fail, and with it
every shrink of the decode."""


def shrinking_sizes(row_block: int) -> tuple[int, ...]:
    """The block sizes a decode of ``row_block`` rows steps down through as its rows finish: ``row_block``,
    then every multiple of :data:`SHRINK_STEP` below it down to :data:`MIN_SHRUNK_ROWS`, e.g.
    20 -> (20, 16, 12, 8), 9 -> (9, 8).

    Why steps of four rows and not halving (20 -> 10 -> 5, as before): a step of the network costs a fixed
    part (per-call overhead, streaming the weights) plus about 16 us per row on one core, and a move costs
    about one step (:meth:`BlockDecoder.take` copies the cache). On the registered arm's decodes the block
    stays at 20 until most rows are done and then runs a long tail for its slowest few rows, which halving
    ran at 5 (and at 10 before that) where 8 suffices. Finer steps (every row) paid more in moves
    than they saved, measured side by side. Each size is one more decoder (its own cache) and one more size
    :func:`rows_keep_their_bytes` checks.
    """
    step = SHRINK_STEP
    return (row_block, *range(step * ((row_block - 1) // step), MIN_SHRUNK_ROWS - 1, -step))


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
