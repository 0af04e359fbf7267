"""``HttpBridge``: the ASGI app of ``langgraph.json``'s ``http.app`` (FastAPI, Starlette,
any ASGI 3 app) answering the requests graphloom's server routes do not (the Rust side is
``src/serve/http.rs``). Each request runs the app once on the graphs' event loop; its
response is collected whole (streaming responses arrive at once, at their end). Bodies
and header values cross as Latin-1 text, one character per byte.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

from graphloom.server._json import dumps, loads


class HttpBridge:
    def __init__(self, app: Any, loop: asyncio.AbstractEventLoop) -> None:
        if not callable(app):
            raise TypeError(f"http.app names a {type(app).__name__}, not an ASGI app")
        self.app = app
        self.loop = loop

    def submit(self, kind: str, payload: str, sink: Any) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(self._call(payload, sink), self.loop)

    async def _call(self, payload: str, sink: Any) -> None:
        try:
            sink.end(dumps(await self._request(loads(payload))))
        except asyncio.CancelledError:
            sink.fail("CancelledError", "")
            raise
        except Exception as e:
            sink.fail(type(e).__name__, str(e))

    async def _request(self, req: dict) -> dict:
        body = req["body"].encode("latin-1")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": req["method"],
            "scheme": "http",
            "path": req["path"],
            "raw_path": req["path"].encode(),
            "query_string": req["query"].encode("latin-1"),
            "root_path": "",
            "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in req["headers"]],
            "client": None,
            "server": None,
        }
        sent = False

        async def receive() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            # The request is whole; the app waits for a disconnect only once it answered.
            await asyncio.Event().wait()
            return {"type": "http.disconnect"}

        status = 500
        headers: list[list[str]] = []
        chunks: list[bytes] = []

        async def send(message: dict) -> None:
            nonlocal status, headers
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in message.get("headers", [])]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, send)
        return {"status": status, "headers": headers, "body": b"".join(chunks).decode("latin-1")}
