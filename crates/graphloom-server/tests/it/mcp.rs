//! `/mcp` driven by the official MCP Python client: every assistant is a tool whose input
//! schema is its graph's (`messages` as one string), a call runs it and answers its final
//! state, arguments that fail the schema are a typed tool error and run nothing, an
//! unknown tool is a JSON-RPC error, and the endpoint is behind the server's auth. On
//! SQLite and on PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::interop;

use common::{split, TestServer};
use graphloom_server::ServerConfig;
use serde_json::json;

async fn drive(cfg: ServerConfig) {
    let python = interop::python().await;
    let mut cfg = cfg;
    cfg.api_keys.insert("key-ann".into(), "ann".into());
    cfg.api_keys.insert("key-bob".into(), "bob".into());
    let s = TestServer::start(cfg).await;
    // An assistant of ann's, offered to ann as a tool of its own.
    let (st, a) = split(
        s.http
            .post(s.u("/assistants"))
            .header("x-api-key", "key-ann")
            .json(&json!({"graph_id": "echo", "name": "helper", "description": "says it back"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 200, "{a}");
    let summary = interop::drive(&python, "mcp_drive.py", &[&s.url, "key-ann"]).await;
    assert_eq!(summary["checks"].as_array().unwrap().len(), 6, "{summary}");
    // The protocol version the reference server speaks.
    assert_eq!(summary["checks"][0], "initialize 2025-11-25", "{summary}");

    // Bob does not see ann's assistant.
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let post = |key: Option<&'static str>, body: serde_json::Value| {
        let mut rb = s
            .http
            .post(s.u("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .json(&body);
        if let Some(k) = key {
            rb = rb.header("x-api-key", k);
        }
        rb.send()
    };
    let (st, b) = split(post(Some("key-bob"), list.clone()).await.unwrap()).await;
    assert_eq!(st, 200, "{b}");
    let names: Vec<&str> = b["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"echo") && !names.contains(&"helper"), "{names:?}");
    // Without a key: 401 before MCP is spoken.
    let (st, b) = split(post(None, list).await.unwrap()).await;
    assert_eq!(st, 401, "{b}");
    // No call left a thread or a run behind (stateless runs drop theirs; refused calls made none).
    let (_, n) = split(
        s.http
            .post(s.u("/threads/count"))
            .header("x-api-key", "key-ann")
            .json(&json!({}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(n, 0);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_client_lists_and_calls_assistants_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    drive(ServerConfig::sqlite(dir.path().join("graphloom.db"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_client_lists_and_calls_assistants_on_postgres() {
    let (url, _db) = graphloom_postgres::testing::test_database().await;
    drive(ServerConfig::postgres(url)).await;
}
