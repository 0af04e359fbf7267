"""Drive a graphloom server through the official LangGraph Python SDK.

Usage: drive.py <server url>

Every check asserts what the SDK hands back. The last stdout line is a JSON summary
{"ok": true, "checks": [...]} that the Rust test reads.
"""

import asyncio
import json
import sys
import time
import uuid

import httpx
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import ConflictError, NotFoundError
from langgraph_sdk.schema import Command

URL = sys.argv[1]
CHECKS: list[str] = []


def passed(name: str) -> None:
    CHECKS.append(name)
    print(f"ok {name}", file=sys.stderr)


def texts(values: dict) -> list[str]:
    return [m["content"] for m in values.get("messages", [])]


def human(text: str) -> dict:
    return {"messages": [{"type": "human", "content": text}]}


async def collect(agen) -> list:
    return [part async for part in agen]


async def assistants(client) -> None:
    found = await client.assistants.search(limit=50)
    graphs = {a["graph_id"] for a in found}
    assert {"echo", "approval", "slow", "chatty"} <= graphs, graphs
    sys_echo = next(a for a in found if a["graph_id"] == "echo")
    assert sys_echo["metadata"].get("created_by") == "system", sys_echo
    # System assistant ids follow the reference server's uuid5 scheme.
    ns = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
    assert sys_echo["assistant_id"] == str(uuid.uuid5(ns, "echo")), sys_echo
    for key in ("assistant_id", "graph_id", "config", "created_at", "updated_at",
                "metadata", "version", "name"):
        assert key in sys_echo, (key, sys_echo)
    got = await client.assistants.get(sys_echo["assistant_id"])
    assert got["assistant_id"] == sys_echo["assistant_id"], got
    # A graph name stands for its system assistant.
    assert (await client.assistants.get("echo"))["assistant_id"] == sys_echo["assistant_id"]

    schemas = await client.assistants.get_schemas("echo")
    assert schemas["graph_id"] == "echo", schemas
    for key in ("input_schema", "output_schema", "state_schema", "config_schema"):
        assert key in schemas, (key, schemas)
    assert "messages" in json.dumps(schemas["state_schema"]), schemas

    graph = await client.assistants.get_graph("echo")
    node_ids = {n["id"] for n in graph["nodes"]}
    assert {"__start__", "reply", "__end__"} <= node_ids, graph
    edges = {(e["source"], e["target"]) for e in graph["edges"]}
    assert ("__start__", "reply") in edges and ("reply", "__end__") in edges, graph
    xray = await client.assistants.get_graph("chatty", xray=True)
    assert xray["nodes"], xray

    mine = await client.assistants.create(
        "echo", config={"recursion_limit": 9}, metadata={"team": "sdk"}, name="sdk-echo"
    )
    assert mine["graph_id"] == "echo" and mine["name"] == "sdk-echo", mine
    assert mine["config"].get("recursion_limit") == 9, mine
    assert mine["version"] == 1, mine
    again = await client.assistants.create(
        "echo", assistant_id=mine["assistant_id"], if_exists="do_nothing"
    )
    assert again["assistant_id"] == mine["assistant_id"] and again["name"] == "sdk-echo"
    try:
        await client.assistants.create("echo", assistant_id=mine["assistant_id"])
        raise AssertionError("duplicate assistant id accepted")
    except ConflictError:
        pass
    upd = await client.assistants.update(
        mine["assistant_id"], name="sdk-echo-2", metadata={"v": 2}
    )
    assert upd["name"] == "sdk-echo-2" and upd["version"] == 2, upd
    assert upd["metadata"].get("team") == "sdk" and upd["metadata"].get("v") == 2, upd
    by_meta = await client.assistants.search(metadata={"team": "sdk"})
    assert [a["assistant_id"] for a in by_meta] == [mine["assistant_id"]], by_meta
    paged = await client.assistants.search(graph_id="echo", limit=1, response_format="object")
    assert len(paged["assistants"]) == 1 and paged["next"] is not None, paged
    assert await client.assistants.count(graph_id="echo") == 2
    versions = await client.assistants.get_versions(mine["assistant_id"])
    assert sorted(v["version"] for v in versions) == [1, 2], versions
    # Runs with the created assistant use its config.
    out = await client.runs.wait(None, mine["assistant_id"], input=human("via mine"))
    assert texts(out)[-1] == "echo: via mine", out
    await client.assistants.delete(mine["assistant_id"])
    try:
        await client.assistants.get(mine["assistant_id"])
        raise AssertionError("deleted assistant still there")
    except NotFoundError:
        pass
    passed("assistants")


async def threads(client) -> None:
    t = await client.threads.create(metadata={"owner": "sdk", "n": 1})
    for key in ("thread_id", "created_at", "updated_at", "metadata", "status", "values"):
        assert key in t, (key, t)
    assert t["status"] == "idle", t
    tid = t["thread_id"]
    got = await client.threads.get(tid)
    assert got["metadata"]["owner"] == "sdk", got
    fixed = str(uuid.uuid4())
    made = await client.threads.create(thread_id=fixed, graph_id="echo")
    assert made["thread_id"] == fixed and made["metadata"]["graph_id"] == "echo", made
    same = await client.threads.create(thread_id=fixed, if_exists="do_nothing")
    assert same["thread_id"] == fixed
    try:
        await client.threads.create(thread_id=fixed)
        raise AssertionError("duplicate thread id accepted")
    except ConflictError:
        pass

    upd = await client.threads.update(tid, metadata={"n": 2, "tag": "x"})
    assert upd["metadata"] == {"owner": "sdk", "n": 2, "tag": "x"}, upd
    out = await client.runs.wait(tid, "echo", input=human("hello"))
    assert texts(out) == ["hello", "echo: hello"], out
    assert out["steps"] == 1, out

    found = await client.threads.search(metadata={"tag": "x"})
    assert [x["thread_id"] for x in found] == [tid], found
    found = await client.threads.search(ids=[tid, fixed], limit=5)
    assert {x["thread_id"] for x in found} == {tid, fixed}, found
    found = await client.threads.search(values={"steps": 1}, status="idle")
    assert tid in [x["thread_id"] for x in found], found
    assert await client.threads.count(metadata={"tag": "x"}) == 1

    copied = await client.threads.copy(tid)
    assert copied["thread_id"] != tid, copied
    cstate = await client.threads.get_state(copied["thread_id"])
    assert texts(cstate["values"]) == ["hello", "echo: hello"], cstate
    # The copy goes on independently.
    await client.runs.wait(copied["thread_id"], "echo", input=human("more"))
    assert len(texts((await client.threads.get_state(tid))["values"])) == 2

    await client.threads.delete(copied["thread_id"])
    try:
        await client.threads.get(copied["thread_id"])
        raise AssertionError("deleted thread still there")
    except NotFoundError:
        pass
    await client.threads.delete(fixed)
    passed("threads")


async def stream_modes(client) -> None:
    t = await client.threads.create()
    tid = t["thread_id"]
    created: list = []
    modes = ["values", "updates", "messages-tuple", "custom", "debug", "tasks", "checkpoints"]
    parts = await collect(
        client.runs.stream(
            tid, "chatty", input=human("go"), stream_mode=modes,
            on_run_created=created.append,
        )
    )
    events = [p.event for p in parts]
    assert events[0] == "metadata", events
    run_id = parts[0].data["run_id"]
    assert created and created[0]["run_id"] == run_id and created[0]["thread_id"] == tid, created
    for mode in ["values", "updates", "messages", "custom", "debug", "tasks", "checkpoints"]:
        assert mode in events, (mode, events)
    assert "end" not in events and "error" not in events, events

    by = lambda name: [p.data for p in parts if p.event == name]  # noqa: E731
    values = by("values")
    assert texts(values[-1]) == ["go", "Hello"], values[-1]
    assert values[-1]["steps"] == 1 and values[-1]["decision"] == "deep", values[-1]
    updates = by("updates")
    assert any("talk" in u for u in updates), updates
    talk = next(u["talk"] for u in updates if "talk" in u)
    assert talk["messages"][0]["content"] == "Hello", talk
    assert talk["messages"][0]["type"] == "ai", talk

    msgs = by("messages")
    assert [m[0]["content"] for m in msgs] == ["Hel", "lo"], msgs
    chunk, meta = msgs[0]
    assert chunk["type"] == "AIMessageChunk", chunk
    assert meta["langgraph_node"] == "talk", meta
    assert meta["thread_id"] == tid and meta["run_id"] == run_id, meta
    assert "langgraph_step" in meta and "langgraph_checkpoint_ns" in meta, meta

    custom = by("custom")
    assert {"progress": 0.5} in custom, custom

    tasks = by("tasks")
    starts = [x for x in tasks if "input" in x]
    results = [x for x in tasks if "result" in x]
    assert "talk" in [x["name"] for x in starts], tasks
    assert "talk" in [x["name"] for x in results], tasks
    for x in starts:
        assert {"id", "name", "input", "triggers"} <= set(x), x
    for x in results:
        assert {"id", "name", "error", "result", "interrupts"} <= set(x), x

    checkpoints = by("checkpoints")
    assert checkpoints, parts
    for c in checkpoints:
        assert {"config", "parent_config", "values", "metadata", "next"} <= set(c), c
        assert c["config"]["configurable"]["thread_id"] == tid, c
    assert checkpoints[-1]["next"] == [], checkpoints[-1]
    assert texts(checkpoints[-1]["values"]) == ["go", "Hello"], checkpoints[-1]

    debug = by("debug")
    kinds = {d["type"] for d in debug}
    assert {"checkpoint", "task", "task_result"} <= kinds, kinds
    for d in debug:
        assert {"step", "timestamp", "type", "payload"} <= set(d), d

    run = await client.runs.get(tid, run_id)
    assert run["status"] == "success", run
    state = await client.threads.get_state(tid)
    last_cp = checkpoints[-1]["config"]["configurable"]["checkpoint_id"]
    assert state["checkpoint"]["checkpoint_id"] == last_cp, (state, checkpoints[-1])

    # One mode as a plain string; the v2 parts give type/ns/data.
    v2 = await collect(
        client.runs.stream(tid, "echo", input=human("again"), stream_mode="updates",
                           version="v2")
    )
    kinds = [p["type"] for p in v2]
    assert kinds[0] == "metadata" and "updates" in kinds, kinds
    up = next(p for p in v2 if p["type"] == "updates")
    assert up["ns"] == [] and "reply" in up["data"], up
    passed("stream_modes")

    # Subgraph events carry their namespace after a "|".
    parts = await collect(
        client.runs.stream(None, "chatty", input=human("deep"),
                           stream_mode=["custom", "updates"], stream_subgraphs=True)
    )
    sub = [p for p in parts if p.event.startswith("custom|")]
    assert sub, [p.event for p in parts]
    assert sub[0].event.split("|")[1].startswith("inner:"), sub[0]
    assert sub[0].data == {"from": "deep"}, sub[0]
    assert any(p.event == "custom" and p.data == {"progress": 0.5} for p in parts), parts
    assert any(p.event.startswith("updates|inner:") for p in parts), [p.event for p in parts]
    v2 = await collect(
        client.runs.stream(None, "chatty", input=human("deep"), stream_mode="custom",
                           stream_subgraphs=True, version="v2")
    )
    deep = [p for p in v2 if p["type"] == "custom" and p["ns"]]
    assert deep and deep[0]["ns"][0].startswith("inner:"), v2
    passed("stream_subgraphs")


async def wait_and_interrupt(client) -> None:
    t = await client.threads.create()
    tid = t["thread_id"]
    out = await client.runs.wait(tid, "approval", input=human("need approval"))
    assert "__interrupt__" in out, out
    intr = out["__interrupt__"][0]
    assert intr["value"] == {"question": "approve?"}, intr
    assert "id" in intr, intr
    th = await client.threads.get(tid)
    assert th["status"] == "interrupted", th
    assert any(i["value"] == {"question": "approve?"}
               for lst in th["interrupts"].values() for i in lst), th
    state = await client.threads.get_state(tid)
    assert state["next"] == ["ask"], state
    assert state["tasks"][0]["name"] == "ask", state
    assert state["tasks"][0]["interrupts"][0]["value"] == {"question": "approve?"}, state
    assert state["interrupts"][0]["id"] == intr["id"], state
    passed("wait")

    # Resume through a stream: interrupts reach the client as updates.
    cmd: Command = {"resume": "yes"}
    parts = await collect(
        client.runs.stream(tid, "approval", command=cmd, stream_mode=["values", "updates"])
    )
    final = [p.data for p in parts if p.event == "values"][-1]
    assert final["decision"] == "yes", final
    assert texts(final)[-1] == "decided: yes", final
    th = await client.threads.get(tid)
    assert th["status"] == "idle" and th["values"]["decision"] == "yes", th

    # Interrupts in a stream: an `updates` event with __interrupt__.
    t2 = (await client.threads.create())["thread_id"]
    parts = await collect(
        client.runs.stream(t2, "approval", input=human("x"), stream_mode="updates")
    )
    intr_updates = [p.data for p in parts if p.event == "updates" and "__interrupt__" in p.data]
    assert intr_updates, parts
    assert intr_updates[0]["__interrupt__"][0]["value"] == {"question": "approve?"}
    # Resuming by wait.
    out = await client.runs.wait(t2, "approval", command={"resume": "no"})
    assert out["decision"] == "no" and "__interrupt__" not in out, out
    passed("interrupt_resume")


async def state_history(client) -> None:
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "echo", input=human("one"))
    await client.runs.wait(tid, "echo", input=human("two"))
    state = await client.threads.get_state(tid)
    assert texts(state["values"]) == ["one", "echo: one", "two", "echo: two"], state
    assert state["next"] == [], state
    cp = state["checkpoint"]
    assert cp["thread_id"] == tid and cp["checkpoint_id"], cp
    assert "checkpoint_ns" in cp, cp
    assert state["metadata"] is not None and state["created_at"], state

    hist = await client.threads.get_history(tid)
    assert len(hist) >= 4, len(hist)
    assert hist[0]["checkpoint"]["checkpoint_id"] == cp["checkpoint_id"], hist[0]
    assert len(await client.threads.get_history(tid, limit=2)) == 2
    older = await client.threads.get_history(tid, limit=1, before=hist[0]["checkpoint"])
    assert older[0]["checkpoint"]["checkpoint_id"] == hist[1]["checkpoint"]["checkpoint_id"]
    # State at an older checkpoint, by id and by checkpoint object.
    first_done = next(h for h in hist if texts(h["values"]) == ["one", "echo: one"])
    at = await client.threads.get_state(tid, checkpoint_id=first_done["checkpoint"]["checkpoint_id"])
    assert texts(at["values"]) == ["one", "echo: one"], at
    at = await client.threads.get_state(tid, checkpoint=first_done["checkpoint"])
    assert texts(at["values"]) == ["one", "echo: one"], at

    res = await client.threads.update_state(
        tid, {"messages": [{"type": "ai", "content": "edited"}], "decision": "manual"},
        as_node="reply",
    )
    assert res["checkpoint"]["checkpoint_id"] != cp["checkpoint_id"], res
    state = await client.threads.get_state(tid)
    assert texts(state["values"])[-1] == "edited", state
    assert state["values"]["decision"] == "manual", state
    assert state["next"] == [], state
    assert state["checkpoint"]["checkpoint_id"] == res["checkpoint"]["checkpoint_id"]
    # Updating as `ask` makes `reply` next on the approval graph.
    t2 = (await client.threads.create())["thread_id"]
    await client.runs.wait(t2, "approval", input=human("q"))
    await client.threads.update_state(t2, {"decision": "forced"}, as_node="ask")
    st2 = await client.threads.get_state(t2)
    assert st2["next"] == ["reply"], st2
    out = await client.runs.wait(t2, "approval", input=None)
    assert texts(out)[-1] == "decided: forced", out
    passed("state_history")


async def store(client) -> None:
    ns = ["sdk", "users", "u1"]
    await client.store.put_item(ns, "prefs", {"theme": "dark", "n": 1})
    await client.store.put_item(ns, "other", {"theme": "light", "n": 2})
    await client.store.put_item(["sdk", "teams"], "t1", {"name": "core"})
    item = await client.store.get_item(ns, "prefs")
    assert item["value"] == {"theme": "dark", "n": 1}, item
    assert item["namespace"] == ns and item["key"] == "prefs", item
    assert item["created_at"] and item["updated_at"], item
    found = await client.store.search_items(["sdk", "users"])
    assert {i["key"] for i in found["items"]} == {"prefs", "other"}, found
    found = await client.store.search_items(["sdk"], filter={"theme": "light"})
    assert [i["key"] for i in found["items"]] == ["other"], found
    assert len((await client.store.search_items(["sdk"], limit=1))["items"]) == 1
    spaces = await client.store.list_namespaces(prefix=["sdk"])
    assert sorted(spaces["namespaces"]) == [["sdk", "teams"], ["sdk", "users", "u1"]], spaces
    spaces = await client.store.list_namespaces(prefix=["sdk"], max_depth=2)
    assert sorted(spaces["namespaces"]) == [["sdk", "teams"], ["sdk", "users"]], spaces
    await client.store.delete_item(ns, "prefs")
    try:
        missing = await client.store.get_item(ns, "prefs")
        assert missing is None, missing
    except NotFoundError:
        pass
    passed("store")


async def wait_status(client, tid: str, rid: str, timeout: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        run = await client.runs.get(tid, rid)
        if run["status"] not in ("pending", "running"):
            return run
        assert time.monotonic() < deadline, run
        await asyncio.sleep(0.05)


async def wait_running(client, tid: str, rid: str) -> None:
    deadline = time.monotonic() + 20
    while (await client.runs.get(tid, rid))["status"] == "pending":
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)


async def cancel_join_multitask(client) -> None:
    tid = (await client.threads.create())["thread_id"]
    run = await client.runs.create(tid, "slow", input={"sleep_ms": 30000})
    for key in ("run_id", "thread_id", "assistant_id", "created_at", "updated_at",
                "status", "metadata", "multitask_strategy"):
        assert key in run, (key, run)
    assert run["status"] == "pending" and run["thread_id"] == tid, run
    await wait_running(client, tid, run["run_id"])
    assert (await client.threads.get(tid))["status"] == "busy"

    # reject: the SDK raises a 409 while the slow run is active.
    try:
        await client.runs.create(tid, "echo", input=human("x"), multitask_strategy="reject")
        raise AssertionError("reject strategy accepted a second run")
    except ConflictError as e:
        assert e.response.status_code == 409
    try:
        await client.runs.wait(tid, "echo", input=human("x"), multitask_strategy="reject")
        raise AssertionError("reject strategy accepted a second run")
    except httpx.HTTPStatusError as e:
        assert e.response.status_code == 409
    # enqueue: accepted, waits for the slow run.
    queued = await client.runs.create(tid, "echo", input=human("queued"),
                                      multitask_strategy="enqueue")
    assert queued["status"] == "pending", queued
    assert queued["multitask_strategy"] == "enqueue", queued

    await client.runs.cancel(tid, run["run_id"])
    done = await wait_status(client, tid, run["run_id"])
    assert done["status"] == "interrupted", done
    passed("cancel")

    out = await client.runs.join(tid, queued["run_id"])
    assert texts(out)[-1] == "echo: queued", out
    assert (await client.runs.get(tid, queued["run_id"]))["status"] == "success"
    # join on a finished run returns its values at once.
    out = await client.runs.join(tid, queued["run_id"])
    assert texts(out)[-1] == "echo: queued", out
    passed("join")

    # cancel with wait=True returns once the run is over.
    r2 = await client.runs.create(tid, "slow", input={"sleep_ms": 30000})
    await wait_running(client, tid, r2["run_id"])
    await client.runs.cancel(tid, r2["run_id"], wait=True)
    assert (await client.runs.get(tid, r2["run_id"]))["status"] == "interrupted"
    # interrupt strategy: a new run stops the active one.
    r3 = await client.runs.create(tid, "slow", input={"sleep_ms": 30000})
    await wait_running(client, tid, r3["run_id"])
    r4 = await client.runs.create(tid, "slow", input={"sleep_ms": 1},
                                  multitask_strategy="interrupt")
    assert (await wait_status(client, tid, r4["run_id"]))["status"] == "success"
    assert (await client.runs.get(tid, r3["run_id"]))["status"] == "interrupted"
    # cancel_many by thread.
    r5 = await client.runs.create(tid, "slow", input={"sleep_ms": 30000})
    await wait_running(client, tid, r5["run_id"])
    await client.runs.cancel_many(thread_id=tid, status="all")
    assert (await wait_status(client, tid, r5["run_id"]))["status"] == "interrupted"
    passed("multitask")

    runs = await client.runs.list(tid, limit=20)
    ids = [r["run_id"] for r in runs]
    assert {run["run_id"], queued["run_id"], r2["run_id"], r5["run_id"]} <= set(ids), ids
    assert ids[0] == r5["run_id"], ids  # newest first
    assert len(await client.runs.list(tid, limit=2)) == 2
    ok = await client.runs.list(tid, status="success")
    assert {r["run_id"] for r in ok} == {queued["run_id"], r4["run_id"]}, ok
    await client.runs.delete(tid, queued["run_id"])
    try:
        await client.runs.get(tid, queued["run_id"])
        raise AssertionError("deleted run still there")
    except NotFoundError:
        pass
    passed("runs_list")


async def stateless(client) -> None:
    out = await client.runs.wait(None, "echo", input=human("nobody"))
    assert texts(out) == ["nobody", "echo: nobody"], out
    parts = await collect(client.runs.stream(None, "echo", input=human("s"),
                                             stream_mode="values"))
    assert texts(parts[-1].data)[-1] == "echo: s", parts
    # runs.wait raises plain httpx errors (it streams the body to survive drops).
    try:
        await client.runs.wait(None, "nope", input={})
        raise AssertionError("unknown assistant accepted")
    except httpx.HTTPStatusError as e:
        assert e.response.status_code == 404, e
    passed("stateless")


async def errors_and_extras(client) -> None:
    # A graph error: runs.wait raises it by default, or hands back __error__.
    try:
        await client.runs.wait(None, "chatty", input=human("e"), config={"recursion_limit": 1})
        raise AssertionError("recursion limit not enforced")
    except AssertionError:
        raise
    except Exception as e:  # the SDK raises a bare Exception("<error>: <message>")
        assert "Recursion" in str(e), e
    out = await client.runs.wait(None, "chatty", input=human("e"),
                                 config={"recursion_limit": 1}, raise_error=False)
    assert "Recursion" in out["__error__"]["error"], out
    assert out["__error__"]["message"], out
    parts = await collect(client.runs.stream(None, "chatty", input=human("e"),
                                             config={"recursion_limit": 1}))
    assert parts[-1].event == "error", parts
    assert {"error", "message"} <= set(parts[-1].data), parts[-1]

    # stream_mode "messages": accumulated partial messages with metadata first.
    parts = await collect(client.runs.stream(None, "chatty", input=human("m"),
                                             stream_mode="messages"))
    events = [p.event for p in parts]
    assert "messages/metadata" in events and "messages/partial" in events, events
    partial = [p.data for p in parts if p.event == "messages/partial"]
    assert [m[0]["content"] for m in partial] == ["Hel", "Hello"], partial
    meta = next(p.data for p in parts if p.event == "messages/metadata")
    assert meta["m1"]["metadata"]["langgraph_node"] == "talk", meta

    # Resumable streams carry ids; join_stream replays after Last-Event-ID.
    tid = (await client.threads.create())["thread_id"]
    parts = await collect(client.runs.stream(tid, "echo", input=human("r"),
                                             stream_mode=["values", "updates"],
                                             stream_resumable=True))
    ids = [p.id for p in parts]
    assert all(ids) and len(set(ids)) == len(ids), ids
    rid = parts[0].data["run_id"]
    again = await collect(client.runs.join_stream(tid, rid, last_event_id=ids[0]))
    assert [p.event for p in again] == [p.event for p in parts[1:]], (again, parts)
    assert again[-1].data == parts[-1].data

    # Background run streamed live by join_stream.
    run = await client.runs.create(tid, "slow", input={"sleep_ms": 300},
                                   stream_mode=["values", "updates"])
    joined = await collect(client.runs.join_stream(tid, run["run_id"]))
    assert any(p.event == "updates" and "sleep" in p.data for p in joined), joined
    assert (await client.runs.get(tid, run["run_id"]))["status"] == "success"

    # Batch of stateless runs.
    batch = await client.runs.create_batch([
        {"assistant_id": "echo", "input": human("b1")},
        {"assistant_id": "echo", "input": human("b2")},
    ])
    assert len(batch) == 2 and all(r["status"] == "pending" for r in batch), batch

    # Subgraphs by namespace, each with its schemas; one namespace; an unknown one.
    subs = await client.assistants.get_subgraphs("chatty")
    assert list(subs) == ["inner"], subs
    assert "decision" in subs["inner"]["state_schema"]["properties"], subs
    assert set(subs["inner"]) >= {"input_schema", "output_schema", "state_schema"}, subs
    assert list(await client.assistants.get_subgraphs("chatty", namespace="inner", recurse=True)) == ["inner"]
    assert await client.assistants.get_subgraphs("chatty", namespace="nope") == {}

    # Field selection on searches and lists.
    found = await client.threads.search(ids=[tid], select=["thread_id", "status"])
    assert found == [{"thread_id": tid, "status": "idle"}], found
    found = await client.assistants.search(graph_id="echo", select=["assistant_id", "graph_id"])
    assert found and all(set(a) == {"assistant_id", "graph_id"} for a in found), found
    runs = await client.runs.list(tid, select=["run_id", "status"])
    assert runs and all(set(r) == {"run_id", "status"} for r in runs), runs

    # PATCH with Prefer: return=minimal answers without a body.
    res = await client.threads.update(tid, metadata={"m": 1}, return_minimal=True)
    assert res is None, res
    assert (await client.threads.get(tid))["metadata"]["m"] == 1

    # Threads seeded with supersteps, and pruned.
    seeded = await client.threads.create(
        graph_id="echo",
        supersteps=[{"updates": [{"values": human("seed"), "as_node": "reply"}]}],
    )
    st = await client.threads.get_state(seeded["thread_id"])
    assert texts(st["values"]) == ["seed"], st
    pruned = await client.threads.prune([seeded["thread_id"]])
    assert pruned.get("pruned_count") == 1, pruned
    passed("extras")


async def seed_messages(client) -> None:
    """A seed graph (chat_runtime: a model that calls a search tool, then answers) in the
    message modes, with its input in OpenAI's role form and content parts."""
    tid = (await client.threads.create())["thread_id"]
    ask = {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "How do I reset my password?"}]}]}
    parts = await collect(client.runs.stream(tid, "chat_runtime", input=ask,
                                             stream_mode="messages-tuple"))
    msgs = [p.data for p in parts if p.event == "messages"]
    assert msgs, parts
    final = (await client.threads.get_state(tid))["values"]["messages"][-1]
    assert final["type"] == "ai" and "Reset password" in final["content"], final
    # The answer streams token by token under the id it is stored with.
    answer = [m for m, _ in msgs if m["type"] == "AIMessageChunk" and m["id"] == final["id"]]
    assert len(answer) > 2, msgs
    assert "".join(m["content"] for m in answer) == final["content"], answer
    # The tool call streams as tool_call_chunks.
    calls = [c for m, _ in msgs if m["type"] == "AIMessageChunk" for c in m["tool_call_chunks"]]
    assert calls and calls[0]["name"] == "knowledge_search", msgs
    # The tool's answer comes whole, once, from the tools node.
    tools = [(m, meta) for m, meta in msgs if m["type"] == "tool"]
    assert len(tools) == 1, msgs
    tool, meta = tools[0]
    assert tool["tool_call_id"] == calls[0]["id"] and tool["id"], tool
    assert meta["langgraph_node"] == "tools" and meta["thread_id"] == tid, meta
    # No message comes twice: nothing streamed is repeated whole.
    assert not [m for m, _ in msgs if m["type"] == "ai"], msgs
    for m, meta in msgs:
        assert {"langgraph_node", "langgraph_step", "langgraph_triggers", "langgraph_path",
                "langgraph_checkpoint_ns"} <= set(meta), meta
    # The stored input is in the type form.
    first = (await client.threads.get_state(tid))["values"]["messages"][0]
    assert first["type"] == "human" and "role" not in first, first

    # stream_mode "messages": partial messages for the tokens, complete for the tool's.
    parts = await collect(client.runs.stream(None, "chat_runtime", input=ask,
                                             stream_mode="messages"))
    events = [p.event for p in parts]
    assert "messages/partial" in events and "messages/complete" in events, events
    complete = [p.data[0] for p in parts if p.event == "messages/complete"]
    assert [m["type"] for m in complete] == ["tool"], complete
    partial = [p.data[0] for p in parts if p.event == "messages/partial"]
    assert "Reset password" in partial[-1]["content"], partial[-1]
    passed("seed_messages")


def sync_client() -> None:
    client = get_sync_client(url=URL)
    assert any(a["graph_id"] == "echo" for a in client.assistants.search())
    tid = client.threads.create()["thread_id"]
    parts = list(client.runs.stream(tid, "chatty", input=human("sync"),
                                    stream_mode=["messages-tuple", "custom"]))
    assert [p.event for p in parts if p.event != "metadata"] == \
        ["custom", "messages", "messages"], parts
    out = client.runs.wait(tid, "echo", input=human("sync wait"))
    assert texts(out)[-1] == "echo: sync wait", out
    client.store.put_item(["sync"], "k", {"v": 1})
    assert client.store.get_item(["sync"], "k")["value"] == {"v": 1}
    passed("sync_client")


async def main() -> None:
    client = get_client(url=URL)
    assert (await client.http.get("/ok")) == {"ok": True}
    await assistants(client)
    await threads(client)
    await stream_modes(client)
    await wait_and_interrupt(client)
    await state_history(client)
    await store(client)
    await cancel_join_multitask(client)
    await stateless(client)
    await errors_and_extras(client)
    await seed_messages(client)
    await asyncio.get_running_loop().run_in_executor(None, sync_client)


if __name__ == "__main__":
    asyncio.run(asyncio.wait_for(main(), timeout=80))
    print(json.dumps({"ok": True, "checks": CHECKS}))
