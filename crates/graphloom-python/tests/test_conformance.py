"""LangGraph's own saver suite (langgraph-checkpoint-conformance) against the async
SQLite saver: every capability, base and extended, must be detected and pass."""

from __future__ import annotations

import tempfile

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from graphloom.checkpoint.sqlite.aio import AsyncSqliteSaver


@checkpointer_test(name="graphloom AsyncSqliteSaver")
async def graphloom_async_sqlite():
    with tempfile.TemporaryDirectory() as tmp:
        async with AsyncSqliteSaver.from_conn_string(f"{tmp}/conformance.db") as saver:
            yield saver


@pytest.mark.asyncio
async def test_langgraph_conformance_all_capabilities() -> None:
    report = await validate(graphloom_async_sqlite)
    report.print_report()
    failures = {
        name: result.failures
        for name, result in report.results.items()
        if not result.passed
    }
    assert failures == {}, report.to_dict() if hasattr(report, "to_dict") else failures
    assert set(report.results) == {c.value for c in ALL_CAPABILITIES}
    assert all(r.detected for r in report.results.values())
