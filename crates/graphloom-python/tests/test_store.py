"""graphloom's stores as LangGraph graphs use them: through ``runtime.store`` and
``get_store()``, with vector search on a deterministic embedding, and with TTLs."""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from dataclasses import dataclass
from typing import TypedDict

import pytest
from langgraph.config import get_store
from langgraph.graph import START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore, InvalidNamespaceError

from graphloom.checkpoint.sqlite import SqliteSaver
from graphloom.store.postgres import PostgresStore
from graphloom.store.postgres.aio import AsyncPostgresStore
from graphloom.store.sqlite import SqliteStore
from graphloom.store.sqlite.aio import AsyncSqliteStore

DIMS = 64


def embed(texts: list[str]) -> list[list[float]]:
    """Bag of words hashed into DIMS slots, unit length: texts sharing words score high."""
    out = []
    for text in texts:
        vec = [0.0] * DIMS
        for word in text.lower().split():
            word = "".join(c for c in word if c.isalnum())
            if word:
                vec[int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIMS] += 1.0
        norm = math.sqrt(sum(x * x for x in vec)) or 1.0
        out.append([x / norm for x in vec])
    return out


async def aembed(texts: list[str]) -> list[list[float]]:
    await asyncio.sleep(0)
    return embed(texts)


INDEX = {"dims": DIMS, "embed": embed, "fields": ["text"]}


class State(TypedDict):
    user: str
    said: str
    memories: list[str]


@dataclass
class Context:
    user: str


def remember(state: State, runtime: Runtime[Context]) -> dict:
    store = runtime.store
    assert store is not None
    n = len(store.search(("memories", state["user"]), limit=100))
    store.put(("memories", state["user"]), f"m{n}", {"text": state["said"]})
    return {}


def recall(state: State) -> dict:
    store = get_store()
    hits = store.search(("memories", state["user"]), query=state["said"], limit=2)
    return {"memories": [h.value["text"] for h in hits]}


def memory_graph():
    builder = StateGraph(State, context_schema=Context)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    return builder


def wait_until(check, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def test_graph_remembers_across_threads(db_path: str) -> None:
    with (
        SqliteSaver.from_conn_string(db_path) as saver,
        SqliteStore.from_conn_string(db_path, index=INDEX) as store,
    ):
        graph = memory_graph().compile(checkpointer=saver, store=store)
        said = ["I like green tea", "my dog is called Rex", "tea with lemon please"]
        for i, text in enumerate(said):
            graph.invoke(
                {"user": "ann", "said": text, "memories": []},
                {"configurable": {"thread_id": f"t{i}"}},
                context=Context(user="ann"),
            )
        # Another user's memories stay apart.
        graph.invoke({"user": "bob", "said": "tea", "memories": []}, {"configurable": {"thread_id": "b"}})
        out = graph.invoke(
            {"user": "ann", "said": "what tea do I like", "memories": []},
            {"configurable": {"thread_id": "t9"}},
        )
        assert out["memories"][0] == "what tea do I like"
        assert "tea" in out["memories"][1]
    # The memories outlive the store object: a new one reads them from the file.
    with SqliteStore.from_conn_string(db_path) as again:
        assert len(again.search(("memories", "ann"), limit=100)) == 4
        assert again.list_namespaces(prefix=("memories",)) == [("memories", "ann"), ("memories", "bob")]


@pytest.mark.asyncio
async def test_async_graph_with_async_embeddings(db_path: str) -> None:
    index = {"dims": DIMS, "embed": aembed, "fields": ["text"]}
    async with AsyncSqliteStore.from_conn_string(db_path, index=index) as store:
        graph = memory_graph().compile(store=store)
        for text in ["the sky is blue", "grass is green", "blue whales are big"]:
            await graph.ainvoke({"user": "cy", "said": text, "memories": []}, context=Context(user="cy"))
        hits = await store.asearch(("memories", "cy"), query="blue sky", limit=3)
        assert hits[0].value["text"] == "the sky is blue"
        assert hits[0].score is not None and hits[0].score > hits[-1].score
        # Sync calls would block the loop: refused on it, fine from another thread.
        with pytest.raises(asyncio.InvalidStateError):
            store.get(("memories", "cy"), "m0")
        item = await asyncio.to_thread(store.get, ("memories", "cy"), "m0")
        assert item is not None and item.value == {"text": "the sky is blue"}


def store_ops(store: BaseStore) -> None:
    store.put(("docs", "a"), "1", {"text": "red apples", "n": 1, "tags": ["fruit"]})
    store.put(("docs", "a"), "2", {"text": "green pears", "n": 2})
    store.put(("docs", "b"), "3", {"text": "red cars", "n": 3}, index=False)
    assert store.get(("docs", "a"), "1").value["n"] == 1
    assert {i.key for i in store.search(("docs",), filter={"n": {"$gte": 2}})} == {"2", "3"}
    assert [i.key for i in store.search(("docs",), query="red apples", limit=1)] == ["1"]
    # An item put with index=False is found by filters, not by a query.
    assert "3" not in {i.key for i in store.search(("docs",), query="red cars")}
    assert store.list_namespaces(max_depth=1) == [("docs",)]
    assert store.list_namespaces(suffix=("b",)) == [("docs", "b")]
    store.delete(("docs", "a"), "1")
    assert store.get(("docs", "a"), "1") is None
    with pytest.raises(InvalidNamespaceError):
        store.put(("a.b",), "k", {"v": 1})


def test_sqlite_store_ops(db_path: str) -> None:
    with SqliteStore.from_conn_string(db_path, index={"dims": DIMS, "embed": embed, "fields": ["text"]}) as store:
        store_ops(store)


def test_postgres_store_ops(pg_url: str) -> None:
    with PostgresStore.from_conn_string(pg_url, index=INDEX) as store:
        store_ops(store)


@pytest.mark.asyncio
async def test_async_postgres_store(pg_url: str) -> None:
    async with AsyncPostgresStore.from_conn_string(pg_url, index=INDEX) as store:
        await store.aput(("x",), "k", {"text": "hello world"})
        assert (await store.aget(("x",), "k")).value == {"text": "hello world"}
        hits = await store.asearch(("x",), query="hello")
        assert [h.key for h in hits] == ["k"]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_ttl_expires_and_sweeps(backend: str, request: pytest.FixtureRequest) -> None:
    ttl = {"default_ttl": 0.5 / 60, "refresh_on_read": True}
    if backend == "sqlite":
        opened = SqliteStore.from_conn_string(request.getfixturevalue("db_path"), ttl=ttl)
    else:
        opened = PostgresStore.from_conn_string(request.getfixturevalue("pg_url"), ttl=ttl)
    with opened as store:
        store.put(("t",), "short", {"v": 1})
        store.put(("t",), "kept", {"v": 2}, ttl=None)
        assert store.get(("t",), "short", refresh_ttl=False) is not None
        # Expired items are never returned, swept or not.
        wait_until(lambda: store.get(("t",), "short", refresh_ttl=False) is None)
        assert [i.key for i in store.search(("t",))] == ["kept"]
        assert store.sweep_ttl() == 1
        assert store.get(("t",), "kept") is not None


def test_ttl_sweeper_thread(db_path: str) -> None:
    ttl = {"default_ttl": 0.2 / 60, "sweep_interval_minutes": 0.1 / 60}
    with SqliteStore.from_conn_string(db_path, ttl=ttl) as store:
        store.start_ttl_sweeper()
        store.put(("t",), "k", {"v": 1})
        # The sweeper deletes it: nothing is left for a manual sweep.
        wait_until(lambda: store.get(("t",), "k") is None)
        wait_until(lambda: store.sweep_ttl() == 0)
        assert store.stop_ttl_sweeper(timeout=5)
