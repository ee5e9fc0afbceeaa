"""FAST action tokens: quantile normalization, DCT over time, scale and round, then BPE over coefficients.

Follows FAST (Pertsch et al. 2025, arXiv:2501.09747v1, Sec. 4 and Alg. 1) and its reference processor:

1. per action dimension, map the 1st..99th percentile of the demo chunks to [-1, 1] (no clipping, so
   values outside the range stay invertible);
2. DCT-II with ``norm="ortho"`` over time (axis 0 of a [50, 6] chunk);
3. multiply by ``scale`` (10) and round to integers;
4. flatten row-major over [frequency, dim]: low frequencies first, the 6 dims interleaved;
5. map each integer coefficient to one unicode character and train a BPE with ``vocab_size`` (1024)
   symbols on the demo chunks (HF ``tokenizers``); BOS and EOS follow: 1026 ids in total.

One deliberate difference from the reference processor: it trains a byte-level BPE, whose
pre-tokenizer splits characters above U+007F into several bytes. We train the BPE directly on the
coefficient characters, so every token stands for a whole number of coefficients; that is what lets the
AR head's grammar mask count coefficients exactly (``coefficient_counts``). Decoding any id sequence pads
with zero coefficients or truncates to exactly 300 and inverts the chain, so it always returns [50, 6].
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from tokenizers import Tokenizer, models, trainers

__all__ = ["FastTokenizer"]

_FORMAT = "grpo-probe-fast-v1"
_CHAR_OFFSET = 0x100
"""Coefficient c maps to chr(c - min_coef + 0x100): printable, never whitespace or a control char."""


@dataclass
class FastTokenizer:
    """A fitted FAST tokenizer. Build with :meth:`fit` or :meth:`from_json`, never by hand."""

    q_low: np.ndarray
    q_high: np.ndarray
    min_coef: int
    max_coef: int
    bpe_json: str
    scale: float = 10.0
    vocab_size: int = 1024
    chunk_length: int = 50
    action_dims: int = 6
    _bpe: Tokenizer = field(init=False, repr=False)
    _token_coefs: list[np.ndarray] = field(init=False, repr=False)
    _flat_coefs: np.ndarray = field(init=False, repr=False)
    _starts: np.ndarray = field(init=False, repr=False)
    _lengths: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.q_low = np.asarray(self.q_low, dtype=np.float64)
        self.q_high = np.asarray(self.q_high, dtype=np.float64)
        self._bpe = Tokenizer.from_str(self.bpe_json)
        size = self._bpe.get_vocab_size()
        if size > self.vocab_size:
            raise ValueError(
                f"FAST tokenizer: BPE has {size} symbols, more than vocab_size {self.vocab_size}"
            )
        self._token_coefs = []
        for i in range(self.vocab_size):
            token = self._bpe.id_to_token(i) if i < size else None
            coefs = [] if token is None else [ord(ch) - _CHAR_OFFSET + self.min_coef for ch in token]
            self._token_coefs.append(np.asarray(coefs, dtype=np.int64))
        # Every id's coefficients in one array (BOS and EOS: none), so a decode gathers them in a few
        # array calls instead of a Python loop over its tokens (it runs for every row of every AR chunk).
        self._lengths = np.zeros(self.n_ids, dtype=np.int64)
        self._lengths[: self.vocab_size] = [len(c) for c in self._token_coefs]
        self._starts = np.zeros(self.n_ids, dtype=np.int64)
        self._starts[1 : self.vocab_size] = np.cumsum(self._lengths[: self.vocab_size - 1])
        self._flat_coefs = np.concatenate([*self._token_coefs, np.zeros(0, dtype=np.int64)])

    # ----------------------------------------------------------------------------------------- ids
    @property
    def n_coefficients(self) -> int:
        """Coefficients per chunk (300 = 50 frequencies x 6 dims)."""
        return self.chunk_length * self.action_dims

    @property
    def bos_id(self) -> int:
        return self.vocab_size

    @property
    def eos_id(self) -> int:
        return self.vocab_size + 1

    @property
    def n_ids(self) -> int:
        """BPE symbols plus BOS and EOS (1026 with the default vocabulary)."""
        return self.vocab_size + 2

    @property
    def coefficient_counts(self) -> np.ndarray:
        """int64 [n_ids]: coefficients each id decodes to (0 for BOS, EOS and unused BPE slots)."""
        counts = np.zeros(self.n_ids, dtype=np.int64)
        counts[: self.vocab_size] = [len(c) for c in self._token_coefs]
        return counts

    # ------------------------------------------------------------------------------------- fitting
    @classmethod
    def fit(
        cls,
        chunks: np.ndarray,
        *,
        scale: float = 10.0,
        vocab_size: int = 1024,
    ) -> FastTokenizer:
        """Fit normalization and BPE on demo chunks float [N, T, D]; deterministic in its inputs."""
        chunks = np.asarray(chunks, dtype=np.float64)
        if chunks.ndim != 3 or chunks.shape[0] == 0:
            raise ValueError(f"FAST fit: chunks must be [N, T, D] with N > 0, got shape {chunks.shape}")
        if not np.all(np.isfinite(chunks)):
            raise ValueError("FAST fit: chunks contain non-finite values")
        _, length, dims = chunks.shape
        flat = chunks.reshape(-1, dims)
        q_low = np.percentile(flat, 1.0, axis=0)
        q_high = np.percentile(flat, 99.0, axis=0)
        # A dimension that never moves would divide by ~0; centre it on 0 with unit half-range instead.
        constant = (q_high - q_low) < 1e-6
        centre = 0.5 * (q_low + q_high)
        q_low = np.where(constant, centre - 1.0, q_low)
        q_high = np.where(constant, centre + 1.0, q_high)
        coefs = _quantized_dct(_normalize(chunks, q_low, q_high), scale)
        min_coef, max_coef = int(coefs.min()), int(coefs.max())
        alphabet_size = max_coef - min_coef + 1
        if alphabet_size > vocab_size:
            raise ValueError(
                f"FAST fit: vocab_size {vocab_size} is smaller than the coefficient range {alphabet_size}"
            )
        alphabet = [chr(_CHAR_OFFSET + i) for i in range(alphabet_size)]
        strings = [
            "".join(chr(_CHAR_OFFSET + c - min_coef) for c in row) for row in coefs.reshape(len(coefs), -1)
        ]
        bpe = Tokenizer(models.BPE())
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=2,
            show_progress=False,
            special_tokens=[],
            initial_alphabet=alphabet,
            limit_alphabet=alphabet_size,
            max_token_length=10000,
        )
        bpe.train_from_iterator(strings, trainer=trainer)
        return cls(
            q_low=q_low,
            q_high=q_high,
            min_coef=min_coef,
            max_coef=max_coef,
            bpe_json=bpe.to_str(),
            scale=float(scale),
            vocab_size=int(vocab_size),
            chunk_length=int(length),
            action_dims=int(dims),
        )

    # --------------------------------------------------------------------------- encode and decode
    def encode(self, chunk: np.ndarray) -> list[int]:
        """One chunk [T, D] -> BPE ids (no BOS/EOS); coefficients beyond the fitted range are clipped."""
        chunk = np.asarray(chunk, dtype=np.float64)
        if chunk.shape != (self.chunk_length, self.action_dims):
            expected = (self.chunk_length, self.action_dims)
            raise ValueError(f"FAST encode: chunk must have shape {expected}, got {chunk.shape}")
        coefs = _quantized_dct(_normalize(chunk[None], self.q_low, self.q_high), self.scale)[0].ravel()
        coefs = np.clip(coefs, self.min_coef, self.max_coef)
        text = "".join(chr(_CHAR_OFFSET + int(c) - self.min_coef) for c in coefs)
        return list(self._bpe.encode(text).ids)

    def encode_batch(self, chunks: np.ndarray) -> list[list[int]]:
        return [self.encode(c) for c in np.asarray(chunks)]

    def decode_coefficients(self, ids: Iterable[int]) -> np.ndarray:
        """Ids -> int64 [300] quantized coefficients: BOS skipped, stop at EOS, zero-pad or truncate.

        An id outside ``[0, n_ids)`` before the first EOS is an error; ids after it are not read.
        """
        if isinstance(ids, np.ndarray) and ids.dtype.kind == "i" and ids.ndim == 1:
            arr = ids.astype(np.int64, copy=False)
        else:
            arr = np.fromiter((int(raw) for raw in ids), dtype=np.int64)
        stops = np.flatnonzero((arr < 0) | (arr >= self.n_ids) | (arr == self.eos_id))
        if len(stops):
            first = int(stops[0])
            if arr[first] != self.eos_id:
                raise ValueError(f"FAST decode: token id {arr[first]} is outside [0, {self.n_ids})")
            arr = arr[:first]
        lengths = self._lengths[arr]
        total = int(lengths.sum())
        n = min(total, self.n_coefficients)
        # entry k of the concatenation is coefficient k - (its token's offset) of that token
        offsets = np.cumsum(lengths) - lengths
        index = np.repeat(self._starts[arr] - offsets, lengths)[:n] + np.arange(n)
        out = np.zeros(self.n_coefficients, dtype=np.int64)
        out[:n] = self._flat_coefs[index]
        return out

    def decode(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Any id sequence -> float64 [T, D] chunk in action units (not clipped to the action box)."""
        coefs = self.decode_coefficients(ids).reshape(self.chunk_length, self.action_dims)
        from scipy.fft import idct  # imported where used: a flow-only job never loads scipy.fft

        normalized = idct(coefs.astype(np.float64) / self.scale, type=2, axis=0, norm="ortho")
        return _denormalize(normalized, self.q_low, self.q_high)

    # ------------------------------------------------------------------------------ serialization
    def to_json(self) -> str:
        """Canonical JSON (sorted keys), stored verbatim inside a checkpoint."""
        return json.dumps(
            {
                "format": _FORMAT,
                "q_low": [float(v) for v in self.q_low],
                "q_high": [float(v) for v in self.q_high],
                "min_coef": self.min_coef,
                "max_coef": self.max_coef,
                "scale": self.scale,
                "vocab_size": self.vocab_size,
                "chunk_length": self.chunk_length,
                "action_dims": self.action_dims,
                "bpe": self.bpe_json,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str, where: str = "tokenizer") -> FastTokenizer:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: FAST tokenizer JSON does not parse: {exc}") from exc
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise ValueError(f"{where}: not a FAST tokenizer (format must be {_FORMAT!r})")
        fields = (
            "q_low",
            "q_high",
            "min_coef",
            "max_coef",
            "scale",
            "vocab_size",
            "chunk_length",
            "action_dims",
        )
        missing = [k for k in (*fields, "bpe") if k not in data]
        if missing:
            raise ValueError(f"{where}: FAST tokenizer JSON lacks {', '.join(missing)}")
        try:
            return cls(bpe_json=data["bpe"], **{k: data[k] for k in fields})
        except Exception as exc:  # tokenizers raises its own exception type on a bad BPE string
            raise ValueError(f"{where}: FAST tokenizer JSON is invalid: {exc}") from exc

    def mean_tokens_per_chunk(self, chunks: np.ndarray) -> float:
        return float(np.mean([len(ids) for ids in self.encode_batch(chunks)]))

    def round_trip_error(self, chunks: np.ndarray) -> tuple[float, float]:
        """(RMS, max) absolute error of decode(encode(chunk)) over chunks, in action units."""
        chunks = np.asarray(chunks, dtype=np.float64)
        err = np.stack([self.decode(self.encode(c)) for c in chunks]) - chunks
        return float(np.sqrt(np.mean(err**2))), float(np.max(np.abs(err)))


def _normalize(x: np.ndarray, q_low: np.ndarray, q_high: np.ndarray) -> np.ndarray:
    return 2.0 * (x - q_low) / (q_high - q_low) - 1.0


def _denormalize(y: np.ndarray, q_low: np.ndarray, q_high: np.ndarray) -> np.ndarray:
    return (y + 1.0) * 0.5 * (q_high - q_low) + q_low


def _quantized_dct(normalized: np.ndarray, scale: float) -> np.ndarray:
    """[N, T, D] -> int64 [N, T, D]: round(scale * DCT-II-ortho over time)."""
    from scipy.fft import dct  # imported where used: a flow-only job never loads scipy.fft

    return np.rint(dct(normalized, type=2, axis=1, norm="ortho") * scale).astype(np.int64)
