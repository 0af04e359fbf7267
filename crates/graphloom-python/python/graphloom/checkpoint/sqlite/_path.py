"""Where a saver's SQLite file lives for a connection string."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from collections.abc import Iterator


@contextmanager
def database_path(conn_string: str) -> Iterator[str]:
    """The file path for ``conn_string``. ``":memory:"`` (or ``""``) is a file in a
    temporary directory removed on exit: the Rust core reads on several connections and
    writes on one of its own, which a private in-memory database cannot be shared with."""
    if conn_string in (":memory:", ""):
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
