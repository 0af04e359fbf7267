"""The ``create_agent_react_*`` cases on LangChain's ``create_agent`` (langchain.agents).

The same scripted model, tool and input as ``react_agent_*`` (``run.py``): n tool rounds with
a 3,600-character query and a 36 KB tool result, then a final answer. ``_mw6`` adds six
middlewares whose only hook is a ``wrap_model_call`` that calls the handler, as graphloom's
``create_agent_react_100x_mw6`` does.
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware


class _Noop(AgentMiddleware):
    """A middleware that only passes the model call on."""

    def __init__(self, index: int):
        super().__init__()
        self._name = f"Noop{index}"

    @property
    def name(self) -> str:
        return self._name

    def wrap_model_call(self, request, handler):
        return handler(request)

    async def awrap_model_call(self, request, handler):
        return await handler(request)


def create_agent_graph(model, tool, checkpointer: Any, middleware: int):
    """LangChain's agent over ``model`` and ``tool`` with ``middleware`` no-op wrappers."""
    return create_agent(
        model,
        [tool],
        middleware=[_Noop(i) for i in range(middleware)],
        checkpointer=checkpointer,
    )
