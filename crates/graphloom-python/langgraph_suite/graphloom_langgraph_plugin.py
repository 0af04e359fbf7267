"""A pytest plugin that runs LangGraph's own test suite on graphloom's savers.

LangGraph's tests build their SQLite checkpointers (`sqlite`, `sqlite_aes`, `sqlite_aio`)
from `langgraph.checkpoint.sqlite.SqliteSaver` and
`langgraph.checkpoint.sqlite.aio.AsyncSqliteSaver`, and their PostgreSQL ones (`postgres`,
`postgres_aio`, and the `_pool` variants, which hand the saver a psycopg pool; the `_pipe`
variants set a pipeline on the saver's psycopg connection, which graphloom's savers do not
have) from `langgraph.checkpoint.postgres`. Loaded with
`-p`, before their conftest is imported, this plugin puts graphloom's classes under those
names, and refuses to run if the suite's fixtures would still get LangGraph's. With
GRAPHLOOM_PG_URL set, the PostgreSQL variants create their databases on that server
instead of LangGraph's container address.
"""

from __future__ import annotations

import os
import sys
from urllib.parse import urlsplit, urlunsplit

import langgraph.checkpoint.postgres as lg_postgres
import langgraph.checkpoint.postgres.aio as lg_postgres_aio
import langgraph.checkpoint.sqlite as lg_sqlite
import langgraph.checkpoint.sqlite.aio as lg_sqlite_aio
import pytest

from graphloom.checkpoint.postgres import PostgresSaver
from graphloom.checkpoint.postgres.aio import AsyncPostgresSaver
from graphloom.checkpoint.sqlite import SqliteSaver
from graphloom.checkpoint.sqlite.aio import AsyncSqliteSaver

lg_sqlite.SqliteSaver = SqliteSaver
lg_sqlite_aio.AsyncSqliteSaver = AsyncSqliteSaver
lg_postgres.PostgresSaver = PostgresSaver
lg_postgres_aio.AsyncPostgresSaver = AsyncPostgresSaver


def pytest_configure(config: pytest.Config) -> None:
    url = os.environ.get("GRAPHLOOM_PG_URL")
    if not url:
        return
    # LangGraph's conftest appends a database name to its server URL.
    server = urlunsplit(urlsplit(url)._replace(path="/"))
    import tests.conftest_checkpointer as checkpointers
    import tests.conftest_store as stores

    checkpointers.DEFAULT_POSTGRES_URI = server
    # LangGraph's own PostgreSQL stores, which some of these tests pair with a saver.
    stores.DEFAULT_POSTGRES_URI = server


def pytest_collection_finish(session: pytest.Session) -> None:
    module = sys.modules.get("tests.conftest_checkpointer")
    if module is None:
        raise pytest.UsageError("LangGraph's tests/conftest_checkpointer.py was not loaded")
    ours = {
        "SqliteSaver": SqliteSaver,
        "AsyncSqliteSaver": AsyncSqliteSaver,
        "PostgresSaver": PostgresSaver,
        "AsyncPostgresSaver": AsyncPostgresSaver,
    }
    for name, cls in ours.items():
        if getattr(module, name) is not cls:
            raise pytest.UsageError(f"LangGraph's tests would not use graphloom's {name}")


def pytest_report_header(config: pytest.Config) -> str:
    return "graphloom: LangGraph's savers replaced by graphloom.checkpoint.sqlite and .postgres"
