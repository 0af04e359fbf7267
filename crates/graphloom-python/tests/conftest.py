"""Shared fixtures: a fresh database file per test."""

from __future__ import annotations

import pytest


@pytest.fixture
def db_path(tmp_path):
    return str(tmp_path / "checkpoints.db")
