//! Regressions: request values that panicked the server, hung a request or answered 500.
//! Each is now a 422 naming the field (and its allowed range) before anything is written.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{human, parse_sse, TestServer};
use serde_json::{json, Value};
use std::time::Duration;

/// Every route that creates runs, as (path, body wrapper: a batch takes a list).
fn run_routes(t: &str) -> Vec<(String, bool)> {
    vec![
        (format!("/threads/{t}/runs"), false),
        (format!("/threads/{t}/runs/stream"), false),
        (format!("/threads/{t}/runs/wait"), false),
        ("/runs".to_owned(), false),
        ("/runs/stream".to_owned(), false),
        ("/runs/wait".to_owned(), false),
        ("/runs/batch".to_owned(), true),
    ]
}

/// POST a raw JSON text (numbers serde_json::Value cannot hold exactly stay as written).
async fn post_raw(s: &TestServer, path: &str, body: String) -> (u16, Value) {
    let r = s
        .http
        .post(s.u(path))
        .header("content-type", "application/json")
        .body(body)
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .expect("a reply, not a dropped connection");
    common::split(r).await
}

#[tokio::test]
async fn after_seconds_beyond_a_year_is_a_422_not_a_dropped_connection() {
    let s = TestServer::sqlite(|_| {}).await;
    let t = s.thread().await;
    for n in ["1e20", "1e300", "18446744073709551616", "1e15", "31536001", "-1"] {
        for (path, batch) in run_routes(&t) {
            let one = format!(
                r#"{{"assistant_id": "echo", "input": {}, "after_seconds": {n}}}"#,
                human("hi")
            );
            let body = if batch { format!("[{one}]") } else { one };
            let (st, e) = post_raw(&s, &path, body).await;
            assert_eq!(st, 422, "{path} after_seconds {n}: {e}");
            let detail = e["detail"].as_str().unwrap();
            assert!(
                detail.contains("after_seconds") && detail.contains("31536000"),
                "{detail}"
            );
        }
    }
    // Nothing was queued, and no thread was made for the stateless runs.
    assert_eq!(s.get(&format!("/threads/{t}/runs")).await.1, json!([]));
    assert_eq!(s.post("/threads/count", json!({})).await.1, json!(1));
    assert_eq!(s.get("/ok").await.0, 200);
    s.stop().await;
}

/// `after_seconds: 1e15` was accepted, and a `runs/wait` then stayed open for ever.
#[tokio::test]
async fn after_seconds_1e15_is_refused_not_waited_on() {
    let s = TestServer::sqlite(|_| {}).await;
    let (st, e) = post_raw(
        &s,
        "/runs/wait",
        format!(
            r#"{{"assistant_id": "echo", "input": {}, "after_seconds": 1e15}}"#,
            human("hi")
        ),
    )
    .await;
    assert_eq!(st, 422, "{e}");
    // A delay within the bound is kept: the run waits for it, then runs.
    let (st, out) = s
        .post(
            "/runs/wait",
            json!({"assistant_id": "echo", "input": human("later"), "after_seconds": 0.2}),
        )
        .await;
    assert_eq!(st, 200, "{out}");
    assert_eq!(out["messages"][1]["content"], "echo: later");
    s.stop().await;
}

#[tokio::test]
async fn store_ttl_beyond_a_year_is_a_422_not_a_dropped_connection() {
    let s = TestServer::sqlite(|_| {}).await;
    for n in ["1e300", "18446744073709551616", "1e20", "525601", "0", "-5"] {
        let r = s
            .http
            .put(s.u("/store/items"))
            .header("content-type", "application/json")
            .body(format!(
                r#"{{"namespace": ["notes"], "key": "k", "value": {{"a": 1}}, "ttl": {n}}}"#
            ))
            .send()
            .await
            .expect("a reply, not a dropped connection");
        let (st, e) = common::split(r).await;
        assert_eq!(st, 422, "ttl {n}: {e}");
        assert!(e["detail"].as_str().unwrap().starts_with("ttl must be"), "{e}");
    }
    let (st, _) = s.get("/store/items?namespace=notes&key=k").await;
    assert_eq!(st, 404, "a refused put stores nothing");
    let r = s
        .http
        .put(s.u("/store/items"))
        .json(&json!({"namespace": ["notes"], "key": "k", "value": {"a": 1}, "ttl": 525600}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    assert_eq!(s.get("/store/items?namespace=notes&key=k").await.0, 200);
    s.stop().await;
}

#[tokio::test]
async fn thread_ttl_beyond_a_year_is_a_422() {
    let s = TestServer::sqlite(|_| {}).await;
    for ttl in [
        json!(1e300),
        json!(-1),
        json!({"strategy": "delete", "ttl": 1e20}),
    ] {
        let (st, e) = s.post("/threads", json!({"ttl": ttl})).await;
        assert_eq!(st, 422, "{ttl}: {e}");
        assert!(e["detail"].as_str().unwrap().contains("ttl"), "{e}");
    }
    let (st, t) = s.post("/threads", json!({"ttl": 60})).await;
    assert_eq!(st, 200, "{t}");
    let id = t["thread_id"].as_str().unwrap();
    let (st, e) = s.patch(&format!("/threads/{id}"), json!({"ttl": 1e300})).await;
    assert_eq!(st, 422, "{e}");
    s.stop().await;
}

/// `config.recursion_limit` reached the executor as a `usize`; `u64::MAX` overflowed there.
#[tokio::test]
async fn recursion_limit_out_of_range_is_a_422() {
    let s = TestServer::sqlite(|_| {}).await;
    let t = s.thread().await;
    for limit in [
        json!(u64::MAX),
        json!(0),
        json!(-3),
        json!(1.5),
        json!("25"),
        json!(1_000_001),
    ] {
        let (st, e) = s
            .post(
                &format!("/threads/{t}/runs/wait"),
                json!({"assistant_id": "echo", "input": human("hi"), "config": {"recursion_limit": limit}}),
            )
            .await;
        assert_eq!(st, 422, "{limit}: {e}");
        assert!(
            e["detail"].as_str().unwrap().contains("config.recursion_limit"),
            "{e}"
        );
        let (st, e) = s
            .post(
                "/assistants",
                json!({"graph_id": "echo", "config": {"recursion_limit": limit}}),
            )
            .await;
        assert_eq!(st, 422, "assistant with {limit}: {e}");
    }
    let (st, e) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "echo", "input": human("hi"), "config": "fast"}),
        )
        .await;
    assert_eq!(
        (st, e["detail"].as_str().unwrap()),
        (422, "config must be an object, not a string")
    );
    let (st, out) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "echo", "input": human("hi"), "config": {"recursion_limit": 5}}),
        )
        .await;
    assert_eq!(st, 200, "{out}");
    s.stop().await;
}

/// `Last-Event-ID: 18446744073709551615` overflowed the cursor (`id + 1`).
#[tokio::test]
async fn the_largest_last_event_id_ends_the_stream() {
    let s = TestServer::sqlite(|_| {}).await;
    let t = s.thread().await;
    let body = s
        .http
        .post(s.u(&format!("/threads/{t}/runs/stream")))
        .json(&json!({"assistant_id": "echo", "input": human("hi"), "stream_resumable": true}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events = parse_sse(&body);
    let run = events[0].1["run_id"].as_str().unwrap();
    let r = s
        .http
        .get(s.u(&format!("/threads/{t}/runs/{run}/stream")))
        .header("last-event-id", u64::MAX.to_string())
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .expect("a reply, not a dropped connection");
    assert_eq!(r.status().as_u16(), 200);
    let rest = r.text().await.unwrap();
    assert!(
        parse_sse(&rest).is_empty(),
        "nothing after the last event: {rest}"
    );
    s.stop().await;
}

/// The largest `max_depth` (a `usize`) overflowed when the owner's label was added to it,
/// and the largest `offset` of an owner's assistant search overflowed `limit + offset`.
#[tokio::test]
async fn the_largest_page_numbers_of_an_owner() {
    let s = TestServer::sqlite(|c| {
        c.api_keys.insert("k".into(), "ann".into());
    })
    .await;
    let post = |path: &'static str, body: String| {
        s.http
            .post(s.u(path))
            .header("x-api-key", "k")
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let r = post("/store/namespaces", format!(r#"{{"max_depth": {}}}"#, u64::MAX))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let r = post("/assistants/search", format!(r#"{{"offset": {}}}"#, i64::MAX))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.json::<Value>().await.unwrap(), json!([]));
    let r = post("/store/namespaces", r#"{"max_depth": 0}"#.into())
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 422, "max_depth 0 is the request's fault");
    s.stop().await;
}

/// `$bogus` (and `$in`, before the store knew it) answered `500 internal error: backend:
/// InvalidInput ...`.
#[tokio::test]
async fn a_filter_the_store_refuses_is_a_422_naming_the_operator() {
    let s = TestServer::sqlite(|_| {}).await;
    for (filter, names) in [
        (json!({"n": {"$bogus": 1}}), "$bogus"),
        (json!({"n": {"$in": 1}}), "$in"),
        (json!({"n": {"$nin": "x"}}), "$nin"),
        (json!({"n": {"$gt": [1]}}), "$gt"),
        (json!({"n": {"$gt": 1, "plain": 2}}), "mixes operators"),
    ] {
        let (st, e) = s
            .post(
                "/store/items/search",
                json!({"namespace_prefix": ["notes"], "filter": filter}),
            )
            .await;
        assert_eq!(st, 422, "{filter}: {e}");
        assert!(e["detail"].as_str().unwrap().contains(names), "{filter}: {e}");
    }
    // A namespace the store refuses is the request's fault too.
    let r = s
        .http
        .put(s.u("/store/items"))
        .json(&json!({"namespace": ["langgraph"], "key": "k", "value": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 422);
    s.stop().await;
}

#[tokio::test]
async fn store_filters_take_in_and_nin() {
    let s = TestServer::sqlite(|_| {}).await;
    for (key, status) in [("a", "open"), ("b", "held"), ("c", "closed")] {
        let r = s
            .http
            .put(s.u("/store/items"))
            .json(&json!({"namespace": ["tickets"], "key": key, "value": {"status": status}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 204);
    }
    let keys = |v: &Value| {
        let mut k: Vec<String> = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["key"].as_str().unwrap().to_owned())
            .collect();
        k.sort();
        k
    };
    let (st, found) = s
        .post(
            "/store/items/search",
            json!({"namespace_prefix": ["tickets"], "filter": {"status": {"$in": ["open", "held"]}}}),
        )
        .await;
    assert_eq!(st, 200, "{found}");
    assert_eq!(keys(&found), ["a", "b"]);
    let (_, found) = s
        .post(
            "/store/items/search",
            json!({"namespace_prefix": ["tickets"], "filter": {"status": {"$nin": ["open", "held"]}}}),
        )
        .await;
    assert_eq!(keys(&found), ["c"]);
    s.stop().await;
}

/// `--api-key KEY` alone makes the key the owner; a key with a '.' got 500 on every store
/// write (`namespace label "owner:team.a" contains '.'`).
#[tokio::test]
async fn an_owner_named_with_dots_and_percents_uses_the_store() {
    let s = TestServer::sqlite(|c| {
        c.api_keys.insert("k1".into(), "team.a".into());
        c.api_keys.insert("k2".into(), "team%2Ea".into());
        c.api_keys.insert("k3".into(), "team".into());
    })
    .await;
    let req = |key: &'static str, m: reqwest::Method, path: &str| {
        s.http.request(m, s.u(path)).header("x-api-key", key)
    };
    for (key, n) in [("k1", 1), ("k2", 2)] {
        let r = req(key, reqwest::Method::PUT, "/store/items")
            .json(&json!({"namespace": ["notes", "x"], "key": "k", "value": {"n": n}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 204, "{}", r.text().await.unwrap());
    }
    // Each owner sees its own item, under its own namespace names.
    for (key, n) in [("k1", 1), ("k2", 2)] {
        let item: Value = req(key, reqwest::Method::GET, "/store/items?namespace=notes.x&key=k")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            (item["value"]["n"].as_i64(), &item["namespace"]),
            (Some(n), &json!(["notes", "x"]))
        );
        let found: Value = req(key, reqwest::Method::POST, "/store/items/search")
            .json(&json!({"namespace_prefix": ["notes"]}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(found["items"].as_array().unwrap().len(), 1, "{found}");
        let ns: Value = req(key, reqwest::Method::POST, "/store/namespaces")
            .json(&json!({"max_depth": 1}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(ns["namespaces"], json!([["notes"]]));
    }
    // Another owner whose name is a prefix sees nothing.
    let r = req("k3", reqwest::Method::GET, "/store/items?namespace=notes.x&key=k")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let r = req("k1", reqwest::Method::DELETE, "/store/items")
        .json(&json!({"namespace": ["notes", "x"], "key": "k"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    let r = req("k1", reqwest::Method::GET, "/store/items?namespace=notes.x&key=k")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let r = req("k2", reqwest::Method::GET, "/store/items?namespace=notes.x&key=k")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "the other owner's item stays");
    s.stop().await;
}

/// PostgreSQL refuses a `\u0000` in text and JSON (SQLSTATE class 22): that answered 500.
#[tokio::test]
async fn a_value_postgres_refuses_is_a_422() {
    let (url, _db) = graphloom_postgres::testing::test_database().await;
    let s = TestServer::start(graphloom_server::ServerConfig::postgres(url)).await;
    let (st, e) = s.post("/threads", json!({"thread_id": "a\u{0}b"})).await;
    assert_eq!(st, 422, "{e}");
    let (st, e) = s.post("/threads", json!({"metadata": {"note": "a\u{0}b"}})).await;
    assert_eq!(st, 422, "{e}");
    let r = s
        .http
        .put(s.u("/store/items"))
        .json(&json!({"namespace": ["notes"], "key": "k", "value": {"text": "a\u{0}b"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 422, "{}", r.text().await.unwrap());
    assert_eq!(s.get("/ok").await.0, 200);
    s.stop().await;
}
