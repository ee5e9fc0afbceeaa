"""The AR head: a small transformer decoder over FAST tokens, conditioned on the observation.

The observation (normalized with demo statistics) becomes ``n_prefix`` prefix embeddings; BOS follows,
then the action tokens. Decoding keeps a KV cache per layer and walks all rows of a fixed-shape batch in
lockstep, so every row goes through the same tensor shapes alone or among others (rows of a padded
batch never mix: attention, softmax and the grammar mask are per row). The network runs on the
policy's device; masking, Gumbel noise and log-probs run in numpy in float64, for all rows of the block
at once (the grammar mask is a precomputed table, the per-row bookkeeping lives in arrays).

Sampling (DESIGN.md, "The two heads"):

- the grammar mask admits only tokens whose coefficients keep the decoded count <= 300; a row ends when
  the count reaches exactly 300, where EOS is the only admissible token (forced, log-prob 0, so it is not
  recorded);
- greedy: argmax of the masked logits; the recorded log-prob and entropy are those of
  softmax(masked logits) (T = 1);
- temperature T: Gumbel-max, argmax(masked_logits / T + g) with g ~ Gumbel(0, 1), which samples exactly
  softmax(masked_logits / T) (Gumbel 1954; Maddison et al. 2014, arXiv:1411.0030v2, Sec. 2). ``g`` of each
  row and position comes from the row's own counter-based stream keyed by (run_key, tag("ar_gumbel"),
  seed, replan, draw) at counter (position, id) (:func:`grpo_probe.keyed_rng.counter_uniforms`), so ids
  do not depend on device or batch composition, and the noise of all rows of a step is one numpy call;
- temperature with ``SamplingMode.noise`` off: the same code without ``g``, argmax(masked_logits / T),
  which picks greedy's ids (the draw-0 oracle's check of the sampling path).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from grpo_probe.keyed_rng import counter_uniforms, stream_key, tag
from grpo_probe.policies.fast_tokenizer import FastTokenizer
from grpo_probe.policies.protocol import PolicyOutput, RowDiagnostics, RowKey, SamplingMode, check_obs_batch

__all__ = [
    "ROW_BLOCK",
    "ARPolicy",
    "ARTransformer",
    "DecodeWeights",
    "chosen_logprob_and_entropy",
    "grammar_mask_table",
    "gumbel_noise",
    "gumbel_noise_on",
    "gumbel_rows",
    "masked_step_distribution",
    "row_stream_key",
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

    def new_cache(self, batch: int) -> list[torch.Tensor]:
        """Per layer, keys and values [2, batch, n_heads, max_len, d_head] (one write per decode step)."""
        dh = self.d_model // self.n_heads
        shape = (2, batch, self.n_heads, self.max_len, dh)
        return [torch.zeros(shape, device=self.pos_emb.device) for _ in self.blocks]

    def prefill(self, obs: torch.Tensor, bos_id: int, cache: list[torch.Tensor]) -> torch.Tensor:
        """Run prefix + BOS into the cache; returns logits [B, n_ids] for the first action token."""
        bos = self.tok_emb(torch.full((obs.shape[0], 1), bos_id, dtype=torch.long, device=obs.device))
        x = torch.cat([self._prefix(obs), bos], dim=1) + self.pos_emb[: self.n_prefix + 1]
        for block, layer_cache in zip(self.blocks, cache, strict=True):
            x = block(x, layer_cache, 0)
        return self.head(self.ln_f(x[:, -1]))

    def decode_weights(self) -> DecodeWeights:
        """The parameters laid out for :meth:`step`, as views: in-place updates show through; take it again
        after replacing a parameter or moving the model to another device."""

        def t(linear: nn.Linear) -> tuple[torch.Tensor, torch.Tensor]:
            return linear.weight.detach().t(), linear.bias.detach()

        def ln(norm: nn.LayerNorm) -> tuple[torch.Tensor, torch.Tensor, float]:
            return norm.weight.detach(), norm.bias.detach(), norm.eps

        layers = tuple(
            _LayerWeights(ln(b.ln1), *t(b.attn.qkv), *t(b.attn.proj), ln(b.ln2), *t(b.mlp[0]), *t(b.mlp[2]))
            for b in self.blocks
        )
        return DecodeWeights(
            self.tok_emb.weight.detach(), self.pos_emb.detach(), layers, ln(self.ln_f), *t(self.head)
        )

    def step(
        self,
        ids: torch.Tensor,
        position: int,
        cache: list[torch.Tensor],
        weights: DecodeWeights | None = None,
    ) -> torch.Tensor:
        """Feed one token per row at sequence ``position``; returns next-token logits [B, n_ids].

        The decode loop's hot path: the modules' arithmetic at one new position, written as plain tensor
        ops on ``weights`` (:meth:`decode_weights`; each linear layer is one ``addmm`` on the transposed
        view of its weight, as ``nn.Linear`` computes it), without module calls or a sequence axis. With
        one query at the newest position the causal mask admits every cached key, so it is left out. The
        logits are bit for bit those of running the blocks on that one position.
        """
        w = self.decode_weights() if weights is None else weights
        b, d = ids.shape[0], self.d_model
        h, dh = self.n_heads, d // self.n_heads
        x = F.embedding(ids, w.tok_emb) + w.pos_emb[position]  # [b, d]
        for layer, kv_cache in zip(w.layers, cache, strict=True):
            qkv = torch.addmm(layer.qkv_b, F.layer_norm(x, (d,), *layer.ln1), layer.qkv_t)
            q = qkv[:, :d].view(b, h, 1, dh)
            kv_cache[:, :, :, position] = qkv[:, d:].view(b, 2, h, dh).transpose(0, 1)
            scores = (q @ kv_cache[0, :, :, : position + 1].transpose(-1, -2)) / math.sqrt(dh)
            y = torch.softmax(scores, dim=-1) @ kv_cache[1, :, :, : position + 1]  # [b, h, 1, dh]
            x = x + torch.addmm(layer.proj_b, y.view(b, d), layer.proj_t)
            up = torch.addmm(layer.up_b, F.layer_norm(x, (d,), *layer.ln2), layer.up_t)
            x = x + torch.addmm(layer.down_b, F.gelu(up), layer.down_t)
        return torch.addmm(w.head_b, F.layer_norm(x, (d,), *w.ln_f), w.head_t)


@dataclass(frozen=True)
class _LayerWeights:
    ln1: tuple[torch.Tensor, torch.Tensor, float]
    qkv_t: torch.Tensor
    qkv_b: torch.Tensor
    proj_t: torch.Tensor
    proj_b: torch.Tensor
    ln2: tuple[torch.Tensor, torch.Tensor, float]
    up_t: torch.Tensor
    up_b: torch.Tensor
    down_t: torch.Tensor
    down_b: torch.Tensor


@dataclass(frozen=True)
class DecodeWeights:
    """:class:`ARTransformer` parameters for :meth:`ARTransformer.step`: linear weights as transposed views
    ([in, out]; a contiguous copy would change the summation order of some matrix products), layer norms
    as (weight, bias, eps)."""

    tok_emb: torch.Tensor
    pos_emb: torch.Tensor
    layers: tuple[_LayerWeights, ...]
    ln_f: tuple[torch.Tensor, torch.Tensor, float]
    head_t: torch.Tensor
    head_b: torch.Tensor


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


def chosen_logprob_and_entropy(tempered: np.ndarray, choice: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: log p(choice) and H = -sum_i p_i log p_i under p = softmax(tempered) (float64).

    With s = tempered - max and z = sum_i exp(s_i): log p_i = s_i - log z and H = log z - sum_i p_i s_i.
    Ids at -inf have p_i = 0 and add nothing to H.
    """
    shifted = tempered - tempered.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    z = e.sum(axis=-1)
    log_z = np.log(z)
    finite = np.where(np.isneginf(shifted), 0.0, shifted)
    chosen = shifted[np.arange(len(choice)), choice] - log_z
    return chosen, log_z - (e * finite).sum(axis=-1) / z


def masked_step_distribution(
    logits: np.ndarray, admissible: np.ndarray, temperature: float
) -> tuple[np.ndarray, np.ndarray]:
    """log-probs [B, n_ids] and entropy [B] of the sampling distribution softmax(masked_logits / T).

    The reference the decode loop's :func:`chosen_logprob_and_entropy` is tested against.
    """
    tempered = tempered_logits(np.asarray(logits), np.asarray(admissible), temperature)
    shifted = tempered - tempered.max(axis=-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    p_logp = np.exp(logp) * np.where(np.isneginf(logp), 0.0, logp)  # p log p -> 0 as p -> 0
    return logp, -p_logp.sum(axis=-1)


def gumbel_rows(stream_keys: np.ndarray, position: int, n_ids: int) -> np.ndarray:
    """Standard Gumbel noise float64 [len(stream_keys), n_ids], g = -log(-log(U)), one row per stream.

    ``stream_keys[r]`` is :func:`row_stream_key` of a row; entry ``[r, i]`` is counter
    ``(position, i)`` of that row's counter-based stream (:func:`grpo_probe.keyed_rng.counter_uniforms`),
    so a row's noise is the same bytes whichever rows are drawn with it, in one vectorised call.
    """
    return -np.log(-np.log(counter_uniforms(stream_keys, position, n_ids)))


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
    """int64 [ROW_BLOCK, n_coefficients]: token ids, the first ``n_tokens[r]`` of row r are valid."""
    logps: np.ndarray
    """float64 [ROW_BLOCK, n_coefficients]: log-prob of each sampled id under the sampling distribution."""
    entropies: np.ndarray
    """float64 [ROW_BLOCK, n_coefficients]: entropy of each step's sampling distribution."""
    n_tokens: np.ndarray
    """int64 [ROW_BLOCK]."""


class ARPolicy:
    """FAST-token AR policy; implements :class:`grpo_probe.policies.protocol.Policy`."""

    head = "ar"

    def __init__(
        self,
        model: ARTransformer,
        tokenizer: FastTokenizer,
        obs_mean: np.ndarray,
        obs_std: np.ndarray,
        device: str = "cpu",
    ) -> None:
        self.device = torch.device(device)
        self.model = model.eval().to(self.device)
        self.tokenizer = tokenizer
        self.obs_mean = np.asarray(obs_mean, dtype=np.float32)
        self.obs_std = np.asarray(obs_std, dtype=np.float32)
        self.obs_dim = int(self.obs_mean.shape[0])
        self._counts = np.asarray(tokenizer.coefficient_counts, dtype=np.int64)
        self._weights = self.model.decode_weights()
        self._mask_table = grammar_mask_table(self._counts, tokenizer.n_coefficients, tokenizer.eos_id)

    def act(self, obs: np.ndarray, keys: Sequence[RowKey], mode: SamplingMode) -> PolicyOutput:
        if mode.kind not in ("greedy", "temperature"):
            raise ValueError(f"the AR head samples with kind 'greedy' or 'temperature', got {mode.kind!r}")
        obs = check_obs_batch(obs, keys, self.obs_dim)
        actions = np.zeros(
            (len(keys), self.tokenizer.chunk_length, self.tokenizer.action_dims), dtype=np.float32
        )
        diagnostics: list[RowDiagnostics] = []
        for start in range(0, len(keys), ROW_BLOCK):
            block_keys = list(keys[start : start + ROW_BLOCK])
            rows = self._generate_block(obs[start : start + ROW_BLOCK], block_keys, mode)
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
        """Decode up to ROW_BLOCK rows in lockstep; padded rows start finished and only ever take EOS.

        Each step, for every row at once: mask = table[remaining]; tempered = masked_logits / T;
        id = argmax(tempered + g) with g the row's keyed Gumbel noise at this position (temperature, noise
        on) or argmax(tempered) (greedy, T = 1; or temperature with ``mode.noise`` off, which picks the
        same ids as greedy because dividing by T > 0 keeps the order of the logits); record log p(id) and
        the entropy of softmax(tempered). A row stops when its coefficients reach exactly 300.
        """
        n_rows = len(keys)
        n_coef = self.tokenizer.n_coefficients
        padded = np.zeros((ROW_BLOCK, self.obs_dim), dtype=np.float32)
        padded[:n_rows] = (obs - self.obs_mean) / self.obs_std
        temperature = 1.0 if mode.kind == "greedy" else float(mode.temperature)  # type: ignore[arg-type]
        n_ids = self.tokenizer.n_ids
        stream_keys = None
        if gumbel_noise_on(mode):
            stream_keys = np.zeros(ROW_BLOCK, dtype=np.uint64)  # padded rows are never live
            stream_keys[:n_rows] = [row_stream_key(k) for k in keys]
        rows = _Rows(
            ids=np.zeros((ROW_BLOCK, n_coef), dtype=np.int64),
            logps=np.zeros((ROW_BLOCK, n_coef), dtype=np.float64),
            entropies=np.zeros((ROW_BLOCK, n_coef), dtype=np.float64),
            n_tokens=np.zeros(ROW_BLOCK, dtype=np.int64),
        )
        remaining = np.zeros(ROW_BLOCK, dtype=np.int64)
        remaining[:n_rows] = n_coef
        cache = self.model.new_cache(ROW_BLOCK)
        logits = self.model.prefill(torch.from_numpy(padded).to(self.device), self.tokenizer.bos_id, cache)
        position = self.model.n_prefix + 1
        for step in range(n_coef):
            live = remaining > 0
            if not live.any():
                break
            tempered = tempered_logits(logits.cpu().numpy(), self._mask_table[remaining], temperature)
            if stream_keys is None:
                choice = tempered.argmax(axis=-1)
            elif live.all():
                choice = (tempered + gumbel_rows(stream_keys, step, n_ids)).argmax(axis=-1)
            else:  # noise for the live rows only (finished and padded rows can only take EOS)
                scores = tempered.copy()
                scores[live] += gumbel_rows(stream_keys[live], step, n_ids)
                choice = scores.argmax(axis=-1)
            logp, entropy = chosen_logprob_and_entropy(tempered, choice)
            # Every row writes column `step`; a finished row's entries lie past its n_tokens and are never
            # read. A finished row chooses EOS (the only admissible id), which emits no coefficient.
            rows.ids[:, step] = choice
            rows.logps[:, step] = logp
            rows.entropies[:, step] = entropy
            rows.n_tokens += live
            remaining -= self._counts[choice]
            if not remaining.any():
                break
            logits = self.model.step(torch.from_numpy(choice).to(self.device), position, cache, self._weights)
            position += 1
        return rows
