"""LangGraph's side of the differential test (tests/it/differential.rs runs this file).

Each scenario builds a small graph with LangGraph, drives it through a list of calls, and
records for every call: the `updates` of each superstep (split at the `values` events, so a
superstep's updates form one group), the error kind if the call failed, and the thread's
state afterwards (values, next nodes, pending interrupt values, history length). The Rust
side builds the same graphs with graphloom and records the same trace; the test compares.

Prints one JSON object: {scenario name: [call trace, ...]}.
"""

import asyncio
import json
import operator
import sys
from typing import Annotated, Optional, TypedDict

import typing_extensions as TE

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import (
    GraphDrained,
    GraphRecursionError,
    InvalidUpdateError,
    NodeError,
    NodeTimeoutError,
    is_invalid_resume,
)
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import RunControl, Runtime
from langgraph.types import Command, Interrupt, Overwrite, RetryPolicy, Send, TimeoutPolicy, interrupt


def plain(v):
    """JSON-ready value; an Interrupt becomes {"value": ...} (ids are not compared)."""
    if isinstance(v, Interrupt):
        return {"value": plain(v.value)}
    if isinstance(v, Overwrite):
        return {"__overwrite__": plain(v.value)}
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


def canon(v):
    return json.dumps(plain(v), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def error_kind(e):
    if isinstance(e, GraphDrained):
        return "drained"
    if isinstance(e, GraphRecursionError):
        return "recursion_limit"
    if isinstance(e, InvalidUpdateError):
        return "invalid_update"
    if isinstance(e, NodeTimeoutError):
        return "timeout"
    if is_invalid_resume(e):
        return "invalid_resume"
    return "node"


def thread(tid, **extra):
    cfg = {"configurable": {"thread_id": tid}}
    cfg.update(extra)
    return cfg


def call(graph, inp, cfg, tid, counts=None, control=None):
    steps, cur, err = [], [], None
    extra = {"control": control} if control is not None else {}
    try:
        for mode, chunk in graph.stream(inp, cfg, stream_mode=["updates", "values"], **extra):
            if mode == "updates":
                cur.append(canon(chunk))
            else:
                steps.append(sorted(cur))
                cur = []
    except Exception as e:  # the error kind is part of the trace
        err = error_kind(e)
    if cur:
        steps.append(sorted(cur))
    out = {"steps": steps, "error": err}
    try:
        st = graph.get_state(thread(tid))
        out["values"] = plain(st.values)
        out["next"] = sorted(st.next)
        out["interrupts"] = sorted(canon(i.value) for i in st.interrupts)
    except Exception as e:  # reading the state can fail too (a stored conflict)
        out["state_error"] = error_kind(e)
    out["history"] = len(list(graph.get_state_history(thread(tid))))
    if counts is not None:
        out["counts"] = dict(sorted(counts.items()))
    return out


async def acall(graph, inp, cfg, tid, counts=None):
    """`call` for graphs whose nodes must be async (timeouts need an event loop)."""
    steps, cur, err = [], [], None
    try:
        async for mode, chunk in graph.astream(inp, cfg, stream_mode=["updates", "values"]):
            if mode == "updates":
                cur.append(canon(chunk))
            else:
                steps.append(sorted(cur))
                cur = []
    except Exception as e:
        err = error_kind(e)
    if cur:
        steps.append(sorted(cur))
    out = {"steps": steps, "error": err}
    st = await graph.aget_state(thread(tid))
    out["values"] = plain(st.values)
    out["next"] = sorted(st.next)
    out["interrupts"] = sorted(canon(i.value) for i in st.interrupts)
    out["history"] = len([h async for h in graph.aget_state_history(thread(tid))])
    if counts is not None:
        out["counts"] = dict(sorted(counts.items()))
    return out


class Log(TypedDict, total=False):
    log: Annotated[list, operator.add]
    n: int
    x: str


def log_node(name):
    return lambda s: {"log": [name]}


def join():
    g = StateGraph(Log)
    for n in ["a", "b", "b2", "c"]:
        g.add_node(n, log_node(n))
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    g.add_edge("b", "b2")
    g.add_edge(["a", "b2"], "c")
    g.add_edge("c", END)
    graph = g.compile(checkpointer=InMemorySaver())
    return [call(graph, {"log": ["in"]}, thread("t"), "t")]


def loop():
    g = StateGraph(Log)
    g.add_node("inc", lambda s: {"n": s["n"] + 1, "log": [f"inc{s['n']}"]})
    g.add_edge(START, "inc")
    g.add_conditional_edges("inc", lambda s: "inc" if s["n"] < 3 else END)
    graph = g.compile(checkpointer=InMemorySaver())
    return [call(graph, {"n": 0}, thread("t"), "t")]


class Fan(TypedDict, total=False):
    items: list
    results: Annotated[list, operator.add]
    item: int


def send():
    g = StateGraph(Fan)
    g.add_node("plan", lambda s: {"results": []})
    g.add_node("worker", lambda s: {"results": [s["item"] * 10]})
    g.add_node("done", lambda s: {"results": [sum(s["results"])]})
    g.add_edge(START, "plan")
    g.add_conditional_edges("plan", lambda s: [Send("worker", {"item": i}) for i in s["items"]])
    g.add_edge("worker", "done")
    g.add_edge("done", END)
    graph = g.compile(checkpointer=InMemorySaver())
    return [call(graph, {"items": [1, 2, 3]}, thread("t"), "t")]


def conflict():
    g = StateGraph(Log)
    g.add_node("a", lambda s: {"x": "from a"})
    g.add_node("b", lambda s: {"x": "from b"})
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    graph = g.compile(checkpointer=InMemorySaver())
    return [call(graph, {"log": ["in"]}, thread("t"), "t")]


def command():
    g = StateGraph(Log)
    g.add_node("a", lambda s: Command(update={"log": ["a"]}, goto="c"))
    g.add_node("b", log_node("b"))
    g.add_node("c", log_node("c"))
    g.add_edge(START, "a")
    g.add_edge("b", END)
    g.add_edge("c", END)
    graph = g.compile(checkpointer=InMemorySaver())
    return [call(graph, {"log": ["in"]}, thread("t"), "t")]


def chain(interrupt_before=None, interrupt_after=None):
    g = StateGraph(Log)
    for n in ["a", "b", "c"]:
        g.add_node(n, log_node(n))
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_edge("c", END)
    return g.compile(
        checkpointer=InMemorySaver(),
        interrupt_before=interrupt_before,
        interrupt_after=interrupt_after,
    )


def static_interrupt():
    graph = chain(interrupt_before=["b"], interrupt_after=["b"])
    return [
        call(graph, {"log": ["in"]}, thread("t"), "t"),
        call(graph, None, thread("t"), "t"),
        call(graph, None, thread("t"), "t"),
    ]


class Ask(TypedDict, total=False):
    log: Annotated[list, operator.add]
    answer: str


def dynamic_interrupt():
    def ask(s):
        answer = interrupt({"question": "approve?"})
        return {"answer": answer, "log": ["asked"]}

    g = StateGraph(Ask)
    g.add_node("ask", ask)
    g.add_node("after", log_node("after"))
    g.add_edge(START, "ask")
    g.add_edge("ask", "after")
    g.add_edge("after", END)
    graph = g.compile(checkpointer=InMemorySaver())
    return [
        call(graph, {"log": ["in"]}, thread("t"), "t"),
        call(graph, Command(resume="yes"), thread("t"), "t"),
    ]


def parallel_interrupts():
    def asker(name):
        def node(s):
            answer = interrupt(f"{name}?")
            return {"log": [f"{name}={answer}"]}

        return node

    g = StateGraph(Ask)
    g.add_node("p", asker("p"))
    g.add_node("q", asker("q"))
    g.add_edge(START, "p")
    g.add_edge(START, "q")
    graph = g.compile(checkpointer=InMemorySaver())
    first = call(graph, {"log": ["in"]}, thread("t"), "t")
    ids = {str(i.value): i.id for i in graph.get_state(thread("t")).interrupts}
    resume = {ids["p?"]: "yes", ids["q?"]: "no"}
    return [first, call(graph, Command(resume=resume), thread("t"), "t")]


def pending_writes():
    counts = {"a": 0, "b": 0}

    def a(s):
        counts["a"] += 1
        return {"log": ["a"]}

    def b(s):
        counts["b"] += 1
        if counts["b"] == 1:
            raise ValueError("b fails once")
        return {"log": ["b"]}

    g = StateGraph(Log)
    g.add_node("a", a)
    g.add_node("b", b)
    g.add_node("c", log_node("c"))
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    g.add_edge(["a", "b"], "c")
    g.add_edge("c", END)
    graph = g.compile(checkpointer=InMemorySaver())
    return [
        call(graph, {"log": ["in"]}, thread("t"), "t", counts),
        call(graph, None, thread("t"), "t", counts),
    ]


class Topic(TypedDict, total=False):
    topic: str
    summary: str
    log: Annotated[list, operator.add]


def subgraph():
    c = StateGraph(Topic)
    c.add_node("draft", lambda s: {"summary": f"draft of {s['topic']}"})
    c.add_node("polish", lambda s: {"summary": s["summary"] + ", polished"})
    c.add_edge(START, "draft")
    c.add_edge("draft", "polish")
    c.add_edge("polish", END)
    child = c.compile()
    g = StateGraph(Topic)
    g.add_node("pre", lambda s: {"topic": s["topic"].upper()})
    g.add_node("child", child)
    g.add_node("post", lambda s: {"summary": s["summary"] + "!"})
    g.add_edge(START, "pre")
    g.add_edge("pre", "child")
    g.add_edge("child", "post")
    g.add_edge("post", END)
    graph = g.compile(checkpointer=InMemorySaver())
    return [call(graph, {"topic": "tides"}, thread("t"), "t")]


def recursion_limit():
    g = StateGraph(Log)
    g.add_node("spin", lambda s: {"n": s.get("n", 0) + 1})
    g.add_edge(START, "spin")
    g.add_edge("spin", "spin")
    graph = g.compile(checkpointer=InMemorySaver())
    return [call(graph, {"n": 0}, thread("t", recursion_limit=4), "t")]


def update_as_node():
    graph = chain(interrupt_before=["b"])
    first = call(graph, {"log": ["in"]}, thread("t"), "t")
    graph.update_state(thread("t"), {"log": ["edited"], "x": "by hand"}, as_node="a")
    return [first, call(graph, None, thread("t"), "t")]


def fork():
    graph = chain()
    first = call(graph, {"log": ["in"]}, thread("t"), "t")
    before_b = next(s for s in graph.get_state_history(thread("t")) if s.next == ("b",))
    forked = graph.update_state(before_b.config, {"log": ["forked"]})
    return [first, call(graph, None, forked, "t")]


def deferred():
    g = StateGraph(Log)
    for n in ["a", "b1", "b2"]:
        g.add_node(n, log_node(n))
    g.add_node("join", lambda s: {"log": [f"join after {len(s['log'])}"]}, defer=True)
    g.add_edge(START, "a")
    g.add_edge(START, "b1")
    g.add_edge("b1", "b2")
    g.add_edge("a", "join")
    g.add_edge("b2", "join")
    g.add_edge("join", END)
    graph = g.compile(checkpointer=InMemorySaver())
    return [call(graph, {"log": ["in"]}, thread("t"), "t")]


def overwrite():
    g = StateGraph(Log)
    g.add_node("p", lambda s: {"log": Overwrite(["reset"])})
    g.add_node("q", log_node("q"))
    g.add_node("after", log_node("after"))
    g.add_edge(START, "p")
    g.add_edge(START, "q")
    g.add_edge(["p", "q"], "after")
    g.add_edge("after", END)
    graph = g.compile(checkpointer=InMemorySaver())
    return [call(graph, {"log": ["in"]}, thread("t"), "t")]


def events():
    """astream_events v2 of a chain: kind, name, tags, nesting depth, the node's name and
    step, and the data (triggers are each implementation's channel names: not compared)."""

    async def collect():
        out = []
        graph = chain()
        async for e in graph.astream_events({"log": ["in"]}, thread("t"), version="v2"):
            md = e["metadata"]
            out.append(
                {
                    "event": e["event"],
                    "name": e["name"],
                    "tags": sorted(e["tags"]),
                    "depth": len(e["parent_ids"]),
                    "node": md.get("langgraph_node"),
                    "step": md.get("langgraph_step"),
                    "data": canon(e["data"]),
                }
            )
        return out

    return asyncio.run(collect())


def functional():
    """An entrypoint that doubles each item in parallel tasks, asks for approval, returns
    one value and saves another as `previous`; run twice on one thread."""
    counts = {"double": 0}

    @task
    def double(x):
        counts["double"] += 1
        return x * 2

    @entrypoint(checkpointer=InMemorySaver())
    def workflow(xs, *, previous=None):
        total = sum(f.result() for f in [double(x) for x in xs])
        answer = interrupt(f"approve {total}?")
        out = {"total": total, "answer": answer, "previous": previous}
        return entrypoint.final(value=out, save=total)

    def fcall(inp):
        updates = [canon(c) for c in workflow.stream(inp, thread("t"), stream_mode="updates")]
        st = workflow.get_state(thread("t"))
        return {
            "updates": sorted(updates),
            "interrupts": sorted(canon(i.value) for i in st.interrupts),
            "next": sorted(st.next),
            "counts": dict(counts),
        }

    calls = [fcall([1, 2, 3]), fcall(Command(resume="yes")), fcall([5]), fcall(Command(resume="no"))]
    history = [[s.metadata["step"], s.metadata["source"], list(s.next)]
               for s in workflow.get_state_history(thread("t"))]
    return calls + [{"history": history}]


def timeouts():
    """An idle timeout retried by default (the retry heartbeats through work longer than
    the limit), then a hard run timeout without retries that fails the run."""
    counts = {"slow": 0}

    async def slow(s, runtime: Runtime):
        counts["slow"] += 1
        if counts["slow"] == 1:
            await asyncio.Event().wait()
        for _ in range(8):
            await asyncio.sleep(0.05)
            runtime.heartbeat()
        return {"log": ["slow"]}

    async def hang(s):
        await asyncio.Event().wait()

    g = StateGraph(Log)
    g.add_node(
        "slow",
        slow,
        timeout=TimeoutPolicy(idle_timeout=0.2),
        retry_policy=RetryPolicy(max_attempts=2, initial_interval=0.01, jitter=False),
    )
    g.add_node("hang", hang, timeout=TimeoutPolicy(run_timeout=0.1))
    g.add_edge(START, "slow")
    g.add_edge("slow", "hang")
    g.add_edge("hang", END)
    graph = g.compile(checkpointer=InMemorySaver())
    return [asyncio.run(acall(graph, {"log": ["in"]}, thread("t"), "t", counts))]


def error_handlers():
    """`a` fails into its own handler, which routes to `fallback` (so `a`'s edge to `b` is
    not followed); `d` fails into the graph's default handler, which routes nowhere; `c`,
    beside them, succeeds."""
    counts = {"a": 0, "d": 0}

    def failing(name):
        def node(s):
            counts[name] += 1
            raise ValueError(f"{name} broke")

        return node

    def own(s, error: NodeError):
        return Command(update={"log": [f"handled {error.node}: {error.error}"]}, goto="fallback")

    def default(s, error: NodeError):
        return {"log": [f"default {error.node}: {error.error}"]}

    g = StateGraph(Log).set_node_defaults(error_handler=default)
    g.add_node("a", failing("a"), error_handler=own, destinations=("fallback",))
    g.add_node("b", log_node("b"))
    g.add_node("c", log_node("c"))
    g.add_node("d", failing("d"))
    g.add_node("fallback", log_node("fallback"))
    g.add_edge(START, "a")
    g.add_edge(START, "c")
    g.add_edge(START, "d")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    g.add_edge("c", END)
    g.add_edge("d", END)
    g.add_edge("fallback", END)
    graph = g.compile(checkpointer=InMemorySaver())
    return [call(graph, {"log": ["in"]}, thread("t"), "t", counts)]


class Decision(TE.TypedDict):
    approved: bool


def interrupt_schemas():
    """An interrupt with a response schema: a resume that does not match is refused and
    the interrupt stays pending; a matching one resumes."""
    counts = {"review": 0}

    def review(s):
        counts["review"] += 1
        d = interrupt("ship it?", response_schema=Decision)
        return {"x": "approved" if d["approved"] else "rejected"}

    g = StateGraph(Log)
    g.add_node("review", review)
    g.add_edge(START, "review")
    g.add_edge("review", END)
    graph = g.compile(checkpointer=InMemorySaver())
    t = thread("t")
    return [
        call(graph, {"log": ["in"]}, t, "t", counts),
        call(graph, Command(resume={"approved": "maybe"}), t, "t", counts),
        call(graph, Command(resume={"approved": True}), t, "t", counts),
    ]


def graph_view(drawn):
    """`to_json()` of a drawn graph without the runnables' class paths (`data.id`), edges
    sorted (LangGraph lists them in the order its dry run finds them)."""
    j = drawn.to_json()
    nodes = []
    for n in j["nodes"]:
        c = {k: n[k] for k in ("id", "type", "metadata") if k in n}
        if isinstance(n.get("data"), dict):
            c["name"] = n["data"].get("name")
        nodes.append(c)
    edges = sorted(j["edges"], key=canon)
    return {"nodes": nodes, "edges": edges}


def get_graph():
    """The nodes and edges of `get_graph()` and `get_graph(xray=True)`: a path map, a
    subgraph whose end two edges reach, a node the graph interrupts before."""
    c = StateGraph(Log)
    c.add_node("plan", log_node("plan"))
    c.add_node("act", log_node("act"))
    c.add_edge(START, "plan")
    c.add_conditional_edges("plan", lambda s: "act", ["act", END])
    c.add_edge("act", END)
    child = c.compile()
    g = StateGraph(Log)
    g.add_node("a", log_node("a"))
    g.add_node("team", child)
    g.add_node("b", log_node("b"))
    g.add_edge(START, "a")
    g.add_conditional_edges("a", lambda s: "team", {"go": "team", "stop": END})
    g.add_edge("team", "b")
    g.add_edge("b", END)
    graph = g.compile(checkpointer=InMemorySaver(), interrupt_before=["b"])
    return [graph_view(graph.get_graph()), graph_view(graph.get_graph(xray=True))]


def drain():
    """A node asks the run to drain: the run stops after that step; continuing runs the
    rest, each node once. A run drained before it starts keeps its input."""
    counts = {"a": 0, "b": 0, "c": 0}
    control = RunControl()

    def node(name):
        def run(s):
            counts[name] += 1
            if name == "a" and s["log"] == ["in"]:
                control.request_drain()
            return {"log": [name]}

        return run

    g = StateGraph(Log)
    for name in ["a", "b", "c"]:
        g.add_node(name, node(name))
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_edge("c", END)
    graph = g.compile(checkpointer=InMemorySaver())
    before = RunControl()
    before.request_drain()
    return [
        call(graph, {"log": ["in"]}, thread("t"), "t", counts, control),
        call(graph, None, thread("t"), "t", counts),
        call(graph, {"log": ["early"]}, thread("u"), "u", counts, before),
        call(graph, None, thread("u"), "u", counts),
    ]


SCENARIOS = {
    "join": join,
    "loop": loop,
    "send": send,
    "conflict": conflict,
    "command": command,
    "static_interrupt": static_interrupt,
    "dynamic_interrupt": dynamic_interrupt,
    "parallel_interrupts": parallel_interrupts,
    "pending_writes": pending_writes,
    "subgraph": subgraph,
    "recursion_limit": recursion_limit,
    "update_as_node": update_as_node,
    "fork": fork,
    "deferred": deferred,
    "overwrite": overwrite,
    "events": events,
    "functional": functional,
    "timeouts": timeouts,
    "error_handlers": error_handlers,
    "interrupt_schemas": interrupt_schemas,
    "get_graph": get_graph,
    "drain": drain,
}

if __name__ == "__main__":
    names = sys.argv[1:] or list(SCENARIOS)
    json.dump({n: SCENARIOS[n]() for n in names}, sys.stdout, indent=1, sort_keys=True)
