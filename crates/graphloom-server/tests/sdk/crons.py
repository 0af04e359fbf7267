"""Drive a graphloom server's crons through the official LangGraph Python SDK.

Usage: crons.py <server url>

To make a tick due now (its `next_run_date` moved into the past, as after downtime, so the
test need not wait for a wall-clock minute), the script prints `DUE <cron id>` and waits for
the Rust test, which holds the server's database (SQLite or PostgreSQL), to answer `ok` on
stdin. The last stdout line is a JSON summary {"ok": true, "checks": [...]} that the Rust
test reads.
"""

import asyncio
import datetime as dt
import json
import sys
import time

from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

URL = sys.argv[1]
CHECKS: list[str] = []


def passed(name: str) -> None:
    CHECKS.append(name)
    print(f"ok {name}", file=sys.stderr)


def human(text: str) -> dict:
    return {"messages": [{"type": "human", "content": text}]}


def make_due(cron_id: str) -> None:
    print(f"DUE {cron_id}", flush=True)
    reply = sys.stdin.readline().strip()
    assert reply == "ok", f"the test did not make the tick due: {reply!r}"


async def crons(client) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    made = await client.crons.create_for_thread(
        tid, "echo", schedule="0 0 1 1 *", input=human("tick"), metadata={"team": "sdk"},
        multitask_strategy="enqueue",
    )
    for key in ("cron_id", "assistant_id", "thread_id", "schedule", "payload", "next_run_date",
                "metadata", "enabled", "end_time", "created_at", "updated_at", "user_id",
                "on_run_completed", "timezone"):
        assert key in made, (key, made)
    assert made["thread_id"] == tid and made["enabled"] is True, made
    assert made["schedule"] == "0 0 1 1 *" and made["metadata"] == {"team": "sdk"}, made
    assert made["payload"]["input"] == human("tick"), made
    assert "-01-01T00:00:00" in made["next_run_date"], made
    end = dt.datetime(2099, 1, 1, tzinfo=dt.timezone.utc)
    stateless = await client.crons.create(
        "echo", schedule="30 9 * * 1-5", timezone="Europe/Paris", end_time=end,
        on_run_completed="keep", input=human("weekday"),
    )
    assert stateless["thread_id"] is None and stateless["on_run_completed"] == "keep", stateless
    assert stateless["timezone"] == "Europe/Paris", stateless
    assert stateless["end_time"].startswith("2099-01-01T00:00:00"), stateless
    passed("crons_create")

    found = await client.crons.search(thread_id=tid)
    assert [c["cron_id"] for c in found] == [made["cron_id"]], found
    found = await client.crons.search(assistant_id="echo", limit=10)
    assert {c["cron_id"] for c in found} >= {made["cron_id"], stateless["cron_id"]}, found
    found = await client.crons.search(metadata={"team": "sdk"}, select=["cron_id", "schedule"])
    assert found == [{"cron_id": made["cron_id"], "schedule": "0 0 1 1 *"}], found
    page = await client.crons.search(limit=1, offset=1, sort_by="created_at", sort_order="asc")
    assert [c["cron_id"] for c in page] == [stateless["cron_id"]], page
    assert await client.crons.count() == 2
    assert await client.crons.count(thread_id=tid) == 1
    assert await client.crons.count(metadata={"team": "nobody"}) == 0
    passed("crons_search")

    up = await client.crons.update(stateless["cron_id"], schedule="0 10 * * *", enabled=False,
                                   end_time=None, metadata={"more": 1})
    assert up["schedule"] == "0 10 * * *" and up["enabled"] is False, up
    assert up["end_time"] is None and up["metadata"] == {"more": 1}, up
    off = await client.crons.search(enabled=False)
    assert [c["cron_id"] for c in off] == [stateless["cron_id"]], off
    passed("crons_update")

    for bad in ("61 * * * *", "hello", "* * *"):
        try:
            await client.crons.create("echo", schedule=bad)
        except UnprocessableEntityError as e:
            assert "Invalid cron schedule" in e.response.text, e.response.text
        else:
            raise AssertionError(f"schedule {bad!r} was accepted")
    try:
        await client.crons.create_for_thread("00000000-0000-0000-0000-000000000000", "echo",
                                             schedule="* * * * *")
    except NotFoundError:
        pass
    else:
        raise AssertionError("a cron for an unknown thread was accepted")
    try:
        await client.crons.create("echo", schedule="* * * * *", webhook="http://127.0.0.1:9/hook")
    except UnprocessableEntityError as e:
        assert "Webhook host blocked: loopback IP range" in e.response.text, e.response.text
    else:
        raise AssertionError("a loopback webhook was accepted")
    try:
        await client.crons.update(made["cron_id"], schedule="bad")
    except UnprocessableEntityError:
        pass
    else:
        raise AssertionError("a bad schedule update was accepted")
    assert await client.crons.count() == 2, "nothing stored by the refused calls"
    passed("crons_bad_input")

    make_due(made["cron_id"])
    deadline = time.time() + 30
    runs: list = []
    while time.time() < deadline:
        runs = await client.runs.list(tid)
        if runs:
            break
        await asyncio.sleep(0.05)
    assert len(runs) == 1, runs
    run = runs[0]
    assert run["metadata"]["cron_id"] == made["cron_id"], run
    assert run["metadata"]["team"] == "sdk", run
    await client.runs.join(tid, run["run_id"])
    state = await client.threads.get_state(tid)
    assert [m["content"] for m in state["values"]["messages"]] == ["tick", "echo: tick"], state
    after = (await client.crons.search(thread_id=tid))[0]
    assert after["next_run_date"] != made["next_run_date"] or "-01-01T00:00:00" in after["next_run_date"]
    assert len(await client.runs.list(tid)) == 1, "one run per tick"
    passed("crons_fire")

    await client.crons.delete(made["cron_id"])
    await client.crons.delete(stateless["cron_id"])
    assert await client.crons.count() == 0
    try:
        await client.crons.delete(made["cron_id"])
    except NotFoundError:
        pass
    else:
        raise AssertionError("deleting a deleted cron succeeded")
    passed("crons_delete")


def sync_client() -> None:
    client = get_sync_client(url=URL)
    c = client.crons.create("echo", schedule="@daily")
    assert client.crons.count() == 1
    assert client.crons.search()[0]["cron_id"] == c["cron_id"]
    client.crons.delete(c["cron_id"])
    assert client.crons.count() == 0
    passed("crons_sync_client")


async def main() -> None:
    client = get_client(url=URL)
    await crons(client)
    await asyncio.to_thread(sync_client)


if __name__ == "__main__":
    asyncio.run(main())
    print(json.dumps({"ok": True, "checks": CHECKS}))
