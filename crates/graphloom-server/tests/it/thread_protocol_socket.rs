//! The thread-centric protocol's WebSocket against a real server on 127.0.0.1:0: bad frames
//! get typed error frames, a huge one closes the socket, a client that never reads is
//! dropped while the server keeps serving, open sockets hold little memory; and what Studio
//! asks of the server: CORS with Private Network Access, the graph drawing with subgraphs
//! expanded.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::weather;

use common::TestServer;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

async fn server() -> TestServer {
    TestServer::sqlite_with(
        |_| {},
        |b| b.graph("weather", graphloom_server::factory(weather::graph)),
    )
    .await
}

fn new_thread() -> String {
    uuid::Uuid::new_v4().to_string()
}

async fn socket(
    s: &TestServer,
    thread: &str,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    let url = format!(
        "{}/threads/{thread}/stream/events",
        s.url.replacen("http", "ws", 1)
    );
    tokio_tungstenite::connect_async(url).await.unwrap().0
}

async fn next_json(
    ws: &mut tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
) -> Option<Value> {
    loop {
        match tokio::time::timeout(Duration::from_secs(20), ws.next())
            .await
            .unwrap()
        {
            Some(Ok(Message::Text(t))) => return Some(serde_json::from_str(&t).unwrap()),
            Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return None,
            Some(Ok(_)) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_answers_bad_frames_and_closes_on_a_huge_one() {
    let s = server().await;
    let t = new_thread();
    let mut ws = socket(&s, &t).await;
    ws.send(Message::text("garbage")).await.unwrap();
    let f = next_json(&mut ws).await.unwrap();
    assert_eq!(
        (f["type"].as_str(), f["error"].as_str(), &f["id"]),
        (Some("error"), Some("invalid_argument"), &Value::Null)
    );
    ws.send(Message::text(r#"{"id": 3, "method": "nope"}"#))
        .await
        .unwrap();
    let f = next_json(&mut ws).await.unwrap();
    assert_eq!(
        (f["id"].as_u64(), f["error"].as_str()),
        (Some(3), Some("unknown_command"))
    );
    ws.send(Message::text(
        r#"{"id": 4, "method": "subscription.subscribe", "params": {"channels": ["nope"]}}"#,
    ))
    .await
    .unwrap();
    assert_eq!(next_json(&mut ws).await.unwrap()["error"], "invalid_argument");
    ws.send(Message::text(
        r#"{"id": 5, "method": "subscription.subscribe", "params": {"channels": ["lifecycle"]}}"#,
    ))
    .await
    .unwrap();
    let ok = next_json(&mut ws).await.unwrap();
    assert_eq!(
        (ok["type"].as_str(), ok["result"]["replayed_events"].as_u64()),
        (Some("success"), Some(0)),
        "{ok}"
    );
    // A frame over 1 MiB: an error frame, then the socket closes.
    let big = format!(
        r#"{{"id": 6, "method": "run.start", "params": {{"pad": "{}"}}}}"#,
        "x".repeat(2 * 1024 * 1024)
    );
    let _ = ws.send(Message::text(big)).await;
    let mut saw_error = false;
    while let Some(f) = next_json(&mut ws).await {
        saw_error |= f["type"] == "error" && f["id"].is_null();
    }
    assert!(saw_error, "no error frame before the close");
    // The server goes on.
    let mut ws = socket(&s, &t).await;
    ws.send(Message::text(
        r#"{"id": 1, "method": "agent.getTree", "params": {}}"#,
    ))
    .await
    .unwrap();
    assert_eq!(next_json(&mut ws).await.unwrap()["error"], "no_such_run");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_that_never_reads_is_dropped_and_the_server_keeps_serving() {
    let s = server().await;
    let t = new_thread();
    let (st, _) = s.post("/threads", json!({"thread_id": t})).await;
    assert_eq!(st, 200);
    // A small receive buffer, so that what the client does not read stays on the server.
    let tcp = tokio::net::TcpSocket::new_v4().unwrap();
    tcp.set_recv_buffer_size(16 * 1024).unwrap();
    let addr: std::net::SocketAddr = s.url.trim_start_matches("http://").parse().unwrap();
    let stream = tcp.connect(addr).await.unwrap();
    let url = format!("ws://{addr}/threads/{t}/stream/events");
    let (mut ws, _) = tokio_tungstenite::client_async(url, stream).await.unwrap();
    ws.send(Message::text(
        r#"{"id": 1, "method": "subscription.subscribe", "params": {"channels": ["values"]}}"#,
    ))
    .await
    .unwrap();
    // Runs whose values are large (a 512 KiB field, replaced by each run), and a client
    // that reads none of them: far more than the socket's buffers and the session's queue
    // hold.
    let big = "x".repeat(512 * 1024);
    for i in 0..40 {
        let (st, r) = s
            .post(
                &format!("/threads/{t}/runs/wait"),
                json!({"assistant_id": "echo", "input": {"decision": format!("{i}{big}")}}),
            )
            .await;
        assert_eq!(st, 200, "{r}");
    }
    // The server still answers while the socket is stalled.
    assert_eq!(s.get("/ok").await.0, 200);
    // It gives up on the client: the socket's session ends (bounded wait).
    let gave_up = tokio::time::timeout(Duration::from_secs(60), async {
        while s.server.followed_threads() > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        gave_up.is_ok(),
        "the server kept following the thread for a client that reads nothing"
    );
    // Reading now, the client gets what the buffers held, then the end.
    let mut frames = 0usize;
    let ended = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(m) = ws.next().await {
            match m {
                Ok(Message::Text(_)) => frames += 1,
                Ok(Message::Close(_)) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "the stalled socket was not closed ({frames} frames read)"
    );
    assert!(
        frames < 81,
        "the server queued everything for a client that read nothing ({frames} frames)"
    );
    assert_eq!(s.get("/ok").await.0, 200);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_answers_studio_with_private_network_access() {
    let s = server().await;
    let preflight = |origin: &'static str| {
        s.http
            .request(reqwest::Method::OPTIONS, s.u("/threads/search"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type")
            .header("access-control-request-private-network", "true")
            .send()
    };
    for origin in [
        "https://smith.langchain.com",
        "http://localhost:5173",
        "http://127.0.0.1:3000",
    ] {
        let r = preflight(origin).await.unwrap();
        let h = r.headers();
        assert_eq!(
            h.get("access-control-allow-origin").and_then(|v| v.to_str().ok()),
            Some(origin)
        );
        assert_eq!(
            h.get("access-control-allow-private-network")
                .and_then(|v| v.to_str().ok()),
            Some("true")
        );
    }
    let r = preflight("https://evil.example").await.unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_graph_drawing_expands_subgraphs_with_xray() {
    let s = server().await;
    let (st, plain) = s.get("/assistants/weather/graph").await;
    assert_eq!(st, 200);
    let ids = |g: &Value| -> Vec<String> {
        g["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(ids(&plain).contains(&"review".to_owned()));
    let (_, xray) = s.get("/assistants/weather/graph?xray=true").await;
    let nodes = ids(&xray);
    assert!(
        nodes.contains(&"review:approve".to_owned()) && !nodes.contains(&"review".to_owned()),
        "{nodes:?}"
    );
    let edge = |a: &str, b: &str| {
        xray["edges"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["source"] == a && e["target"] == b)
    };
    assert!(
        edge("agent", "review:approve") && edge("review:approve", "__end__"),
        "{xray}"
    );
    assert_eq!(s.get("/assistants/weather/graph?xray=maybe").await.0, 422);
    s.stop().await;
}

/// The process's resident memory, in bytes (`VmRSS`).
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// Each open socket costs the server little memory: its read buffer is allocated (and
/// zeroed) when it opens, and at the WebSocket library's default of 128 KiB, 200 idle
/// subscribed sockets grew this process by 28.5 MB (5.6 MB at 8 KiB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_sockets_hold_little_memory() {
    const SOCKETS: usize = 200;
    let s = server().await;
    // The client's own sockets (in this process too) read into small buffers.
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default().read_buffer_size(4096);
    let open = |n: usize| {
        let url = s.url.replacen("http", "ws", 1);
        async move {
            let mut out = Vec::with_capacity(n);
            for _ in 0..n {
                let url = format!("{url}/threads/{}/stream/events", new_thread());
                let (mut ws, _) = tokio_tungstenite::connect_async_with_config(url, Some(config), true)
                    .await
                    .unwrap();
                let sub =
                    r#"{"id": 1, "method": "subscription.subscribe", "params": {"channels": ["values"]}}"#;
                ws.send(Message::text(sub)).await.unwrap();
                let answer = next_json(&mut ws).await.unwrap();
                assert_eq!(answer["type"], "success", "{answer}");
                out.push(ws);
            }
            out
        }
    };
    // Warm up what every socket shares (tasks, allocator pools), then measure.
    drop(open(20).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = rss();
    let held = open(SOCKETS).await;
    let grown = rss().saturating_sub(before);
    assert_eq!(held.len(), SOCKETS);
    assert!(
        grown < 10 << 20,
        "{SOCKETS} open sockets grew the process by {} KiB",
        grown / 1024
    );
}
