//! The thread protocol across two replicas on one PostgreSQL database: a client talks only
//! to an API replica (no workers) while the other replica executes the runs. Its commands
//! reach the executing replica through the queue, and its thread stream follows the runs
//! there through the events stored with them: tokens, the interrupt, the answer, the end.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::weather;

use common::{human, parse_sse};
use futures::StreamExt;
use graphloom_server::{factory, Server, ServerConfig};
use serde_json::{json, Value};
use std::time::Duration;

async fn serve(url: &str, workers: usize) -> (String, tokio::sync::oneshot::Sender<()>) {
    let mut cfg = ServerConfig::postgres(url);
    cfg.workers = workers;
    let server = Server::builder(cfg)
        .graph("weather", factory(weather::graph))
        .build()
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        server
            .serve(listener, async move {
                let _ = rx.await;
            })
            .await
    });
    (base, tx)
}

/// The thread's events from `since` until the root's lifecycle event `until` (at most 30 s).
async fn events_until(
    http: &reqwest::Client,
    api: &str,
    thread: &str,
    since: Option<u64>,
    until: &str,
) -> Vec<Value> {
    let mut body = json!({"channels": ["values", "messages", "lifecycle", "input"]});
    if let Some(s) = since {
        body["since"] = json!(s);
    }
    let r = http
        .post(format!("{api}/threads/{thread}/stream/events"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut bytes = r.bytes_stream();
    let mut buf = String::new();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(chunk) = bytes.next().await {
            buf.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            while let Some(end) = buf.find("\r\n\r\n") {
                let frame: String = buf.drain(..end + 4).collect();
                for (_, ev, _) in parse_sse(&frame) {
                    let done = ev["method"] == "lifecycle"
                        && ev["params"]["namespace"] == json!([])
                        && ev["params"]["data"]["event"] == until;
                    out.push(ev);
                    if done {
                        return;
                    }
                }
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {until} in {out:#?}"));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_of_an_api_replica_streams_runs_another_replica_executes() {
    let (url, _guard) = graphloom_postgres::testing::test_database().await;
    let (api, _stop_api) = serve(&url, 0).await;
    let (_worker, _stop_worker) = serve(&url, 2).await;
    let http = reqwest::Client::new();
    let thread = uuid::Uuid::new_v4().to_string();
    let cmd = |body: Value| {
        let http = http.clone();
        let u = format!("{api}/threads/{thread}/commands");
        async move {
            http.post(u)
                .json(&body)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let ok = cmd(json!({"id": 1, "method": "run.start", "params": {"assistant_id": "weather", "input": human("weather in Paris?")}})).await;
    assert_eq!(ok["type"], "success", "{ok}");
    let first = events_until(&http, &api, &thread, None, "interrupted").await;
    let text: String = first
        .iter()
        .filter(|e| e["params"]["data"]["delta"]["type"] == "text-delta")
        .filter_map(|e| e["params"]["data"]["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, weather::ANSWER.concat(), "{first:#?}");
    let ask = first.iter().find(|e| e["method"] == "input.requested").unwrap();
    let ok = cmd(json!({"id": 2, "method": "input.respond", "params": {
        "namespace": ask["params"]["namespace"], "interrupt_id": ask["params"]["data"]["interrupt_id"],
        "response": {"decisions": [{"type": "approve"}]},
    }}))
    .await;
    assert_eq!(ok["type"], "success", "{ok}");
    let since = first.iter().filter_map(|e| e["seq"].as_u64()).max();
    let second = events_until(&http, &api, &thread, since, "completed").await;
    let last = second
        .iter()
        .rev()
        .find(|e| e["method"] == "values" && e["params"]["namespace"] == json!([]))
        .unwrap();
    assert_eq!(
        last["params"]["data"]["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["content"],
        "review: approve"
    );
}
