//! No response drops its keep-alive connection: every route of `/openapi.json`, plus `/mcp`
//! and `/a2a/{id}`, is sent requests with and without bodies (JSON, junk, bodies over the
//! server's limit, bodies sent in pieces) over a few long-lived HTTP/1.1 connections, and
//! after every response either the same connection serves the next request or the response
//! said `connection: close`. No response is a 5xx.
//!
//! A response that leaves its request's body unread on the connection made hyper close the
//! connection without saying so; whether the next request failed depended on when the body's
//! bytes arrived, so the client here sends bodies in pieces, with a pause, to make that
//! timing certain. Deterministic: a fixed seed; `KEEP_ALIVE_REQUESTS` sets the count
//! (default 1,200, about 10 s).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{human, TestServer};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Bytes;
use hyper::body::Frame;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::json;
use std::time::Duration;

type Body = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

/// The server's body limit in this test, small so that over-limit bodies are cheap to send.
const LIMIT: usize = 64 * 1024;

/// A body so far over the limit that the server refuses it without reading it all: the
/// client may see the 413 or, when the server closed the connection before the client
/// finished sending, a reset; either way the connection is gone, and the response said so.
const FAR_OVER: usize = 3 * LIMIT;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// Real resources to aim requests at, made again now and then (requests delete them).
struct Fixture {
    thread: String,
    assistant: String,
    run: String,
    checkpoint: String,
    cron: String,
}

async fn fixture(s: &TestServer) -> Fixture {
    let (_, a) = s.post("/assistants", json!({"graph_id": "echo"})).await;
    let thread = s.thread().await;
    let (st, _) = s
        .post(
            &format!("/threads/{thread}/runs/wait"),
            json!({"assistant_id": "echo", "input": human("hi")}),
        )
        .await;
    assert_eq!(st, 200);
    let (_, runs) = s.get(&format!("/threads/{thread}/runs?limit=1")).await;
    let (_, state) = s.get(&format!("/threads/{thread}/state")).await;
    let (st, cron) = s
        .post(
            "/runs/crons",
            json!({"assistant_id": "echo", "schedule": "0 0 1 1 *", "input": {"steps": 1}, "enabled": false}),
        )
        .await;
    assert_eq!(st, 200, "{cron}");
    Fixture {
        thread,
        assistant: a["assistant_id"].as_str().unwrap().to_owned(),
        run: runs[0]["run_id"].as_str().unwrap().to_owned(),
        checkpoint: state["checkpoint"]["checkpoint_id"]
            .as_str()
            .unwrap_or("none")
            .to_owned(),
        cron: cron["cron_id"].as_str().unwrap().to_owned(),
    }
}

/// Every (method, path template) the server serves: the OpenAPI document's, and the interop
/// endpoints, which it leaves out.
async fn routes(s: &TestServer) -> Vec<(String, String)> {
    let (st, doc) = s.get("/openapi.json").await;
    assert_eq!(st, 200);
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                out.push((method.to_uppercase(), path.clone()));
            }
        }
    }
    assert!(out.len() > 50, "the document lists {} operations", out.len());
    for (m, p) in [
        ("POST", "/mcp"),
        ("GET", "/mcp"),
        ("DELETE", "/mcp"),
        ("POST", "/a2a/{assistant_id}"),
        ("GET", "/a2a/{assistant_id}/.well-known/agent-card.json"),
    ] {
        out.push((m.to_owned(), p.to_owned()));
    }
    out
}

/// Routes whose response may stay open (a thread's stream follows the thread; `GET /mcp`
/// is the server's notification stream): the client ends those itself, which is not the
/// server dropping the connection.
fn open_ended(method: &str, path: &str) -> bool {
    (path.contains("/stream") && !path.contains("/runs")) || (method == "GET" && path == "/mcp")
}

fn fill(template: &str, fx: &Fixture, rng: &mut Rng) -> String {
    let garbage = ["nope", "00000000-0000-0000-0000-000000000000", "%20", "x.y"];
    let mut path = template.to_owned();
    while let Some(start) = path.find('{') {
        let end = path[start..].find('}').map_or(path.len(), |e| start + e + 1);
        let real = match &path[start + 1..end - 1] {
            "thread_id" => fx.thread.clone(),
            "assistant_id" => fx.assistant.clone(),
            "run_id" => fx.run.clone(),
            "checkpoint_id" => fx.checkpoint.clone(),
            "cron_id" => fx.cron.clone(),
            _ => "inner".to_owned(),
        };
        let id = if rng.below(3) == 0 {
            (*rng.pick(&garbage)).to_owned()
        } else {
            real
        };
        path.replace_range(start..end, &id);
    }
    path
}

/// A body for `method path`: none, near-valid JSON, junk, large, or over the limit.
fn body(method: &str, path: &str, fx: &Fixture, rng: &mut Rng) -> Option<Vec<u8>> {
    let run = json!({"assistant_id": "echo", "input": human("hi"), "multitask_strategy": "enqueue"});
    let near_valid = match (method, path) {
        (_, "/mcp") => json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        (_, p) if p.starts_with("/a2a/") => {
            json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "nope"}})
        }
        (_, p) if p.ends_with("/runs") || p.ends_with("/wait") || p.ends_with("/runs/stream") => run,
        (_, p) if p.contains("/runs/crons") => {
            json!({"assistant_id": "echo", "schedule": "0 0 1 1 *", "enabled": false})
        }
        (_, "/store/items") => json!({"namespace": ["n"], "key": "k", "value": {"v": 1}}),
        (_, p) if p.ends_with("/state") => json!({"values": {"steps": 1}, "as_node": "reply"}),
        (_, p) if p.ends_with("/cancel") => json!({"run_ids": [fx.run], "action": "interrupt"}),
        _ => json!({"limit": 2, "metadata": {}}),
    };
    match rng.below(9) {
        0 | 1 => None,
        2..=4 => Some(serde_json::to_vec(&near_valid).unwrap()),
        5 => Some(b"{not json".to_vec()),
        6 => Some(vec![b' '; 20 * 1024]),
        7 => Some(serde_json::to_vec(&json!({"pad": "x".repeat(30 * 1024), "limit": 1})).unwrap()),
        // Over the limit by less than the limit again: read, refused, the connection kept.
        _ if rng.below(3) > 0 => Some(vec![b'x'; LIMIT + 1 + rng.below(LIMIT / 2)]),
        // Far over: refused with `connection: close`.
        _ => Some(vec![b'x'; FAR_OVER]),
    }
}

/// A body sent in pieces with a pause between them, so that the response can come back
/// before the whole body has arrived (the case that dropped connections).
fn in_pieces(bytes: Vec<u8>) -> Body {
    let mid = bytes.len() / 2;
    let (a, b) = (
        Bytes::copy_from_slice(&bytes[..mid]),
        Bytes::copy_from_slice(&bytes[mid..]),
    );
    let stream = futures::stream::unfold(0u8, move |i| {
        let (a, b) = (a.clone(), b.clone());
        async move {
            match i {
                0 => Some((Ok(Frame::data(a)), 1)),
                1 => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    Some((Ok(Frame::data(b)), 2))
                }
                _ => None,
            }
        }
    });
    StreamBody::new(stream).boxed()
}

async fn connect(addr: &str) -> SendRequest<Body> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    sender
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_response_drops_its_keep_alive_connection() {
    let s = TestServer::sqlite(|c| {
        c.body_limit = LIMIT;
        c.run_timeout = Some(Duration::from_secs(2));
    })
    .await;
    let addr = s.url.trim_start_matches("http://").to_owned();
    let routes = routes(&s).await;
    let count: usize = std::env::var("KEEP_ALIVE_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1200);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut fx = fixture(&s).await;
    let mut sender = connect(&addr).await;
    // What the last response on this connection was, to name the culprit of a drop.
    let mut previous: Option<String> = None;
    let (mut closes, mut drops, mut server_errors) = (0usize, Vec::new(), Vec::new());
    for i in 0..count {
        if i % 150 == 149 {
            fx = fixture(&s).await;
        }
        let (method, template) = rng.pick(&routes).clone();
        let path = fill(&template, &fx, &mut rng);
        let payload = body(&method, &template, &fx, &mut rng);
        let pieces = rng.below(2) == 0;
        let mut req = hyper::Request::builder()
            .method(method.as_str())
            .uri(format!("http://{addr}{path}"))
            .header("host", &addr)
            .header("content-type", "application/json");
        if template == "/mcp" {
            // Asking for JSON only: `/mcp` refuses it with 406 without reading the body.
            req = req.header(
                "accept",
                if rng.below(2) == 0 {
                    "application/json"
                } else {
                    "application/json, text/event-stream"
                },
            );
        }
        let far_over = payload.as_ref().is_some_and(|b| b.len() == FAR_OVER);
        let what = format!(
            "{method} {path} (body: {}{})",
            payload.as_ref().map_or(0, Vec::len),
            if pieces { ", in pieces" } else { "" }
        );
        let body: Body = match payload {
            None => http_body_util::Empty::new().boxed(),
            Some(b) if pieces => {
                // Said outright: hyper sends no body of unknown length on a GET otherwise.
                req = req.header("transfer-encoding", "chunked");
                in_pieces(b)
            }
            Some(b) => {
                req = req.header("content-length", b.len());
                http_body_util::Full::new(Bytes::from(b)).boxed()
            }
        };
        let req = req.body(body).unwrap();
        let sent = async {
            sender.ready().await?;
            sender.send_request(req).await
        };
        let res = match tokio::time::timeout(Duration::from_secs(10), sent).await {
            Ok(Ok(res)) => res,
            Ok(Err(_)) if far_over => {
                closes += 1;
                sender = connect(&addr).await;
                previous = None;
                continue;
            }
            Ok(Err(e)) => {
                drops.push(format!(
                    "{what} failed on the connection {previous:?} left open: {e}"
                ));
                sender = connect(&addr).await;
                previous = None;
                continue;
            }
            Err(_) => panic!("{what}: no response within 10 s"),
        };
        let status = res.status().as_u16();
        if far_over {
            assert_eq!(status, 413, "{what}");
        }
        let close = res
            .headers()
            .get("connection")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
        // A stream that stays open is ended soon; any other body must end well within 3 s.
        let patience = if open_ended(&method, &template) {
            Duration::from_millis(300)
        } else {
            Duration::from_secs(3)
        };
        let read = tokio::time::timeout(patience, res.into_body().collect())
            .await
            .map(|r| r.map(http_body_util::Collected::to_bytes));
        if status >= 500 {
            let text = match &read {
                Ok(Ok(b)) => String::from_utf8_lossy(b).into_owned(),
                _ => String::new(),
            };
            server_errors.push(format!("{what} -> {status}: {text}"));
        }
        match read {
            Ok(Ok(_)) if !close => previous = Some(format!("{what} -> {status}")),
            Ok(Ok(_)) => {
                closes += 1;
                sender = connect(&addr).await;
                previous = None;
            }
            Ok(Err(_)) if far_over => {
                closes += 1;
                sender = connect(&addr).await;
                previous = None;
            }
            Ok(Err(e)) => {
                drops.push(format!("{what} -> {status}: the body broke off: {e}"));
                sender = connect(&addr).await;
                previous = None;
            }
            Err(_) => {
                // A stream still open: ours to end.
                assert!(
                    open_ended(&method, &template),
                    "{what} -> {status}: the body did not end within 3 s"
                );
                sender = connect(&addr).await;
                previous = None;
            }
        }
    }
    assert!(
        server_errors.is_empty(),
        "{} 5xx:\n{}",
        server_errors.len(),
        server_errors.join("\n")
    );
    assert!(
        drops.is_empty(),
        "{} of {count} requests found their connection dropped:\n{}",
        drops.len(),
        drops.join("\n")
    );
    // Over-limit bodies said `connection: close`; most responses kept the connection.
    assert!(
        closes > 0 && closes < count / 4,
        "{closes} of {count} responses closed"
    );
    assert_eq!(s.get("/ok").await.0, 200);
    s.stop().await;
}
