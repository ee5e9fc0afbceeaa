"""Progress of a rollout: a tqdm bar on a terminal, plain log lines in a log file.

Why two forms: a researcher running ``grpo-probe rollout`` by hand wants a live bar with a rate and a
time left; a Snakemake or SLURM log wants a few complete lines (a bar's carriage returns turn a log
into one unreadable line). Nothing here touches stdout, and nothing here reaches an artifact.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from tqdm import tqdm

__all__ = ["RolloutProgress"]


class RolloutProgress:
    """Counts finished episodes of one shard (or one oracle path) and reports them on ``stream``.

    On a terminal: a tqdm bar (episodes done / total, episodes per second, time left). Otherwise: one
    line per completion chunk, at most one every ``min_interval_s`` seconds, and always one at the end.
    """

    def __init__(
        self,
        total: int,
        label: str,
        *,
        stream: TextIO | None = None,
        min_interval_s: float = 5.0,
        enabled: bool = True,
    ) -> None:
        self.total = total
        self.label = label
        self.done = 0
        self._stream = sys.stderr if stream is None else stream
        self._min_interval_s = min_interval_s
        self._enabled = enabled
        self._start = time.perf_counter()
        self._last_line = -float("inf")
        isatty = getattr(self._stream, "isatty", None)
        self._bar = (
            tqdm(total=total, desc=label, unit="ep", file=self._stream, dynamic_ncols=True)
            if enabled and callable(isatty) and isatty()
            else None
        )

    def update(self, n: int) -> None:
        """Record ``n`` more finished episodes."""
        self.done += n
        if not self._enabled:
            return
        if self._bar is not None:
            self._bar.update(n)
            return
        now = time.perf_counter()
        if self.done >= self.total or now - self._last_line >= self._min_interval_s:
            self._last_line = now
            self._write_line(now)

    def _write_line(self, now: float) -> None:
        elapsed = now - self._start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        left = (self.total - self.done) / rate if rate > 0 else float("nan")
        print(
            f"{self.label}: {self.done}/{self.total} episodes, {rate:.2f} episodes/s, "
            f"elapsed {elapsed:.1f} s, time left {left:.1f} s",
            file=self._stream,
            flush=True,
        )

    def close(self) -> None:
        """Close the bar (a log stream already got its final line from the last update)."""
        if self._bar is not None:
            self._bar.close()
