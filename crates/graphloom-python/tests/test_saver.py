"""The saver's own promises beyond the conformance suite: values go through the saver's
serde (encrypted and custom ones too), LangGraph's value types round-trip, versions sort,
concurrent callers share one saver, ``":memory:"`` cleans up after itself."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import sqlite3
import threading
import uuid
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from graphloom import StorageError
from graphloom.checkpoint.sqlite import SqliteSaver
from graphloom.checkpoint.sqlite.aio import AsyncSqliteSaver

SECRET = "the-launch-code-is-0000"


def put_values(saver, thread: str, values: dict[str, Any], parent: dict | None = None) -> dict:
    cp = empty_checkpoint()
    cp["channel_values"] = values
    cp["channel_versions"] = {k: saver.get_next_version(None, None) for k in values}
    config = parent or {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return saver.put(config, cp, {"source": "loop", "step": 0}, cp["channel_versions"])


def stored_bytes(path: str) -> bytes:
    conn = sqlite3.connect(path)
    try:
        out = b""
        for table, column in [
            ("typed_checkpoints", "checkpoint"),
            ("typed_blobs", "value"),
            ("typed_writes", "value"),
        ]:
            for (value,) in conn.execute(f"SELECT {column} FROM {table}"):
                out += bytes(value)
        return out
    finally:
        conn.close()


def test_an_encrypted_serde_keeps_values_sealed_on_disk(db_path):
    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"k" * 32)
    with SqliteSaver.from_conn_string(db_path, serde=serde) as saver:
        stored = put_values(saver, "t", {"secret": SECRET})
        saver.put_writes(stored, [("secret", SECRET + "!")], "task-1")
        got = saver.get_tuple(stored)
        assert got.checkpoint["channel_values"] == {"secret": SECRET}
        assert got.pending_writes == [("task-1", "secret", SECRET + "!")]
    raw = stored_bytes(db_path)
    assert raw and SECRET.encode() not in raw

    # Without the key the values cannot be read back.
    with SqliteSaver.from_conn_string(db_path) as plain:
        with pytest.raises(Exception):
            plain.get_tuple(stored)

    # The same value with the default serde is readable on disk: the check above can fail.
    other = os.path.join(os.path.dirname(db_path), "plain.db")
    with SqliteSaver.from_conn_string(other) as saver:
        put_values(saver, "t", {"secret": SECRET})
    assert SECRET.encode() in stored_bytes(other)


class Recording(JsonPlusSerializer):
    """A custom serde: tags its values and counts its calls."""

    def __init__(self) -> None:
        super().__init__()
        self.dumped = 0
        self.loaded = 0

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        self.dumped += 1
        type_tag, data = super().dumps_typed(obj)
        return "recorded+" + type_tag, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        self.loaded += 1
        type_tag, raw = data
        assert type_tag.startswith("recorded+"), type_tag
        return super().loads_typed((type_tag.removeprefix("recorded+"), raw))


def test_a_custom_serde_serializes_every_value(db_path):
    serde = Recording()
    with SqliteSaver.from_conn_string(db_path, serde=serde) as saver:
        stored = put_values(saver, "t", {"a": 1, "b": [1, 2]})
        # The checkpoint itself and one value per channel.
        assert serde.dumped == 3
        assert saver.get_tuple(stored).checkpoint["channel_values"] == {"a": 1, "b": [1, 2]}
        assert serde.loaded == 3
    conn = sqlite3.connect(db_path)
    tags = {t for (t,) in conn.execute("SELECT type FROM typed_blobs")}
    conn.close()
    assert tags == {"recorded+msgpack"}


def test_langgraph_value_types_round_trip(db_path):
    values = {
        "messages": [HumanMessage(content="hi", id="1"), AIMessage(content="hello", id="2")],
        "when": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc),
        "ids": {uuid.UUID(int=7)},
        "raw": b"\x00\x01",
        "nested": {"a": (1, 2), "b": None},
    }
    # What LangGraph's serde itself gives back (msgpack has no tuples: lists come back).
    serde = JsonPlusSerializer()
    expected = {k: serde.loads_typed(serde.dumps_typed(v)) for k, v in values.items()}
    assert expected["nested"] == {"a": [1, 2], "b": None}
    with SqliteSaver.from_conn_string(db_path) as saver:
        stored = put_values(saver, "t", values)
        got = saver.get_tuple(stored).checkpoint["channel_values"]
        assert got == expected
        assert isinstance(got["messages"][0], HumanMessage) and got["ids"] == {uuid.UUID(int=7)}


def test_versions_increase_as_strings():
    with SqliteSaver.from_conn_string(":memory:") as saver:
        v = None
        seen = []
        for _ in range(12):
            v = saver.get_next_version(v, None)
            seen.append(v)
        assert seen == sorted(seen) and len(set(seen)) == 12
        assert saver.get_next_version(3, None) > saver.get_next_version(2, None)


def test_memory_databases_live_in_a_directory_removed_on_exit():
    with SqliteSaver.from_conn_string(":memory:") as saver:
        path = saver.path
        put_values(saver, "t", {"a": 1})
        assert os.path.exists(path)
    assert not os.path.exists(os.path.dirname(path))


def test_a_uri_connection_string_is_refused():
    with pytest.raises(ValueError):
        with SqliteSaver.from_conn_string("file:x.db?mode=ro"):
            pass


def test_threads_share_one_saver(db_path):
    with SqliteSaver.from_conn_string(db_path) as saver:
        errors: list[BaseException] = []

        def work(n: int) -> None:
            try:
                parent = None
                for i in range(10):
                    parent = put_values(saver, f"t{n}", {"i": i}, parent)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        for n in range(8):
            assert len(list(saver.list({"configurable": {"thread_id": f"t{n}"}}))) == 10
            latest = saver.get_tuple({"configurable": {"thread_id": f"t{n}"}})
            assert latest.checkpoint["channel_values"] == {"i": 9}


@pytest.mark.asyncio
async def test_concurrent_async_writes_all_commit(db_path):
    async with AsyncSqliteSaver.from_conn_string(db_path) as saver:

        async def one(n: int) -> dict:
            cp = empty_checkpoint()
            cp["channel_values"] = {"n": n}
            cp["channel_versions"] = {"n": saver.get_next_version(None, None)}
            config = {"configurable": {"thread_id": f"t{n}", "checkpoint_ns": ""}}
            return await saver.aput(config, cp, {"source": "loop", "step": 0}, cp["channel_versions"])

        stored = await asyncio.gather(*(one(n) for n in range(32)))
        got = await asyncio.gather(*(saver.aget_tuple(c) for c in stored))
        assert [t.checkpoint["channel_values"]["n"] for t in got] == list(range(32))


def test_a_storage_failure_is_a_storage_error(tmp_path):
    # A directory where the file should be: SQLite cannot open it.
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(StorageError):
        SqliteSaver(str(tmp_path / "dir.db"))


def test_synchronous_is_full_or_normal(db_path):
    with pytest.raises(ValueError, match="full"):
        SqliteSaver(db_path, synchronous="off")
    saver = SqliteSaver(db_path, synchronous="normal")
    stored = put_values(saver, "t", {"a": 1})
    assert saver.get_tuple(stored).checkpoint["channel_values"] == {"a": 1}
