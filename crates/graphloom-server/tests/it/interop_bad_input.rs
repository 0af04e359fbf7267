//! Bad requests to `/mcp` and `/a2a`: every one answers below 500 with a typed error, and
//! none runs anything.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{split, TestServer};
use graphloom_server::system_assistant_id;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_interop_requests_are_typed_errors_and_run_nothing() {
    let s = TestServer::sqlite(|_| {}).await;
    let echo = system_assistant_id("echo");
    let a2a = format!("/a2a/{echo}");
    let huge = "x".repeat(64 * 1024);
    let bodies: Vec<(String, &str, String)> = vec![
        ("/mcp".into(), "application/json", "garbage".into()),
        ("/mcp".into(), "application/json", "[]".into()),
        ("/mcp".into(), "text/plain", r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#.into()),
        ("/mcp".into(), "application/json", r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":"nope"}}"#.into()),
        ("/mcp".into(), "application/json", r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"messages":[1,2]}}}"#.into()),
        ("/mcp".into(), "application/json", format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{huge}"}}}}"#)),
        (a2a.clone(), "application/json", "garbage".into()),
        (a2a.clone(), "application/json", "[1,2]".into()),
        (a2a.clone(), "application/json", r#"{"jsonrpc":"1.0","id":1,"method":"message/send"}"#.into()),
        (a2a.clone(), "application/json", r#"{"jsonrpc":"2.0","id":{"x":1},"method":5}"#.into()),
        (a2a.clone(), "application/json", r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"robot","parts":[{"text":"hi"}]}}}"#.into()),
        (a2a.clone(), "application/json", r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"agent","parts":[{"text":"hi"}]}}}"#.into()),
        (a2a.clone(), "application/json", r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"parts":[{"data":[1]}]}}}"#.into()),
        (a2a.clone(), "application/json", r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"parts":[{"data":{"messages":"not a list"}}]}}}"#.into()),
        (a2a.clone(), "application/json", r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":5}}"#.into()),
        (a2a.clone(), "application/json", format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{huge}"}}"#)),
        ("/a2a/%00".into(), "application/json", r#"{"jsonrpc":"2.0","id":1,"method":"message/send"}"#.into()),
    ];
    for (path, ctype, body) in &bodies {
        let r = s
            .http
            .post(s.u(path))
            .header("content-type", *ctype)
            .header("accept", "application/json, text/event-stream")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let (_, v) = split(r).await;
        let short: String = body.chars().take(120).collect();
        assert!(status < 500, "{path} {short}: {status} {v}");
        if path.starts_with("/a2a") {
            assert_eq!(status, 200, "{path} {short}: {v}");
            assert!(
                v["error"]["code"].as_i64().is_some_and(|c| c < -32000 + 1),
                "{short}: {v}"
            );
        }
        if status == 200 && path == "/mcp" {
            let is_error = v["result"]["isError"] == json!(true) || v.get("error").is_some();
            assert!(is_error, "{short}: {v}");
        }
    }
    for path in [
        "/.well-known/agent-card.json?assistant_id=",
        "/.well-known/agent-card.json?assistant_id=%00",
        "/a2a/nobody/.well-known/agent-card.json",
    ] {
        let (st, v) = s.get(path).await;
        assert!((400..500).contains(&st), "{path}: {st} {v}");
        assert!(v["detail"].is_string(), "{path}: {v}");
    }
    let (_, n) = s.post("/threads/count", json!({})).await;
    assert_eq!(n, Value::from(0));
    s.stop().await;
}
