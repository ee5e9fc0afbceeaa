"""Fixtures for the analysis tests: a small prereg."""

from __future__ import annotations

from typing import Any

import pytest

from .rollout_factory import default_prereg


@pytest.fixture
def prereg() -> dict[str, Any]:
    """A fresh two-cell prereg (AR cell c1, flow cell c3) with the registered default numbers."""
    return default_prereg()
