"""A saver's or store's database URL from what LangGraph's PostgreSQL classes take: a URL,
or a psycopg connection or pool, whose connection parameters (its conninfo, password
included) are read. graphloom then opens its own pool of connections to that database;
the psycopg object is not used for anything else. Given a psycopg object, graphloom's pool
closes when that object closes."""

from __future__ import annotations

import asyncio
import functools
import inspect
from typing import Any
from urllib.parse import quote, urlencode

# Connection parameters carried over into the URL besides user, password, host, port and
# database name.
_PASSED_ON = ("sslmode", "sslrootcert", "sslcert", "sslkey", "application_name", "options")


def _params(conn: Any) -> dict[str, Any]:
    from psycopg.conninfo import conninfo_to_dict

    if hasattr(conn, "conninfo") and hasattr(conn, "getconn"):  # a psycopg_pool pool
        return conninfo_to_dict(conn.conninfo, **(getattr(conn, "kwargs", None) or {}))
    info = getattr(conn, "info", None)
    if info is not None and hasattr(info, "dsn"):  # a psycopg (async) connection
        params = conninfo_to_dict(info.dsn)
        if info.password:
            params["password"] = info.password
        return params
    raise TypeError(
        f"expected a PostgreSQL URL, a psycopg connection or a psycopg_pool pool, not {type(conn).__name__}"
    )


def _url(params: dict[str, Any]) -> str:
    user = quote(str(params.get("user") or ""), safe="")
    password = params.get("password")
    auth = user + (":" + quote(str(password), safe="") if password else "")
    host = str(params.get("host") or "")
    query = {k: str(params[k]) for k in _PASSED_ON if params.get(k) is not None}
    if not host or host.startswith("/"):
        # A Unix socket directory goes in the query, as the URL's host cannot hold a path.
        if host:
            query["host"] = host
        host = "localhost"
    elif ":" in host:
        host = f"[{host}]"
    port = params.get("port")
    netloc = (f"{auth}@" if auth else "") + host + (f":{port}" if port else "")
    dbname = quote(str(params.get("dbname") or ""), safe="")
    return f"postgresql://{netloc}/{dbname}" + (f"?{urlencode(query)}" if query else "")


def database_url(conn: Any) -> str:
    """The URL of ``conn``: itself if it is a string, else the database of a psycopg
    connection or pool."""
    if isinstance(conn, str):
        return conn
    return _url(_params(conn))


def close_with(conn: Any, close: Any) -> None:
    """Run ``close`` (blocking) when the psycopg object ``conn`` closes, before it does; a
    no-op for a URL. (Its ``close`` is wrapped on the instance: ``with pool:`` and
    ``async with pool:`` call it.)"""
    if isinstance(conn, str):
        return
    original = conn.close
    if inspect.iscoroutinefunction(original):

        @functools.wraps(original)
        async def aclose(*args: Any, **kwargs: Any) -> Any:
            try:
                await asyncio.get_running_loop().run_in_executor(None, close)
            finally:
                return await original(*args, **kwargs)

        conn.close = aclose
    else:

        @functools.wraps(original)
        def sclose(*args: Any, **kwargs: Any) -> Any:
            try:
                close()
            finally:
                return original(*args, **kwargs)

        conn.close = sclose
