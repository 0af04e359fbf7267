"""``AsyncPostgresStore``: the async face of graphloom's PostgreSQL store.

A drop-in for ``langgraph.store.postgres.aio.AsyncPostgresStore``::

    from graphloom.store.postgres.aio import AsyncPostgresStore

    async with AsyncPostgresStore.from_conn_string(url) as store:
        await store.setup()
        graph = builder.compile(store=store)

Its async methods run the Rust calls on the event loop's default executor (they release
the GIL); an ``embed`` with an async method is awaited on the store's loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from typing import Any

from langgraph.store.base import IndexConfig, TTLConfig

from graphloom._native import StoreCore
from graphloom.store._base import AsyncGraphloomStore, index_arg
from graphloom.store.sqlite.aio import _running_loop

__all__ = ["AsyncPostgresStore"]


class AsyncPostgresStore(AsyncGraphloomStore):
    """LangGraph's ``BaseStore`` in PostgreSQL, for async code. See
    ``graphloom.store.postgres.PostgresStore`` for the arguments."""

    def __init__(
        self, url: str, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None
    ) -> None:
        self.loop = _running_loop()
        config, native = index_arg(index, lambda: self.loop)
        super().__init__(StoreCore.postgres(str(url), native), index=config, ttl=ttl)
        self.url = str(url)

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        pipeline: bool = False,
        pool_config: dict[str, Any] | None = None,
    ) -> AsyncIterator[AsyncPostgresStore]:
        """A store on the database at ``conn_string``; connecting runs off the event
        loop, and the pool is closed at the end of the block. ``pipeline`` and
        ``pool_config`` (psycopg's) are accepted for code written against LangGraph's
        store and ignored: graphloom's store always uses its own pool."""
        loop = asyncio.get_running_loop()
        store = cls.__new__(cls)
        store.loop = loop
        config, native = index_arg(index, lambda: store.loop)
        core = await loop.run_in_executor(None, StoreCore.postgres, conn_string, native)
        AsyncGraphloomStore.__init__(store, core, index=config, ttl=ttl)
        store.url = conn_string
        try:
            yield store
        finally:
            await store.aclose()

    async def setup(self) -> None:
        """Nothing to do: the tables are created when the store connects (kept for code
        written against LangGraph's store)."""
