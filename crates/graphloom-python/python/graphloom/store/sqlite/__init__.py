"""``SqliteStore``: LangGraph's SQLite long-term memory store on graphloom's Rust storage.

A drop-in for ``langgraph.store.sqlite.SqliteStore``::

    from graphloom.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string("memory.db", index={"dims": 1536, "embed": embeddings}) as store:
        store.setup()
        graph = builder.compile(store=store)

The constructor takes a file path, not a ``sqlite3.Connection``: graphloom opens its own
connections (one writer thread that group-commits, and read connections), and a store may
share its file with a ``graphloom.checkpoint.sqlite`` saver.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from langgraph.store.base import IndexConfig, TTLConfig

from graphloom._native import StoreCore
from graphloom.checkpoint.sqlite._path import database_path, synchronous_for
from graphloom.store._base import GraphloomStore, index_arg

__all__ = ["SqliteStore"]


class SqliteStore(GraphloomStore):
    """LangGraph's ``BaseStore`` in one SQLite file (WAL mode).

    Args:
        path: the database file (created with its tables if missing).
        index: vector search, as LangGraph's stores take it: ``{"dims": ..., "embed": ...,
            "fields": [...]}`` (``text_fields`` is read too, as ``langgraph.store.sqlite``
            names it). Fields are top-level or dotted paths, or ``"$"`` for the whole value.
        ttl: ``{"default_ttl": minutes, "refresh_on_read": bool, "sweep_interval_minutes":
            minutes}``. Expired items are never returned, even before a sweep deletes them.
            As in ``langgraph.store.sqlite``, reads restart an item's TTL only if this
            config sets ``"refresh_on_read": True`` (and the read does not opt out).
        synchronous: ``"full"`` (the default: a write returns once it is fsynced) or
            ``"normal"``.
    """

    refresh_needs_config = True

    def __init__(
        self,
        path: str,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        synchronous: str = "full",
    ) -> None:
        config, native = index_arg(index, lambda: None)
        super().__init__(StoreCore.sqlite(str(path), synchronous, native), index=config, ttl=ttl)
        self.path = str(path)

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        synchronous: str | None = None,
    ) -> Iterator[SqliteStore]:
        """A store on the file ``conn_string`` (``":memory:"``: a temporary file removed at
        the end of the block)."""
        with database_path(conn_string) as path:
            store = cls(
                path, index=index, ttl=ttl, synchronous=synchronous_for(conn_string, synchronous)
            )
            try:
                yield store
            finally:
                store.close()

    def setup(self) -> None:
        """Nothing to do: the tables are created when the store opens the file (kept for
        code written against LangGraph's store)."""
