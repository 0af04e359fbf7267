//! Two server replicas on one PostgreSQL database: 200 runs over 20 threads, submitted to
//! both. No run is lost, none executes twice, and no thread ever has two runs executing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::*;
use graphloom_server::{factory, GraphDeps, Server, ServerBuilder, ServerConfig};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const THREADS: usize = 20;
const RUNS_PER_THREAD: usize = 10;

#[derive(State, Clone, Default, Debug)]
struct Count {
    #[reducer(add)]
    n: i64,
}

#[derive(Default)]
struct Watch {
    /// Executions in progress per thread, and the highest seen.
    active: HashMap<String, usize>,
    max_active: usize,
    /// Executions per run id.
    runs: HashMap<String, usize>,
}

fn graph(deps: &GraphDeps, watch: Arc<Mutex<Watch>>) -> graphloom_core::Result<CompiledGraph<Count>> {
    StateGraph::<Count>::new()
        .add_node("work", move |_s: Arc<Count>, rt: Runtime| {
            let watch = Arc::clone(&watch);
            async move {
                let thread = rt.thread_id().unwrap_or_default().to_owned();
                {
                    let mut w = watch.lock().unwrap();
                    let a = w.active.entry(thread.clone()).or_insert(0);
                    *a += 1;
                    let now = *a;
                    w.max_active = w.max_active.max(now);
                    *w.runs.entry(rt.run_id().to_owned()).or_insert(0) += 1;
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
                *watch.lock().unwrap().active.get_mut(&thread).unwrap() -= 1;
                Ok(CountUpdate::new().n(1))
            }
        })
        .add_edge(START, "work")
        .add_edge("work", END)
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .compile()
}

/// A server on the database at `url` with `workers` workers and the graphs `graphs` adds;
/// its base URL and the sender that stops it.
async fn serve(
    url: &str,
    workers: usize,
    graphs: impl FnOnce(ServerBuilder) -> ServerBuilder,
) -> (String, tokio::sync::oneshot::Sender<()>) {
    let mut cfg = ServerConfig::postgres(url);
    cfg.workers = workers;
    let server = graphs(Server::builder(cfg)).build().await.unwrap();
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

async fn replica(url: &str, watch: &Arc<Mutex<Watch>>) -> (String, tokio::sync::oneshot::Sender<()>) {
    let w = Arc::clone(watch);
    serve(url, 4, |b| {
        b.graph("count", factory(move |deps| graph(deps, Arc::clone(&w))))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_share_the_queue_without_losing_or_doubling_runs() {
    let (url, _guard) = graphloom_postgres::testing::test_database().await;
    let watch = Arc::new(Mutex::new(Watch::default()));
    let (a, stop_a) = replica(&url, &watch).await;
    let (b, stop_b) = replica(&url, &watch).await;
    let http = reqwest::Client::new();
    let mut threads = Vec::new();
    for i in 0..THREADS {
        let t: Value = http
            .post(format!("{a}/threads"))
            .json(&json!({"thread_id": format!("t{i}")}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        threads.push(t["thread_id"].as_str().unwrap().to_owned());
    }
    // Submit concurrently, alternating replicas.
    let mut submits = Vec::new();
    for r in 0..RUNS_PER_THREAD {
        for (i, t) in threads.iter().enumerate() {
            let base = if (i + r) % 2 == 0 { a.clone() } else { b.clone() };
            let http = http.clone();
            let t = t.clone();
            submits.push(tokio::spawn(async move {
                let res = http
                    .post(format!("{base}/threads/{t}/runs"))
                    .json(&json!({"assistant_id": "count", "input": {}, "multitask_strategy": "enqueue"}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(res.status().as_u16(), 200);
                res.json::<Value>().await.unwrap()["run_id"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            }));
        }
    }
    let mut run_ids = Vec::new();
    for s in submits {
        run_ids.push(s.await.unwrap());
    }
    assert_eq!(run_ids.len(), THREADS * RUNS_PER_THREAD);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    for t in &threads {
        loop {
            let runs: Vec<Value> = http
                .get(format!("{b}/threads/{t}/runs?limit=100"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(runs.len(), RUNS_PER_THREAD);
            if runs.iter().all(|r| r["status"] == "success") {
                break;
            }
            assert!(
                runs.iter()
                    .all(|r| ["pending", "running", "success"].contains(&r["status"].as_str().unwrap())),
                "{runs:?}"
            );
            assert!(
                tokio::time::Instant::now() < deadline,
                "runs of {t} never finished"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let state: Value = http
            .get(format!("{a}/threads/{t}/state"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            state["values"]["n"].as_i64(),
            Some(RUNS_PER_THREAD as i64),
            "{state}"
        );
    }
    let w = watch.lock().unwrap();
    assert_eq!(w.max_active, 1, "a thread had two runs executing at once");
    assert_eq!(w.runs.len(), THREADS * RUNS_PER_THREAD, "every run executed");
    assert!(w.runs.values().all(|n| *n == 1), "a run executed twice");
    drop(w);
    let _ = stop_a.send(());
    let _ = stop_b.send(());
}

/// `stepper`: three nodes, each a short sleep, a custom event and one count.
fn stepper(deps: &GraphDeps) -> graphloom_core::Result<CompiledGraph<Count>> {
    let mut g = StateGraph::<Count>::new();
    for k in 1..=3 {
        g = g.add_node(format!("s{k}"), move |_s: Arc<Count>, rt: Runtime| async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            rt.write(json!({"step": k}));
            Ok(CountUpdate::new().n(1))
        });
    }
    g.add_edge(START, "s1")
        .add_edge("s1", "s2")
        .add_edge("s2", "s3")
        .add_edge("s3", END)
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .compile()
}

async fn stepper_replica(url: &str, workers: usize) -> (String, tokio::sync::oneshot::Sender<()>) {
    serve(url, workers, |b| b.graph("stepper", factory(stepper))).await
}

/// `(event, data, id)` of an SSE body.
fn sse_events(body: &str) -> Vec<(String, Value, Option<u64>)> {
    let mut out = Vec::new();
    for frame in body.split("\r\n\r\n") {
        let (mut event, mut data, mut id) = (None, None, None);
        for line in frame.split("\r\n") {
            if let Some(v) = line.strip_prefix("event: ") {
                event = Some(v.to_owned());
            } else if let Some(v) = line.strip_prefix("data: ") {
                data = serde_json::from_str(v).ok();
            } else if let Some(v) = line.strip_prefix("id: ") {
                id = v.parse().ok();
            }
        }
        if let (Some(e), Some(d)) = (event, data) {
            out.push((e, d, id));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_resumable_run_streams_live_to_a_client_of_another_replica() {
    let (url, _guard) = graphloom_postgres::testing::test_database().await;
    // `a` executes runs; `b` only serves the API.
    let (a, _stop_a) = stepper_replica(&url, 1).await;
    let (b, _stop_b) = stepper_replica(&url, 0).await;
    let http = reqwest::Client::new();
    let thread: Value = http
        .post(format!("{a}/threads"))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let t = thread["thread_id"].as_str().unwrap().to_owned();
    let run: Value = http
        .post(format!("{a}/threads/{t}/runs"))
        .json(
            &json!({"assistant_id": "stepper", "input": {}, "stream_mode": ["custom", "values"],
                      "stream_resumable": true}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rid = run["run_id"].as_str().unwrap().to_owned();
    // Join on `b` while the run executes on `a`: every event, live, with its id.
    let from_b = http
        .get(format!("{b}/threads/{t}/runs/{rid}/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(from_b.status().as_u16(), 200);
    let from_b = sse_events(&from_b.text().await.unwrap());
    let status: Value = http
        .get(format!("{b}/threads/{t}/runs/{rid}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["status"], "success");
    let steps: Vec<Value> = from_b
        .iter()
        .filter(|(e, _, _)| e == "custom")
        .map(|(_, d, _)| d["step"].clone())
        .collect();
    assert_eq!(steps, vec![json!(1), json!(2), json!(3)], "{from_b:?}");
    assert_eq!(from_b[0].0, "metadata");
    let ids: Vec<Option<u64>> = from_b.iter().map(|(_, _, id)| *id).collect();
    let expected: Vec<Option<u64>> = (0..from_b.len() as u64).map(Some).collect();
    assert_eq!(ids, expected);
    let last_values = from_b.iter().rev().find(|(e, _, _)| e == "values").unwrap();
    assert_eq!(last_values.1["n"], 3);
    // The same log from the replica that executed it.
    let from_a = http
        .get(format!("{a}/threads/{t}/runs/{rid}/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(sse_events(&from_a.text().await.unwrap()), from_b);
    // Reconnecting to `b` with Last-Event-ID gets only what follows.
    let rest = http
        .get(format!("{b}/threads/{t}/runs/{rid}/stream"))
        .header("Last-Event-ID", "2")
        .send()
        .await
        .unwrap();
    assert_eq!(sse_events(&rest.text().await.unwrap()), from_b[3..].to_vec());
    // Deleting the run forgets its stored events.
    assert_eq!(
        http.delete(format!("{b}/threads/{t}/runs/{rid}"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        204
    );
    assert_eq!(
        http.get(format!("{b}/threads/{t}/runs/{rid}/stream"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        404
    );
}

/// A run streamed from a replica that only serves the API (`runs/stream` there) while
/// another replica executes it: the replica that queued it opened its log, which never
/// gets an event, so its stream follows the run through the database, every event of a
/// resumable run, the final values of one that is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_streamed_from_an_api_replica_follows_it_on_the_executing_one() {
    let (url, _guard) = graphloom_postgres::testing::test_database().await;
    let (_a, _stop_a) = stepper_replica(&url, 1).await;
    let (b, _stop_b) = stepper_replica(&url, 0).await;
    let http = reqwest::Client::new();
    for resumable in [true, false] {
        let t: Value = http
            .post(format!("{b}/threads"))
            .json(&json!({}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let t = t["thread_id"].as_str().unwrap().to_owned();
        let body = tokio::time::timeout(Duration::from_secs(30), async {
            http.post(format!("{b}/threads/{t}/runs/stream"))
                .json(&json!({"assistant_id": "stepper", "input": {},
                              "stream_mode": ["custom", "values"], "stream_resumable": resumable}))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        })
        .await
        .unwrap_or_else(|_| {
            panic!("the stream on the API-only replica never ended (resumable: {resumable})")
        });
        let events = sse_events(&body);
        let last_values = events.iter().rev().find(|(e, _, _)| e == "values");
        assert_eq!(last_values.unwrap().1["n"], 3, "{events:?}");
        if resumable {
            let steps: Vec<Value> = events
                .iter()
                .filter(|(e, _, _)| e == "custom")
                .map(|(_, d, _)| d["step"].clone())
                .collect();
            assert_eq!(steps, vec![json!(1), json!(2), json!(3)], "{events:?}");
        }
    }
}

/// `runs/wait` sent to a replica that only serves the API: it opens the run's log, another
/// replica executes the run, and the wait still ends with the final values.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wait_on_one_replica_ends_when_another_executes_the_run() {
    let (url, _guard) = graphloom_postgres::testing::test_database().await;
    let (a, _stop_a) = stepper_replica(&url, 1).await;
    let (b, _stop_b) = stepper_replica(&url, 0).await;
    let http = reqwest::Client::new();
    for path in ["/runs/wait", "/threads/{t}/runs/wait"] {
        let t: Value = http
            .post(format!("{b}/threads"))
            .json(&json!({}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let path = path.replace("{t}", t["thread_id"].as_str().unwrap());
        let waited = tokio::time::timeout(
            Duration::from_secs(30),
            http.post(format!("{b}{path}"))
                .json(&json!({"assistant_id": "stepper", "input": {}}))
                .send(),
        )
        .await
        .unwrap_or_else(|_| panic!("{path} on the API-only replica never answered"))
        .unwrap();
        assert_eq!(waited.status().as_u16(), 200, "{path}");
        let body: Value = waited.json().await.unwrap();
        assert_eq!(body["n"], 3, "{path}: {body}");
    }
    drop(a);
}
