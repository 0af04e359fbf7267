"""The small graph the thread-protocol fixtures are recorded from: a chat model that
streams tokens and a tool call, a tool, a subgraph, and an interrupt in LangChain's
human-in-the-loop shape."""
from typing import Annotated, Any, Iterator, List, Optional
from typing_extensions import TypedDict

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.types import interrupt
from langgraph.config import get_stream_writer


class ScriptedModel(BaseChatModel):
    """First turn: a tool call; after a tool result: a text answer, token by token."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _chunks(self, messages: List[BaseMessage]) -> List[AIMessageChunk]:
        if any(isinstance(m, ToolMessage) for m in messages):
            words = ["It", " is", " sunny", " in", " Paris."]
            return [AIMessageChunk(content=w) for w in words]
        return [
            AIMessageChunk(content="", tool_call_chunks=[{"name": "get_weather", "args": '{"city": ', "id": "call_1", "index": 0}]),
            AIMessageChunk(content="", tool_call_chunks=[{"name": None, "args": '"Paris"}', "id": None, "index": 0}]),
        ]

    def _stream(self, messages, stop=None, run_manager: Optional[CallbackManagerForLLMRun] = None, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        for c in self._chunks(messages):
            chunk = ChatGenerationChunk(message=c)
            if run_manager:
                run_manager.on_llm_new_token(c.content if isinstance(c.content, str) else "", chunk=chunk)
            yield chunk

    def _generate(self, messages, stop=None, run_manager=None, **kwargs: Any) -> ChatResult:
        acc = None
        for c in self._stream(messages, stop, run_manager, **kwargs):
            acc = c if acc is None else acc + c
        return ChatResult(generations=[ChatGeneration(message=acc.message)])


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


class State(TypedDict):
    messages: Annotated[list, add_messages]


model = ScriptedModel()


def agent(state: State):
    get_stream_writer()({"progress": "thinking"})
    return {"messages": [model.invoke(state["messages"])]}


def route(state: State):
    last = state["messages"][-1]
    return "tools" if getattr(last, "tool_calls", None) else "review"


def approve(state: State):
    decision = interrupt({
        "action_requests": [{"name": "send_report", "args": {"city": "Paris"}, "description": "Send the weather report"}],
        "review_configs": [{"action_name": "send_report", "allowed_decisions": ["approve", "edit", "reject"]}],
    })
    kind = decision.get("decisions", [{}])[0].get("type", "reject") if isinstance(decision, dict) else str(decision)
    return {"messages": [AIMessage(content=f"review: {kind}", id="review-1")]}


review = StateGraph(State).add_node("approve", approve).add_edge(START, "approve").add_edge("approve", END).compile()

graph = (
    StateGraph(State)
    .add_node("agent", agent)
    .add_node("tools", ToolNode([get_weather]))
    .add_node("review", review)
    .add_edge(START, "agent")
    .add_conditional_edges("agent", route, ["tools", "review"])
    .add_edge("tools", "agent")
    .add_edge("review", END)
    .compile()
)
