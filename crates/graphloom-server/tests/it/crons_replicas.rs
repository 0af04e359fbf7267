//! Two server replicas on one PostgreSQL database, both running the cron scheduler: ten
//! thread crons made due at once, five rounds. Every tick creates exactly one run, and
//! every run executes once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::*;
use graphloom_server::db::{CronDb, CronPatch, PgDb};
use graphloom_server::{factory, GraphDeps, Server, ServerConfig};
use graphloom_server_db::kit::now_micros;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const CRONS: usize = 10;
const ROUNDS: usize = 5;

#[derive(State, Clone, Default, Debug)]
struct Count {
    #[reducer(add)]
    n: i64,
}

/// Executions per run id.
type Seen = Arc<Mutex<HashMap<String, usize>>>;

fn graph(deps: &GraphDeps, seen: Seen) -> graphloom_core::Result<CompiledGraph<Count>> {
    StateGraph::<Count>::new()
        .add_node("work", move |_s: Arc<Count>, rt: Runtime| {
            let seen = Arc::clone(&seen);
            async move {
                *seen.lock().unwrap().entry(rt.run_id().to_owned()).or_insert(0) += 1;
                Ok(CountUpdate::new().n(1))
            }
        })
        .add_edge(START, "work")
        .add_edge("work", END)
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .compile()
}

async fn replica(url: &str, seen: &Seen) -> (String, tokio::sync::oneshot::Sender<()>) {
    let mut cfg = ServerConfig::postgres(url);
    cfg.workers = 4;
    cfg.crons.poll = Duration::from_millis(20);
    let s = Arc::clone(seen);
    let server = Server::builder(cfg)
        .graph("count", factory(move |deps| graph(deps, Arc::clone(&s))))
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

async fn runs_of(http: &reqwest::Client, base: &str, thread: &str) -> Vec<Value> {
    http.get(format!("{base}/threads/{thread}/runs?limit=100"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_fire_each_cron_tick_once() {
    let (url, _guard) = graphloom_postgres::testing::test_database().await;
    let seen: Seen = Arc::default();
    let (a, stop_a) = replica(&url, &seen).await;
    let (b, stop_b) = replica(&url, &seen).await;
    let db = PgDb::connect(&url).await.unwrap();
    let http = reqwest::Client::new();
    let mut crons = Vec::new();
    for i in 0..CRONS {
        let base = if i % 2 == 0 { &a } else { &b };
        let t: Value = http
            .post(format!("{base}/threads"))
            .json(&json!({}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let thread = t["thread_id"].as_str().unwrap().to_owned();
        let c: Value = http
            .post(format!("{base}/threads/{thread}/runs/crons"))
            // Yearly: no natural tick comes during the test, only the ones it makes due.
            .json(&json!({"assistant_id": "count", "schedule": "0 0 1 1 *", "input": {}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        crons.push((c["cron_id"].as_str().unwrap().to_owned(), thread));
    }
    for round in 1..=ROUNDS {
        // Every cron due at once (a distinct tick each round).
        let at = now_micros() - 1_000;
        for (cron_id, _) in &crons {
            let patch = CronPatch {
                next_run_us: Some(Some(at)),
                ..CronPatch::default()
            };
            db.patch_cron("", cron_id, &patch).await.unwrap().unwrap();
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        for (cron_id, thread) in &crons {
            loop {
                let runs = runs_of(&http, if round % 2 == 0 { &a } else { &b }, thread).await;
                assert!(
                    runs.len() <= round,
                    "cron {cron_id}: {} runs after {round} ticks",
                    runs.len()
                );
                if runs.len() == round && runs.iter().all(|r| r["status"] == "success") {
                    assert!(runs.iter().all(|r| r["metadata"]["cron_id"] == json!(cron_id)));
                    break;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "round {round}: cron {cron_id} did not fire"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    // Nothing more comes: the crons' next ticks are next year's.
    for (cron_id, thread) in &crons {
        assert_eq!(runs_of(&http, &a, thread).await.len(), ROUNDS, "cron {cron_id}");
        let c: Value = http
            .get(format!("{b}/runs/crons/{cron_id}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let next =
            graphloom_server::scheduler::schedule::parse_time_micros(c["next_run_date"].as_str().unwrap())
                .unwrap();
        assert!(next > now_micros(), "{c}");
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), CRONS * ROUNDS, "one run per tick");
    assert!(seen.values().all(|n| *n == 1), "a run executed twice: {seen:?}");
    let _ = stop_a.send(());
    let _ = stop_b.send(());
}
