"""The graphloom benchmark suite, written for Python LangGraph.

Our own rewrite of the cases of LangGraph's bench/ directory (same graphs, parameters and
measured shapes), timed with the same rule as the Rust runner: one warm-up run, then runs
until both --min-iters iterations and --min-time seconds are reached; the median is
reported. Every graph run consumes ``graph.stream(input, config, durability="exit")`` with a
fresh thread id and recursion_limit 1_000_000_000, as LangGraph's harness does; the
``*_sqlite`` / ``*_postgres`` cases use ``durability="sync"`` with a durable saver
(``_postgres`` needs GRAPHLOOM_PG_URL, which bench/compare.sh sets).

    python run.py [--mode sync|async|best] [--filter a,b] [--min-iters N] [--min-time S]
                  [--json out.json] [--detail-json detail.json] [--list]

--mode best (the default) runs every case with sync and async nodes and keeps the faster
median, so the comparison uses LangGraph's better number.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import operator
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
import warnings
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Optional, TypedDict

warnings.filterwarnings("ignore")

from langchain_core.language_models.chat_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tools import StructuredTool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402
from langgraph.prebuilt import create_react_agent  # noqa: E402
from langgraph.types import Send  # noqa: E402

RECURSION_LIMIT = 1_000_000_000
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def random_lowercase(n: int) -> str:
    return "".join(random.choice(LETTERS) for _ in range(n))


def saver(checkpoint: Any) -> Any:
    """None (False), an InMemorySaver (True), or a durable saver ("sqlite" / "postgres")."""
    if checkpoint == "sqlite":
        return sqlite_saver()
    if checkpoint == "postgres":
        return postgres_saver()
    return InMemorySaver() if checkpoint else None


# Durable savers stay open (and their temp dirs alive) until the process exits.
_KEEP = contextlib.ExitStack()


def sqlite_saver():
    """LangGraph's SqliteSaver on a temp file, synchronous=FULL in WAL mode (as graphloom's)."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    tmp = _KEEP.enter_context(tempfile.TemporaryDirectory(prefix="langgraph-bench-"))
    conn = sqlite3.connect(os.path.join(tmp, "checkpoints.sqlite"), check_same_thread=False)
    _KEEP.callback(conn.close)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    cp = SqliteSaver(conn)
    cp.setup()
    return cp


_PG_SETUP = False


def postgres_saver():
    """LangGraph's PostgresSaver on GRAPHLOOM_PG_URL (compare.sh starts or reuses a server)."""
    global _PG_SETUP
    from langgraph.checkpoint.postgres import PostgresSaver

    url = os.environ.get("GRAPHLOOM_PG_URL")
    if not url:
        raise SystemExit("the _postgres cases need GRAPHLOOM_PG_URL (bash bench/compare.sh sets it)")
    cp = _KEEP.enter_context(PostgresSaver.from_conn_string(url))
    if not _PG_SETUP:
        cp.setup()
        _PG_SETUP = True
    return cp


# --------------------------------------------------------------------------- fanout


class Overall(TypedDict):
    subjects: list
    jokes: Annotated[list, operator.add]


class JokeIn(TypedDict):
    subject: Any


class JokeOut(TypedDict):
    jokes: list


class Joke(TypedDict):
    subject: Any
    jokes: list


DONE_SUFFIX = " a" * 10


def fanout_graph(checkpoint: Any, is_async: bool):
    def edit(s):
        return {"subject": f"{s['subject']} - hohoho"}

    def generate(s):
        return {"jokes": [f"Joke about {s['subject']}"]}

    def bump(s):
        return {"jokes": [s["jokes"][0] + " a"]}

    async def aedit(s):
        return edit(s)

    async def agenerate(s):
        return generate(s)

    async def abump(s):
        return bump(s)

    def after_bump(s):
        return END if s["jokes"][0].endswith(DONE_SUFFIX) else "bump"

    def fan_out(s):
        return [Send("generate_joke", {"subject": subj}) for subj in s["subjects"]]

    sub = StateGraph(Joke, input_schema=JokeIn, output_schema=JokeOut)
    sub.add_node("edit", aedit if is_async else edit)
    sub.add_node("generate", agenerate if is_async else generate)
    sub.add_node("bump", abump if is_async else bump)
    sub.add_edge(START, "edit")
    sub.add_edge("edit", "generate")
    sub.add_edge("generate", "bump")
    sub.add_conditional_edges("bump", after_bump)
    sub.set_finish_point("generate")

    parent = StateGraph(Overall)
    parent.add_node("generate_joke", sub.compile())
    parent.add_conditional_edges(START, fan_out)
    parent.add_edge("generate_joke", END)
    return parent.compile(checkpointer=saver(checkpoint))


def fanout_input(n: int) -> dict:
    return {"subjects": [random.choices(LETTERS, k=1000) for _ in range(n)]}


# --------------------------------------------------------------------------- react


class ScriptedChatModel(BaseChatModel):
    """Replays its responses in a cycle; binding tools changes nothing."""

    responses: list[BaseMessage]
    index: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools, **kwargs):  # noqa: ARG002
        return self

    def _next(self) -> ChatResult:
        message = copy.deepcopy(self.responses[self.index])
        self.index = (self.index + 1) % len(self.responses)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ARG002
        return self._next()

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ARG002
        return self._next()


def react_graph(n_tools: int, checkpoint: bool, is_async: bool):  # noqa: ARG001
    model, tool = react_script(n_tools)
    return create_react_agent(model, [tool], checkpointer=saver(checkpoint))


def create_agent_graph(n_tools: int, checkpoint: bool, middleware: int):
    """The react script on LangChain's ``create_agent`` (``create_agent_cases.py``)."""
    from create_agent_cases import create_agent_graph as build

    model, tool = react_script(n_tools)
    return build(model, tool, saver(checkpoint), middleware)


def react_script(n_tools: int):
    """The scripted model (n tool calls, then an answer) and its tool."""

    def lookup(query: str) -> str:
        return f"result for query: {query}" * 10

    tool = StructuredTool.from_function(lookup, name=str(uuid.uuid4()), description="")
    script: list[BaseMessage] = [
        AIMessage(
            content="",
            id=str(uuid.uuid4()),
            tool_calls=[
                {
                    "id": str(uuid.uuid4()),
                    "name": tool.name,
                    "args": {"query": str(uuid.uuid4()) * 100},
                }
            ],
        )
        for _ in range(n_tools)
    ]
    script.append(AIMessage(content="answer" * 100, id=str(uuid.uuid4())))
    return ScriptedChatModel(responses=script), tool


def react_input() -> dict:
    return {"messages": [HumanMessage(content="hi?")]}


# --------------------------------------------------------------------------- wide state

LIST_FIELDS = {
    "messages",
    "trigger_events",
    "categorizations",
    "responses",
    "memory_docs",
    "relevant_rules",
}
DICT_FIELDS = {
    "user_info",
    "crm_info",
    "slack_participants",
    "notified_assignees",
    "autoresponse",
    "issue",
}
WIDE_SIZES = [("25x300", (5, 5), 300), ("15x600", (3, 5), 600), ("9x1200", (3, 3), 1200)]


def y_or_x(x, y):
    return y or x


def always_y(_x, y):
    return y


def y_if_truthy(x, y):
    return y if y else x


def y_if_not_none(x, y):
    return y if y is not None else x


@dataclass(kw_only=True)
class WideState:
    messages: Annotated[list, operator.add] = field(default_factory=list)
    trigger_events: Annotated[list, operator.add] = field(default_factory=list)
    primary_issue_medium: Annotated[str, y_or_x] = field(default="email")
    autoresponse: Annotated[Optional[dict], always_y] = field(default=None)
    issue: Annotated[Optional[dict], y_if_truthy] = field(default=None)
    relevant_rules: Optional[list] = field(default=None)
    memory_docs: Optional[list] = field(default=None)
    categorizations: Annotated[list, operator.add] = field(default_factory=list)
    responses: Annotated[list, operator.add] = field(default_factory=list)
    user_info: Annotated[Optional[dict], y_if_not_none] = field(default=None)
    crm_info: Annotated[Optional[dict], y_if_not_none] = field(default=None)
    email_thread_id: Annotated[Optional[str], y_if_not_none] = field(default=None)
    slack_participants: Annotated[dict, operator.or_] = field(default_factory=dict)
    bot_id: Optional[str] = field(default=None)
    notified_assignees: Annotated[dict, operator.or_] = field(default_factory=dict)


class WideDict(TypedDict):
    messages: Annotated[list, operator.add]
    trigger_events: Annotated[list, operator.add]
    primary_issue_medium: Annotated[str, y_or_x]
    autoresponse: Annotated[Optional[dict], always_y]
    issue: Annotated[Optional[dict], y_if_truthy]
    relevant_rules: Optional[list]
    memory_docs: Optional[list]
    categorizations: Annotated[list, operator.add]
    responses: Annotated[list, operator.add]
    user_info: Annotated[Optional[dict], y_if_not_none]
    crm_info: Annotated[Optional[dict], y_if_not_none]
    email_thread_id: Annotated[Optional[str], y_if_not_none]
    slack_participants: Annotated[dict, operator.or_]
    bot_id: Optional[str]
    notified_assignees: Annotated[dict, operator.or_]


NODES = [
    ("one", "messages", ["trigger_events", "primary_issue_medium"]),
    ("two", "trigger_events", ["autoresponse", "issue"]),
    ("three", "autoresponse", ["relevant_rules"]),
    ("four", "trigger_events", ["categorizations", "responses", "memory_docs"]),
    (
        "five",
        "categorizations",
        ["user_info", "crm_info", "email_thread_id", "slack_participants", "bot_id", "notified_assignees"],
    ),
    ("six", "responses", ["messages"]),
]


def wide_builder(schema, n: int, is_async: bool) -> StateGraph:
    as_dict = schema is WideDict

    def make(read: str, writes: list[str]) -> Callable:
        def node(state):
            val = state[read] if as_dict else getattr(state, read)
            if isinstance(val, str):
                val = {val: val}
            single = val[-1] if isinstance(val, list) else val
            many = val if isinstance(val, list) else [val]
            out = {}
            for k in writes:
                if k in LIST_FIELDS:
                    out[k] = many
                elif k in DICT_FIELDS:
                    out[k] = single
                else:
                    out[k] = random_lowercase(n)
            return out

        async def anode(state):
            return node(state)

        return anode if is_async else node

    def loop_or_end(state):
        msgs = state["messages"] if as_dict else state.messages
        return END if len(msgs) > n else "one"

    b = StateGraph(schema)
    for name, read, writes in NODES:
        b.add_node(name, make(read, writes))
    b.add_edge(START, "one")
    b.add_edge("one", "two")
    b.add_edge("two", "three")
    b.add_edge("two", "four")
    b.add_edge(["three", "four"], "five")
    b.add_edge("five", "six")
    b.add_conditional_edges("six", loop_or_end)
    return b


def wide_message(i_count: int, j_count: int) -> dict:
    leaf = ["hi?" * 10, True, 1, 6327816386138, None] * 5
    return {
        str(i) * 10: {str(j) * 10: list(leaf) for j in range(j_count)} for i in range(i_count)
    }


def wide_input(i_count: int, j_count: int) -> dict:
    return {"messages": [wide_message(i_count, j_count)]}


# --------------------------------------------------------------------------- sequential


def sequential_builder(n: int, is_async: bool) -> StateGraph:
    def noop(_state):
        return None

    async def anoop(_state):
        return None

    b = StateGraph(MessagesState)
    for i in range(n):
        b.add_node(f"node_{i}", anoop if is_async else noop)
    b.add_edge(START, "node_0")
    for i in range(1, n):
        b.add_edge(f"node_{i - 1}", f"node_{i}")
    b.add_edge(f"node_{n - 1}", END)
    return b


# --------------------------------------------------------------------------- harness


def fresh_config() -> dict:
    return {"configurable": {"thread_id": str(uuid.uuid4())}, "recursion_limit": RECURSION_LIMIT}


# Cases with LangGraph's synchronous durable savers (SqliteSaver / PostgresSaver): their
# async methods are not implemented, so only sync mode runs them.
SYNC_ONLY_SUFFIXES = ("_sqlite", "_postgres")


class GraphCase:
    """Times one full run of a compiled graph (the stream consumed to its end).

    ``durability="sync"`` (the durable-saver cases) saves every superstep before the next;
    those savers are synchronous, so such cases run only in sync mode (SYNC_ONLY_SUFFIXES)."""

    def __init__(self, graph, inp, durability: str = "exit"):
        self.graph = graph
        self.inp = inp
        self.durability = durability

    def _cleanup(self, cfg) -> None:
        cp = self.graph.checkpointer
        if cp:
            cp.delete_thread(cfg["configurable"]["thread_id"])

    def run_sync(self) -> float:
        cfg = fresh_config()
        t0 = time.perf_counter()
        for _ in self.graph.stream(self.inp, cfg, durability=self.durability):
            pass
        took = time.perf_counter() - t0
        self._cleanup(cfg)
        return took

    async def run_async(self) -> float:
        cfg = fresh_config()
        t0 = time.perf_counter()
        async for _ in self.graph.astream(self.inp, cfg, durability=self.durability):
            pass
        took = time.perf_counter() - t0
        self._cleanup(cfg)
        return took


class FnCase:
    """Times a plain function (graph construction and compilation)."""

    def __init__(self, fn: Callable[[], Any]):
        self.fn = fn

    def run_sync(self) -> float:
        t0 = time.perf_counter()
        self.fn()
        return time.perf_counter() - t0

    async def run_async(self) -> float:
        return self.run_sync()


class FirstEventCase:
    """Time from calling stream(values) to its first event; the rest is drained untimed."""

    def __init__(self, graph, inp):
        self.graph = graph
        self.inp = inp

    def run_sync(self) -> float:
        t0 = time.perf_counter()
        it = self.graph.stream(self.inp, fresh_config(), stream_mode="values", durability="exit")
        next(it)
        took = time.perf_counter() - t0
        for _ in it:
            pass
        return took

    async def run_async(self) -> float:
        t0 = time.perf_counter()
        it = self.graph.astream(self.inp, fresh_config(), stream_mode="values", durability="exit")
        await it.__anext__()
        took = time.perf_counter() - t0
        async for _ in it:
            pass
        return took


def registry() -> dict[str, Callable[[bool], Any]]:
    """Case name -> builder(is_async) of a case object. Building is untimed."""
    cases: dict[str, Callable[[bool], Any]] = {}
    for n in (10, 100):
        for ck in (False, True):
            name = f"fanout_to_subgraph_{n}x" + ("_checkpoint" if ck else "")
            cases[name] = lambda a, n=n, ck=ck: GraphCase(fanout_graph(ck, a), fanout_input(n))
    for n in (10, 100):
        for ck in (False, True):
            name = f"react_agent_{n}x" + ("_checkpoint" if ck else "")
            cases[name] = lambda a, n=n, ck=ck: GraphCase(react_graph(n, ck, a), react_input())
    for n in (10, 100):
        for ck in (False, True):
            name = f"create_agent_react_{n}x" + ("_checkpoint" if ck else "")
            cases[name] = lambda a, n=n, ck=ck: GraphCase(
                create_agent_graph(n, ck, 0), react_input()
            )
    cases["create_agent_react_100x_mw6"] = lambda a: GraphCase(
        create_agent_graph(100, False, 6), react_input()
    )
    for kind in ("sqlite", "postgres"):
        cases[f"fanout_to_subgraph_100x_{kind}"] = lambda a, k=kind: GraphCase(
            fanout_graph(k, a), fanout_input(100), durability="sync"
        )
        cases[f"react_agent_100x_{kind}"] = lambda a, k=kind: GraphCase(
            react_graph(100, k, a), react_input(), durability="sync"
        )
    for kind, schema in (("wide_state", WideState), ("wide_dict", WideDict)):
        for size, (i, j), n in WIDE_SIZES:
            for ck in (False, True):
                name = f"{kind}_{size}" + ("_checkpoint" if ck else "")
                cases[name] = lambda a, s=schema, n=n, i=i, j=j, ck=ck: GraphCase(
                    wide_builder(s, n, a).compile(checkpointer=saver(ck)), wide_input(i, j)
                )
        if kind == "wide_state":
            cases["wide_state_15x600_compilation"] = lambda a: FnCase(
                lambda: wide_builder(WideState, 600, a).compile()
            )
    for n in (10, 1000):
        cases[f"sequential_{n}"] = lambda a, n=n: GraphCase(
            sequential_builder(n, a).compile(), {"messages": []}
        )
    cases["sequential_1000_compilation"] = lambda a: FnCase(
        lambda: sequential_builder(1000, a).compile()
    )
    cases["first_event_latency_sequential_1000"] = lambda a: FirstEventCase(
        sequential_builder(1000, a).compile(), {"messages": []}
    )
    return cases


def measure(case, is_async: bool, min_iters: int, min_time: float, warmup: int) -> list[float]:
    async def run_all() -> list[float]:
        for _ in range(warmup):
            await case.run_async()
        samples: list[float] = []
        start = time.perf_counter()
        while len(samples) < max(min_iters, 1) or time.perf_counter() - start < min_time:
            samples.append(await case.run_async())
        return samples

    if is_async:
        return asyncio_run(run_all())
    for _ in range(warmup):
        case.run_sync()
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < max(min_iters, 1) or time.perf_counter() - start < min_time:
        samples.append(case.run_sync())
    return samples


def asyncio_run(coro):
    try:
        import uvloop  # type: ignore[import-not-found]

        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)


def human(secs: float) -> str:
    if secs >= 1:
        return f"{secs:.3f} s"
    if secs >= 1e-3:
        return f"{secs * 1e3:.3f} ms"
    return f"{secs * 1e6:.1f} us"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--min-iters", type=int, default=10)
    p.add_argument("--min-time", type=float, default=2.0)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--filter", default="", help="comma-separated substrings of case names")
    p.add_argument("--exact", action="store_true", help="--filter entries are whole case names")
    p.add_argument("--mode", choices=["sync", "async", "best"], default="best")
    p.add_argument("--json", help="write {case: median_seconds} here")
    p.add_argument("--detail-json", help="write per-mode medians, minimums and iterations here")
    p.add_argument("--list", action="store_true")
    args = p.parse_args()

    filters = [f for f in args.filter.split(",") if f]
    def wanted(name):
        return not filters or any(f == name if args.exact else f in name for f in filters)

    cases = {k: v for k, v in registry().items() if wanted(k)}
    if args.list:
        print("\n".join(cases))
        return 0
    if not cases:
        print(f"no case matches {filters}", file=sys.stderr)
        return 1
    modes = ["sync", "async"] if args.mode == "best" else [args.mode]

    print(f"{'case':<40} {'mode':>5} {'iters':>6} {'median':>12} {'min':>12}", flush=True)
    best: dict[str, float] = {}
    detail: dict[str, dict] = {}
    for name, make in cases.items():
        for mode in modes:
            is_async = mode == "async"
            if is_async and name.endswith(SYNC_ONLY_SUFFIXES):
                if args.mode == "async":
                    print(f"{name:<40} async: skipped (synchronous saver)", flush=True)
                continue
            samples = measure(make(is_async), is_async, args.min_iters, args.min_time, args.warmup)
            med, low = statistics.median(samples), min(samples)
            detail.setdefault(name, {})[mode] = {"median": med, "min": low, "iters": len(samples)}
            best[name] = min(best.get(name, med), med)
            print(f"{name:<40} {mode:>5} {len(samples):>6} {human(med):>12} {human(low):>12}", flush=True)
    for path, data in ((args.json, best), (args.detail_json, detail)):
        if path:
            # Cases not run this time keep their earlier results (a filtered run refreshes
            # only its own cases).
            try:
                with open(path) as f:
                    data = {**json.load(f), **data}
            except (OSError, ValueError):
                pass
            with open(path, "w") as f:
                json.dump(data, f, indent=2, sort_keys=True)
                f.write("\n")
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
