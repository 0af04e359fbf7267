"""Where a saver's SQLite file lives for a connection string."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from collections.abc import Iterator


def is_memory(conn_string: str) -> bool:
    """Whether ``conn_string`` names a database that lives as long as its saver."""
    return conn_string in (":memory:", "")


@contextmanager
def database_path(conn_string: str) -> Iterator[str]:
    """The file path for ``conn_string``. ``":memory:"`` (or ``""``) is a file in a
    temporary directory removed on exit: the Rust core reads on several connections and
    writes on one of its own, which a private in-memory database cannot be shared with."""
    if is_memory(conn_string):
        tmp = tempfile.mkdtemp(prefix="graphloom-")
        try:
            yield os.path.join(tmp, "checkpoints.db")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    if conn_string.startswith("file:"):
        raise ValueError(
            "SQLite URI file names are not supported; pass a path (or ':memory:')"
        )
    yield conn_string


def synchronous_for(conn_string: str, synchronous: str | None) -> str:
    """The saver's ``synchronous`` setting: as asked, else ``"full"`` for a file and
    ``"normal"`` for ``":memory:"`` (a file removed when the saver closes has no use for
    an fsync per commit)."""
    if synchronous is not None:
        return synchronous
    return "normal" if is_memory(conn_string) else "full"
