//! Runs in flight on two replicas survive PostgreSQL's bad days: their connections killed
//! (`pg_terminate_backend`) in the middle of their writes, the server restarted (fast and
//! immediate), the server down for five seconds. Every acknowledged run ends `success`, its
//! thread holds each step's write exactly once, and no step ran more than once past the
//! last checkpoint before a fault (a step under way when the fault struck may run again; a
//! step whose checkpoint was saved never does). Against real PostgreSQL servers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{human, TestServer};
use graphloom_core::*;
use graphloom_postgres::testing::{test_database, OwnedServer};
use graphloom_server::{factory, GraphDeps, ServerConfig};
use serde_json::{json, Value};
use sqlx::{Connection, PgConnection};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The steps of the `work` graph.
const STEPS: [&str; 5] = ["s1", "s2", "s3", "s4", "s5"];

#[derive(State, Clone, Default, Debug)]
struct Work {
    /// One per step executed and saved.
    #[reducer(add)]
    done: i64,
    /// The steps, in the order their writes were applied.
    #[reducer(append)]
    trail: Seq<String>,
}

/// How many times each (thread, step) ran, across both replicas of the test process.
fn executions() -> &'static Mutex<HashMap<(String, String), u32>> {
    static RUNS: std::sync::OnceLock<Mutex<HashMap<(String, String), u32>>> = std::sync::OnceLock::new();
    RUNS.get_or_init(Mutex::default)
}

/// `work`: five steps in a row, each taking a moment, so that faults find runs mid-way.
fn work(deps: &GraphDeps) -> graphloom_core::Result<CompiledGraph<Work>> {
    let mut g = StateGraph::<Work>::new();
    for (i, step) in STEPS.iter().enumerate() {
        g = g.add_node(*step, move |_s: Arc<Work>, rt: Runtime| async move {
            let thread = rt.thread_id().unwrap_or_default().to_owned();
            *executions()
                .lock()
                .unwrap()
                .entry((thread, (*step).to_owned()))
                .or_default() += 1;
            tokio::time::sleep(Duration::from_millis(60)).await;
            Ok(WorkUpdate::new().done(1).trail(vec![(*step).to_owned()]))
        });
        let from = if i == 0 { START } else { STEPS[i - 1] };
        g = g.add_edge(from, *step);
    }
    g.add_edge(STEPS[STEPS.len() - 1], END)
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .compile()
}

async fn replica(url: &str) -> TestServer {
    let mut cfg = ServerConfig::postgres(url.to_owned());
    cfg.lease = Duration::from_secs(3);
    cfg.workers = 4;
    TestServer::start_with(cfg, |b| b.graph("work", factory(work))).await
}

/// `n` runs of `work` created across the two replicas, each on a thread of its own, all
/// acknowledged: (thread, run).
async fn start_runs(replicas: &[TestServer; 2], n: usize) -> Vec<(String, String)> {
    let mut runs = Vec::new();
    for i in 0..n {
        let s = &replicas[i % 2];
        let thread = s.thread().await;
        let (st, run) = s
            .post(
                &format!("/threads/{thread}/runs"),
                json!({"assistant_id": "work", "input": {"done": 0}}),
            )
            .await;
        assert_eq!(st, 200, "{run}");
        runs.push((thread, run["run_id"].as_str().unwrap().to_owned()));
    }
    runs
}

/// Wait until every run has ended (asking either replica, through the faults), then check
/// each ended `success` with every step applied once and no saved step run again.
async fn check_all_succeed(replicas: &[TestServer; 2], runs: &[(String, String)]) {
    let deadline = Instant::now() + Duration::from_secs(120);
    for (i, (thread, run)) in runs.iter().enumerate() {
        let s = &replicas[i % 2];
        let status = loop {
            let r = s
                .http
                .get(s.u(&format!("/threads/{thread}/runs/{run}")))
                .timeout(Duration::from_secs(10))
                .send()
                .await;
            if let Ok(r) = r {
                if r.status() == 200 {
                    let v: Value = r.json().await.unwrap();
                    let status = v["status"].as_str().unwrap_or_default().to_owned();
                    if status != "pending" && status != "running" {
                        break status;
                    }
                }
            }
            assert!(Instant::now() < deadline, "run {run} did not end within 120 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(status, "success", "run {run} on thread {thread}");
        let (st, state) = s.get(&format!("/threads/{thread}/state")).await;
        assert_eq!(st, 200, "{state}");
        assert_eq!(
            state["values"]["done"],
            json!(STEPS.len()),
            "thread {thread}: {state}"
        );
        assert_eq!(
            state["values"]["trail"],
            json!(STEPS),
            "thread {thread}: each step's write applied once, in order"
        );
    }
    // A step runs again only when a fault struck while it was under way (its checkpoint
    // not saved): at most twice here, and most steps once.
    let counts = executions().lock().unwrap().clone();
    let mut again = 0;
    for (thread, _) in runs {
        for step in STEPS {
            let n = counts
                .get(&(thread.clone(), step.to_owned()))
                .copied()
                .unwrap_or(0);
            assert!((1..=3).contains(&n), "{thread}/{step} ran {n} times");
            again += n - 1;
        }
    }
    assert!(
        (again as usize) < runs.len() * STEPS.len() / 2,
        "{again} steps ran again of {}",
        runs.len() * STEPS.len()
    );
}

/// Each replica runs a new run to its end.
async fn serve_normally(replicas: &[TestServer; 2]) {
    for s in replicas {
        let (st, v) = s
            .post(
                &format!("/threads/{}/runs/wait", s.thread().await),
                json!({"assistant_id": "echo", "input": human("after")}),
            )
            .await;
        assert_eq!(st, 200, "{v}");
    }
}

/// From a connection of its own, end every other client session of the database.
async fn kill_sessions(url: &str) -> i64 {
    let mut conn = PgConnection::connect(url).await.unwrap();
    let killed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid()
           AND backend_type = 'client backend') t",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    killed
}

/// Runs created on alternate replicas until `stop`, each on a new thread, while faults
/// strike: the acknowledged ones (thread, run), and the threads whose creation was refused.
async fn create_during(
    replicas: &[TestServer; 2],
    stop: &std::sync::atomic::AtomicBool,
) -> (Vec<(String, String)>, Vec<String>) {
    let (mut acknowledged, mut refused) = (Vec::new(), Vec::new());
    let mut i = 0;
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        let s = &replicas[i % 2];
        i += 1;
        let (st, thread) = s.post("/threads", json!({})).await;
        if st != 200 {
            assert_eq!(st, 503, "{thread}");
            continue;
        }
        let thread = thread["thread_id"].as_str().unwrap().to_owned();
        let (st, run) = s
            .post(
                &format!("/threads/{thread}/runs"),
                json!({"assistant_id": "work", "input": {"done": 0}}),
            )
            .await;
        match st {
            200 => acknowledged.push((thread, run["run_id"].as_str().unwrap().to_owned())),
            503 => refused.push(thread),
            _ => panic!("creating a run answered {st}: {run}"),
        }
    }
    (acknowledged, refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_on_two_replicas_survive_their_connections_killed_mid_write() {
    let (url, _db) = test_database().await;
    let replicas = [replica(&url).await, replica(&url).await];
    let runs = start_runs(&replicas, 12).await;
    // Sweeps while the runs write their checkpoints, events and outcomes, and while more
    // runs are being created.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let sweeps = async {
        let mut killed = 0;
        for _ in 0..6 {
            tokio::time::sleep(Duration::from_millis(90)).await;
            killed += kill_sessions(&url).await;
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        killed
    };
    let (killed, (created, refused)) = tokio::join!(sweeps, create_during(&replicas, &stop));
    assert!(killed > 0, "the sweeps found sessions to kill");
    assert!(!created.is_empty(), "runs were created between the sweeps");
    check_all_succeed(&replicas, &runs).await;
    check_all_succeed(&replicas, &created).await;
    // A creation that was refused created nothing: no run its client does not know of.
    for thread in refused {
        let (st, listed) = replicas[0].get(&format!("/threads/{thread}/runs")).await;
        assert_eq!(st, 200, "{listed}");
        assert_eq!(
            listed,
            json!([]),
            "thread {thread}: a refused creation left a run"
        );
    }
    // Both replicas serve normally after.
    serve_normally(&replicas).await;
    for s in replicas {
        s.stop().await;
    }
}

/// A database on a server of the test's own, which it restarts.
async fn owned_database() -> (OwnedServer, String) {
    let server = tokio::task::spawn_blocking(|| OwnedServer::start().unwrap())
        .await
        .unwrap();
    let url = graphloom_postgres::testing::with_database(server.url(), "faults").unwrap();
    let mut conn = PgConnection::connect(server.url()).await.unwrap();
    sqlx::query("CREATE DATABASE faults")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    (server, url)
}

async fn blocking(f: impl FnOnce() + std::marker::Send + 'static) {
    tokio::task::spawn_blocking(f).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_on_two_replicas_survive_postgres_restarted_and_down_for_five_seconds() {
    let (server, url) = owned_database().await;
    let server = Arc::new(server);
    let replicas = [replica(&url).await, replica(&url).await];

    // A fast restart (sessions ended, the server back at once), then an immediate one (the
    // server killed; crash recovery at start), each with runs under way.
    for mode in ["fast", "immediate"] {
        let runs = start_runs(&replicas, 8).await;
        tokio::time::sleep(Duration::from_millis(150)).await;
        let s = Arc::clone(&server);
        blocking(move || s.restart(mode).unwrap()).await;
        check_all_succeed(&replicas, &runs).await;
    }

    // Down for five seconds.
    let runs = start_runs(&replicas, 8).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let s = Arc::clone(&server);
    blocking(move || s.stop("fast").unwrap()).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let s = Arc::clone(&server);
    blocking(move || s.start_again().unwrap()).await;
    let back = Instant::now();
    check_all_succeed(&replicas, &runs).await;
    // Normal again within seconds of the server's return: a new run on each replica.
    serve_normally(&replicas).await;
    assert!(
        back.elapsed() < Duration::from_secs(60),
        "the replicas took {:?} to finish after the server came back",
        back.elapsed()
    );
    for s in replicas {
        s.stop().await;
    }
}
