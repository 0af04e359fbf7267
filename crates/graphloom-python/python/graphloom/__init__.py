"""graphloom for Python: LangGraph's persistence on graphloom's Rust storage.

The savers live where LangGraph's do, so migrating is one import line:
``from graphloom.checkpoint.sqlite import SqliteSaver``.
"""

from graphloom._native import StorageError, __version__

__all__ = ["StorageError", "__version__"]
