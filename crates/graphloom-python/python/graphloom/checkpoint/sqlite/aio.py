"""``AsyncSqliteSaver``: the async face of graphloom's SQLite saver.

A drop-in for ``langgraph.checkpoint.sqlite.aio.AsyncSqliteSaver``::

    from graphloom.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string("checkpoints.db") as saver:
        graph = builder.compile(checkpointer=saver)

Its async methods run the Rust calls on the event loop's default executor (the calls
release the GIL), so the loop keeps serving other tasks while a read or a commit is under
way. Its sync methods work too, from any thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from langgraph.checkpoint.serde.base import SerializerProtocol

from graphloom._native import Core
from graphloom.checkpoint._typed import TypedSaver
from graphloom.checkpoint.sqlite._path import database_path, synchronous_for

__all__ = ["AsyncSqliteSaver"]


class AsyncSqliteSaver(TypedSaver):
    """A LangGraph checkpoint saver keeping checkpoints in one SQLite file (WAL mode), for
    async graphs. See ``graphloom.checkpoint.sqlite.SqliteSaver`` for its guarantees."""

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
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        serde: SerializerProtocol | None = None,
        synchronous: str | None = None,
    ) -> AsyncIterator[AsyncSqliteSaver]:
        """A saver on the file ``conn_string`` (``":memory:"``: a temporary file, written
        without an fsync per commit unless ``synchronous`` says otherwise). Opening the
        file (and migrating it) runs off the event loop."""
        with database_path(conn_string) as path:
            loop = asyncio.get_running_loop()
            core = await loop.run_in_executor(
                None, Core.sqlite, path, synchronous_for(conn_string, synchronous)
            )
            saver = cls.__new__(cls)
            TypedSaver.__init__(saver, core, serde=serde)
            saver.path = path
            try:
                yield saver
            finally:
                await loop.run_in_executor(None, saver.close)

    async def setup(self) -> None:
        """Nothing to do: the tables are created when the saver opens the file (kept for
        code written against LangGraph's saver)."""
