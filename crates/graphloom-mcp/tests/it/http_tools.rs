//! Tools of a real MCP server process (the crate's rmcp test server) over streamable HTTP:
//! calls, headers, errors, timeouts, unreachable and non-MCP endpoints, a server killed
//! mid-call and started again.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{bounded, call, find, http_process, http_server, text};
use graphloom_mcp::{Error, HttpServer, McpClient, ServerConfig};
use graphloom_prebuilt::ToolErrorCode;
use serde_json::json;
use std::future::IntoFuture;
use std::time::Duration;

#[tokio::test]
async fn calls_over_streamable_http() {
    let server = http_process("127.0.0.1:0").await;
    let tools = bounded(
        McpClient::new()
            .server("web", http_server(&server.url))
            .load_tools(),
    )
    .await
    .unwrap();
    assert_eq!(
        text(&find(&tools, "echo"), json!({"text": "over http"})).await,
        "over http"
    );
    let sum = call(&find(&tools, "add"), json!({"a": 20, "b": 22}))
        .await
        .unwrap();
    assert_eq!(sum.content, json!({"sum": 42}));
    let e = call(&find(&tools, "fail"), json!({"message": "nope"}))
        .await
        .unwrap_err();
    assert_eq!((e.code, e.message.as_str()), (ToolErrorCode::Execution, "nope"));
    let e = call(&find(&tools, "rpc_error"), json!({})).await.unwrap_err();
    assert_eq!(e.code, ToolErrorCode::Execution);
    assert!(e.message.contains("the database is on fire"), "{}", e.message);
    let big = text(&find(&tools, "big"), json!({"bytes": 500_000})).await;
    assert_eq!(big.len(), 500_000);
}

#[tokio::test]
async fn headers_reach_the_server() {
    let server = http_process("127.0.0.1:0").await;
    let cfg = ServerConfig::http(
        HttpServer::new(&server.url)
            .header("X-Api-Key", "k-123")
            .bearer("t0ken"),
    );
    let tools = bounded(McpClient::new().server("web", cfg).load_tools())
        .await
        .unwrap();
    let header = find(&tools, "header");
    assert_eq!(text(&header, json!({"name": "x-api-key"})).await, "k-123");
    assert_eq!(
        text(&header, json!({"name": "authorization"})).await,
        "Bearer t0ken"
    );
}

#[tokio::test]
async fn a_hanging_call_times_out_and_is_cancelled_at_the_server() {
    let server = http_process("127.0.0.1:0").await;
    let cfg = http_server(&server.url).call_timeout(Duration::from_millis(300));
    let tools = bounded(McpClient::new().server("web", cfg).load_tools())
        .await
        .unwrap();
    let e = call(&find(&tools, "hang"), json!({})).await.unwrap_err();
    assert_eq!(e.code, ToolErrorCode::Timeout);
    // The cancellation travels in its own POST: wait (bounded) until the server counted it.
    let cancellations = find(&tools, "cancellations");
    bounded(async {
        while text(&cancellations, json!({})).await != "1" {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_refused_connection_is_a_handshake_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let cfg = http_server(&format!("http://{addr}/mcp"));
    let err = bounded(McpClient::new().server("down", cfg).connect())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Handshake { server, .. } if server == "down"),
        "{err:?}"
    );
    // The cause says what happened, without the transport's type names.
    let mut cause: &dyn std::error::Error = &err;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    let cause = cause.to_string();
    assert!(
        cause.contains("error sending request") && !cause.contains("WorkerTransport"),
        "{cause}"
    );
}

#[tokio::test]
async fn an_endpoint_that_is_not_mcp_is_a_handshake_error() {
    let app = axum::Router::new().fallback(|| async {
        (
            [("content-type", "text/html")],
            "<html><body>Welcome to nginx!</body></html>",
        )
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(axum::serve(listener, app).into_future());
    let cfg = http_server(&format!("http://{addr}/mcp")).connect_timeout(Duration::from_secs(5));
    let err = bounded(McpClient::new().server("html", cfg).connect())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Handshake { server, .. } if server == "html"),
        "{err:?}"
    );
}

#[tokio::test]
async fn bad_urls_and_headers_are_config_errors() {
    for cfg in [
        http_server("not a url"),
        http_server("ftp://127.0.0.1/mcp"),
        ServerConfig::http(HttpServer::new("http://127.0.0.1:1/mcp").header("bad header", "x")),
        ServerConfig::http(HttpServer::new("http://127.0.0.1:1/mcp").header("x-ok", "line\nbreak")),
    ] {
        let err = bounded(McpClient::new().server("cfg", cfg).connect())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Config { .. }), "{err:?}");
    }
}

#[tokio::test]
async fn a_server_killed_mid_call_gives_a_tool_error_and_is_reconnected_when_back() {
    let mut server = http_process("127.0.0.1:0").await;
    let addr = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let cfg = http_server(&server.url).connect_timeout(Duration::from_secs(5));
    let tools = bounded(McpClient::new().server("web", cfg).load_tools())
        .await
        .unwrap();
    let hang = find(&tools, "hang");
    let pending = tokio::spawn(async move { call(&hang, json!({})).await });
    let _ = text(&find(&tools, "echo"), json!({"text": "sync"})).await;
    server.kill().await;
    let e = bounded(pending).await.unwrap().unwrap_err();
    assert_eq!(e.code, ToolErrorCode::Unavailable, "{e:?}");
    // While it is down, calls answer with errors, not hangs or panics.
    // (The server asked clients to wait 3 s before resuming a stream; that is honoured.)
    let e = call(&find(&tools, "echo"), json!({"text": "x"}))
        .await
        .unwrap_err();
    assert_eq!(e.code, ToolErrorCode::Unavailable, "{e:?}");
    assert!(e.message.contains("reconnecting failed"), "{}", e.message);
    assert!(!e.message.contains("WorkerTransport"), "{}", e.message);

    // Back on the same address: the next call works again.
    let _server = http_process(&addr).await;
    assert_eq!(text(&find(&tools, "echo"), json!({"text": "back"})).await, "back");
}
