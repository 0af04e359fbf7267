"""A pytest plugin that runs LangGraph's own test suite on graphloom's savers.

LangGraph's tests build their SQLite checkpointers (`sqlite`, `sqlite_aes`, `sqlite_aio`)
from `langgraph.checkpoint.sqlite.SqliteSaver` and
`langgraph.checkpoint.sqlite.aio.AsyncSqliteSaver`. Loaded with `-p`, before their
conftest is imported, this plugin puts graphloom's classes under those names, and refuses
to run if the suite's fixtures would still get LangGraph's.
"""

from __future__ import annotations

import sys

import langgraph.checkpoint.sqlite as lg_sqlite
import langgraph.checkpoint.sqlite.aio as lg_sqlite_aio
import pytest

from graphloom.checkpoint.sqlite import SqliteSaver
from graphloom.checkpoint.sqlite.aio import AsyncSqliteSaver

lg_sqlite.SqliteSaver = SqliteSaver
lg_sqlite_aio.AsyncSqliteSaver = AsyncSqliteSaver


def pytest_collection_finish(session: pytest.Session) -> None:
    module = sys.modules.get("tests.conftest_checkpointer")
    if module is None:
        raise pytest.UsageError("LangGraph's tests/conftest_checkpointer.py was not loaded")
    if module.SqliteSaver is not SqliteSaver or module.AsyncSqliteSaver is not AsyncSqliteSaver:
        raise pytest.UsageError("LangGraph's tests would not use graphloom's savers")


def pytest_report_header(config: pytest.Config) -> str:
    return "graphloom: LangGraph's SQLite savers replaced by graphloom.checkpoint.sqlite"
