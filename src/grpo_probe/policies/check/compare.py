"""Row-by-row byte comparison of two ``act`` calls, naming the first field, row and index that differ.

Why bytes: the probe's oracles compare rollouts bit for bit, so the check holds a policy to the same
standard and says where two calls parted, with both values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from grpo_probe.policies.check.calls import Call

__all__ = ["same_rows", "usable"]

_DIAGNOSTIC_FIELDS = ("logprob", "token_ids", "token_logprobs", "entropy", "step_logprobs")


def _row_fields(call: Call, i: int, fields: Sequence[str]) -> dict[str, Any]:
    """Row ``i`` of a call: its actions and diagnostics fields, as values to compare bytewise."""
    out: dict[str, Any] = {}
    for name in fields:
        if name == "actions":
            out[name] = np.asarray(call.actions)[i]
        else:
            out[name] = getattr(call.diagnostics[i], name, None)
    return out


def _as_array(value: Any) -> np.ndarray | None:
    """A field as a contiguous array (a scalar as float64 [1]), so two rows compare by their bytes."""
    if value is None:
        return None
    if isinstance(value, (float, int, np.floating, np.integer)):
        return np.asarray([value], dtype=np.float64)
    return np.ascontiguousarray(np.asarray(value))


def _difference(a: dict[str, Any], b: dict[str, Any], names: tuple[str, str]) -> str | None:
    """The first field in which two rows differ, with where and both values; None when equal bytewise."""
    for field_name in a:
        x, y = _as_array(a[field_name]), _as_array(b[field_name])
        if x is None and y is None:
            continue
        if x is None or y is None:
            return f"{field_name} is {'None' if x is None else 'set'} in {names[0]}, not in {names[1]}"
        if x.dtype != y.dtype or x.shape != y.shape:
            return (
                f"{field_name} is {x.dtype} {list(x.shape)} in {names[0]}, {y.dtype} {list(y.shape)} in "
                f"{names[1]}"
            )
        if x.tobytes() != y.tobytes():
            flat = np.flatnonzero(x.ravel() != y.ravel())
            at = int(flat[0]) if flat.size else 0
            index = [int(k) for k in np.unravel_index(at, x.shape)] if x.shape and x.size > 1 else []
            where = f"{index}" if index else ""
            return (
                f"{field_name}{where} is {x.ravel()[at].item()!r} in {names[0]}, {y.ravel()[at].item()!r} "
                f"in {names[1]}"
            )
    return None


def usable(call: Call) -> bool:
    """Whether a call returned one action row and one diagnostics record per row it was given."""
    n = len(call.rows)
    actions, diagnostics = call.actions, call.diagnostics
    return (
        call.error is None
        and isinstance(actions, np.ndarray)
        and actions.ndim >= 1
        and actions.shape[0] == n
        and isinstance(diagnostics, Sequence)
        and len(diagnostics) == n
    )


_ALL_FIELDS = ("actions", *_DIAGNOSTIC_FIELDS)


def same_rows(
    first: Call, second: Call, names: tuple[str, str], fields: Sequence[str] = _ALL_FIELDS
) -> str | None:
    """The first difference between the rows two calls share (by row index), naming the row."""
    if not usable(second):
        what = f"raised {second.error!r}" if second.error is not None else "returned rows of another count"
        return f"{names[1]} {what}"
    where = {r: i for i, r in enumerate(second.rows)}
    for i, r in enumerate(first.rows):
        if r in where:
            diff = _difference(_row_fields(first, i, fields), _row_fields(second, where[r], fields), names)
            if diff is not None:
                return f"row {r}: {diff}"
    return None
