"""The create_agent scenarios of the differential test, run on LangChain's create_agent.

Each scenario: a two-tool agent with human-in-the-loop review and a model call limit, a
scripted fake chat model, a thread run until its review, then resumed with decisions.
Prints one JSON object: scenario name -> {"interrupts": [...], "messages": [...]}, messages
normalised (type, content, tool calls, tool_call_id, name, status; no ids).
"""

import json
import sys

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware, ModelCallLimitMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from typing import Annotated

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command


class ScriptedChat(GenericFakeChatModel):
    """Answers from a list; accepts the tools it is bound to."""

    def bind_tools(self, tools, **kwargs):
        return self


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
def send_email(body: str, to: str) -> str:
    """Send an email."""
    return f"sent to {to}: {body}"


@tool
def note(what: str, tool_call_id: Annotated[str, InjectedToolCallId]):
    """Note something."""
    return [
        Command(update={"messages": [ToolMessage(f"noted {what}", tool_call_id=tool_call_id)]}),
        Command(update={"messages": [HumanMessage(f"remember: {what}")]}),
    ]


TOOLS = [get_weather, send_email, note]


def call(name, args, id_):
    return {"name": name, "args": args, "id": id_, "type": "tool_call"}


def norm(m):
    out = {"type": m.type, "content": m.content}
    calls = getattr(m, "tool_calls", None)
    if calls:
        out["tool_calls"] = [{"name": c["name"], "args": c["args"], "id": c["id"]} for c in calls]
    if getattr(m, "tool_call_id", None):
        out["tool_call_id"] = m.tool_call_id
    if m.name:
        out["name"] = m.name
    if m.type == "tool":
        out["status"] = m.status
    return out


def run(replies, middleware, decisions):
    agent = create_agent(
        ScriptedChat(messages=iter(replies)),
        TOOLS,
        system_prompt="You help with weather and email.",
        middleware=middleware,
        checkpointer=InMemorySaver(),
    )
    cfg = {"configurable": {"thread_id": "t"}}
    interrupts = []
    out = agent.invoke({"messages": [HumanMessage("Weather in Paris, and tell bob.")]}, cfg)
    for d in decisions:
        interrupts.append([i.value for i in out.get("__interrupt__", [])])
        out = agent.invoke(Command(resume=d), cfg)
    interrupts.append([i.value for i in out.get("__interrupt__", [])])
    return {"interrupts": interrupts, "messages": [norm(m) for m in out["messages"]]}


def reject_then_limit():
    replies = [
        AIMessage("", tool_calls=[call("get_weather", {"city": "Paris"}, "w1"),
                                  call("send_email", {"body": "sunny", "to": "bob"}, "e1")]),
        AIMessage("", tool_calls=[call("get_weather", {"city": "Rome"}, "w2")]),
        AIMessage("", tool_calls=[call("get_weather", {"city": "Oslo"}, "w3")]),
        AIMessage("never reached"),
    ]
    middleware = [
        HumanInTheLoopMiddleware(interrupt_on={"send_email": True}),
        ModelCallLimitMiddleware(run_limit=2),
    ]
    return run(replies, middleware, [{"decisions": [{"type": "reject", "message": "not now"}]}])


def edit_and_approve():
    replies = [
        AIMessage("Checking.", tool_calls=[call("get_weather", {"city": "Paris"}, "w1"),
                                           call("send_email", {"body": "rain", "to": "bob"}, "e1")]),
        AIMessage("Done: bob knows."),
    ]
    middleware = [
        ModelCallLimitMiddleware(thread_limit=5),
        HumanInTheLoopMiddleware(
            interrupt_on={
                "send_email": {"allowed_decisions": ["approve", "edit", "reject"]},
                "get_weather": {"allowed_decisions": ["approve"], "description": "Weather lookup"},
            }
        ),
    ]
    decisions = [{"decisions": [
        {"type": "approve"},
        {"type": "edit", "edited_action": {"name": "send_email", "args": {"body": "sunny", "to": "bob"}}},
    ]}]
    return run(replies, middleware, decisions)


def respond_and_limit_on_thread():
    replies = [
        AIMessage("", tool_calls=[call("send_email", {"body": "hi", "to": "ann"}, "e1")]),
        AIMessage("Ann says hi back."),
    ]
    middleware = [
        HumanInTheLoopMiddleware(interrupt_on={"send_email": {"allowed_decisions": ["respond", "reject"]}}),
        ModelCallLimitMiddleware(thread_limit=1),
    ]
    return run(replies, middleware, [{"decisions": [{"type": "respond", "message": "ann replied: hi"}]}])


def describe(update):
    """A tools update: per key, its messages' types and tool call ids; a list (one update
    per write, when the task wrote a key more than once) as its updates in order."""
    if isinstance(update, list):
        return "[" + " | ".join(describe(u) for u in update) + "]"
    parts = []
    for key, value in update.items():
        if key == "messages":
            value = value if isinstance(value, list) else [value]
            parts.append("messages=" + "+".join(f"{m.type}:{getattr(m, 'tool_call_id', '') or ''}" for m in value))
        else:
            parts.append(key)
    return ",".join(parts)


def updates_trace(replies):
    agent = create_agent(
        ScriptedChat(messages=iter(replies)),
        TOOLS,
        system_prompt="You help with weather and email.",
        checkpointer=InMemorySaver(),
    )
    cfg = {"configurable": {"thread_id": "t"}}
    updates = []
    inp = {"messages": [HumanMessage("Weather in Paris, and tell bob.")]}
    for chunk in agent.stream(inp, cfg, stream_mode="updates"):
        for node, update in chunk.items():
            if node == "tools":
                updates.append("tools:" + describe(update))
            else:
                updates.append(node)
    state = agent.get_state(cfg)
    return {"updates": sorted(updates), "messages": [norm(m) for m in state.values["messages"]]}


def tool_calls_are_tasks():
    return updates_trace([
        AIMessage("", tool_calls=[call("get_weather", {"city": "Paris"}, "w1"),
                                  call("get_weather", {"city": "Rome"}, "w2"),
                                  call("send_email", {"body": "sunny", "to": "bob"}, "e1")]),
        AIMessage("Done."),
    ])


def tool_returns_commands():
    replies = [
        AIMessage("", tool_calls=[call("note", {"what": "umbrella"}, "n1"),
                                  call("get_weather", {"city": "Paris"}, "w1")]),
        AIMessage("Noted."),
    ]
    return run(replies, [], [])


def tool_commands_stream_per_write():
    return updates_trace([
        AIMessage("", tool_calls=[call("note", {"what": "umbrella"}, "n1"),
                                  call("get_weather", {"city": "Paris"}, "w1")]),
        AIMessage("Noted."),
    ])


def approve_keeps_argument_order():
    replies = [
        AIMessage("", tool_calls=[call("send_email", {"to": "bob", "body": "hi"}, "e1")]),
        AIMessage("Sent."),
    ]
    middleware = [HumanInTheLoopMiddleware(interrupt_on={"send_email": True})]
    return run(replies, middleware, [{"decisions": [{"type": "approve"}]}])


if __name__ == "__main__":
    json.dump(
        {
            "reject_then_limit": reject_then_limit(),
            "edit_and_approve": edit_and_approve(),
            "respond_and_limit_on_thread": respond_and_limit_on_thread(),
            "approve_keeps_argument_order": approve_keeps_argument_order(),
            "tool_calls_are_tasks": tool_calls_are_tasks(),
            "tool_returns_commands": tool_returns_commands(),
            "tool_commands_stream_per_write": tool_commands_stream_per_write(),
        },
        sys.stdout,
    )
