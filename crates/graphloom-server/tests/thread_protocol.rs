//! The thread-centric protocol against a real server on 127.0.0.1:0: commands, the
//! thread's SSE stream, and what a run looks like on it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod weather;

use common::{parse_sse, TestServer};
use futures::StreamExt;
use serde_json::{json, Value};
use std::time::Duration;

async fn server() -> TestServer {
    TestServer::sqlite_with(|_| {}, |b| b.graph("weather", graphloom_server::factory(weather::graph))).await
}

/// Read a thread's event stream until `until` holds for an event (bounded).
async fn read_events(s: &TestServer, thread: &str, body: Value, until: impl Fn(&Value) -> bool) -> Vec<Value> {
    let r = s
        .http
        .post(s.u(&format!("/threads/{thread}/stream/events")))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut bytes = r.bytes_stream();
    let mut buf = String::new();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(chunk) = bytes.next().await {
            buf.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            while let Some(end) = buf.find("\r\n\r\n") {
                let frame: String = buf.drain(..end + 4).collect();
                for (_, data, _) in parse_sse(&frame) {
                    let stop = until(&data);
                    out.push(data);
                    if stop {
                        return;
                    }
                }
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no end in {out:#?}"));
    out
}

fn root_terminal(v: &Value) -> bool {
    v["method"] == "lifecycle"
        && v["params"]["namespace"] == json!([])
        && ["completed", "interrupted", "failed"].contains(&v["params"]["data"]["event"].as_str().unwrap_or(""))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke() {
    let s = server().await;
    let thread = uuid::Uuid::new_v4().to_string();
    let (st, r) = s
        .post(
            &format!("/threads/{thread}/commands"),
            json!({"id": 1, "method": "run.start", "params": {"assistant_id": "weather", "input": {"messages": [{"type": "human", "content": "weather in Paris?"}]}}}),
        )
        .await;
    assert_eq!(st, 200, "{r}");
    let evs = read_events(&s, &thread, json!({"channels": ["values", "updates", "messages", "tools", "lifecycle", "input", "custom", "checkpoints"]}), root_terminal).await;
    for e in &evs {
        println!("{}", e);
    }
}
