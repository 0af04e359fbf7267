"""``AsyncSqliteStore``: the async face of graphloom's SQLite store.

A drop-in for ``langgraph.store.sqlite.aio.AsyncSqliteStore``::

    from graphloom.store.sqlite.aio import AsyncSqliteStore

    async with AsyncSqliteStore.from_conn_string("memory.db") as store:
        await store.setup()
        graph = builder.compile(store=store)

Its async methods run the Rust calls on the event loop's default executor (they release
the GIL); an ``embed`` with an async method is awaited on the store's loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from langgraph.store.base import IndexConfig, TTLConfig

from graphloom._native import StoreCore
from graphloom.checkpoint.sqlite._path import database_path, synchronous_for
from graphloom.store._base import AsyncGraphloomStore, index_arg

__all__ = ["AsyncSqliteStore"]


class AsyncSqliteStore(AsyncGraphloomStore):
    """LangGraph's ``BaseStore`` in one SQLite file, for async code. See
    ``graphloom.store.sqlite.SqliteStore`` for the arguments."""

    refresh_needs_config = True

    def __init__(
        self,
        path: str,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        synchronous: str = "full",
    ) -> None:
        self.loop = _running_loop()
        config, native = index_arg(index, lambda: self.loop)
        core = StoreCore.sqlite(str(path), synchronous, native)
        super().__init__(core, index=config, ttl=ttl)
        self.path = str(path)

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        synchronous: str | None = None,
    ) -> AsyncIterator[AsyncSqliteStore]:
        """A store on the file ``conn_string`` (``":memory:"``: a temporary file removed at
        the end of the block). Opening the file runs off the event loop."""
        with database_path(conn_string) as path:
            loop = asyncio.get_running_loop()
            store = cls.__new__(cls)
            store.loop = loop
            config, native = index_arg(index, lambda: store.loop)
            core = await loop.run_in_executor(
                None, StoreCore.sqlite, path, synchronous_for(conn_string, synchronous), native
            )
            AsyncGraphloomStore.__init__(store, core, index=config, ttl=ttl)
            store.path = path
            try:
                yield store
            finally:
                await store.aclose()

    async def setup(self) -> None:
        """Nothing to do: the tables are created when the store opens the file (kept for
        code written against LangGraph's store)."""


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
