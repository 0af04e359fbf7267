"""kill -9 of a Python process in the middle of a step: the thread resumes from its last
checkpoint, the finished task's pending write is neither lost nor applied twice, and the
finished task does not run again."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap


GRAPH = textwrap.dedent(
    '''
    import operator, os, sys, time
    from typing import Annotated, TypedDict
    from langgraph.graph import END, START, StateGraph
    from graphloom.checkpoint.sqlite import SqliteSaver

    class S(TypedDict, total=False):
        log: Annotated[list[str], operator.add]

    def build(saver, runs_path, block):
        def record(name):
            with open(runs_path, "a") as f:
                f.write(name + "\\n")
                f.flush()
                os.fsync(f.fileno())

        def fast(state):
            record("fast")
            return {"log": ["fast"]}

        def slow(state):
            record("slow")
            if block:
                # Wait until fast's write is saved as a pending write, say so, then hang
                # until killed.
                config = {"configurable": {"thread_id": "k"}}
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    t = saver.get_tuple(config)
                    if t and ("log", ["fast"]) in [(w[1], w[2]) for w in t.pending_writes]:
                        print("ready", flush=True)
                        break
                    time.sleep(0.01)
                while True:
                    time.sleep(60)
            return {"log": ["slow"]}

        b = StateGraph(S)
        b.add_node("fast", fast)
        b.add_node("slow", slow)
        b.add_edge(START, "fast")
        b.add_edge(START, "slow")
        b.add_edge("fast", END)
        b.add_edge("slow", END)
        return b.compile(checkpointer=saver)

    if __name__ == "__main__":
        db, runs = sys.argv[1], sys.argv[2]
        with SqliteSaver.from_conn_string(db) as saver:
            build(saver, runs, block=True).invoke({"log": ["start"]}, {"configurable": {"thread_id": "k"}})
    '''
)


def test_a_killed_step_resumes_without_losing_or_repeating_a_write(tmp_path):
    script = tmp_path / "killed_graph.py"
    script.write_text(GRAPH)
    db, runs = str(tmp_path / "k.db"), str(tmp_path / "runs.txt")
    child = subprocess.Popen(
        [sys.executable, str(script), db, runs],
        stdout=subprocess.PIPE,
        env={**os.environ},
        text=True,
    )
    try:
        ready, _, _ = select.select([child.stdout], [], [], 60)
        assert ready, "the child never reported fast's pending write"
        assert child.stdout.readline().strip() == "ready"
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    with open(runs) as f:
        assert sorted(f.read().split()) == ["fast", "slow"]

    sys.path.insert(0, str(tmp_path))
    try:
        import killed_graph
    finally:
        sys.path.remove(str(tmp_path))
    from graphloom.checkpoint.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(db) as saver:
        graph = killed_graph.build(saver, runs, block=False)
        config = {"configurable": {"thread_id": "k"}}
        state = graph.get_state(config)
        # The step that was cut short is still to run; fast's write waits as a pending write.
        assert state.next == ("slow",)
        assert [t.name for t in state.tasks if t.result is not None] == ["fast"]
        out = graph.invoke(None, config)
    assert sorted(out["log"]) == ["fast", "slow", "start"]
    with open(runs) as f:
        ran = f.read().split()
    # fast ran once (before the kill); slow twice (cut short, then resumed).
    assert sorted(ran) == ["fast", "slow", "slow"]
