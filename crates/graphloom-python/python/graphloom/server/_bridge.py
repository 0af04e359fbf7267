"""``GraphBridge``: one Python LangGraph graph as graphloom's server calls it.

The Rust server schedules each call on the serve command's event loop with
``submit(kind, payload, sink)``: ``payload`` is the request as JSON text, and the
coroutine answers through ``sink`` (``graphloom._native.Sink``): stream parts with
``sink.part(mode, ns, json)``, then ``sink.end(json)``, or ``sink.fail(class, message)``.
The returned future's ``cancel()`` cancels the run (the server's cancel, its time limit, a
client gone).

The graph runs on LangGraph itself, compiled with graphloom's saver and store on the
server's database (``attach``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
from collections.abc import Callable
from typing import Any

from langgraph.types import Command, Send

from graphloom.server._json import dumps, loads

try:
    from langgraph.runtime import RunControl
except ImportError:  # LangGraph before 1.2: its runs cannot drain
    RunControl = None  # type: ignore[assignment,misc]

if RunControl is not None:

    class _ServerControl(RunControl):  # type: ignore[misc,valid-type]
        """LangGraph's drain control of one run, asked by the server through the run's sink
        (a graceful shutdown: the run stops at its next step boundary, checkpoint saved,
        and goes back to the queue)."""

        __slots__ = ("_sink",)

        def __init__(self, sink: Any) -> None:
            super().__init__()
            self._sink = sink

        @property
        def drain_requested(self) -> bool:
            return super().drain_requested or self._sink.draining()

        @property
        def drain_reason(self) -> str | None:
            return super().drain_reason or ("shutdown" if self._sink.draining() else None)

log = logging.getLogger("graphloom.server")

# Separates the failed node's name from the message in a failure's text (the Rust side
# splits on it): a character no node name or message holds.
_NODE_SEP = "\x1f"


def _failed_node(exc: BaseException) -> str | None:
    """The node a LangGraph run failed in, from the note LangGraph adds to the exception
    (``During task with name 'X' and id 'Y'``)."""
    for note in getattr(exc, "__notes__", ()) or ():
        marker = "During task with name '"
        if marker in note:
            rest = note.split(marker, 1)[1]
            return rest.split("'", 1)[0]
    return None


def _checkpoint(config: dict | None) -> dict | None:
    if not config:
        return None
    conf = config.get("configurable", {})
    return {
        "thread_id": conf.get("thread_id"),
        "checkpoint_ns": conf.get("checkpoint_ns", ""),
        "checkpoint_id": conf.get("checkpoint_id"),
        "checkpoint_map": conf.get("checkpoint_map"),
    }


def _task(t: Any) -> dict:
    state = getattr(t, "state", None)
    return {
        "id": t.id,
        "name": t.name,
        "path": list(t.path) if getattr(t, "path", None) else [],
        "error": repr(t.error) if getattr(t, "error", None) else None,
        "interrupts": list(getattr(t, "interrupts", ()) or ()),
        "checkpoint": _checkpoint(state) if isinstance(state, dict) else None,
        "state": None,
        "result": getattr(t, "result", None),
    }


def thread_state(snapshot: Any) -> dict | None:
    """A LangGraph ``StateSnapshot`` as the Agent Server's ``ThreadState``."""
    if snapshot is None or not snapshot.metadata:
        return None
    checkpoint = _checkpoint(snapshot.config)
    parent = _checkpoint(snapshot.parent_config)
    return {
        "values": snapshot.values,
        "next": list(snapshot.next),
        "tasks": [_task(t) for t in snapshot.tasks],
        "checkpoint": checkpoint,
        "metadata": snapshot.metadata,
        "created_at": snapshot.created_at,
        "parent_checkpoint": parent,
        "interrupts": list(getattr(snapshot, "interrupts", ()) or ()),
        "checkpoint_id": checkpoint["checkpoint_id"] if checkpoint else None,
        "parent_checkpoint_id": parent["checkpoint_id"] if parent else None,
    }


def _nodes(value: Any) -> Any:
    return value if value in (None, "*") else list(value)


def _command(c: dict) -> Command:
    goto = []
    for g in c.get("goto") or []:
        if isinstance(g, dict):
            goto.append(Send(g["node"], g.get("input")))
        else:
            goto.append(g)
    kwargs: dict[str, Any] = {}
    if c.get("update") is not None:
        kwargs["update"] = c["update"]
    if c.get("resume") is not None:
        kwargs["resume"] = c["resume"]
    if goto:
        kwargs["goto"] = goto
    return Command(**kwargs)


class GraphBridge:
    """One graph behind the server (see the module docs).

    ``graph`` is a compiled LangGraph graph, or a factory returning one (called with the
    run's config when it takes an argument, once per run)."""

    def __init__(
        self,
        graph_id: str,
        graph: Any,
        loop: asyncio.AbstractEventLoop,
        checkpointer: Any,
        store: Any,
    ) -> None:
        self.graph_id = graph_id
        self.loop = loop
        self.checkpointer = checkpointer
        self.store = store
        self._factory: Callable[..., Any] | None = None
        if _is_graph(graph):
            self._graph = self.attach(graph)
        elif callable(graph):
            self._factory = graph
            self._graph = self.attach(self._call_factory({"configurable": {}}))
        else:
            raise TypeError(
                f"graph {graph_id!r} is a {type(graph).__name__}, not a compiled LangGraph "
                "graph or a function returning one"
            )

    def _call_factory(self, config: dict) -> Any:
        """The factory's graph, made at start (off the loop: an async factory runs there)."""
        assert self._factory is not None
        params = inspect.signature(self._factory).parameters
        made = self._factory(config) if params else self._factory()
        if inspect.isawaitable(made):
            made = asyncio.run_coroutine_threadsafe(_awaited(made), self.loop).result()
        if not _is_graph(made):
            raise TypeError(
                f"graph {self.graph_id!r}: the factory returned a {type(made).__name__}, "
                "not a compiled LangGraph graph"
            )
        return made

    def attach(self, graph: Any) -> Any:
        """``graph`` with graphloom's saver and store (a graph compiled with a checkpointer
        of its own keeps it, as LangGraph Server does not: the server's is the one whose
        threads it lists, so it wins)."""
        update = {"checkpointer": self.checkpointer}
        if self.store is not None:
            update["store"] = self.store
        return graph.copy(update=update)

    # -- what the server reads once ----------------------------------------------------

    def describe(self) -> str:
        g = self._graph
        drawn = g.get_graph()
        drawing = drawn.to_json()
        nodes = [n for n in drawn.nodes if n not in ("__start__", "__end__")]
        try:
            mermaid = drawn.draw_mermaid()
        except Exception:  # a graph LangGraph cannot draw still serves
            mermaid = ""
        subgraphs = []
        try:
            for ns, sub in g.get_subgraphs(recurse=True):
                sub_drawn = sub.get_graph()
                subgraphs.append(
                    {
                        "ns": ns,
                        "name": getattr(sub, "name", ns),
                        "schema": _schema(sub.get_output_jsonschema),
                        "mermaid": sub_drawn.draw_mermaid(),
                    }
                )
        except Exception as e:  # pragma: no cover - drawing only
            log.debug("subgraphs of %s not drawn: %s", self.graph_id, e)
        output = _schema(g.get_output_jsonschema)
        return dumps(
            {
                "nodes": nodes,
                "input_schema": _schema(g.get_input_jsonschema),
                "output_schema": output,
                "state_schema": output,
                "drawing": drawing,
                "mermaid": mermaid,
                "subgraphs": subgraphs,
            }
        )

    # -- calls ---------------------------------------------------------------------------

    def submit(self, kind: str, payload: str, sink: Any) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(self._call(kind, payload, sink), self.loop)

    async def _call(self, kind: str, payload: str, sink: Any) -> None:
        try:
            request = loads(payload)
            if kind == "run":
                await self._run(request, sink)
            elif kind == "get_state":
                sink.end(dumps(await self._get_state(request)))
            elif kind == "history":
                sink.end(dumps(await self._history(request)))
            elif kind == "update_state":
                sink.end(dumps(await self._update_state(request)))
            else:
                sink.fail("ValueError", f"unknown call {kind!r}")
        except asyncio.CancelledError:
            sink.fail("CancelledError", "")
            raise
        except Exception as e:
            node = _failed_node(e)
            text = str(e)
            sink.fail(type(e).__name__, f"{node}{_NODE_SEP}{text}" if node else text)

    async def _graph_for(self, config: dict) -> Any:
        """The graph of a call: the compiled one, or what a factory that takes the run's
        config makes of it (on the loop: an async factory is awaited here)."""
        factory = self._factory
        if factory is None or not inspect.signature(factory).parameters:
            return self._graph
        made = factory(config)
        if inspect.isawaitable(made):
            made = await made
        if not _is_graph(made):
            raise TypeError(
                f"graph {self.graph_id!r}: the factory returned a {type(made).__name__}, "
                "not a compiled LangGraph graph"
            )
        return self.attach(made)

    @staticmethod
    def _config(thread_id: str | None, checkpoint_id: str | None = None) -> dict:
        conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
        if checkpoint_id:
            conf["checkpoint_id"] = checkpoint_id
        return {"configurable": conf}

    async def _run(self, req: dict, sink: Any) -> None:
        config = self._config(req.get("thread_id"), req.get("checkpoint_id"))
        # The client's configurable (and the authenticated user the server adds), under
        # the thread and checkpoint the server chose.
        config["configurable"] = {**(req.get("configurable") or {}), **config["configurable"]}
        if req.get("recursion_limit"):
            config["recursion_limit"] = req["recursion_limit"]
        metadata = dict(req.get("metadata") or {})
        if req.get("run_id"):
            config["run_id"] = req["run_id"]
            # The run's checkpoints say which run wrote them: a run taken over after a
            # crash finds whether it already checkpointed (and continues instead of
            # applying its input again).
            metadata.setdefault("run_id", req["run_id"])
        if metadata:
            config["metadata"] = metadata
        graph = await self._graph_for(config)
        if req.get("command"):
            run_input: Any = _command(req["command"])
        else:
            run_input = req.get("input")
        asked = req.get("modes") or ["values"]
        events = "events" in asked
        modes = [m for m in asked if m != "events"]
        kwargs: dict[str, Any] = {
            "stream_mode": modes or ["values"],
            "subgraphs": bool(req.get("subgraphs")),
            "durability": req.get("durability") or "sync",
        }
        if req.get("interrupt_before") is not None:
            kwargs["interrupt_before"] = _nodes(req["interrupt_before"])
        if req.get("interrupt_after") is not None:
            kwargs["interrupt_after"] = _nodes(req["interrupt_after"])
        if req.get("context") is not None:
            kwargs["context"] = req["context"]
        if RunControl is not None and "control" in inspect.signature(graph.astream).parameters:
            kwargs["control"] = _ServerControl(sink)
        nested = kwargs["subgraphs"]

        def part(chunk: Any) -> bool:
            if nested:
                ns, mode, data = chunk
            else:
                (mode, data), ns = chunk, ()
            return sink.part(mode, list(ns), dumps(data))

        if events:
            # The graph's own events are named after its graph id, as the Agent Server's.
            config["run_name"] = self.graph_id
            # `astream_events` (v2): every event goes out as an `events` part but the graph's
            # own `on_chain_stream`, whose chunks are the other modes' parts (none when only
            # `events` was asked), as the Agent Server sends them.
            async for event in graph.astream_events(run_input, config, version="v2", **kwargs):
                if event.get("event") == "on_chain_stream" and not event.get("parent_ids"):
                    if modes and not part(event["data"]["chunk"]):
                        return
                elif not sink.part("events", [], dumps(event)):
                    return
        else:
            async for chunk in graph.astream(run_input, config, **kwargs):
                if not part(chunk):
                    return
        snapshot = await graph.aget_state(self._config(req.get("thread_id")))
        interrupts = list(getattr(snapshot, "interrupts", ()) or ())
        sink.end(
            dumps(
                {
                    "values": snapshot.values,
                    "interrupts": interrupts,
                    "interrupted": bool(snapshot.next) or bool(interrupts),
                    "checkpoint": _checkpoint(snapshot.config),
                }
            )
        )

    async def _get_state(self, req: dict) -> dict | None:
        config = self._config(req["thread_id"], req.get("checkpoint_id"))
        snapshot = await (await self._graph_for(config)).aget_state(config)
        return thread_state(snapshot)

    async def _history(self, req: dict) -> list:
        config = self._config(req["thread_id"])
        before = self._config(req["thread_id"], req["before"]) if req.get("before") else None
        out = []
        graph = await self._graph_for(config)
        async for snapshot in graph.aget_state_history(
            config, filter=req.get("filter") or None, before=before, limit=req.get("limit")
        ):
            state = thread_state(snapshot)
            if state is not None:
                out.append(state)
        return out

    async def _update_state(self, req: dict) -> dict | None:
        config = self._config(req["thread_id"], req.get("checkpoint_id"))
        values = req.get("values")
        done = await (await self._graph_for(config)).aupdate_state(
            config, values, as_node=req.get("as_node")
        )
        return _checkpoint(done)


async def _awaited(made: Any) -> Any:
    return await made


def _is_graph(obj: Any) -> bool:
    return hasattr(obj, "astream") and hasattr(obj, "aget_state") and hasattr(obj, "copy")


def _schema(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception:  # a schema LangGraph cannot describe: the server shows none
        return None
