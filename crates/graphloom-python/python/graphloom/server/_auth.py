"""``AuthBridge``: the ``Auth`` object of ``langgraph.json``'s ``auth.path`` as graphloom's
server calls it (the Rust side is ``src/serve/auth.rs``).

- ``authenticate``: the ``@auth.authenticate`` handler, given what it asks for by name
  (``authorization``, ``headers`` with bytes keys and values, ``method``, ``path``,
  ``query_params``, ``path_params``, ``request``), answers the identity: a string, a dict
  with ``identity`` (and ``display_name``, ``permissions``, anything else), or a user
  object. ``Auth.exceptions.HTTPException`` refuses with its status.
- ``authorize``: the most specific ``@auth.on`` handler (``resource.action``, then
  ``resource``, then the action on every resource, then ``@auth.on``) gets the context and
  the request's value in LangGraph's shape; ``None`` or ``True`` allows, ``False``
  refuses (403), a dict filters by metadata (``{"key": value}``, ``{"$eq": ..}``,
  ``{"$contains": ..}``), and what the handler writes into ``value["metadata"]`` is
  stamped on what the request creates or updates.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import inspect
from typing import Any
from urllib.parse import parse_qsl

from graphloom.server._json import dumps, loads

_SEP = "\x1f"


class _Url:
    def __init__(self, path: str) -> None:
        self.path = path


class _Request:
    """What an authenticate handler reads of the request."""

    def __init__(self, method: str, path: str, query: str | None, headers: dict[str, str]) -> None:
        self.method = method
        self.url = _Url(path)
        self.headers = headers
        self.query_params = dict(parse_qsl(query or ""))
        self.path_params: dict[str, str] = {}


class _User:
    """The authenticated user as ``@auth.on`` handlers see it (``ctx.user``)."""

    def __init__(self, data: dict) -> None:
        extra = data.get("extra") or {}
        self._data = {**extra, **{k: v for k, v in data.items() if k != "extra"}}
        self.identity = data.get("identity", "")
        self.display_name = data.get("display_name") or self.identity
        self.is_authenticated = bool(data.get("is_authenticated", True))
        self.permissions = list(data.get("permissions") or [])

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def __iter__(self):
        return iter(self._data)

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)


# The server's (resource, action) as LangGraph names them.
def _lg_target(resource: str, action: str) -> tuple[str, str]:
    if resource == "runs":
        return ("threads", "create_run") if action == "create" else ("threads", "read")
    if resource == "store":
        return "store", {"create": "put", "update": "put", "read": "get"}.get(action, action)
    return resource, action


def _value(resource: str, action: str, req: dict) -> dict:
    """The value a LangGraph handler gets for this request."""
    body = req.get("body") if isinstance(req.get("body"), dict) else {}
    rid, tid = req.get("id"), req.get("thread_id")
    if resource == "threads":
        if action == "create":
            return {"thread_id": body.get("thread_id"), "metadata": dict(body.get("metadata") or {}), "if_exists": body.get("if_exists")}
        if action == "search":
            found = {k: body.get(k) for k in ("values", "status", "limit", "offset")}
            return {**found, "metadata": dict(body.get("metadata") or {})}
        if action == "update":
            return {"thread_id": rid, "metadata": dict(body.get("metadata") or {})}
        return {"thread_id": rid}
    if resource == "runs":
        if action == "create":
            return {
                "thread_id": tid,
                "assistant_id": body.get("assistant_id"),
                "run_id": None,
                "status": "pending",
                "metadata": dict(body.get("metadata") or {}),
                "prevent_insert_if_inflight": body.get("multitask_strategy") == "reject",
                "multitask_strategy": body.get("multitask_strategy"),
                "if_not_exists": body.get("if_not_exists"),
                "after_seconds": body.get("after_seconds"),
                "kwargs": body,
            }
        return {"thread_id": tid, "run_id": rid}
    if resource == "assistants":
        if action in ("create", "update"):
            return {**body, "assistant_id": rid or body.get("assistant_id"), "metadata": dict(body.get("metadata") or {})}
        if action == "search":
            found = {k: body.get(k) for k in ("graph_id", "limit", "offset")}
            return {**found, "metadata": dict(body.get("metadata") or {})}
        return {"assistant_id": rid}
    if resource == "crons":
        if action in ("create", "update"):
            return {**body, "cron_id": rid, "thread_id": tid}
        return {"cron_id": rid}
    if resource == "store":
        query = dict(parse_qsl(req.get("query") or ""))
        ns = body.get("namespace") or body.get("namespace_prefix")
        if ns is None and "namespace" in query:
            ns = query["namespace"].split(".")
        return {**body, "namespace": tuple(ns or ()), "key": body.get("key", query.get("key"))}
    return dict(body)


class AuthBridge:
    def __init__(self, auth: Any, loop: asyncio.AbstractEventLoop) -> None:
        if not hasattr(auth, "_authenticate_handler") or not hasattr(auth, "_handlers"):
            raise TypeError(f"auth.path names a {type(auth).__name__}, not a langgraph_sdk Auth object")
        if auth._authenticate_handler is None:
            raise TypeError("the Auth object has no @auth.authenticate handler")
        self.auth = auth
        self.loop = loop

    def authorizes(self) -> bool:
        return bool(self.auth._handlers or self.auth._global_handlers)

    def submit(self, kind: str, payload: str, sink: Any) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(self._call(kind, payload, sink), self.loop)

    async def _call(self, kind: str, payload: str, sink: Any) -> None:
        from langgraph_sdk.auth.exceptions import HTTPException

        try:
            req = loads(payload)
            if kind == "authenticate":
                sink.end(dumps(await self._authenticate(req)))
            else:
                sink.end(dumps(await self._authorize(req)))
        except HTTPException as e:
            status = getattr(e, "status_code", 401)
            sink.fail("HTTPException", f"{status}{_SEP}{getattr(e, 'detail', '') or ''}")
        except asyncio.CancelledError:
            sink.fail("CancelledError", "")
            raise
        except Exception as e:
            sink.fail(type(e).__name__, str(e))

    async def _authenticate(self, req: dict) -> dict:
        handler = self.auth._authenticate_handler
        headers = req.get("headers") or {}
        request = _Request(req["method"], req["path"], req.get("query"), headers)
        offered = {
            "request": request,
            "authorization": headers.get("authorization"),
            "headers": {k.encode(): v.encode() for k, v in headers.items()},
            "method": req["method"],
            "path": req["path"],
            "query_params": request.query_params,
            "path_params": {},
        }
        params = inspect.signature(handler).parameters
        unknown = [p for p in params if p not in offered]
        if unknown:
            raise TypeError(f"the authenticate handler asks for {unknown[0]!r}, which graphloom does not give yet")
        result = handler(**{p: offered[p] for p in params})
        if inspect.isawaitable(result):
            result = await result
        if result is None:
            from langgraph_sdk.auth.exceptions import HTTPException

            raise HTTPException(status_code=401, detail="not authenticated")
        if isinstance(result, str):
            return {"identity": result}
        if isinstance(result, dict):
            data = dict(result)
        else:
            data = {
                k: getattr(result, k)
                for k in ("identity", "display_name", "permissions")
                if getattr(result, k, None) is not None
            }
        out = {k: data.pop(k) for k in ("identity", "display_name", "permissions") if k in data}
        data.pop("is_authenticated", None)
        out["extra"] = data
        return out

    def _handler(self, resource: str, action: str) -> Any:
        handlers = self.auth._handlers
        for key in ((resource, action), (resource, "*"), ("*", action), ("*", "*")):
            if key in handlers and handlers[key]:
                return handlers[key][-1]
        if self.auth._global_handlers:
            return self.auth._global_handlers[-1]
        return None

    async def _authorize(self, req: dict) -> dict:
        from langgraph_sdk.auth.types import AuthContext

        resource, action = req["resource"], req["action"]
        lg_resource, lg_action = _lg_target(resource, action)
        handler = self._handler(lg_resource, lg_action)
        if handler is None:
            return {"allow": True}
        value = _value(resource, action, req)
        before = copy.deepcopy(value.get("metadata")) if isinstance(value.get("metadata"), dict) else None
        user = _User(req.get("user") or {})
        ctx = AuthContext(permissions=user.permissions, user=user, resource=lg_resource, action=lg_action)
        result = handler(ctx=ctx, value=value)
        if inspect.isawaitable(result):
            result = await result
        if result is False:
            return {"allow": False}
        out: dict[str, Any] = {"allow": True}
        if isinstance(result, dict):
            out["filter"] = result
        after = value.get("metadata")
        if isinstance(after, dict) and before is not None:
            stamps = {k: v for k, v in after.items() if before.get(k, object()) != v}
            if stamps:
                out["metadata"] = stamps
        return out
