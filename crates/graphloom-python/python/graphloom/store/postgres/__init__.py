"""``PostgresStore``: LangGraph's PostgreSQL long-term memory store on graphloom's Rust
storage.

A drop-in for ``langgraph.store.postgres.PostgresStore``::

    from graphloom.store.postgres import PostgresStore

    with PostgresStore.from_conn_string("postgresql://user:pw@host:5432/db") as store:
        store.setup()
        graph = builder.compile(store=store)

The constructor takes a connection URL, not a psycopg connection or pool: graphloom keeps
its own pool of connections, in Rust. Vector search needs no extension (no pgvector):
embeddings are ranked by cosine similarity in Rust.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from typing import Any

from langgraph.store.base import IndexConfig, TTLConfig

from graphloom._native import StoreCore
from graphloom.store._base import GraphloomStore, index_arg

__all__ = ["PostgresStore"]


class PostgresStore(GraphloomStore):
    """LangGraph's ``BaseStore`` in PostgreSQL, over graphloom's connection pool.

    Args:
        url: the database URL (``postgres://`` or ``postgresql://``); the tables are
            created on connect if missing.
        index: vector search, as LangGraph's stores take it: ``{"dims": ..., "embed": ...,
            "fields": [...]}``. Fields are top-level or dotted paths, or ``"$"``.
        ttl: ``{"default_ttl": minutes, "refresh_on_read": bool, "sweep_interval_minutes":
            minutes}``. Expiry follows the database's clock; expired items are never
            returned, even before a sweep deletes them.
    """

    def __init__(
        self, url: str, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None
    ) -> None:
        config, native = index_arg(index, lambda: None)
        super().__init__(StoreCore.postgres(str(url), native), index=config, ttl=ttl)
        self.url = str(url)

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        pipeline: bool = False,
        pool_config: dict[str, Any] | None = None,
    ) -> Iterator[PostgresStore]:
        """A store on the database at ``conn_string``, closed at the end of the block.
        ``pipeline`` and ``pool_config`` (psycopg's) are accepted for code written against
        LangGraph's store and ignored: graphloom's store always uses its own pool."""
        store = cls(conn_string, index=index, ttl=ttl)
        try:
            yield store
        finally:
            store.close()

    def setup(self) -> None:
        """Nothing to do: the tables are created when the store connects (kept for code
        written against LangGraph's store)."""
