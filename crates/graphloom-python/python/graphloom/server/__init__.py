"""``graphloom serve``: graphloom's server (the LangGraph Server API) hosting the Python
LangGraph graphs a ``langgraph.json`` names, unchanged.

::

    pip install graphloom            # into the environment that runs your graphs
    graphloom serve                  # reads ./langgraph.json, listens on 127.0.0.1:2024

Every option of the Rust ``graphloom serve`` works (``--addr``, ``--db``,
``--database-url``, ``--api-key``, ``--cors``, ``--workers``, ...; ``graphloom serve
--help``), plus ``--config FILE`` for another ``langgraph.json``. The graphs run on
LangGraph itself, on one event loop in this process, checkpointed by graphloom's savers and
given graphloom's store in the server's database. See docs/python.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
from typing import Any

from graphloom.server._config import ConfigError, ServeConfig, load_config

__all__ = ["main", "ConfigError"]

USAGE = """usage: graphloom serve [--config langgraph.json] [graphloom serve options]

Serve the Python graphs of a langgraph.json over the LangGraph Server API.
`graphloom serve --help` lists every option."""


def main(argv: list[str] | None = None) -> int:
    """The ``graphloom`` command of the Python package."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    if args[0] != "serve":
        print(f"error: unknown command {args[0]!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    try:
        return serve(args[1:])
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0


def _split_args(args: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The options read here (``--config``, and ``--db`` / ``--database-url``, which the
    savers open too), and the arguments passed on to the server (all but ``--config``)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--config", default=None)
    parser.add_argument("--db", default="graphloom.db")
    parser.add_argument("--database-url", default=None)
    ours, _ = parser.parse_known_args(args)
    rest: list[str] = []
    skip = False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a == "--config":
            skip = True
            continue
        if a.startswith("--config="):
            continue
        rest.append(a)
    return ours, rest


def serve(args: list[str]) -> int:
    """Run the server until it stops; the exit code."""
    from graphloom import _native

    if any(a in ("-h", "--help") for a in args):
        return _native.serve(["graphloom", "serve", *args], [])
    ours, rest = _split_args(args)
    config = load_config(ours.config)
    config.apply_environment()
    # Options from langgraph.json, checked before any graph is imported.
    from_config = [*config.ttl_args(rest), *config.webhook_args(rest)]
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="graphloom-graphs", daemon=True)
    thread.start()
    try:
        checkpointer, store, close = _persistence(loop, ours.db, ours.database_url, config)
        try:
            bridges = _bridges(config, loop, checkpointer, store)
            auth = _auth(config, loop, rest)
            http = _http(config, loop)
            print(
                f"graphloom: serving {len(bridges)} Python graph(s) from {config.path}: "
                + ", ".join(graph_id for graph_id, _ in bridges),
                file=sys.stderr,
            )
            return _native.serve(
                ["graphloom", "serve", "--config", config.path, *from_config, *rest],
                bridges,
                _server_index(config, loop),
                checkpointer._core,
                auth,
                http,
            )
        finally:
            asyncio.run_coroutine_threadsafe(close(), loop).result(timeout=30)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)


def _persistence(
    loop: asyncio.AbstractEventLoop, db: str, database_url: str | None, config: ServeConfig
) -> tuple[Any, Any, Any]:
    """graphloom's saver and store on the server's database, made on the graphs' loop, and
    a coroutine function that closes them."""

    async def make() -> tuple[Any, Any]:
        if database_url:
            from graphloom.checkpoint.postgres.aio import AsyncPostgresSaver
            from graphloom.store.postgres.aio import AsyncPostgresStore

            saver = AsyncPostgresSaver(database_url)
            store = AsyncPostgresStore(database_url, index=config.store_index, ttl=config.store_ttl)
        else:
            from graphloom.checkpoint.sqlite.aio import AsyncSqliteSaver
            from graphloom.store.sqlite.aio import AsyncSqliteStore

            path = os.path.abspath(db)
            saver = await loop.run_in_executor(None, AsyncSqliteSaver, path)
            store = AsyncSqliteStore(path, index=config.store_index, ttl=config.store_ttl)
        return saver, store

    saver, store = asyncio.run_coroutine_threadsafe(make(), loop).result()

    async def close() -> None:
        for part in (store, saver):
            closer = getattr(part, "aclose", None)
            if closer is not None:
                await closer()
            elif getattr(part, "close", None) is not None:
                part.close()

    return saver, store, close


def _server_index(config: ServeConfig, loop: asyncio.AbstractEventLoop) -> Any:
    """``store.index`` as the server's own store routes take it (``None`` without one): the
    graphs' embeddings, run on their loop."""
    if not config.store_index:
        return None
    from graphloom.store._base import index_arg

    _, native = index_arg(config.store_index, lambda: loop)
    return native


def _auth(config: ServeConfig, loop: asyncio.AbstractEventLoop, rest: list[str]) -> Any:
    """The bridge of ``auth.path``'s ``Auth`` object, or ``None``."""
    if not config.auth_path:
        return None
    for flag in ("--api-key", "--jwt-secret", "--jwt-jwks"):
        if any(a == flag or a.startswith(flag + "=") for a in rest):
            raise ConfigError(f"{config.path} sets auth.path: {flag} cannot be given too (one auth per server)")
    from graphloom.server._auth import AuthBridge

    auth = config.import_graph("auth.path", config.auth_path)
    try:
        return AuthBridge(auth, loop)
    except TypeError as e:
        raise ConfigError(f"{config.path}: auth.path {config.auth_path}: {e}") from e


def _http(config: ServeConfig, loop: asyncio.AbstractEventLoop) -> Any:
    """The bridge of ``http.app``, or ``None``."""
    if not config.http_app:
        return None
    from graphloom.server._http import HttpBridge

    app = config.import_graph("http.app", config.http_app)
    try:
        return HttpBridge(app, loop)
    except TypeError as e:
        raise ConfigError(f"{config.path}: {e}") from e


def _bridges(
    config: ServeConfig, loop: asyncio.AbstractEventLoop, checkpointer: Any, store: Any
) -> list[tuple[str, Any]]:
    from graphloom.server._bridge import GraphBridge

    out = []
    for graph_id, spec in config.graphs.items():
        graph = config.import_graph(graph_id, spec)
        try:
            out.append((graph_id, GraphBridge(graph_id, graph, loop, checkpointer, store)))
        except Exception as e:
            raise ConfigError(f"graph {graph_id!r} ({spec}): {type(e).__name__}: {e}") from e
    return out
