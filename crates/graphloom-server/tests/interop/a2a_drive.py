"""Drives graphloom's `/a2a/{assistant_id}` with the official A2A Python client (`a2a-sdk`):
protocol 1.0 (`SendMessage`, `SendStreamingMessage`, `GetTask`) as the client picks it from
the agent card, and protocol 0.3 (`message/send`, `message/stream`, `tasks/get`) through the
client's own 0.3 transport.

Usage: a2a_drive.py <server url> <api key> <echo assistant id> <sum assistant id>.
Prints one JSON line: {"ok": true, "checks": [...]}.
"""
import asyncio
import json
import sys

import httpx
from google.protobuf import json_format
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError

methods = []


async def record(request: httpx.Request) -> None:
    if request.method == "POST":
        methods.append(json.loads(request.content)["method"])


def text_message(text: str, mid: str, context: str = "") -> pb.SendMessageRequest:
    msg = pb.Message(message_id=mid, role=pb.ROLE_USER, parts=[pb.Part(text=text)])
    if context:
        msg.context_id = context
    return pb.SendMessageRequest(message=msg)


def data_message(data: dict, mid: str) -> pb.SendMessageRequest:
    part = json_format.ParseDict({"data": data}, pb.Part())
    return pb.SendMessageRequest(message=pb.Message(message_id=mid, role=pb.ROLE_USER, parts=[part]))


def data_of(part: pb.Part) -> dict:
    return json_format.MessageToDict(part)["data"]


async def main(url: str, key: str, echo: str, summer: str) -> None:
    checks = []
    http = httpx.AsyncClient(headers={"x-api-key": key}, timeout=60, event_hooks={"request": [record]})
    agent = f"{url}/a2a/{echo}"

    card = await A2ACardResolver(http, agent).get_agent_card()
    assert card.name == "echo", card
    assert card.capabilities.streaming, card
    iface = card.supported_interfaces[0]
    assert (iface.url, iface.protocol_binding, iface.protocol_version) == (agent, "JSONRPC", "1.0"), card
    checks.append("agent_card")

    # 1.0, as the client chooses from the card.
    client = await create_client(agent, ClientConfig(streaming=False, httpx_client=http))
    events = [e async for e in client.send_message(text_message("hello", "m1"))]
    task = events[-1].task
    assert task.status.state == pb.TASK_STATE_COMPLETED, task
    assert task.artifacts[0].parts[0].text == "echo: hello", task
    assert [m.role for m in task.history] == [pb.ROLE_USER, pb.ROLE_AGENT], task
    assert methods[-1] == "SendMessage", methods
    got = await client.get_task(pb.GetTaskRequest(id=task.id))
    assert (got.id, got.context_id, got.status.state) == (task.id, task.context_id, pb.TASK_STATE_COMPLETED), got
    assert got.artifacts[0].parts[0].text == "echo: hello", got
    assert methods[-1] == "GetTask", methods
    checks.append("send_1.0")

    # The same context is the same thread: the conversation goes on.
    events = [e async for e in client.send_message(text_message("again", "m2", task.context_id))]
    second = events[-1].task
    assert second.context_id == task.context_id and second.id != task.id, second
    got = await client.get_task(pb.GetTaskRequest(id=second.id))
    assert [p.parts[0].text for p in got.history] == ["hello", "echo: hello", "again", "echo: again"], got
    got = await client.get_task(pb.GetTaskRequest(id=second.id, history_length=1))
    assert [p.parts[0].text for p in got.history] == ["echo: again"], got
    checks.append("context_1.0")

    streaming = await create_client(agent, ClientConfig(streaming=True, httpx_client=http))
    events = [e async for e in streaming.send_message(text_message("flow", "m3"))]
    assert methods[-1] == "SendStreamingMessage", methods
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds[0] == "task" and kinds[-1] == "status_update", kinds
    arts = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    assert [a.parts[0].text for a in arts] == ["echo: flow"], events
    assert events[-1].status_update.status.state == pb.TASK_STATE_COMPLETED, events
    checks.append("stream_1.0")

    try:
        await client.get_task(pb.GetTaskRequest(id="no-such-task"))
        raise AssertionError("an unknown task was found")
    except TaskNotFoundError:
        checks.append("task_not_found")

    # A graph without messages takes data parts, and answers data.
    summing = await create_client(f"{url}/a2a/{summer}", ClientConfig(streaming=False, httpx_client=http))
    events = [e async for e in summing.send_message(data_message({"a": 2, "b": 5}, "m4"))]
    task = events[-1].task
    assert task.status.state == pb.TASK_STATE_COMPLETED, task
    assert data_of(task.artifacts[0].parts[0])["total"] == 7, task
    try:
        [e async for e in summing.send_message(text_message("hi", "m5"))]
        raise AssertionError("text reached a graph without messages")
    except InvalidParamsError as e:
        assert "takes no messages" in str(e), e
    try:
        [e async for e in summing.send_message(data_message({"a": "two"}, "m6"))]
        raise AssertionError("input against the schema was run")
    except InvalidParamsError as e:
        assert "input" in str(e), e
    checks.append("data_parts")

    # 0.3 through the client's own transport for that version.
    old = CompatJsonRpcTransport(http, card, agent)
    sent = await old.send_message(text_message("old", "m7"))
    assert methods[-1] == "message/send", methods
    assert sent.task.status.state == pb.TASK_STATE_COMPLETED, sent
    assert sent.task.artifacts[0].parts[0].text == "echo: old", sent
    got = await old.get_task(pb.GetTaskRequest(id=sent.task.id))
    assert methods[-1] == "tasks/get", methods
    assert got.status.state == pb.TASK_STATE_COMPLETED and got.id == sent.task.id, got
    events = [e async for e in old.send_message_streaming(text_message("old flow", "m8"))]
    assert methods[-1] == "message/stream", methods
    arts = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    assert [a.parts[0].text for a in arts] == ["echo: old flow"], events
    assert events[-1].status_update.status.state == pb.TASK_STATE_COMPLETED, events
    checks.append("v0.3")

    await http.aclose()
    print(json.dumps({"ok": True, "checks": checks}))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
