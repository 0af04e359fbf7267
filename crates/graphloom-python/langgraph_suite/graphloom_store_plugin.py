"""A pytest plugin that runs LangGraph's own store tests on graphloom's stores.

The tests of ``langgraph-checkpoint-sqlite`` and ``langgraph-checkpoint-postgres`` (their
source packages carry them) import ``SqliteStore``, ``AsyncSqliteStore``, ``PostgresStore``
and ``AsyncPostgresStore`` from ``langgraph.store.sqlite`` / ``langgraph.store.postgres``.
Loaded with ``-p``, before the test modules are imported, this plugin puts graphloom's
classes under those names and refuses to run if a test module would still get LangGraph's.
With GRAPHLOOM_PG_URL set, the PostgreSQL tests create their databases on that server
instead of LangGraph's container address.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import langgraph.store.postgres as lg_postgres
import langgraph.store.postgres.aio as lg_postgres_aio
import langgraph.store.postgres.base as lg_postgres_base
import langgraph.store.sqlite as lg_sqlite
import langgraph.store.sqlite.aio as lg_sqlite_aio
import langgraph.store.sqlite.base as lg_sqlite_base
import psycopg
import pytest

from graphloom.store.postgres import PostgresStore
from graphloom.store.postgres.aio import AsyncPostgresStore
from graphloom.store.sqlite import SqliteStore
from graphloom.store.sqlite.aio import AsyncSqliteStore

OURS = {
    "SqliteStore": SqliteStore,
    "AsyncSqliteStore": AsyncSqliteStore,
    "PostgresStore": PostgresStore,
    "AsyncPostgresStore": AsyncPostgresStore,
}

# LangGraph's PostgreSQL fixtures edit the store's migration list before `setup()`, and the
# vector and async ones drop LangGraph's migration table through `_cursor()`: give graphloom's stores
# an empty list (their migrations are graphloom's, in Rust) and a cursor on a connection of
# their own to the same database, for the fixtures only.
PostgresStore.MIGRATIONS = []
AsyncPostgresStore.MIGRATIONS = []


@asynccontextmanager
async def _cursor(self: AsyncPostgresStore) -> AsyncIterator[Any]:
    async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
        async with conn.cursor() as cur:
            yield cur


@contextmanager
def _sync_cursor(self: PostgresStore) -> Iterator[Any]:
    with psycopg.connect(self.url, autocommit=True) as conn:
        with conn.cursor() as cur:
            yield cur


AsyncPostgresStore._cursor = _cursor
PostgresStore._cursor = _sync_cursor

for module in (lg_sqlite, lg_sqlite_aio, lg_sqlite_base, lg_postgres, lg_postgres_aio, lg_postgres_base):
    for name, cls in OURS.items():
        if hasattr(module, name):
            setattr(module, name, cls)


def pytest_configure(config: pytest.Config) -> None:
    # LangGraph marks its timing-sensitive TTL tests for a retry plugin we do not install:
    # here they run once.
    config.addinivalue_line("markers", "flaky(retries): retried by a plugin, if installed")
    url = os.environ.get("GRAPHLOOM_PG_URL")
    if not url:
        return
    try:
        import tests.conftest as conftest
    except ImportError:
        return
    if hasattr(conftest, "DEFAULT_URI"):
        # LangGraph's fixtures replace the database name of DEFAULT_URI with a fresh one.
        conftest.DEFAULT_URI = url
        conftest.DEFAULT_POSTGRES_URI = urlunsplit(urlsplit(url)._replace(path="/"))


def pytest_collection_finish(session: pytest.Session) -> None:
    for item in session.items:
        module = getattr(item, "module", None)
        if module is None:
            continue
        for name, cls in OURS.items():
            found = getattr(module, name, None)
            if found is not None and found is not cls:
                raise pytest.UsageError(f"{module.__name__} would not use graphloom's {name}")


def pytest_report_header(config: pytest.Config) -> str:
    return "graphloom: LangGraph's stores replaced by graphloom.store.sqlite and .postgres"

