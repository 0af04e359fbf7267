"""``SqliteSaver``: LangGraph's SQLite checkpointer on graphloom's Rust storage.

A drop-in for ``langgraph.checkpoint.sqlite.SqliteSaver``::

    from graphloom.checkpoint.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string("checkpoints.db") as saver:
        graph = builder.compile(checkpointer=saver)

One difference: the constructor takes a file path, not a ``sqlite3.Connection`` (graphloom
opens its own connections: one writer thread that group-commits, and read connections).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from langgraph.checkpoint.serde.base import SerializerProtocol

from graphloom._native import Core
from graphloom.checkpoint._typed import TypedSaver
from graphloom.checkpoint.sqlite._path import database_path, synchronous_for

__all__ = ["SqliteSaver"]


class SqliteSaver(TypedSaver):
    """A LangGraph checkpoint saver keeping checkpoints in one SQLite file (WAL mode).

    Every write returns once its transaction is committed and fsynced; concurrent writers
    share commits. Thread-safe: one saver may serve many threads and graphs.

    Args:
        path: the database file (created with its tables if missing).
        serde: the serializer of checkpoint values (LangGraph's ``JsonPlusSerializer`` by
            default; an ``EncryptedSerializer`` encrypts values before they reach disk).
        synchronous: ``"full"`` (the default: a write returns once it is fsynced) or
            ``"normal"`` (no fsync per commit: a crash of the process loses nothing, a
            power loss may lose the last commits).
    """

    def __init__(
        self,
        path: str,
        *,
        serde: SerializerProtocol | None = None,
        synchronous: str = "full",
    ) -> None:
        super().__init__(Core.sqlite(str(path), synchronous), serde=serde)
        self.path = str(path)

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        serde: SerializerProtocol | None = None,
        synchronous: str | None = None,
    ) -> Iterator[SqliteSaver]:
        """A saver on the file ``conn_string`` (``":memory:"``: a temporary file, written
        without an fsync per commit unless ``synchronous`` says otherwise)."""
        with database_path(conn_string) as path:
            saver = cls(path, serde=serde, synchronous=synchronous_for(conn_string, synchronous))
            try:
                yield saver
            finally:
                saver.close()

    def setup(self) -> None:
        """Nothing to do: the tables are created when the saver opens the file (kept for
        code written against LangGraph's saver)."""
