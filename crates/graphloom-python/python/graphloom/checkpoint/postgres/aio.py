"""``AsyncPostgresSaver``: the async face of graphloom's PostgreSQL saver.

A drop-in for ``langgraph.checkpoint.postgres.aio.AsyncPostgresSaver``::

    from graphloom.checkpoint.postgres.aio import AsyncPostgresSaver

    async with AsyncPostgresSaver.from_conn_string(url) as saver:
        await saver.setup()
        graph = builder.compile(checkpointer=saver)

Its async methods run the Rust calls on the event loop's default executor (the calls
release the GIL); its sync methods work from any thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from graphloom._native import Core
from graphloom.checkpoint._typed import TypedSaver
from graphloom.checkpoint.postgres._conn import close_with, database_url

__all__ = ["AsyncPostgresSaver"]


class AsyncPostgresSaver(TypedSaver):
    """A LangGraph checkpoint saver keeping checkpoints in PostgreSQL, for async graphs.
    See ``graphloom.checkpoint.postgres.PostgresSaver`` for its guarantees."""

    def __init__(self, url: Any, *, serde: SerializerProtocol | None = None) -> None:
        """``url``: a URL, or a psycopg async connection or pool (see ``PostgresSaver``).
        Connecting blocks: construct it off the event loop, or use ``from_conn_string``."""
        super().__init__(Core.postgres(database_url(url)), serde=serde)
        close_with(url, self.close)

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls, conn_string: str, *, serde: SerializerProtocol | None = None
    ) -> AsyncIterator[AsyncPostgresSaver]:
        """A saver on the database at ``conn_string``; connecting (and creating the
        tables) runs off the event loop."""
        loop = asyncio.get_running_loop()
        core = await loop.run_in_executor(None, Core.postgres, conn_string)
        saver = cls.__new__(cls)
        TypedSaver.__init__(saver, core, serde=serde)
        try:
            yield saver
        finally:
            await loop.run_in_executor(None, saver.close)

    async def setup(self) -> None:
        """Nothing to do: the tables are created when the saver connects (kept for code
        written against LangGraph's saver)."""
