//! Against the reference server: `tests/python/mcp_server.py` on the official Python SDK
//! (`mcp`, pinned, in a virtualenv under `~/.cache/graphloom`), over stdio and streamable
//! HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{bounded, call, find, listening, text};
use graphloom_mcp::{HttpServer, McpClient, ServerConfig, StdioServer};
use graphloom_prebuilt::{Tool, ToolErrorCode};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The official Python MCP SDK, pinned.
const MCP: &str = "mcp==2.3.0";

/// The venv's python (made once however many test processes ask at the same moment).
async fn python() -> String {
    let python = tokio::task::spawn_blocking(|| graphloom_test_kit::python::venv("mcp-venv", &[MCP]))
        .await
        .unwrap();
    python.display().to_string()
}

fn script() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python/mcp_server.py")
        .display()
        .to_string()
}

/// What both transports must get right.
async fn check_tools(tools: &[Arc<dyn Tool>]) {
    let add = find(tools, "add");
    assert_eq!(add.description(), "Add two integers.");
    assert_eq!(add.schema()["properties"]["a"]["type"], json!("integer"));
    // A plain return is structured content {"result": 5} plus the text "5": the text wins.
    let sum = call(&add, json!({"a": 2, "b": 3})).await.unwrap();
    assert_eq!(sum.content, json!("5"));
    // A model return is structured content repeated as JSON text: the JSON value.
    let weather = call(&find(tools, "weather"), json!({"city": "Oslo"}))
        .await
        .unwrap();
    assert_eq!(weather.content, json!({"city": "Oslo", "celsius": 21.5}));
    assert_eq!(
        text(&find(tools, "echo"), json!({"text": "héllo"})).await,
        "héllo"
    );

    let e = call(&find(tools, "fail"), json!({"message": "boom"}))
        .await
        .unwrap_err();
    assert_eq!(e.code, ToolErrorCode::Execution);
    assert!(e.message.contains("boom"), "{}", e.message);

    let e = call(&add, json!({"a": "two", "b": 3})).await.unwrap_err();
    assert_eq!(e.code, ToolErrorCode::Validation);

    assert_eq!(
        text(&find(tools, "picture"), json!({})).await,
        "[image: image/png, 70 bytes]"
    );

    let e = call(&find(tools, "sleep"), json!({"seconds": 30}))
        .await
        .unwrap_err();
    assert_eq!(e.code, ToolErrorCode::Timeout);
    // The session is still usable after the cancelled call.
    assert_eq!(text(&add, json!({"a": 1, "b": 1})).await, "2");
}

#[tokio::test]
async fn the_python_reference_server_over_stdio() {
    let python = python().await;
    let cfg = ServerConfig::stdio(StdioServer::new(python).arg(script()))
        .tool_timeout("sleep", Duration::from_millis(500));
    let tools = bounded(McpClient::new().server("py", cfg).load_tools())
        .await
        .unwrap();
    check_tools(&tools).await;
}

#[tokio::test]
async fn the_python_reference_server_over_streamable_http() {
    let python = python().await;
    let server = listening(&python, &[&script(), "http"]).await;
    let cfg =
        ServerConfig::http(HttpServer::new(&server.url)).tool_timeout("sleep", Duration::from_millis(500));
    let tools = bounded(McpClient::new().server("py", cfg).load_tools())
        .await
        .unwrap();
    check_tools(&tools).await;
}
