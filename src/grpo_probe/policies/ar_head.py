"""The AR head: a small transformer decoder over FAST tokens, conditioned on the observation.

The observation (normalized with demo statistics) becomes ``n_prefix`` prefix embeddings; BOS follows,
then the action tokens. Decoding keeps a KV cache per layer and walks all rows of a fixed-shape batch in
lockstep, so every row goes through the same tensor shapes alone or among others (rows of a padded
batch never mix: attention, softmax and the grammar mask are per row). The network runs on the
policy's device; masking, Gumbel noise and log-probs run on the CPU in float64.

Sampling (DESIGN.md, "The two heads"):

- the grammar mask admits only tokens whose coefficients keep the decoded count <= 300; a row ends when
  the count reaches exactly 300, where EOS is the only admissible token (forced, log-prob 0, so it is not
  recorded);
- greedy: argmax of the masked logits; the recorded log-prob and entropy are those of
  softmax(masked logits) (T = 1);
- temperature T: Gumbel-max, argmax(masked_logits / T + g) with g ~ Gumbel(0, 1), which samples exactly
  softmax(masked_logits / T) (Gumbel 1954; Maddison et al. 2014, arXiv:1411.0030v2, Sec. 2). ``g`` of each
  row and position comes from its own CPU generator keyed by (run_key, tag("ar_gumbel"), seed, replan,
  draw, position), so ids do not depend on device or batch composition.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from grpo_probe.keyed_rng import tag, torch_generator
from grpo_probe.policies.fast_tokenizer import FastTokenizer
from grpo_probe.policies.protocol import PolicyOutput, RowDiagnostics, RowKey, SamplingMode, check_obs_batch

__all__ = [
    "ROW_BLOCK",
    "ARPolicy",
    "ARTransformer",
    "grammar_mask_table",
    "gumbel_noise",
    "masked_step_distribution",
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

    def forward(
        self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None, start: int
    ) -> torch.Tensor:
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

    def forward(
        self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None, start: int
    ) -> torch.Tensor:
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

    def new_cache(self, batch: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        dh = self.d_model // self.n_heads
        shape = (batch, self.n_heads, self.max_len, dh)
        device = self.pos_emb.device
        return [(torch.zeros(shape, device=device), torch.zeros(shape, device=device)) for _ in self.blocks]

    def prefill(
        self, obs: torch.Tensor, bos_id: int, cache: list[tuple[torch.Tensor, torch.Tensor]]
    ) -> torch.Tensor:
        """Run prefix + BOS into the cache; returns logits [B, n_ids] for the first action token."""
        bos = self.tok_emb(torch.full((obs.shape[0], 1), bos_id, dtype=torch.long, device=obs.device))
        x = torch.cat([self._prefix(obs), bos], dim=1) + self.pos_emb[: self.n_prefix + 1]
        for block, layer_cache in zip(self.blocks, cache, strict=True):
            x = block(x, layer_cache, 0)
        return self.head(self.ln_f(x[:, -1]))

    def step(
        self, ids: torch.Tensor, position: int, cache: list[tuple[torch.Tensor, torch.Tensor]]
    ) -> torch.Tensor:
        """Feed one token per row at sequence ``position``; returns next-token logits [B, n_ids]."""
        x = self.tok_emb(ids[:, None]) + self.pos_emb[position : position + 1]
        for block, layer_cache in zip(self.blocks, cache, strict=True):
            x = block(x, layer_cache, position)
        return self.head(self.ln_f(x[:, -1]))


def grammar_mask_table(counts: np.ndarray, n_coefficients: int, eos_id: int) -> torch.Tensor:
    """bool [n_coefficients + 1, n_ids]: row r = ids admissible with r coefficients still to emit.

    A token is admissible iff it emits at least one coefficient and no more than remain; with none
    remaining only EOS is admissible.
    """
    counts_t = torch.as_tensor(np.asarray(counts), dtype=torch.long)
    remaining = torch.arange(n_coefficients + 1)[:, None]
    table = (counts_t[None, :] >= 1) & (counts_t[None, :] <= remaining)
    table[0, :] = False
    table[0, eos_id] = True
    return table


def masked_step_distribution(
    logits: torch.Tensor, admissible: torch.Tensor, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """log-probs and entropy of the sampling distribution softmax(masked_logits / T), per row (float64)."""
    masked = torch.where(
        admissible, logits.to(torch.float64), torch.tensor(float("-inf"), dtype=torch.float64)
    )
    logp = torch.log_softmax(masked / temperature, dim=-1)
    p_logp = torch.where(admissible, logp.exp() * logp, torch.zeros((), dtype=torch.float64))
    return logp, -p_logp.sum(dim=-1)


def gumbel_noise(key: RowKey, position: int, n_ids: int) -> torch.Tensor:
    """Standard Gumbel noise float64 [n_ids] for one row and position: g = -log(-log(U)), U ~ U[0, 1)."""
    gen = torch_generator(key.run_key, _AR_GUMBEL, key.seed, key.replan, key.draw, position)
    u = torch.rand(n_ids, generator=gen, dtype=torch.float64)
    return -torch.log(-torch.log(u))  # u = 0 gives -inf: that id is simply never the argmax


@dataclass
class _RowState:
    ids: list[int]
    logps: list[float]
    entropies: list[float]
    remaining: int


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
        self._counts = tokenizer.coefficient_counts
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
            for i, row in enumerate(rows):
                chunk = self.tokenizer.decode(row.ids)
                actions[start + i] = np.clip(chunk, -1.0, 1.0).astype(np.float32)
                logps = np.asarray(row.logps, dtype=np.float64)
                diagnostics.append(
                    RowDiagnostics(
                        logprob=float(logps.sum()),
                        token_ids=np.asarray(row.ids, dtype=np.int32),
                        token_logprobs=logps,
                        entropy=np.asarray(row.entropies, dtype=np.float64),
                    )
                )
        return PolicyOutput(actions=actions, diagnostics=diagnostics)

    @torch.no_grad()
    def _generate_block(self, obs: np.ndarray, keys: list[RowKey], mode: SamplingMode) -> list[_RowState]:
        n_rows = len(keys)
        padded = np.zeros((ROW_BLOCK, self.obs_dim), dtype=np.float32)
        padded[:n_rows] = (obs - self.obs_mean) / self.obs_std
        temperature = 1.0 if mode.kind == "greedy" else float(mode.temperature)  # type: ignore[arg-type]
        n_ids = self.tokenizer.n_ids
        cache = self.model.new_cache(ROW_BLOCK)
        logits = self.model.prefill(
            torch.from_numpy(padded).to(self.device), self.tokenizer.bos_id, cache
        ).cpu()
        rows = [_RowState([], [], [], self.tokenizer.n_coefficients) for _ in range(n_rows)]
        position = self.model.n_prefix + 1
        for step in range(self.tokenizer.n_coefficients):
            live = [r for r in range(n_rows) if rows[r].remaining > 0]
            if not live:
                break
            remaining = torch.tensor([rows[r].remaining if r < n_rows else 0 for r in range(ROW_BLOCK)])
            logp, entropy = masked_step_distribution(logits, self._mask_table[remaining], temperature)
            if mode.kind == "greedy":
                scores = logp
            else:
                noise = torch.zeros((ROW_BLOCK, n_ids), dtype=torch.float64)
                for r in live:
                    noise[r] = gumbel_noise(keys[r], step, n_ids)
                scores = logp + noise
            choice = torch.argmax(scores, dim=-1)
            next_ids = torch.full((ROW_BLOCK,), self.tokenizer.eos_id, dtype=torch.long)
            for r in live:
                token = int(choice[r])
                rows[r].ids.append(token)
                rows[r].logps.append(float(logp[r, token]))
                rows[r].entropies.append(float(entropy[r]))
                rows[r].remaining -= int(self._counts[token])
                next_ids[r] = token
            if all(rows[r].remaining == 0 for r in range(n_rows)):
                break
            logits = self.model.step(next_ids.to(self.device), position, cache).cpu()
            position += 1
        return rows
