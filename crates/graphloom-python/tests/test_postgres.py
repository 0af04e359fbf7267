"""graphloom's PostgreSQL savers: LangGraph's conformance suite against the async one, and
real graphs (interrupt and resume across two savers, Send fan-out into a pausing subgraph,
an encrypted serde) on both."""

from __future__ import annotations

import psycopg
import pytest
from conftest import fresh_database
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.types import Command
from test_graphs import approval_graph, cfg, fan_graph

from graphloom.checkpoint.postgres import PostgresSaver
from graphloom.checkpoint.postgres.aio import AsyncPostgresSaver


@checkpointer_test(name="graphloom AsyncPostgresSaver")
async def graphloom_async_postgres():
    with fresh_database() as url:
        async with AsyncPostgresSaver.from_conn_string(url) as saver:
            await saver.setup()
            yield saver


@pytest.mark.asyncio
async def test_langgraph_conformance_all_capabilities_on_postgres() -> None:
    report = await validate(graphloom_async_postgres)
    report.print_report()
    failures = {n: r.failures for n, r in report.results.items() if not r.passed}
    assert failures == {}
    assert set(report.results) == {c.value for c in ALL_CAPABILITIES}
    assert all(r.detected for r in report.results.values())


def test_an_interrupted_run_resumes_from_another_postgres_saver(pg_url):
    with PostgresSaver.from_conn_string(pg_url) as saver:
        saver.setup()
        graph = approval_graph().compile(checkpointer=saver)
        out = graph.invoke({"request": "refund"}, cfg("p1"))
        assert out["__interrupt__"][0].value == {"question": "approve refund?"}
    with PostgresSaver.from_conn_string(pg_url) as saver:
        graph = approval_graph().compile(checkpointer=saver)
        out = graph.invoke(Command(resume="yes"), cfg("p1"))
        assert out["log"] == ["drafted refund", "asked", "acted on yes"]
        history = list(graph.get_state_history(cfg("p1")))
        assert [s.metadata["step"] for s in history] == [3, 2, 1, 0, -1]


@pytest.mark.asyncio
async def test_async_fan_out_into_a_pausing_subgraph_on_postgres(pg_url):
    async with AsyncPostgresSaver.from_conn_string(pg_url) as saver:
        graph = fan_graph().compile(checkpointer=saver)
        out = await graph.ainvoke({"topics": ["a", "b", "c"]}, cfg("p2"))
        assert out["__interrupt__"][0].value == {"notes": ["note on a", "note on b", "note on c"]}
        out = await graph.ainvoke(Command(resume="fine"), cfg("p2"))
        assert out["summary"] == "3 notes, review: fine"


def test_an_encrypted_serde_keeps_values_sealed_in_postgres(pg_url):
    secret = "the-launch-code-is-0000"
    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"k" * 32)
    with PostgresSaver.from_conn_string(pg_url, serde=serde) as saver:
        graph = approval_graph().compile(checkpointer=saver)
        graph.invoke({"request": secret}, cfg("p3"))
        assert graph.get_state(cfg("p3")).values["request"] == secret
    with psycopg.connect(pg_url) as conn:
        raw = b"".join(
            bytes(v)
            for sql in (
                "SELECT checkpoint FROM typed_checkpoints",
                "SELECT value FROM typed_blobs",
                "SELECT value FROM typed_writes",
            )
            for (v,) in conn.execute(sql)
        )
    assert raw and secret.encode() not in raw



def test_a_saver_on_a_psycopg_pool_or_connection_closes_with_it(pg_url):
    from urllib.parse import urlsplit

    from psycopg_pool import ConnectionPool

    with ConnectionPool(pg_url, min_size=1, max_size=2, kwargs={"autocommit": True}) as pool:
        saver = PostgresSaver(pool)
        graph = approval_graph().compile(checkpointer=saver)
        graph.invoke({"request": "refund"}, cfg("p4"))
    # A key=value conninfo, as psycopg connections report theirs, reaches the same database.
    parts = urlsplit(pg_url)
    conninfo = f"host={parts.hostname} port={parts.port} user={parts.username} dbname={parts.path[1:]}"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        saver = PostgresSaver(conn)
        assert saver.get_tuple(cfg("p4")) is not None
    # Both closed their graphloom pools with them: no session of the database is left.
    with psycopg.connect(pg_url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as admin:
        (left,) = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (parts.path[1:],)
        ).fetchone()
    assert left == 0
