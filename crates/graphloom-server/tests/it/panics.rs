//! What a client sees when the server fails: a 500 says `internal error` and the request id
//! (the cause goes to the log), a handler that panics still answers (JSON 500, not a dropped
//! connection), and a run that panics ends its stream with an `error` event.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{human, parse_sse, TestServer};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use graphloom_core::checkpoint::CheckpointConfig;
use graphloom_core::{BackendError, BackendErrorKind, Error};
use graphloom_server::hosted::{JsonRunEvent, JsonRunRequest};
use graphloom_server::{hosted, GraphDeps, GraphFactory, HostedGraph};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Copy)]
enum Fault {
    /// `get_state` fails with a backend error whose message must not reach the client.
    StateError,
    /// `get_state` panics (on the request's task).
    StatePanics,
    /// `stream` panics (on the worker's task).
    StreamPanics,
}

/// The `echo` graph with one fault.
struct Faulty {
    inner: Arc<dyn HostedGraph>,
    fault: Fault,
}

impl HostedGraph for Faulty {
    fn node_names(&self) -> Vec<String> {
        self.inner.node_names()
    }
    fn input_schema(&self) -> Value {
        self.inner.input_schema()
    }
    fn output_schema(&self) -> Value {
        self.inner.output_schema()
    }
    fn state_schema(&self) -> Value {
        self.inner.state_schema()
    }
    fn drawing(&self) -> Value {
        self.inner.drawing()
    }
    fn mermaid(&self) -> String {
        self.inner.mermaid()
    }
    fn subgraphs(&self, recurse: bool) -> Vec<(String, String, Value)> {
        self.inner.subgraphs(recurse)
    }
    fn stream(&self, req: JsonRunRequest) -> BoxStream<'static, JsonRunEvent> {
        if let Fault::StreamPanics = self.fault {
            let nodes: Vec<String> = Vec::new();
            let _ = &nodes[nodes.len() + 1];
        }
        self.inner.stream(req)
    }
    fn get_state<'a>(
        &'a self,
        thread_id: &'a str,
        checkpoint_id: Option<&'a str>,
    ) -> BoxFuture<'a, graphloom_core::Result<Option<Value>>> {
        match self.fault {
            Fault::StateError => Box::pin(async {
                Err(Error::Backend(BackendError::new(
                    BackendErrorKind::Other,
                    "disk I/O error at /var/secret/graphloom.db",
                )))
            }),
            Fault::StatePanics => Box::pin(async { panic!("state of a haunted thread") }),
            Fault::StreamPanics => self.inner.get_state(thread_id, checkpoint_id),
        }
    }
    fn history<'a>(
        &'a self,
        thread_id: &'a str,
        filter: Map<String, Value>,
        before: Option<String>,
        limit: Option<usize>,
    ) -> BoxFuture<'a, graphloom_core::Result<Vec<Value>>> {
        self.inner.history(thread_id, filter, before, limit)
    }
    fn update_state<'a>(
        &'a self,
        thread_id: &'a str,
        checkpoint_id: Option<&'a str>,
        values: Option<Value>,
        as_node: Option<&'a str>,
    ) -> BoxFuture<'a, graphloom_core::Result<CheckpointConfig>> {
        self.inner.update_state(thread_id, checkpoint_id, values, as_node)
    }
}

fn faulty(fault: Fault) -> GraphFactory {
    Arc::new(move |deps: &GraphDeps| {
        let inner = hosted(common::echo(deps)?);
        Ok(Arc::new(Faulty { inner, fault }) as Arc<dyn HostedGraph>)
    })
}

/// `panicky`: its one node panics (on the run's own task).
fn panicky(deps: &GraphDeps) -> graphloom_core::Result<graphloom_core::CompiledGraph<common::Chat>> {
    use graphloom_core::{StateGraph, END, START};
    StateGraph::<common::Chat>::new()
        .add_node("boom", |s: Arc<common::Chat>, _rt| async move {
            let steps: Vec<i64> = Vec::new();
            let i = usize::try_from(s.steps).unwrap_or(0) + 2;
            Ok(common::ChatUpdate::new().steps(steps[i]))
        })
        .add_edge(START, "boom")
        .add_edge("boom", END)
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .compile()
}

async fn server() -> TestServer {
    TestServer::sqlite_with(
        |_| {},
        |b| {
            b.graph("state-error", faulty(Fault::StateError))
                .graph("state-panics", faulty(Fault::StatePanics))
                .graph("stream-panics", faulty(Fault::StreamPanics))
                .graph("panicky", graphloom_server::factory(panicky))
        },
    )
    .await
}

/// A 500 body said `internal error: {cause}`, the cause being whatever broke inside.
#[tokio::test]
async fn a_500_tells_the_client_only_internal_error_and_the_request_id() {
    let s = server().await;
    let (st, t) = s
        .post("/threads", json!({"metadata": {"graph_id": "state-error"}}))
        .await;
    assert_eq!(st, 200, "{t}");
    let t = t["thread_id"].as_str().unwrap();
    let r = s
        .http
        .get(s.u(&format!("/threads/{t}/state")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 500);
    let id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert!(!id.is_empty());
    let body: Value = r.json().await.unwrap();
    assert_eq!(body, json!({"detail": "internal error", "request_id": id}));
    s.stop().await;
}

#[tokio::test]
async fn a_handler_that_panics_answers_a_json_500() {
    let s = server().await;
    let (_, t) = s
        .post("/threads", json!({"metadata": {"graph_id": "state-panics"}}))
        .await;
    let t = t["thread_id"].as_str().unwrap();
    for _ in 0..3 {
        let r = s
            .http
            .get(s.u(&format!("/threads/{t}/state")))
            .header("x-request-id", "client-chosen-1")
            .send()
            .await
            .expect("a reply, not a dropped connection");
        assert_eq!(r.status().as_u16(), 500);
        assert_eq!(r.headers()["x-request-id"], "client-chosen-1");
        let body: Value = r.json().await.unwrap();
        assert_eq!(
            body,
            json!({"detail": "internal error", "request_id": "client-chosen-1"})
        );
    }
    assert_eq!(s.get("/ok").await.0, 200);
    s.stop().await;
}

/// Read a run's SSE stream to its end (bounded).
async fn stream_events(s: &TestServer, path: &str, body: Value) -> Vec<(String, Value, Option<String>)> {
    let r = s
        .http
        .post(s.u(path))
        .json(&body)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    parse_sse(&r.text().await.expect("the stream ends"))
}

/// A run whose graph panicked was taken for stopped by shutdown and queued again, for ever;
/// its stream never ended.
#[tokio::test]
async fn a_run_whose_node_panics_ends_its_stream_with_an_error_event() {
    let s = server().await;
    let t = s.thread().await;
    let events = stream_events(
        &s,
        &format!("/threads/{t}/runs/stream"),
        json!({"assistant_id": "panicky", "input": human("hi")}),
    )
    .await;
    let (last, data, _) = events.last().unwrap();
    assert_eq!(last, "error", "{events:?}");
    assert!(data["message"].as_str().unwrap().contains("panicked"), "{data}");
    let run = events[0].1["run_id"].as_str().unwrap();
    let r = s.wait_run(&t, run).await;
    assert_eq!(r["status"], "error", "not queued again: {r}");
    assert_eq!(s.get(&format!("/threads/{t}")).await.1["status"], "error");
    s.stop().await;
}

/// A panic in the worker's own code (here: the graph's `stream` call) left the run running
/// and its readers waiting for ever.
#[tokio::test]
async fn a_run_whose_execution_panics_ends_its_stream_with_an_error_event() {
    let s = server().await;
    let t = s.thread().await;
    let events = stream_events(
        &s,
        &format!("/threads/{t}/runs/stream"),
        json!({"assistant_id": "stream-panics", "input": human("hi")}),
    )
    .await;
    let names: Vec<&str> = events.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(names.last(), Some(&"error"), "{events:?}");
    assert_eq!(
        events.last().unwrap().1["message"],
        "the run failed on the server"
    );
    // The run and the thread are marked failed; runs/wait and a new run still work.
    let (st, body) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "stream-panics"}),
        )
        .await;
    assert_eq!(
        (st, &body["__error__"]["error"]),
        (200, &json!("InternalError")),
        "{body}"
    );
    let (_, runs) = s.get(&format!("/threads/{t}/runs")).await;
    assert!(
        runs.as_array().unwrap().iter().all(|r| r["status"] == "error"),
        "{runs}"
    );
    assert_eq!(s.get(&format!("/threads/{t}")).await.1["status"], "error");
    let (st, out) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "echo", "input": human("again")}),
        )
        .await;
    assert_eq!(
        (st, &out["messages"][1]["content"]),
        (200, &json!("echo: again")),
        "{out}"
    );
    // A stateless run's temporary thread goes, as when a run ends.
    let events = stream_events(&s, "/runs/stream", json!({"assistant_id": "stream-panics"})).await;
    assert_eq!(events.last().unwrap().0, "error", "{events:?}");
    assert_eq!(s.post("/threads/count", json!({})).await.1, json!(1));
    s.stop().await;
}
