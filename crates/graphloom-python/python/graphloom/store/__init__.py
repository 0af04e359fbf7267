"""LangGraph's long-term memory stores on graphloom's Rust storage.

``graphloom.store.sqlite.SqliteStore`` (and ``.aio.AsyncSqliteStore``) and
``graphloom.store.postgres.PostgresStore`` (and ``.aio.AsyncPostgresStore``) implement
LangGraph's ``BaseStore``, as ``langgraph.store.sqlite`` and ``langgraph.store.postgres`` do.
"""
