"""CPU per run of the server benchmark's `agent` graph without any server: `ainvoke` in a
loop on one event loop, with LangGraph's `InMemorySaver` and with graphloom's
`AsyncSqliteSaver` (the saver `graphloom serve` gives Python graphs). What is left of a
served run's CPU is the server's.

    bench/.venv/bin/python bench/server/graph_alone.py   # after bench/server.sh made the venv
"""

import asyncio
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from agent import agent  # noqa: E402
from langchain_core.messages import HumanMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

WARMUP, RUNS = 50, 500


async def measure(label, graph, durability):
    async def once(thread):
        await graph.ainvoke(
            {"messages": [HumanMessage("Paris")]},
            {"configurable": {"thread_id": thread}},
            durability=durability,
        )

    for i in range(WARMUP):
        await once(f"{label}-warm-{i}")
    cpu, wall = time.process_time(), time.perf_counter()
    for i in range(RUNS):
        await once(f"{label}-{i}")
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(f"{label}, durability={durability}: {1000 * cpu / RUNS:.2f} ms CPU, {1000 * wall / RUNS:.2f} ms wall per run")


async def main():
    await measure("InMemorySaver", agent.copy(update={"checkpointer": InMemorySaver()}), "sync")
    from graphloom.checkpoint.sqlite.aio import AsyncSqliteSaver

    with tempfile.TemporaryDirectory() as d:
        async with AsyncSqliteSaver.from_conn_string(os.path.join(d, "bench.db")) as saver:
            graph = agent.copy(update={"checkpointer": saver})
            for durability in ("sync", "async"):
                await measure("graphloom AsyncSqliteSaver", graph, durability)


asyncio.run(main())
