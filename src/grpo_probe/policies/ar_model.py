"""The AR head's network: a small pre-LN transformer decoder over FAST tokens, conditioned on the observation.

The observation (normalized with demo statistics) becomes ``n_prefix`` prefix embeddings; BOS follows,
then the action tokens. Training and the phase-2 recomputation run :class:`ARTransformer` on whole
sequences (teacher forcing); the decode loop runs the same weights one position at a time through
:class:`grpo_probe.policies.ar_decoder.BlockDecoder`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["ARTransformer"]


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
