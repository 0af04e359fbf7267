"""Real LangGraph graphs checkpointed by graphloom's SQLite savers, sync and async:
interrupts and resume across saver instances, a subgraph with its own namespace, Send
fan-out, and time travel (replay and fork from an earlier checkpoint)."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt

from graphloom.checkpoint.sqlite import SqliteSaver
from graphloom.checkpoint.sqlite.aio import AsyncSqliteSaver


class Approval(TypedDict, total=False):
    request: str
    verdict: str
    log: Annotated[list[str], operator.add]


def approval_graph():
    def draft(state: Approval) -> Approval:
        return {"log": [f"drafted {state['request']}"]}

    def ask(state: Approval) -> Approval:
        answer = interrupt({"question": f"approve {state['request']}?"})
        return {"verdict": answer, "log": ["asked"]}

    def act(state: Approval) -> Approval:
        return {"log": [f"acted on {state['verdict']}"]}

    b = StateGraph(Approval)
    b.add_node("draft", draft)
    b.add_node("ask", ask)
    b.add_node("act", act)
    b.add_edge(START, "draft")
    b.add_edge("draft", "ask")
    b.add_edge("ask", "act")
    b.add_edge("act", END)
    return b


class Fan(TypedDict, total=False):
    topics: list[str]
    notes: Annotated[list[str], operator.add]
    summary: str


class Note(TypedDict):
    topic: str


class Inner(TypedDict, total=False):
    notes: Annotated[list[str], operator.add]
    summary: str


class Summary(TypedDict):
    summary: str


def fan_graph():
    """Send fan-out to one researcher per topic, then a subgraph that pauses for review."""

    def plan(state: Fan) -> Fan:
        return {}

    def route(state: Fan):
        return [Send("research", {"topic": t}) for t in state["topics"]]

    def research(packet: Note) -> Fan:
        return {"notes": [f"note on {packet['topic']}"]}

    def review(state: Inner) -> Inner:
        ok = interrupt({"notes": sorted(state["notes"])})
        return {"summary": f"{len(state['notes'])} notes, review: {ok}"}

    inner = StateGraph(Inner, output_schema=Summary)
    inner.add_node("review", review)
    inner.add_edge(START, "review")
    inner.add_edge("review", END)

    b = StateGraph(Fan)
    b.add_node("plan", plan)
    b.add_node("research", research)
    b.add_node("summarize", inner.compile())
    b.add_edge(START, "plan")
    b.add_conditional_edges("plan", route, ["research"])
    b.add_edge("research", "summarize")
    b.add_edge("summarize", END)
    return b


def cfg(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


# --- sync -----------------------------------------------------------------------------------


def test_an_interrupted_run_resumes_from_another_saver_on_the_same_file(db_path):
    with SqliteSaver.from_conn_string(db_path) as saver:
        graph = approval_graph().compile(checkpointer=saver)
        out = graph.invoke({"request": "refund"}, cfg("t1"))
        assert out["__interrupt__"][0].value == {"question": "approve refund?"}
        state = graph.get_state(cfg("t1"))
        assert state.next == ("ask",)
        assert state.values["log"] == ["drafted refund"]

    # Another saver (another process would do the same) picks the thread up.
    with SqliteSaver.from_conn_string(db_path) as saver:
        graph = approval_graph().compile(checkpointer=saver)
        out = graph.invoke(Command(resume="yes"), cfg("t1"))
        assert out["verdict"] == "yes"
        assert out["log"] == ["drafted refund", "asked", "acted on yes"]
        assert graph.get_state(cfg("t1")).next == ()


def test_send_fan_out_and_a_subgraph_interrupt_resume(db_path):
    with SqliteSaver.from_conn_string(db_path) as saver:
        graph = fan_graph().compile(checkpointer=saver)
        out = graph.invoke({"topics": ["a", "b", "c"]}, cfg("t2"))
        assert out["__interrupt__"][0].value == {
            "notes": ["note on a", "note on b", "note on c"]
        }
        state = graph.get_state(cfg("t2"), subgraphs=True)
        assert state.next == ("summarize",)
        sub = state.tasks[0].state
        # The subgraph's checkpoints live in their own namespace.
        assert sub.config["configurable"]["checkpoint_ns"].startswith("summarize:")
        assert sorted(sub.values["notes"]) == ["note on a", "note on b", "note on c"]

        out = graph.invoke(Command(resume="fine"), cfg("t2"))
        assert out["summary"] == "3 notes, review: fine"
        assert sorted(out["notes"]) == ["note on a", "note on b", "note on c"]
        ours = [(s.next, s.metadata["step"]) for s in graph.get_state_history(cfg("t2"))]

    # LangGraph's in-memory saver, the reference, goes through the same checkpoints.
    reference = fan_graph().compile(checkpointer=InMemorySaver())
    reference.invoke({"topics": ["a", "b", "c"]}, cfg("t2"))
    assert reference.invoke(Command(resume="fine"), cfg("t2")) == out
    assert [(s.next, s.metadata["step"]) for s in reference.get_state_history(cfg("t2"))] == ours


def test_time_travel_replays_and_forks_from_an_earlier_checkpoint(db_path):
    with SqliteSaver.from_conn_string(db_path) as saver:
        graph = approval_graph().compile(checkpointer=saver)
        graph.invoke({"request": "refund"}, cfg("t3"))
        graph.invoke(Command(resume="yes"), cfg("t3"))
        history = list(graph.get_state_history(cfg("t3")))
        # Newest first: input, draft, ask (paused), act, done.
        assert [s.metadata["step"] for s in history] == [3, 2, 1, 0, -1]
        before_ask = next(s for s in history if s.next == ("ask",))

        # Fork: change the request before the paused step and run again from there.
        forked = graph.update_state(before_ask.config, {"request": "exchange"})
        out = graph.invoke(None, forked)
        assert out["__interrupt__"][0].value == {"question": "approve exchange?"}
        out = graph.invoke(Command(resume="no"), cfg("t3"))
        assert out["verdict"] == "no"
        assert out["log"] == ["drafted refund", "asked", "acted on no"]

        # The original branch is still there, untouched.
        old = graph.get_state(history[0].config)
        assert old.values["verdict"] == "yes"
        assert len(list(graph.get_state_history(cfg("t3")))) > len(history)


def test_list_filters_and_limits_the_history(db_path):
    with SqliteSaver.from_conn_string(db_path) as saver:
        graph = approval_graph().compile(checkpointer=saver)
        graph.invoke({"request": "refund"}, cfg("t4"))
        graph.invoke(Command(resume="yes"), cfg("t4"))
        loops = list(saver.list(cfg("t4"), filter={"source": "loop"}))
        assert loops and all(t.metadata["source"] == "loop" for t in loops)
        newest_two = list(saver.list(cfg("t4"), limit=2))
        assert len(newest_two) == 2
        older = list(saver.list(cfg("t4"), before=newest_two[-1].config, limit=1))
        assert older[0].checkpoint["id"] < newest_two[-1].checkpoint["id"]
        saver.delete_thread("t4")
        assert saver.get_tuple(cfg("t4")) is None


# --- async ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_async_interrupt_resume_and_fan_out(db_path):
    async with AsyncSqliteSaver.from_conn_string(db_path) as saver:
        graph = approval_graph().compile(checkpointer=saver)
        out = await graph.ainvoke({"request": "refund"}, cfg("a1"))
        assert out["__interrupt__"][0].value == {"question": "approve refund?"}

    async with AsyncSqliteSaver.from_conn_string(db_path) as saver:
        graph = approval_graph().compile(checkpointer=saver)
        out = await graph.ainvoke(Command(resume="yes"), cfg("a1"))
        assert out["log"] == ["drafted refund", "asked", "acted on yes"]

        fan = fan_graph().compile(checkpointer=saver)
        out = await fan.ainvoke({"topics": ["x", "y"]}, cfg("a2"))
        assert "__interrupt__" in out
        out = await fan.ainvoke(Command(resume="ok"), cfg("a2"))
        assert out["summary"] == "2 notes, review: ok"


@pytest.mark.asyncio
async def test_async_time_travel_fork(db_path):
    async with AsyncSqliteSaver.from_conn_string(db_path) as saver:
        graph = approval_graph().compile(checkpointer=saver)
        await graph.ainvoke({"request": "refund"}, cfg("a3"))
        await graph.ainvoke(Command(resume="yes"), cfg("a3"))
        history = [s async for s in graph.aget_state_history(cfg("a3"))]
        before_ask = next(s for s in history if s.next == ("ask",))
        forked = await graph.aupdate_state(before_ask.config, {"request": "exchange"})
        out = await graph.ainvoke(None, forked)
        assert out["__interrupt__"][0].value == {"question": "approve exchange?"}
        state = await graph.aget_state(cfg("a3"))
        assert state.values["request"] == "exchange"
        assert state.next == ("ask",)
