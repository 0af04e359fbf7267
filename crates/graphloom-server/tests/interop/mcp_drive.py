"""Drives graphloom's `/mcp` with the official MCP Python client (the `mcp` package).

Usage: mcp_drive.py <server url> <api key>. Prints one JSON line: {"ok": true, "checks": [...]}
or fails with an assertion naming what differed.
"""
import asyncio
import json
import sys

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


async def main(url: str, key: str) -> None:
    checks = []
    async with httpx2.AsyncClient(headers={"x-api-key": key}, timeout=60) as http:
        async with streamable_http_client(url + "/mcp", http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                init = await session.initialize()
                assert init.server_info.name == "graphloom", init
                assert init.capabilities.tools is not None, init
                checks.append("initialize " + str(init.protocol_version))

                listed = await session.list_tools()
                tools = {t.name: t for t in listed.tools}
                for name in ("echo", "approval", "helper"):
                    assert name in tools, sorted(tools)
                echo = tools["echo"].input_schema
                assert echo["type"] == "object", echo
                assert echo["properties"]["messages"]["type"] == "string", echo
                assert "messages" in echo["required"], echo
                assert tools["helper"].description == "says it back", tools["helper"]
                checks.append("list_tools")

                done = await session.call_tool("echo", {"messages": "hello"})
                assert not done.is_error, done
                state = json.loads(done.content[0].text)
                assert state["messages"][-1]["content"] == "echo: hello", state
                assert state["messages"][0]["type"] == "human", state
                assert done.structured_content == state, done
                checks.append("call_tool")

                done = await session.call_tool("helper", {"messages": "again"})
                assert not done.is_error, done
                assert done.structured_content["messages"][-1]["content"] == "echo: again", done
                checks.append("call_user_assistant")

                bad = await session.call_tool("echo", {"messages": 5})
                assert bad.is_error, bad
                assert bad.structured_content["error"] == "invalid_arguments", bad
                assert "/messages" in bad.content[0].text, bad
                bad = await session.call_tool("echo", {})
                assert bad.is_error and "messages" in bad.content[0].text, bad
                checks.append("invalid_arguments")

                try:
                    await session.call_tool("no_such_tool", {})
                    raise AssertionError("an unknown tool answered")
                except MCPError as e:
                    assert "unknown tool" in str(e), e
                checks.append("unknown_tool")
    print(json.dumps({"ok": True, "checks": checks}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
