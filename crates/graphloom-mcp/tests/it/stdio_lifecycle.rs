//! A stdio MCP server's life: dead or broken servers at load time, hanging calls, a server
//! killed mid-call and reconnected, processes ended on drop and close.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{alive, bounded, call, find, gone, kill, server_bin, stdio, stdio_server, text};
use graphloom_mcp::{Error, McpClient, ServerConfig, Stderr, StdioServer};
use graphloom_prebuilt::ToolErrorCode;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn a_missing_program_is_a_spawn_error() {
    let cfg = ServerConfig::stdio(StdioServer::new("/nonexistent/mcp-server"));
    let err = bounded(McpClient::new().server("ghost", cfg).connect())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Spawn { server, .. } if server == "ghost"),
        "{err:?}"
    );
    assert_eq!(err.server(), "ghost");
    let err = bounded(McpClient::new().server("blank", StdioServer::new(" ")).connect())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Config { .. }), "{err:?}");
}

#[tokio::test]
async fn a_server_that_exits_at_start_fails_the_handshake() {
    let cfg = ServerConfig::stdio(stdio("exit"));
    let err = bounded(McpClient::new().server("dead", cfg).connect())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Handshake { server, .. } if server == "dead"),
        "{err:?}"
    );
    let cause = std::error::Error::source(&err)
        .map(ToString::to_string)
        .unwrap_or_default();
    // Depending on when the process is gone: writing the request fails, or reading the answer.
    assert!(
        cause.contains("connection closed") || cause.contains("Broken pipe"),
        "{cause}"
    );
}

#[tokio::test]
async fn a_server_answering_garbage_times_out_at_load() {
    let cfg = ServerConfig::stdio(stdio("garbage")).connect_timeout(Duration::from_millis(500));
    let err = bounded(McpClient::new().server("noise", cfg).connect())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Timeout { server, phase: "connecting", .. } if server == "noise"),
        "{err:?}"
    );
}

#[tokio::test]
async fn one_dead_server_fails_the_load_and_stops_the_others() {
    let err = bounded(
        McpClient::new()
            .server("good", stdio_server())
            .server("zdead", ServerConfig::stdio(stdio("exit")))
            .connect(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.server(), "zdead");
}

#[tokio::test]
async fn a_tool_with_an_invalid_schema_is_refused_unless_denied() {
    let cfg = ServerConfig::stdio(stdio("bad-schema"));
    let err = bounded(McpClient::new().server("s", cfg.clone()).connect())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidSchema { tool, .. } if tool == "broken"),
        "{err:?}"
    );
    let tools = bounded(McpClient::new().server("s", cfg.deny(["broken"])).load_tools())
        .await
        .unwrap();
    assert_eq!(text(&find(&tools, "echo"), json!({"text": "ok"})).await, "ok");
}

#[tokio::test]
async fn a_result_of_the_wrong_shape_is_a_tool_error() {
    let cfg = ServerConfig::stdio(stdio("garbled")).call_timeout(Duration::from_secs(2));
    let tools = bounded(McpClient::new().server("g", cfg).load_tools())
        .await
        .unwrap();
    let e = call(&find(&tools, "garbled"), json!({})).await.unwrap_err();
    assert_eq!(e.code, ToolErrorCode::Execution, "{e:?}");
    assert!(e.message.contains("not a tool result"), "{}", e.message);
}

#[tokio::test]
async fn a_hanging_call_times_out_and_is_cancelled_at_the_server() {
    let cfg = stdio_server().tool_timeout("hang", Duration::from_millis(300));
    let tools = bounded(McpClient::new().server("t", cfg).load_tools())
        .await
        .unwrap();
    let e = call(&find(&tools, "hang"), json!({})).await.unwrap_err();
    assert_eq!(e.code, ToolErrorCode::Timeout);
    assert!(e.message.contains("300 ms"), "{}", e.message);
    // The server hears of the cancellation (sent in the background when the call is
    // dropped, handled beside other requests): wait (bounded) until it counted it.
    let cancellations = find(&tools, "cancellations");
    bounded(async {
        while text(&cancellations, json!({})).await != "1" {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    // Other tools keep the server's default bound.
    assert_eq!(
        text(&find(&tools, "sleep"), json!({"ms": 400})).await,
        "slept 400 ms"
    );
}

#[tokio::test]
async fn a_server_killed_mid_call_gives_a_tool_error_then_reconnects() {
    let tools = bounded(McpClient::new().server("t", stdio_server()).load_tools())
        .await
        .unwrap();
    let pid: u32 = text(&find(&tools, "pid"), json!({})).await.parse().unwrap();
    let hang = find(&tools, "hang");
    let pending = tokio::spawn(async move { call(&hang, json!({})).await });
    // Let the call reach the server before killing it.
    let _ = text(&find(&tools, "echo"), json!({"text": "sync"})).await;
    kill(pid);
    let e = bounded(pending).await.unwrap().unwrap_err();
    assert_eq!(e.code, ToolErrorCode::Unavailable, "{e:?}");
    gone(pid).await;

    // The next call starts a new process.
    let new_pid: u32 = text(&find(&tools, "pid"), json!({})).await.parse().unwrap();
    assert_ne!(new_pid, pid);
    assert_eq!(text(&find(&tools, "echo"), json!({"text": "back"})).await, "back");
}

#[tokio::test]
async fn without_auto_reconnect_a_dead_server_stays_an_error_until_reconnected() {
    let conns = bounded(
        McpClient::new()
            .server("t", stdio_server().auto_reconnect(false))
            .connect(),
    )
    .await
    .unwrap();
    let tools = conns.tools();
    let pid: u32 = text(&find(&tools, "pid"), json!({})).await.parse().unwrap();
    kill(pid);
    gone(pid).await;
    let e = call(&find(&tools, "echo"), json!({"text": "x"}))
        .await
        .unwrap_err();
    assert_eq!(e.code, ToolErrorCode::Unavailable, "{e:?}");
    let e = call(&find(&tools, "echo"), json!({"text": "x"}))
        .await
        .unwrap_err();
    assert_eq!(e.code, ToolErrorCode::Unavailable, "{e:?}");

    bounded(conns.reconnect("t")).await.unwrap();
    assert_eq!(text(&find(&tools, "echo"), json!({"text": "x"})).await, "x");
    assert!(matches!(
        bounded(conns.reconnect("nope")).await,
        Err(Error::UnknownServer { .. })
    ));
}

#[tokio::test]
async fn dropping_the_tools_ends_the_process() {
    let tools = bounded(McpClient::new().server("t", stdio_server()).load_tools())
        .await
        .unwrap();
    let pid: u32 = text(&find(&tools, "pid"), json!({})).await.parse().unwrap();
    assert!(alive(pid));
    drop(tools);
    gone(pid).await;
}

#[tokio::test]
async fn close_ends_a_server_that_ignores_stdin_and_its_whole_process_group() {
    // Through a shell that does not `exec`: the server is a grandchild, and it keeps
    // running after stdin closes, so only a signal to the group ends it.
    let script = format!("'{}' stubborn; true", server_bin());
    let cfg = ServerConfig::stdio(StdioServer::new("sh").args(["-c", &script]).stderr(Stderr::Null));
    let conns = bounded(McpClient::new().server("t", cfg).connect())
        .await
        .unwrap();
    let tools = conns.tools();
    let pid: u32 = text(&find(&tools, "pid"), json!({})).await.parse().unwrap();
    bounded(conns.close()).await;
    gone(pid).await;
    let e = call(&find(&tools, "echo"), json!({"text": "x"}))
        .await
        .unwrap_err();
    assert_eq!(e.code, ToolErrorCode::Unavailable, "{e:?}");
    assert!(e.message.contains("closed"), "{}", e.message);
}

#[tokio::test]
async fn concurrent_calls_share_one_process() {
    let tools = bounded(McpClient::new().server("t", stdio_server()).load_tools())
        .await
        .unwrap();
    let echo = find(&tools, "echo");
    let calls = (0..20).map(|i| {
        let echo = echo.clone();
        async move { call(&echo, json!({"text": format!("m{i}")})).await }
    });
    let outs = bounded(futures::future::join_all(calls)).await;
    for (i, out) in outs.into_iter().enumerate() {
        assert_eq!(out.unwrap().to_text(), format!("m{i}"));
    }
    let pid = find(&tools, "pid");
    let pids: std::collections::BTreeSet<String> =
        futures::future::join_all((0..3).map(|_| text(&pid, json!({}))))
            .await
            .into_iter()
            .collect();
    assert_eq!(pids.len(), 1);
}
