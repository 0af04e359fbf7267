"""``PostgresSaver``: LangGraph's PostgreSQL checkpointer on graphloom's Rust storage.

A drop-in for ``langgraph.checkpoint.postgres.PostgresSaver``::

    from graphloom.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string("postgresql://user:pw@host:5432/db") as saver:
        saver.setup()
        graph = builder.compile(checkpointer=saver)

The constructor takes a connection URL, or a psycopg connection or pool as LangGraph's
does: graphloom reads its connection parameters (password included) and keeps its own pool
of connections to that database, in Rust, closed when the psycopg object closes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from contextlib import contextmanager

from langgraph.checkpoint.serde.base import SerializerProtocol

from graphloom._native import Core
from graphloom.checkpoint._typed import TypedSaver
from graphloom.checkpoint.postgres._conn import close_with, database_url

__all__ = ["PostgresSaver"]


class PostgresSaver(TypedSaver):
    """A LangGraph checkpoint saver keeping checkpoints in PostgreSQL, over graphloom's
    connection pool. Every write is one transaction and returns once committed.
    Thread-safe: one saver may serve many threads and graphs.

    Args:
        url: the database URL (``postgres://`` or ``postgresql://``), or a psycopg
            connection or ``psycopg_pool`` pool on the database (its parameters are read;
            graphloom's pool closes when it does); the tables are created on connect if
            missing.
        serde: the serializer of checkpoint values (LangGraph's ``JsonPlusSerializer`` by
            default; an ``EncryptedSerializer`` encrypts values before they reach the
            database).
    """

    def __init__(self, url: Any, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(Core.postgres(database_url(url)), serde=serde)
        close_with(url, self.close)

    @classmethod
    @contextmanager
    def from_conn_string(
        cls, conn_string: str, *, serde: SerializerProtocol | None = None
    ) -> Iterator[PostgresSaver]:
        """A saver on the database at ``conn_string``."""
        saver = cls(conn_string, serde=serde)
        try:
            yield saver
        finally:
            saver.close()

    def setup(self) -> None:
        """Nothing to do: the tables are created when the saver connects (kept for code
        written against LangGraph's saver)."""
