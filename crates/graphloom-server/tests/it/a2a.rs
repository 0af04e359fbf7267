//! `/a2a/{assistant_id}` driven by the official A2A Python client (`a2a-sdk`), in the
//! protocol's versions 1.0 and 0.3: the agent card, a message as a completed task that
//! `tasks/get` finds, a context that keeps its conversation, streaming, data parts for a
//! graph without messages. Tasks are their owner's; the card is behind auth and needs its
//! assistant. On SQLite and on PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::interop;

use common::{split, TestServer};
use graphloom_core::*;
use graphloom_server::{factory, system_assistant_id, GraphDeps, ServerConfig};
use serde_json::{json, Value};
use std::sync::Arc;

/// A state without messages.
#[derive(State, Clone, Default, Debug)]
struct Sum {
    a: i64,
    b: i64,
    total: i64,
}

fn sum(deps: &GraphDeps) -> graphloom_core::Result<CompiledGraph<Sum>> {
    StateGraph::<Sum>::new()
        .add_node("add", |s: Arc<Sum>, _rt| async move {
            Ok(SumUpdate::new().total(s.a + s.b))
        })
        .add_edge(START, "add")
        .add_edge("add", END)
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .compile()
}

async fn rpc(s: &TestServer, key: &str, agent: &str, method: &str, params: Value) -> Value {
    let (st, b) = split(
        s.http
            .post(s.u(&format!("/a2a/{agent}")))
            .header("x-api-key", key)
            .json(&json!({"jsonrpc": "2.0", "id": "r1", "method": method, "params": params}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 200, "{b}");
    b
}

async fn drive(cfg: ServerConfig) {
    let python = interop::python().await;
    let mut cfg = cfg;
    cfg.api_keys.insert("key-ann".into(), "ann".into());
    cfg.api_keys.insert("key-bob".into(), "bob".into());
    let s = TestServer::start_with(cfg, |b| b.graph("sum", factory(sum))).await;
    let echo = system_assistant_id("echo");
    let summer = system_assistant_id("sum");
    let summary = interop::drive(&python, "a2a_drive.py", &[&s.url, "key-ann", &echo, &summer]).await;
    assert_eq!(summary["checks"].as_array().unwrap().len(), 7, "{summary}");

    // The card by query; without the query parameter, 400; without a key, 401.
    let get = |path: String, key: Option<&'static str>| {
        let mut rb = s.http.get(s.u(&path));
        if let Some(k) = key {
            rb = rb.header("x-api-key", k);
        }
        rb.send()
    };
    let (st, card) = split(
        get(
            format!("/.well-known/agent-card.json?assistant_id={echo}"),
            Some("key-ann"),
        )
        .await
        .unwrap(),
    )
    .await;
    assert_eq!((st, card["name"].as_str()), (200, Some("echo")), "{card}");
    assert_eq!(card["url"], format!("{}/a2a/{echo}", s.url));
    let (st, b) = split(
        get("/.well-known/agent-card.json".into(), Some("key-ann"))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 400, "{b}");
    let (st, _) = split(
        get(format!("/a2a/{echo}/.well-known/agent-card.json"), None)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 401);
    let (st, _) = split(
        get(
            "/a2a/no-such-assistant/.well-known/agent-card.json".into(),
            Some("key-ann"),
        )
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(st, 404);

    // Ann's task is hers: bob's `tasks/get` does not find it.
    let sent = rpc(
        &s,
        "key-ann",
        &echo,
        "message/send",
        json!({"message": {"role": "user", "messageId": "x1", "parts": [{"kind": "text", "text": "mine"}]}}),
    )
    .await;
    assert_eq!(sent["result"]["status"]["state"], "completed", "{sent}");
    let task = sent["result"]["id"].as_str().unwrap();
    let got = rpc(&s, "key-ann", &echo, "tasks/get", json!({"id": task})).await;
    assert_eq!(got["result"]["id"], task, "{got}");
    let got = rpc(&s, "key-bob", &echo, "tasks/get", json!({"id": task})).await;
    assert_eq!(got["error"]["code"], -32001, "{got}");
    // A task of another agent is not this agent's.
    let got = rpc(&s, "key-ann", &summer, "tasks/get", json!({"id": task})).await;
    assert_eq!(got["error"]["code"], -32001, "{got}");

    // Bad requests: typed JSON-RPC errors, nothing run.
    let (_, before) = split(
        s.http
            .post(s.u("/threads/count"))
            .header("x-api-key", "key-ann")
            .json(&json!({}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    for (method, params, code) in [
        ("message/send", json!({}), -32602),
        (
            "message/send",
            json!({"message": {"role": "user", "parts": []}}),
            -32602,
        ),
        (
            "message/send",
            json!({"message": {"role": "user", "parts": [{"kind": "file", "file": {"uri": "file:///etc/passwd"}}]}}),
            -32005,
        ),
        (
            "SendMessage",
            json!({"message": {"role": "ROLE_USER", "parts": [{"url": "https://x.test/a"}]}}),
            -32005,
        ),
        ("tasks/get", json!({}), -32602),
        ("tasks/resubscribe", json!({"id": task}), -32601),
    ] {
        let b = rpc(&s, "key-ann", &echo, method, params.clone()).await;
        assert_eq!(b["error"]["code"], code, "{method} {params}: {b}");
        assert_eq!(b["id"], "r1");
    }
    let (st, b) = split(
        s.http
            .post(s.u(&format!("/a2a/{echo}")))
            .header("x-api-key", "key-ann")
            .header("content-type", "application/json")
            .body("{oops")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((st, b["error"]["code"].as_i64()), (200, Some(-32700)), "{b}");
    let b = rpc(&s, "key-ann", "no-such-assistant", "message/send", json!({})).await;
    assert_eq!(b["error"]["code"], -32602, "{b}");
    let (_, after) = split(
        s.http
            .post(s.u("/threads/count"))
            .header("x-api-key", "key-ann")
            .json(&json!({}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(before, after);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_a2a_client_talks_to_an_assistant_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    drive(ServerConfig::sqlite(dir.path().join("graphloom.db"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_a2a_client_talks_to_an_assistant_on_postgres() {
    let (url, _db) = graphloom_postgres::testing::test_database().await;
    drive(ServerConfig::postgres(url)).await;
}
