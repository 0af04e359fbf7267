"""``PostgresSaver``: LangGraph's PostgreSQL checkpointer on graphloom's Rust storage.

A drop-in for ``langgraph.checkpoint.postgres.PostgresSaver``::

    from graphloom.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string("postgresql://user:pw@host:5432/db") as saver:
        saver.setup()
        graph = builder.compile(checkpointer=saver)

One difference: the constructor takes a connection URL, not a psycopg connection or pool
(graphloom keeps its own pool of connections, in Rust).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from langgraph.checkpoint.serde.base import SerializerProtocol

from graphloom._native import Core
from graphloom.checkpoint._typed import TypedSaver

__all__ = ["PostgresSaver"]


class PostgresSaver(TypedSaver):
    """A LangGraph checkpoint saver keeping checkpoints in PostgreSQL, over graphloom's
    connection pool. Every write is one transaction and returns once committed.
    Thread-safe: one saver may serve many threads and graphs.

    Args:
        url: the database URL (``postgres://`` or ``postgresql://``); its tables are
            created on connect if missing.
        serde: the serializer of checkpoint values (LangGraph's ``JsonPlusSerializer`` by
            default; an ``EncryptedSerializer`` encrypts values before they reach the
            database).
    """

    def __init__(self, url: str, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(Core.postgres(str(url)), serde=serde)

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
