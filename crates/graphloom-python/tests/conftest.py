"""Shared fixtures: a fresh SQLite file, or a fresh PostgreSQL database, per test."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

PG_URL_ENV = "GRAPHLOOM_PG_URL"


@pytest.fixture
def db_path(tmp_path):
    return str(tmp_path / "checkpoints.db")


def server_url() -> str:
    """The PostgreSQL server of the run (scripts/test.sh starts one and exports it)."""
    url = os.environ.get(PG_URL_ENV)
    if not url:
        pytest.fail(
            f"the PostgreSQL tests need a server: export {PG_URL_ENV}=postgres://USER@HOST:PORT/postgres "
            "(a user allowed to create databases), or run bash scripts/test.sh, which starts one"
        )
    return url


@contextmanager
def fresh_database() -> Iterator[str]:
    """A database of its own on the run's server, dropped afterwards: its URL."""
    admin = server_url()
    name = f"graphloom_py_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(admin)
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_url() -> Iterator[str]:
    with fresh_database() as url:
        yield url
