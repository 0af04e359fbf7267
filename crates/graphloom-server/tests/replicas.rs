//! Two server replicas on one PostgreSQL database: 200 runs over 20 threads, submitted to
//! both. No run is lost, none executes twice, and no thread ever has two runs executing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::*;
use graphloom_server::{factory, GraphDeps, Server, ServerConfig};
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

async fn replica(url: &str, watch: &Arc<Mutex<Watch>>) -> (String, tokio::sync::oneshot::Sender<()>) {
    let mut cfg = ServerConfig::postgres(url);
    cfg.workers = 4;
    let w = Arc::clone(watch);
    let server = Server::builder(cfg)
        .graph("count", factory(move |deps| graph(deps, Arc::clone(&w))))
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
