"""``graphloom serve`` hosting Python LangGraph graphs from a ``langgraph.json``, driven by
the official ``langgraph-sdk`` client: runs (wait, stream in several modes, resume),
interrupts, state, history, update_state, errors, token streaming from a LangChain chat
model, subgraphs with ``Send``, the store, the functional API, cancel, runs in flight at
once, and a server killed with SIGKILL in the middle of a run.

Every test of the served API runs twice: against ``graphloom serve`` and against
``langgraph dev`` (langgraph-cli[inmem], the reference server) serving the same
``langgraph.json``, so each assertion is one both servers meet."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client

GRAPHS = {
    "steps.py": '''
        import operator
        from typing import Annotated
        from typing_extensions import TypedDict
        from langgraph.config import get_stream_writer
        from langgraph.graph import END, START, StateGraph
        from langgraph.types import interrupt

        class State(TypedDict):
            log: Annotated[list[str], operator.add]
            approved: bool

        def plan(state):
            get_stream_writer()({"planning": len(state.get("log", []))})
            return {"log": ["planned"]}

        def approve(state):
            answer = interrupt({"question": "approve?"})
            return {"approved": answer == "yes", "log": ["asked"]}

        def finish(state):
            if "boom" in state["log"]:
                raise ValueError("boom in state")
            return {"log": ["done"]}

        b = StateGraph(State)
        b.add_node("plan", plan)
        b.add_node("approve", approve)
        b.add_node("finish", finish)
        b.add_edge(START, "plan")
        b.add_edge("plan", "approve")
        b.add_edge("approve", "finish")
        b.add_edge("finish", END)
        graph = b.compile()
    ''',
    "chat.py": '''
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage
        from langgraph.graph import END, START, MessagesState, StateGraph

        def make_graph():
            model = GenericFakeChatModel(messages=iter([AIMessage(content="hello there friend")] * 100))

            async def reply(state):
                return {"messages": [await model.ainvoke(state["messages"])]}

            b = StateGraph(MessagesState)
            b.add_node("reply", reply)
            b.add_edge(START, "reply")
            b.add_edge("reply", END)
            return b.compile()
    ''',
    "fanout.py": '''
        import operator
        from typing import Annotated
        from typing_extensions import TypedDict
        from langgraph.config import get_stream_writer
        from langgraph.graph import END, START, StateGraph
        from langgraph.types import Send

        class Inner(TypedDict):
            item: str
            results: Annotated[list[str], operator.add]

        def work(state):
            get_stream_writer()({"working_on": state["item"]})
            return {"results": [state["item"].upper()]}

        inner = StateGraph(Inner)
        inner.add_node("work", work)
        inner.add_edge(START, "work")
        inner.add_edge("work", END)
        inner = inner.compile()

        class Outer(TypedDict):
            items: list[str]
            results: Annotated[list[str], operator.add]

        def spread(state):
            return [Send("each", {"item": i, "results": []}) for i in state["items"]]

        b = StateGraph(Outer)
        b.add_node("each", inner)
        b.add_conditional_edges(START, spread, ["each"])
        b.add_edge("each", END)
        graph = b.compile()
    ''',
    "memory.py": '''
        from langgraph.config import get_store
        from langgraph.graph import END, START, MessagesState, StateGraph

        def remember(state):
            store = get_store()
            text = state["messages"][-1].content
            store.put(("memories", "u1"), "last", {"text": text})
            seen = store.search(("memories", "u1"))
            return {"messages": [{"role": "ai", "content": f"I keep {len(seen)} memory"}]}

        b = StateGraph(MessagesState)
        b.add_node("remember", remember)
        b.add_edge(START, "remember")
        b.add_edge("remember", END)
        graph = b.compile()
    ''',
    "func.py": '''
        from langgraph.func import entrypoint, task
        from langgraph.types import interrupt

        @task
        def double(x: int) -> int:
            return x * 2

        @entrypoint()
        async def workflow(n: int) -> dict:
            doubled = await double(n)
            extra = interrupt({"doubled": doubled})
            return {"result": doubled + extra}
    ''',
    "waits.py": '''
        import asyncio, os
        from typing_extensions import TypedDict
        from langgraph.graph import END, START, StateGraph

        class S(TypedDict, total=False):
            n: int
            out: str

        # How many runs are inside `gather` at once: a run leaves only once `want` are in,
        # so it passes only when runs interleave on the loop.
        inside = {"now": 0}

        async def gather(state):
            inside["now"] += 1
            want = state.get("n", 1)
            for _ in range(1000):
                if inside["now"] >= want:
                    break
                await asyncio.sleep(0.01)
            return {"out": f"met {inside['now']}"}

        async def hang(state):
            await asyncio.sleep(3600)
            return {}

        b = StateGraph(S)
        b.add_node("gather", gather)
        b.add_edge(START, "gather")
        b.add_edge("gather", END)
        graph = b.compile()

        def env(state):
            return {"out": os.environ.get("GRAPHLOOM_TEST_ENV", "unset")}

        e = StateGraph(S)
        e.add_node("env", env)
        e.add_edge(START, "env")
        e.add_edge("env", END)
        env_graph = e.compile()

        h = StateGraph(S)
        h.add_node("hang", hang)
        h.add_edge(START, "hang")
        h.add_edge("hang", END)
        hanging = h.compile()
    ''',
    "agents.py": '''
        from typing import Annotated
        from langchain.agents import create_agent
        from langchain.agents.middleware import HumanInTheLoopMiddleware
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage, ToolMessage
        from langchain_core.tools import InjectedToolCallId, tool
        from langgraph.types import Command

        class ScriptedChat(GenericFakeChatModel):
            """Answers from a script whatever it is asked; binding tools changes nothing."""

            def bind_tools(self, tools, **kwargs):
                return self

        def scripted(*answers):
            return ScriptedChat(messages=iter(list(answers) * 50))

        @tool
        def transfer(to: str, amount: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
            """Send money."""
            return Command(update={"messages": [ToolMessage(f"sent {amount} to {to}", tool_call_id=tool_call_id)]})

        agent = create_agent(
            scripted(
                AIMessage(content="", tool_calls=[{"name": "transfer", "args": {"to": "B2", "amount": 5}, "id": "call_1"}]),
                AIMessage(content="transfer made"),
            ),
            tools=[transfer],
            middleware=[HumanInTheLoopMiddleware(interrupt_on={"transfer": True})],
        )

        def make_deep_agent():
            from deepagents import create_deep_agent

            return create_deep_agent(
                model=scripted(
                    AIMessage(content="", tool_calls=[{"name": "write_file", "args": {"file_path": "/note.md", "content": "hello from the agent"}, "id": "t1"}]),
                    AIMessage(content="", tool_calls=[{"name": "ls", "args": {"path": "/"}, "id": "t2"}]),
                    AIMessage(content="", tool_calls=[{"name": "task", "args": {"description": "read /note.md", "subagent_type": "general-purpose"}, "id": "t3"}]),
                    AIMessage(content="the note says hello"),
                    AIMessage(content="all done"),
                ),
                tools=[],
                system_prompt="You write notes.",
            )
    ''',
    "embed.py": '''
        import hashlib

        def embed(texts):
            """A bag of words hashed into 16 dimensions: texts sharing words are near."""
            out = []
            for text in texts:
                v = [0.0] * 16
                for word in text.lower().split():
                    v[hashlib.sha256(word.encode()).digest()[0] % 16] += 1.0
                out.append(v)
            return out
    ''',
    "app.py": '''
        from starlette.applications import Starlette
        from starlette.responses import JSONResponse, PlainTextResponse
        from starlette.routing import Route

        async def hello(request):
            return JSONResponse({"hello": request.query_params.get("name", "world"), "method": request.method})

        async def echo(request):
            body = await request.body()
            return PlainTextResponse(body.decode()[::-1], headers={"x-echo": "yes"})

        app = Starlette(routes=[Route("/custom/hello", hello), Route("/custom/echo", echo, methods=["POST"])])
    ''',
    "crash.py": '''
        import operator, os, time
        from typing import Annotated
        from typing_extensions import TypedDict
        from langgraph.graph import END, START, StateGraph

        MARKS = os.environ["CRASH_MARKS"]

        def mark(name):
            with open(MARKS, "a") as f:
                f.write(f"{name} {os.getpid()}\\n")
                f.flush()
                os.fsync(f.fileno())

        class S(TypedDict, total=False):
            log: Annotated[list[str], operator.add]

        def first(state):
            mark("first")
            # Held while the test asks the server to stop.
            while os.path.exists(MARKS + ".hold"):
                time.sleep(0.05)
            return {"log": ["first"]}

        def second(state):
            mark("second")
            # Hangs in the first server (killed here), passes in the second.
            while os.path.exists(MARKS + ".block"):
                time.sleep(0.05)
            return {"log": ["second"]}

        b = StateGraph(S)
        b.add_node("first", first)
        b.add_node("second", second)
        b.add_edge(START, "first")
        b.add_edge("first", "second")
        b.add_edge("second", END)
        graph = b.compile()
    ''',
}

CONFIG = """{
  "dependencies": ["."],
  "graphs": {
    "steps": "./steps.py:graph",
    "chat": "./chat.py:make_graph",
    "fanout": "./fanout.py:graph",
    "memory": "./memory.py:graph",
    "func": "./func.py:workflow",
    "waits": "./waits.py:graph",
    "hanging": "./waits.py:hanging",
    "env": "./waits.py:env_graph",
    "crash": "./crash.py:graph",
    "agent": "./agents.py:agent",
    "deep": "./agents.py:make_deep_agent"
  },
  "store": {"index": {"embed": "./embed.py:embed", "dims": 16, "fields": ["text"]}},
  "http": {"app": "./app.py:app"},
  "env": {"GRAPHLOOM_TEST_ENV": "from-config"}
}"""


def write_app(root: Path, config: str = CONFIG) -> None:
    for name, text in GRAPHS.items():
        (root / name).write_text(textwrap.dedent(text))
    (root / "langgraph.json").write_text(config)


class Served:
    def __init__(self, proc: subprocess.Popen, url: str, lines: list[str]) -> None:
        self.proc, self.url, self.lines = proc, url, lines


def start(root: Path, db: Path, *extra: str, env: dict | None = None) -> Served:
    """``python -m graphloom serve`` in ``root`` on a free port; its URL once it listens."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "graphloom", "serve", "--db", str(db), "--addr", "127.0.0.1:0", *extra],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "RUST_LOG": "warn", **(env or {})},
    )
    lines: list[str] = []
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if "listening on http://" in line:
            url = line.split("listening on ", 1)[1].split(" ", 1)[0]
            return Served(proc, url, lines)
    proc.kill()
    raise AssertionError("graphloom serve did not start:\n" + "".join(lines))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_langgraph_dev(root: Path, env: dict) -> Served:
    """``langgraph dev`` (in memory) serving ``root``'s langgraph.json, once it answers."""
    port = free_port()
    langgraph = Path(sys.executable).parent / "langgraph"
    log = open(root / "langgraph-dev.log", "w")
    proc = subprocess.Popen(
        [str(langgraph), "dev", "--no-browser", "--no-reload", "--port", str(port),
         "--n-jobs-per-worker", "8", "--config", "langgraph.json"],
        cwd=root,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "LANGSMITH_TRACING": "false", "LANGGRAPH_NO_VERSION_CHECK": "true", **env},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                pass
            import urllib.request

            with urllib.request.urlopen(f"{url}/ok", timeout=5) as r:
                if r.status == 200:
                    return Served(proc, url, [])
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("langgraph dev did not start:\n" + (root / "langgraph-dev.log").read_text())


def stop(served: Served) -> None:
    served.proc.send_signal(signal.SIGINT)
    try:
        served.proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        served.proc.kill()
        served.proc.wait()


@pytest.fixture(scope="module", params=["graphloom", "langgraph-dev"])
def app(request, tmp_path_factory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("app")
    write_app(root)
    env = {"CRASH_MARKS": str(root / "marks")}
    if request.param == "graphloom":
        served = start(root, root / "server.db", env=env)
    else:
        served = start_langgraph_dev(root, env)
    yield served
    stop(served)


@pytest.fixture(scope="module")
def client(app):
    return get_sync_client(url=app.url)


def test_every_graph_of_the_config_is_an_assistant_with_its_schemas_and_drawing(client):
    found = {a["graph_id"]: a["assistant_id"] for a in client.assistants.search(limit=50)}
    assert {"steps", "chat", "fanout", "memory", "func", "waits", "hanging", "crash", "agent", "deep"} <= set(found)
    schemas = client.assistants.get_schemas(found["steps"])
    assert set(schemas["input_schema"]["properties"]) == {"log", "approved"}
    graph = client.assistants.get_graph(found["steps"])
    edges = {(e["source"], e["target"]) for e in graph["edges"]}
    assert ("plan", "approve") in edges and ("finish", "__end__") in edges


def test_wait_interrupt_resume_state_and_history(client):
    thread = client.threads.create()
    tid = thread["thread_id"]
    out = client.runs.wait(tid, "steps", input={"log": []})
    assert out["log"] == ["planned"]
    [pending] = out["__interrupt__"]
    assert pending["value"] == {"question": "approve?"}
    assert client.threads.get(tid)["status"] == "interrupted"
    state = client.threads.get_state(tid)
    assert state["next"] == ["approve"]
    assert state["tasks"][0]["interrupts"][0]["id"] == pending["id"]

    parts = list(
        client.runs.stream(tid, "steps", command={"resume": "yes"}, stream_mode=["values", "updates", "custom"])
    )
    events = [p.event for p in parts]
    assert events[0] == "metadata"
    updates = [p.data for p in parts if p.event == "updates"]
    assert updates == [{"approve": {"approved": True, "log": ["asked"]}}, {"finish": {"log": ["done"]}}]
    assert parts[-1].event == "values"
    assert parts[-1].data == {"log": ["planned", "asked", "done"], "approved": True}
    assert client.threads.get(tid)["status"] == "idle"

    history = client.threads.get_history(tid)
    assert [h["next"] for h in history] == [[], ["finish"], ["approve"], ["plan"], ["__start__"]]
    # Time travel: the state as it was before `plan`.
    before_plan = client.threads.get_state(tid, checkpoint_id=history[3]["checkpoint_id"])
    assert before_plan["values"]["log"] == []


def test_custom_events_and_an_error_by_its_python_class(client):
    thread = client.threads.create(graph_id="steps")
    tid = thread["thread_id"]
    parts = list(client.runs.stream(tid, "steps", input={"log": []}, stream_mode="custom"))
    assert {"planning": 0} in [p.data for p in parts if p.event == "custom"]

    # As `approve` wrote it: the next node fails on the state.
    client.threads.update_state(tid, {"log": ["boom"], "approved": True}, as_node="approve")
    assert client.threads.get_state(tid)["next"] == ["finish"]
    parts = list(client.runs.stream(tid, "steps", input=None, stream_mode="updates"))
    [error] = [p.data for p in parts if p.event == "error"]
    assert error == {"error": "ValueError", "message": "boom in state"}
    assert client.threads.get(tid)["status"] == "error"


def test_a_chat_models_tokens_stream_as_messages(client):
    thread = client.threads.create()
    parts = list(
        client.runs.stream(
            thread["thread_id"],
            "chat",
            input={"messages": [{"role": "user", "content": "hi"}]},
            stream_mode=["messages-tuple"],
        )
    )
    chunks = [p.data[0] for p in parts if p.event == "messages"]
    assert len(chunks) > 1, parts
    assert "".join(c["content"] for c in chunks) == "hello there friend"
    assert all(p.data[1]["langgraph_node"] == "reply" for p in parts if p.event == "messages")
    state = client.threads.get_state(thread["thread_id"])
    assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai"]


def test_the_events_mode_streams_astream_events_beside_the_other_modes(client):
    tid = client.threads.create()["thread_id"]
    parts = list(client.runs.stream(tid, "steps", input={"log": []}, stream_mode=["events", "updates"]))
    events = [p.data for p in parts if p.event == "events"]
    chain = [(e["event"], e["name"]) for e in events if e["event"].startswith("on_chain")]
    # The run, named after its graph, opens the stream; its nodes start and end inside it.
    assert chain[0] == ("on_chain_start", "steps")
    assert ("on_chain_start", "plan") in chain and ("on_chain_end", "plan") in chain
    root = events[0]["run_id"]
    assert all(root in e["parent_ids"] for e in events if e["run_id"] != root), "the rest is under the run"
    # The graph's own stream chunks are the `updates` parts, not `events`.
    assert not [e for e in events if e["event"] == "on_chain_stream" and not e["parent_ids"]]
    assert [p.data for p in parts if p.event == "updates"][0] == {"plan": {"log": ["planned"]}}
    # Alone, `events` sends the events and nothing else but the metadata.
    tid = client.threads.create()["thread_id"]
    alone = list(client.runs.stream(tid, "steps", input={"log": []}, stream_mode="events"))
    assert {p.event for p in alone} == {"metadata", "events"}
    assert [(p.data["event"], p.data["name"]) for p in alone if p.event == "events"][0] == ("on_chain_start", "steps")


def test_subgraphs_under_send_stream_with_their_namespaces(client):
    parts = list(
        client.runs.stream(
            None,
            "fanout",
            input={"items": ["a", "b", "c"], "results": []},
            stream_mode=["updates", "custom"],
            stream_subgraphs=True,
        )
    )
    nested = [p for p in parts if p.event.startswith("custom|each:")]
    assert sorted(p.data["working_on"] for p in nested) == ["a", "b", "c"]
    final = client.runs.wait(None, "fanout", input={"items": ["x", "y"], "results": []})
    assert sorted(final["results"]) == ["X", "Y"]


def test_the_graph_store_is_the_servers_store(client):
    thread = client.threads.create()
    out = client.runs.wait(
        thread["thread_id"], "memory", input={"messages": [{"role": "user", "content": "tea at 4"}]}
    )
    assert out["messages"][-1]["content"] == "I keep 1 memory"
    item = client.store.get_item(["memories", "u1"], "last")
    assert item["value"] == {"text": "tea at 4"}
    client.store.put_item(["memories", "u1"], "other", {"text": "from the API"})
    out = client.runs.wait(
        thread["thread_id"], "memory", input={"messages": [{"role": "user", "content": "again"}]}
    )
    assert out["messages"][-1]["content"] == "I keep 2 memory"


def test_the_configs_http_app_answers_its_routes_beside_the_servers(app, client):
    hello = httpx.get(f"{app.url}/custom/hello", params={"name": "ann"}, timeout=30)
    assert hello.status_code == 200 and hello.json() == {"hello": "ann", "method": "GET"}
    echo = httpx.post(f"{app.url}/custom/echo", content=b"abc", timeout=30)
    assert (echo.status_code, echo.text, echo.headers["x-echo"]) == (200, "cba", "yes")
    assert httpx.get(f"{app.url}/custom/nowhere", timeout=30).status_code == 404
    # The server's own routes still answer.
    assert httpx.get(f"{app.url}/ok", timeout=30).status_code == 200
    assert any(a["graph_id"] == "steps" for a in client.assistants.search(limit=50))


def test_semantic_search_of_the_store_uses_the_configs_index(client):
    client.store.put_item(["docs"], "tea", {"text": "green tea at four"})
    client.store.put_item(["docs"], "bike", {"text": "fix the bike chain"})
    client.store.put_item(["docs"], "rain", {"text": "rain all week"})
    found = client.store.search_items(["docs"], query="bike chain", limit=2)["items"]
    assert found[0]["key"] == "bike", found
    assert found[0]["score"] > found[1]["score"]


def test_create_agent_with_approval_and_a_tool_returning_a_command(client):
    tid = client.threads.create()["thread_id"]
    out = client.runs.wait(tid, "agent", input={"messages": [{"role": "user", "content": "pay B2 5"}]})
    [pending] = out["__interrupt__"]
    [action] = pending["value"]["action_requests"]
    assert (action["name"], action["args"]) == ("transfer", {"to": "B2", "amount": 5})
    parts = list(
        client.runs.stream(tid, "agent", command={"resume": {"decisions": [{"type": "approve"}]}}, stream_mode="updates")
    )
    nodes = [next(iter(p.data)) for p in parts if p.event == "updates"]
    assert nodes == [
        "HumanInTheLoopMiddleware.after_model",
        "tools",
        "model",
        "HumanInTheLoopMiddleware.after_model",
    ]
    messages = client.threads.get_state(tid)["values"]["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"]
    assert messages[2]["content"] == "sent 5 to B2" and messages[3]["content"] == "transfer made"


def test_a_deep_agent_writes_files_and_delegates_to_a_subagent(client):
    tid = client.threads.create()["thread_id"]
    out = client.runs.wait(tid, "deep", input={"messages": [{"role": "user", "content": "write a note"}]})
    tools = {m["name"]: m["content"] for m in out["messages"] if m["type"] == "tool"}
    assert "Updated file /note.md" in tools["write_file"]
    assert "/note.md" in tools["ls"]
    assert tools["task"] == "the note says hello"
    assert out["messages"][-1]["content"] == "all done"
    files = client.threads.get_state(tid)["values"]["files"]
    assert "/note.md" in files


def test_a_functional_entrypoint_interrupts_and_resumes(client):
    thread = client.threads.create()
    tid = thread["thread_id"]
    out = client.runs.wait(tid, "func", input=5)
    assert out["__interrupt__"][0]["value"] == {"doubled": 10}
    out = client.runs.wait(tid, "func", command={"resume": 1})
    assert out == {"result": 11}


def test_runs_in_flight_at_once_interleave_on_the_loop(client):
    threads = [client.threads.create()["thread_id"] for _ in range(4)]
    runs = [client.runs.create(t, "waits", input={"n": 4}) for t in threads]
    outs = [client.runs.join(t, r["run_id"]) for t, r in zip(threads, runs)]
    assert all(o["out"].startswith("met ") and int(o["out"].split()[1]) >= 4 for o in outs), outs


def test_cancel_stops_a_hanging_python_run(client):
    tid = client.threads.create()["thread_id"]
    run = client.runs.create(tid, "hanging", input={})
    deadline = time.monotonic() + 30
    while client.runs.get(tid, run["run_id"])["status"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    client.runs.cancel(tid, run["run_id"], wait=True)
    assert client.runs.get(tid, run["run_id"])["status"] == "interrupted"
    # The server still serves.
    assert client.runs.wait(None, "steps", input={"log": []})["log"] == ["planned"]


def serve_refused(root: Path) -> subprocess.CompletedProcess:
    """``graphloom serve`` in ``root``, expected to refuse to start (exit code 1)."""
    done = subprocess.run(
        [sys.executable, "-m", "graphloom", "serve", "--db", str(root / "x.db"), "--addr", "127.0.0.1:0"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done
    return done


def test_config_keys_not_served_are_named(tmp_path):
    write_app(tmp_path, '{"graphs": {"steps": "./steps.py:graph"}, "encryption": {"path": "./e.py:e"}}')
    done = serve_refused(tmp_path)
    assert "`encryption`" in done.stderr and "not supported by graphloom serve yet" in done.stderr


def test_a_graph_that_fails_to_import_stops_the_start_with_its_error(tmp_path):
    (tmp_path / "bad.py").write_text("import nonexistent_module_for_the_test\n")
    (tmp_path / "langgraph.json").write_text('{"graphs": {"bad": "./bad.py:graph"}}')
    done = serve_refused(tmp_path)
    assert "graph 'bad'" in done.stderr and "nonexistent_module_for_the_test" in done.stderr


def test_a_run_killed_with_its_server_resumes_from_its_checkpoint(tmp_path):
    write_app(tmp_path)
    marks = tmp_path / "marks"
    block = Path(str(marks) + ".block")
    block.write_text("")
    db = tmp_path / "server.db"
    env = {"CRASH_MARKS": str(marks)}
    served = start(tmp_path, db, env=env)
    try:
        client = get_sync_client(url=served.url)
        tid = client.threads.create()["thread_id"]
        run = client.runs.create(tid, "crash", input={"log": []})
        deadline = time.monotonic() + 30
        while "second" not in (marks.read_text() if marks.exists() else ""):
            assert time.monotonic() < deadline, "the run never reached its second node"
            time.sleep(0.02)
    finally:
        served.proc.kill()
        served.proc.wait()
    block.unlink()
    served = start(tmp_path, db, env=env)
    try:
        client = get_sync_client(url=served.url)
        out = client.runs.join(tid, run["run_id"])
        assert out["log"] == ["first", "second"]
        # `first` was checkpointed before the kill: it did not run again.
        assert [line.split()[0] for line in marks.read_text().splitlines()] == ["first", "second", "second"]
        assert client.runs.get(tid, run["run_id"])["status"] == "success"
    finally:
        stop(served)


def test_sigterm_drains_a_python_run_at_its_step_boundary_and_a_restart_finishes_it(tmp_path):
    write_app(tmp_path)
    marks = tmp_path / "marks"
    hold = Path(str(marks) + ".hold")
    hold.write_text("")
    db = tmp_path / "server.db"
    env = {"CRASH_MARKS": str(marks)}
    served = start(tmp_path, db, "--shutdown-grace-secs", "60", env=env)
    try:
        client = get_sync_client(url=served.url)
        tid = client.threads.create()["thread_id"]
        run = client.runs.create(tid, "crash", input={"log": []})
        deadline = time.monotonic() + 30
        while "first" not in (marks.read_text() if marks.exists() else ""):
            assert time.monotonic() < deadline, "the run never reached its first node"
            time.sleep(0.02)
        served.proc.send_signal(signal.SIGTERM)
        # The server stops listening once its shutdown began; only then does `first` end.
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{served.url}/ok", timeout=1)
            except httpx.TransportError:
                break
            assert time.monotonic() < deadline, "the server kept listening after SIGTERM"
            time.sleep(0.05)
        stopping = time.monotonic()
        hold.unlink()
        # `first` ends, its step is checkpointed, the run drains: the server exits long
        # before its 60 s grace, without running `second`.
        assert served.proc.wait(timeout=30) == 0
        assert time.monotonic() - stopping < 30
        assert [line.split()[0] for line in marks.read_text().splitlines()] == ["first"]
    finally:
        hold.unlink(missing_ok=True)
        if served.proc.poll() is None:
            served.proc.kill()
            served.proc.wait()
    served = start(tmp_path, db, env=env)
    try:
        client = get_sync_client(url=served.url)
        out = client.runs.join(tid, run["run_id"])
        assert out["log"] == ["first", "second"]
        # Drained after `first`: the restarted server ran `second` alone.
        assert [line.split()[0] for line in marks.read_text().splitlines()] == ["first", "second"]
        assert client.runs.get(tid, run["run_id"])["status"] == "success"
    finally:
        stop(served)


def test_the_config_env_reaches_the_graphs(client):
    assert client.runs.wait(None, "env", input={})["out"] == "from-config"


# The JS clients of the server's own tests (crates/graphloom-server/tests/js): the official
# @langchain/langgraph-sdk on the thread-centric protocol, and a @langchain/react useStream
# page in Chromium, both written for the `weather` graph, whose Python original
# (tests/js/reference/graph.py) the reference recording was made from.
JS_DIR = Path(__file__).resolve().parents[2] / "graphloom-server" / "tests" / "js"


def npm_ci() -> None:
    """Install the JS tests' packages from the committed lock file when missing or stale,
    under the lock the server's Rust tests take for the same install."""
    import fcntl

    cache = Path.home() / ".cache" / "graphloom"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "js-tests.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lockfile = (JS_DIR / "package-lock.json").read_bytes()
        stamp = JS_DIR / "node_modules" / ".installed-from"
        if not (JS_DIR / "node_modules" / ".package-lock.json").exists() or (
            not stamp.exists() or stamp.read_bytes() != lockfile
        ):
            subprocess.run(
                ["npm", "ci", "--no-audit", "--no-fund"],
                cwd=JS_DIR,
                check=True,
                capture_output=True,
                env={
                    **os.environ,
                    "npm_config_cache": os.environ.get("npm_config_cache", str(cache / "npm")),
                    "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1",
                },
                timeout=600,
            )
            stamp.write_bytes(lockfile)


def node(script: str, url: str, *args: str, **env: str) -> dict:
    """``node <script> <url> <args>``: the JSON summary it prints last."""
    import json

    npm_ci()
    done = subprocess.run(
        ["node", str(JS_DIR / script), url, *args],
        cwd=JS_DIR,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, f"{script}:\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])


PACED = '''
import sys, time
sys.path.insert(0, {reference!r})
import graph as reference

# Tokens 40 ms apart, as a provider sends them: a page must see the answer grow.
_stream = reference.ScriptedModel._stream

def paced(self, *args, **kwargs):
    for chunk in _stream(self, *args, **kwargs):
        time.sleep(0.04)
        yield chunk

reference.ScriptedModel._stream = paced
graph = reference.graph
'''


@pytest.fixture(scope="module")
def weather(tmp_path_factory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("weather")
    (root / "paced.py").write_text(PACED.format(reference=str(JS_DIR / "reference")))
    (root / "langgraph.json").write_text('{"graphs": {"weather": "./paced.py:graph"}}')
    served = start(root, root / "server.db")
    yield served
    stop(served)


def test_the_js_sdk_streams_a_python_graph_over_the_thread_protocol(weather):
    summary = node("thread_client.mjs", weather.url, GRAPHLOOM_REFERENCE="1")
    for want in [
        "sse:tokens arrive one by one",
        "sse:the interrupt is in the subgraph",
        "sse:the resumed run completes",
        "websocket:tokens arrive one by one",
        "websocket:the resumed run completes",
        "an SSE client that reconnects with since loses nothing",
    ]:
        assert want in summary["checks"], summary
    # The frames of each channel as the reference server sent them for the same graph.
    compared = node("reference/compare.mjs", weather.url)
    assert compared["ok"] and len(compared["checks"]) >= 6, compared


def test_a_use_stream_page_chats_with_a_python_graph_in_chromium(weather):
    chromium = os.environ.get("GRAPHLOOM_CHROMIUM", "/usr/bin/chromium")
    assert os.path.exists(chromium), f"Chromium is needed at {chromium} (scripts/test.sh installs Debian's)"
    summary = node("react_check.mjs", weather.url, GRAPHLOOM_CHROMIUM=chromium)
    for want in ["the answer streams in", "the interrupt shows its HITL request", "approving finishes the run", "no error shows"]:
        assert want in summary["checks"], summary


def test_two_replicas_on_postgresql_one_killed_mid_run_the_other_finishes_it(tmp_path, pg_url):
    write_app(tmp_path)
    marks = tmp_path / "marks"
    block = Path(str(marks) + ".block")
    block.write_text("")
    env = {"CRASH_MARKS": str(marks)}
    opts = ("--database-url", pg_url, "--lease-secs", "2", "--heartbeat-secs", "0.5")
    replicas = [start(tmp_path, tmp_path / "unused.db", *opts, env=env) for _ in range(2)]
    try:
        client = get_sync_client(url=replicas[0].url)
        tid = client.threads.create()["thread_id"]
        run = client.runs.create(tid, "crash", input={"log": []})
        deadline = time.monotonic() + 30
        while "second" not in (marks.read_text() if marks.exists() else ""):
            assert time.monotonic() < deadline, "the run never reached its second node"
            time.sleep(0.02)
        # Kill the replica whose graph is running it (the node wrote its process id).
        busy = int(marks.read_text().splitlines()[-1].split()[1])
        [victim] = [r for r in replicas if r.proc.pid == busy]
        [survivor] = [r for r in replicas if r.proc.pid != busy]
        victim.proc.kill()
        victim.proc.wait()
        block.unlink()
        other = get_sync_client(url=survivor.url)
        out = other.runs.join(tid, run["run_id"])
        assert out["log"] == ["first", "second"]
        lines = [line.split() for line in marks.read_text().splitlines()]
        assert [name for name, _ in lines] == ["first", "second", "second"]
        assert int(lines[2][1]) == survivor.proc.pid
        assert other.runs.get(tid, run["run_id"])["status"] == "success"
    finally:
        for r in replicas:
            if r.proc.poll() is None:
                stop(r)


def test_a_copied_thread_has_the_python_graphs_state_and_history(client):
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "steps", input={"log": []})
    copy = client.threads.copy(tid)
    state = client.threads.get_state(copy["thread_id"])
    assert state["values"]["log"] == ["planned"] and state["next"] == ["approve"]
    assert len(client.threads.get_history(copy["thread_id"])) == len(client.threads.get_history(tid))
    # The copy goes on by itself; the original stays where it was.
    out = client.runs.wait(copy["thread_id"], "steps", command={"resume": "no"})
    assert out["log"] == ["planned", "asked", "done"] and out["approved"] is False
    assert client.threads.get_state(tid)["next"] == ["approve"]


def test_thread_storage_counts_the_python_graphs_checkpoints(app, client):
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "steps", input={"log": []})
    response = httpx.get(f"{app.url}/threads/{tid}/storage", timeout=30)
    assert response.status_code == 200, response.text
    report = response.json()
    assert set(report) == {"thread_id", "total_bytes", "checkpoints", "channel_values", "pending_writes"}
    assert report["thread_id"] == tid
    assert report["checkpoints"]["count"] == len(client.threads.get_history(tid, limit=100))
    by_channel = report["channel_values"]["by_channel"]
    assert by_channel["log"]["versions"] >= 1 and by_channel["log"]["bytes"] > 0
    assert report["channel_values"]["bytes"] == sum(c["bytes"] for c in by_channel.values())
    parts = report["checkpoints"]["bytes"] + report["channel_values"]["bytes"] + report["pending_writes"]["bytes"]
    assert report["total_bytes"] == parts > 0


def saved_checkpoints(db: Path, thread_id: str) -> int:
    """How many checkpoints graphloom's Python saver keeps for `thread_id` in `db`."""
    from graphloom.checkpoint.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(str(db)) as saver:
        return len(list(saver.list({"configurable": {"thread_id": thread_id}})))


def test_deleting_a_thread_deletes_its_python_checkpoints(tmp_path):
    write_app(tmp_path)
    db = tmp_path / "server.db"
    served = start(tmp_path, db, env={"CRASH_MARKS": str(tmp_path / "marks")})
    try:
        client = get_sync_client(url=served.url)
        tid = client.threads.create()["thread_id"]
        client.runs.wait(tid, "steps", input={"log": []})
        saved = saved_checkpoints(db, tid)
        assert saved == len(client.threads.get_history(tid)) and saved > 0
        client.threads.delete(tid)
        assert saved_checkpoints(db, tid) == 0
    finally:
        stop(served)


def test_checkpointer_ttl_of_the_config_sweeps_python_threads(tmp_path):
    config = CONFIG.replace(
        '"store":',
        '"checkpointer": {"ttl": {"strategy": "delete", "default_ttl": 0.02, "sweep_interval_minutes": 0.02}},\n  "store":',
    )
    write_app(tmp_path, config)
    db = tmp_path / "server.db"
    served = start(tmp_path, db, env={"CRASH_MARKS": str(tmp_path / "marks")})
    try:
        client = get_sync_client(url=served.url)
        tid = client.threads.create()["thread_id"]
        client.runs.wait(tid, "steps", input={"log": []})
        assert saved_checkpoints(db, tid) > 0
        deadline = time.monotonic() + 60
        while any(t["thread_id"] == tid for t in client.threads.search(limit=100)):
            assert time.monotonic() < deadline, "the thread outlived its TTL"
            time.sleep(0.2)
        assert saved_checkpoints(db, tid) == 0
    finally:
        stop(served)


AUTH = '''
from langgraph_sdk import Auth

auth = Auth()
TOKENS = {"token-alice": ("alice", ["write"]), "token-bob": ("bob", [])}


@auth.authenticate
async def authenticate(authorization: str | None):
    if not authorization or not authorization.startswith("Bearer "):
        raise Auth.exceptions.HTTPException(status_code=401, detail="a bearer token is needed")
    found = TOKENS.get(authorization.split(" ", 1)[1])
    if found is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="unknown token")
    return {"identity": found[0], "permissions": found[1]}


@auth.on.threads
async def own_threads(ctx, value):
    metadata = value.setdefault("metadata", {})
    metadata["owner"] = ctx.user.identity
    return {"owner": ctx.user.identity}


@auth.on.threads.delete
async def writers_delete(ctx, value):
    if "write" not in ctx.permissions:
        return False
    return {"owner": ctx.user.identity}
'''

WHOAMI = '''
from langchain_core.runnables import RunnableConfig
from typing_extensions import TypedDict
from langgraph.graph import END, START, StateGraph

class S(TypedDict, total=False):
    user: str
    flavour: str

def whoami(state, config: RunnableConfig):
    conf = config["configurable"]
    return {"user": conf.get("langgraph_auth_user_id", ""), "flavour": conf.get("flavour", "")}

b = StateGraph(S)
b.add_node("whoami", whoami)
b.add_edge(START, "whoami")
b.add_edge("whoami", END)
graph = b.compile()
'''


@pytest.fixture(scope="module", params=["graphloom", "langgraph-dev"])
def guarded(request, tmp_path_factory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("guarded")
    (root / "auth.py").write_text(AUTH)
    (root / "whoami.py").write_text(WHOAMI)
    (root / "langgraph.json").write_text(
        '{"dependencies": ["."], "graphs": {"whoami": "./whoami.py:graph"}, "auth": {"path": "./auth.py:auth"}}'
    )
    if request.param == "graphloom":
        served = start(root, root / "server.db")
    else:
        served = start_langgraph_dev(root, {})
    yield served
    stop(served)


def test_the_configs_auth_authenticates_filters_stamps_and_refuses(guarded):
    from langgraph_sdk.errors import NotFoundError

    anonymous = get_sync_client(url=guarded.url)
    with pytest.raises(httpx.HTTPStatusError) as refused:
        anonymous.threads.create()
    assert refused.value.response.status_code == 401
    alice = get_sync_client(url=guarded.url, headers={"Authorization": "Bearer token-alice"})
    bob = get_sync_client(url=guarded.url, headers={"Authorization": "Bearer token-bob"})
    mine = alice.threads.create()
    assert mine["metadata"]["owner"] == "alice"
    with pytest.raises(NotFoundError):
        bob.threads.get(mine["thread_id"])
    assert mine["thread_id"] not in [t["thread_id"] for t in bob.threads.search(limit=100)]
    out = alice.runs.wait(mine["thread_id"], "whoami", input={}, config={"configurable": {"flavour": "mint"}})
    assert out == {"user": "alice", "flavour": "mint"}
    bobs = bob.threads.create()
    with pytest.raises(httpx.HTTPStatusError) as forbidden:
        bob.threads.delete(bobs["thread_id"])
    assert forbidden.value.response.status_code == 403
    alice.threads.delete(mine["thread_id"])
    with pytest.raises(NotFoundError):
        alice.threads.get(mine["thread_id"])


def test_the_console_draws_a_python_graph_and_shows_its_thread(weather):
    client = get_sync_client(url=weather.url)
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "weather", input={"messages": [{"role": "user", "content": "weather?"}]})
    summary = node("console_check.mjs", weather.url, "weather", tid)
    assert {"agent", "tools"} <= set(summary["nodes"]), summary
    assert "the thread page shows a state" in summary["checks"]


class HookReceiver:
    """A webhook receiver on 127.0.0.1: answers 200 and keeps each request's headers."""

    def __init__(self) -> None:
        self.got: list = []
        self.arrived = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                receiver.got.append((self.headers, json.loads(body)))
                self.send_response(200)
                self.end_headers()
                receiver.arrived.set()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def webhooks_config(webhooks: dict, env: dict | None = None) -> str:
    return json.dumps(
        {"dependencies": ["."], "graphs": {"steps": "./steps.py:graph"}, "env": env or {}, "webhooks": webhooks}
    )


# graphloom only: the 422 details differ from the reference server's.
def test_webhooks_of_the_config_refuse_urls_and_send_static_headers(tmp_path):
    hook = HookReceiver()
    write_app(
        tmp_path,
        webhooks_config(
            {
                "url": {
                    "require_https": False,
                    "disable_loopback": False,
                    "allowed_domains": ["127.0.0.1"],
                    "allowed_ports": [hook.server.server_port],
                    "max_url_length": 200,
                },
                "headers": {"Authorization": "Bearer ${{ env.LG_WEBHOOK_TOKEN }}", "x-team": "agents"},
            },
            # The template reads the environment after the config's `env` is applied.
            env={"LG_WEBHOOK_TOKEN": "from-config"},
        ),
    )
    served = start(tmp_path, tmp_path / "server.db")
    try:
        tid = httpx.post(f"{served.url}/threads", json={}).json()["thread_id"]
        for url, detail in [
            ("https://example.com/hook", "Webhook host 'example.com' is not in the server's allowed domains"),
            ("http://127.0.0.1:1/hook", "Webhook port 1 is not in the server's allowed ports"),
            (hook.url + "/" + "a" * 200, "Webhook URL too long"),
            ("/runs/hook", "Relative webhook URLs are not supported"),
        ]:
            r = httpx.post(
                f"{served.url}/threads/{tid}/runs",
                json={"assistant_id": "steps", "input": {"log": []}, "webhook": url},
            )
            assert r.status_code == 422, (url, r.text)
            assert r.json()["detail"].startswith(detail), r.text
        r = httpx.post(
            f"{served.url}/threads/{tid}/runs/wait",
            json={"assistant_id": "steps", "input": {"log": []}, "webhook": hook.url},
            timeout=60,
        )
        assert r.status_code == 200, r.text
        assert hook.arrived.wait(timeout=30), "no webhook delivered"
        headers, body = hook.got[0]
        assert headers["Authorization"] == "Bearer from-config"
        assert headers["x-team"] == "agents"
        assert body["thread_id"] == tid
    finally:
        stop(served)
        hook.close()


def test_webhook_header_templates_and_keys_are_checked_at_start(tmp_path):
    for webhooks, message in [
        ({"headers": {"a": "${{ env.LG_WEBHOOK_UNSET_FOR_THE_TEST }}"}}, "LG_WEBHOOK_UNSET_FOR_THE_TEST, which is not set"),
        ({"headers": {"a": "${{ env.PATH }}"}}, "names PATH, which does not start with webhooks.env_prefix 'LG_WEBHOOK_'"),
        ({"env_prefix": "HOOK_", "headers": {"a": "${{ env.LG_WEBHOOK_X }}"}}, "does not start with webhooks.env_prefix 'HOOK_'"),
        ({"url": {"allowed_domains": ["x.com"], "block_ranges": []}}, "webhooks.url.block_ranges is not supported"),
        ({"signing": {}}, "webhooks.signing is not supported"),
        ({"url": {"allowed_ports": ["443"]}}, "webhooks.url.allowed_ports must be a list of port numbers"),
    ]:
        write_app(tmp_path, webhooks_config(webhooks))
        done = serve_refused(tmp_path)
        assert message in done.stderr, (webhooks, done.stderr)
