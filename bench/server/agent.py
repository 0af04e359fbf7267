"""The graphs of the server benchmark for `langgraph dev` (bench/server.sh).

The same logic as `bench/src/bin/bench_server.rs` (graphloom):

- `agent`: a ReAct loop `agent <-> tools` over `MessagesState`. The model is an offline,
  deterministic chat model (a tiny `BaseChatModel`): when the last message is a tool result
  it answers "The weather in <city>: <result>", otherwise it calls `get_weather` once with
  {"city": <last human text>}. The tool runs in LangGraph's prebuilt `ToolNode`.
  One run: 3 supersteps, 4 messages.
- `interrupter`: one node that calls `interrupt(...)` (the idle-threads memory case).

No checkpointer here: `langgraph dev` (langgraph-api, in-memory runtime) supplies its own.
"""

import itertools
from typing import Any, List, Optional

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import interrupt

_calls = itertools.count()


class ScriptedWeatherModel(BaseChatModel):
    """One tool call, then a final answer built from the tool result."""

    @property
    def _llm_type(self) -> str:
        return "scripted-weather"

    def _reply(self, messages: List[BaseMessage]) -> AIMessage:
        last = messages[-1] if messages else None
        if isinstance(last, ToolMessage):
            city = next((m.content for m in reversed(messages) if isinstance(m, HumanMessage)), "")
            return AIMessage(content=f"The weather in {city}: {last.content}")
        city = last.content if last is not None else ""
        return AIMessage(
            content="",
            tool_calls=[{"name": "get_weather", "args": {"city": city}, "id": f"call_{next(_calls)}"}],
        )

    def _generate(
        self,
        messages: List[BaseMessage],
        stop: Optional[List[str]] = None,
        run_manager: Optional[CallbackManagerForLLMRun] = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    async def _agenerate(
        self,
        messages: List[BaseMessage],
        stop: Optional[List[str]] = None,
        run_manager: Optional[AsyncCallbackManagerForLLMRun] = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])


@tool
def get_weather(city: str) -> str:
    """Current weather of a city."""
    return f"sunny and 21 degrees in {city}"


model = ScriptedWeatherModel()


async def call_model(state: MessagesState):
    return {"messages": [await model.ainvoke(state["messages"])]}


agent = (
    StateGraph(MessagesState)
    .add_node("agent", call_model)
    .add_node("tools", ToolNode([get_weather]))
    .add_edge(START, "agent")
    .add_conditional_edges("agent", tools_condition)
    .add_edge("tools", "agent")
    .compile()
)


async def ask(state: MessagesState):
    answer = interrupt({"question": "approve?"})
    return {"messages": [AIMessage(content=str(answer))]}


interrupter = (
    StateGraph(MessagesState).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END).compile()
)
