"""Fixtures for the analysis tests: a small prereg and its identity."""

from __future__ import annotations

from typing import Any

import pytest

from .rollout_factory import default_prereg


@pytest.fixture
def prereg() -> dict[str, Any]:
    """A fresh two-cell prereg (AR cell c1, flow cell c3) with the registered default numbers."""
    return default_prereg()


@pytest.fixture
def prereg_info() -> dict[str, str]:
    """Name, hash and lock date as the caller passes them."""
    return {
        "name": "test_probe",
        "sha256": "ab" * 32,
        "lock_date": "2026-08-12",
        "path": "prereg/test_probe.yaml",
    }
