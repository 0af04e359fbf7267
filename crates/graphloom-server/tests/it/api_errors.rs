//! Errors, auth and robustness of every route, over a real socket.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{human, TestServer};
use serde_json::{json, Value};

#[tokio::test]
async fn bad_requests_get_typed_errors() {
    let s = TestServer::sqlite(|c| c.body_limit = 64 * 1024).await;
    let t = s.thread().await;
    // Missing assistant_id.
    let (st, e) = s
        .post(&format!("/threads/{t}/runs/wait"), json!({"input": {}}))
        .await;
    assert_eq!(st, 422);
    assert!(e["detail"].as_str().unwrap().contains("assistant_id"));
    // Input of the wrong type: 422 naming the field.
    let (st, e) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "slow", "input": {"sleep_ms": "soon"}}),
        )
        .await;
    assert_eq!(st, 422, "{e}");
    assert!(e["detail"].as_str().unwrap().contains("/sleep_ms"), "{e}");
    // Unknown stream mode.
    let (st, e) = s
        .post(
            &format!("/threads/{t}/runs/stream"),
            json!({"assistant_id": "echo", "stream_mode": ["telepathy"]}),
        )
        .await;
    assert_eq!(st, 422, "{e}");
    // Malformed JSON.
    let r = s
        .http
        .post(s.u("/threads"))
        .header("content-type", "application/json")
        .body("{\"thread_id\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 422);
    let e: Value = r.json().await.unwrap();
    assert!(e["detail"].as_str().unwrap().contains("line 1"), "{e}");
    // Too large.
    let big = "x".repeat(100 * 1024);
    let r = s
        .http
        .post(s.u(&format!("/threads/{t}/runs/wait")))
        .json(&json!({"assistant_id": "echo", "input": human(&big)}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 413);
    assert!(r.json::<Value>().await.unwrap()["detail"].is_string());
    // Unknown thread / run / assistant / route.
    assert_eq!(
        s.post("/threads/nope/runs/wait", json!({"assistant_id": "echo"}))
            .await
            .0,
        404
    );
    assert_eq!(s.get(&format!("/threads/{t}/runs/nope")).await.0, 404);
    assert_eq!(
        s.post(&format!("/threads/{t}/runs"), json!({"assistant_id": "ghost"}))
            .await
            .0,
        404
    );
    let (st, e) = s.get("/no/such/route").await;
    assert_eq!((st, e["detail"].is_string()), (404, true));
    // if_not_exists=create makes the thread.
    let (st, _) = s
        .post(
            "/threads/fresh/runs/wait",
            json!({"assistant_id": "echo", "if_not_exists": "create", "input": human("a")}),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(s.get("/threads/fresh").await.0, 200);
    s.stop().await;
}

#[tokio::test]
async fn api_keys_isolate_owners() {
    let s = TestServer::sqlite(|c| {
        c.api_keys.insert("key-ann".into(), "ann".into());
        c.api_keys.insert("key-bob".into(), "bob".into());
    })
    .await;
    let r = s
        .http
        .post(s.u("/threads"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(s.get("/ok").await.0, 200);
    let as_ = |key: &'static str, rb: reqwest::RequestBuilder| rb.header("x-api-key", key);
    let t: Value = as_("key-ann", s.http.post(s.u("/threads")))
        .json(&json!({"thread_id": "ann-1"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(t["thread_id"], "ann-1");
    let r = as_("key-bob", s.http.get(s.u("/threads/ann-1")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let r = s
        .http
        .get(s.u("/threads/ann-1"))
        .header("authorization", "Bearer key-ann")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let r = as_("key-bob", s.http.post(s.u("/threads/ann-1/runs/wait")))
        .json(&json!({"assistant_id": "echo"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    // Store items are per owner too.
    let r = as_("key-ann", s.http.put(s.u("/store/items")))
        .json(&json!({"namespace": ["notes"], "key": "k", "value": {"v": 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    let r = as_("key-bob", s.http.get(s.u("/store/items?namespace=notes&key=k")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let v: Value = as_("key-ann", s.http.get(s.u("/store/items?namespace=notes&key=k")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["namespace"], json!(["notes"]));
    let ns: Value = as_("key-bob", s.http.post(s.u("/store/namespaces")))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ns["namespaces"], json!([]));
    s.stop().await;
}

#[tokio::test]
async fn arbitrary_bodies_never_crash_a_route() {
    let s = TestServer::sqlite(|_| {}).await;
    let t = s.thread().await;
    let routes = [
        ("POST", "/assistants".to_owned()),
        ("POST", "/assistants/search".to_owned()),
        ("PATCH", "/assistants/echo".to_owned()),
        ("POST", "/threads".to_owned()),
        ("POST", "/threads/search".to_owned()),
        ("POST", "/threads/prune".to_owned()),
        ("PATCH", format!("/threads/{t}")),
        ("POST", format!("/threads/{t}/state")),
        ("POST", format!("/threads/{t}/history")),
        ("POST", format!("/threads/{t}/runs")),
        ("POST", format!("/threads/{t}/runs/wait")),
        ("POST", "/runs/wait".to_owned()),
        ("POST", "/runs/batch".to_owned()),
        ("POST", "/runs/cancel".to_owned()),
        ("PUT", "/store/items".to_owned()),
        ("POST", "/store/items/search".to_owned()),
        ("POST", "/store/namespaces".to_owned()),
    ];
    let bodies = [
        json!(null),
        json!(42),
        json!("text"),
        json!([1, 2]),
        json!({"assistant_id": 5, "input": [], "command": "resume"}),
        json!({"assistant_id": "echo", "input": {"messages": 3}}),
        json!({"assistant_id": "echo", "command": {"resume": null, "goto": {"node": 1}}}),
        json!({"assistant_id": "echo", "interrupt_before": 7, "stream_mode": 3, "after_seconds": -1}),
        json!({"limit": -5, "offset": "x", "metadata": []}),
        json!({"namespace": [""], "key": "", "value": 1}),
        json!({"thread_ids": "all", "values": "x", "as_node": 9}),
        json!({"graph_id": null, "config": "x"}),
    ];
    let mut seed = 7u64;
    for (method, path) in &routes {
        for b in &bodies {
            let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
            let r = s.http.request(m.clone(), s.u(path)).json(b).send().await.unwrap();
            assert!(r.status().as_u16() < 500, "{method} {path} {b} -> {}", r.status());
            // And raw bytes that are not JSON at all.
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let junk: Vec<u8> = (0..64).map(|i| (seed >> (i % 56)) as u8).collect();
            let r = s.http.request(m, s.u(path)).body(junk).send().await.unwrap();
            assert!(
                r.status().as_u16() < 500,
                "{method} {path} junk -> {}",
                r.status()
            );
        }
    }
    assert_eq!(s.get("/ok").await.0, 200);
    s.stop().await;
}
