//! SIGTERM a graphloom server while its runs are mid-step: it drains. The step in flight
//! finishes on it, the runs stop at that step boundary and go back to the queue, the
//! server exits well within its grace period, and another replica on the same database
//! (PostgreSQL), or the same server restarted (SQLite), continues them. Every run ends
//! `success`, and the execution log (written by every node before and after its work,
//! with no idempotency key) shows each node of each run started and ended exactly once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const THREADS: usize = 4;
const NODES: [&str; 4] = ["one", "two", "three", "four"];
/// How long each node works.
const SLEEP_MS: u64 = 400;
/// The servers' shutdown grace: a drained server exits long before it.
const GRACE: Duration = Duration::from_secs(20);

struct Replica {
    child: Child,
    url: String,
    pid: u32,
}

/// A server on `db` logging node executions to `log`.
async fn start(db: &str, log: &Path) -> Replica {
    let mut child = Command::new(env!("CARGO_BIN_EXE_drain-server"))
        .args(["--db", db, "--grace-ms", &GRACE.as_millis().to_string(), "--log"])
        .arg(log)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("server starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("server listens in time")
        .unwrap()
        .expect("a LISTENING line");
    let addr = line.strip_prefix("LISTENING ").expect("LISTENING <addr>");
    let pid = child.id().unwrap();
    Replica {
        child,
        url: format!("http://{addr}"),
        pid,
    }
}

/// One line of the execution log.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    what: String,
    run: String,
    node: String,
    pid: u32,
}

fn read_log(log: &Path) -> Vec<Entry> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 4, "log line {l:?}");
            Entry {
                what: f[0].to_owned(),
                run: f[1].to_owned(),
                node: f[2].to_owned(),
                pid: f[3].parse().unwrap(),
            }
        })
        .collect()
}

/// A (run, node) that `pid` started and has not ended, past the first node (so its run has
/// a checkpoint behind it) and before the last (so the run has work left after it).
fn in_flight(entries: &[Entry], pid: u32) -> Option<(String, String)> {
    entries
        .iter()
        .filter(|e| e.what == "start" && e.pid == pid && e.node != NODES[0] && e.node != NODES[3])
        .find(|s| {
            !entries
                .iter()
                .any(|e| e.what == "end" && e.run == s.run && e.node == s.node)
        })
        .map(|s| (s.run.clone(), s.node.clone()))
}

async fn get(http: &reqwest::Client, url: String) -> Value {
    http.get(url).send().await.unwrap().json().await.unwrap()
}

/// Create one slow run on each of [`THREADS`] threads; their ids.
async fn create_runs(http: &reqwest::Client, url: &str) -> Vec<String> {
    let mut threads = Vec::new();
    for _ in 0..THREADS {
        let t: Value = http
            .post(format!("{url}/threads"))
            .json(&json!({}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let tid = t["thread_id"].as_str().unwrap().to_owned();
        let r = http
            .post(format!("{url}/threads/{tid}/runs"))
            .json(&json!({"assistant_id": "slow", "input": {"sleep_ms": SLEEP_MS}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        threads.push(tid);
    }
    threads
}

/// Wait until every run of `threads` has ended (served at `url`); each one's status.
async fn wait_ended(http: &reqwest::Client, url: &str, threads: &[String]) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut statuses = Vec::new();
        for t in threads {
            let runs = get(http, format!("{url}/threads/{t}/runs?limit=100")).await;
            for r in runs.as_array().unwrap() {
                statuses.push(r["status"].as_str().unwrap().to_owned());
            }
        }
        if statuses.iter().all(|s| s != "pending" && s != "running") {
            return statuses;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "runs never finished: {statuses:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// SIGTERM the replica running the runs mid-step, then check that the other one (started
/// beside it when `side_by_side`, else after it exits) finishes them, each node once.
async fn drain_and_continue(db: &str, side_by_side: bool) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("executions.log");
    let http = reqwest::Client::new();
    let mut a = start(db, &log).await;
    let mut b = if side_by_side {
        Some(start(db, &log).await)
    } else {
        None
    };
    let threads = create_runs(&http, &a.url).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let (run, node) = loop {
        if let Some(found) = in_flight(&read_log(&log), a.pid) {
            break found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no run of the first replica went mid-step"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &a.pid.to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let signalled = tokio::time::Instant::now();
    let exit = tokio::time::timeout(GRACE + Duration::from_secs(10), a.child.wait())
        .await
        .expect("the drained server exits")
        .unwrap();
    let took = signalled.elapsed();
    assert!(exit.success(), "{exit:?}");
    assert!(
        took < GRACE,
        "the server took {took:?} to exit: its runs were not drained"
    );
    println!("drained and exited {took:?} after SIGTERM");
    let b = match b.take() {
        Some(b) => b,
        None => start(db, &log).await,
    };
    let statuses = wait_ended(&http, &b.url, &threads).await;
    assert_eq!(statuses.len(), THREADS);
    assert!(statuses.iter().all(|s| s == "success"), "{statuses:?}");
    for t in &threads {
        let state = get(&http, format!("{}/threads/{t}/state", b.url)).await;
        assert_eq!(state["values"]["steps"], json!(NODES.len()), "{state}");
    }
    check_log(&read_log(&log), (a.pid, b.pid), (&run, &node));
}

/// Each node of each run started and ended once, on one process; the node in flight at
/// SIGTERM ended on the drained replica, and its run went on on the other.
fn check_log(entries: &[Entry], (a, b): (u32, u32), (run, node): (&str, &str)) {
    let mut seen: BTreeMap<(&str, &str, &str), Vec<u32>> = BTreeMap::new();
    for e in entries {
        seen.entry((&e.run, &e.node, &e.what)).or_default().push(e.pid);
    }
    let runs: std::collections::BTreeSet<&str> = entries.iter().map(|e| e.run.as_str()).collect();
    assert_eq!(runs.len(), THREADS, "{entries:?}");
    for r in &runs {
        for n in NODES {
            let starts = seen.get(&(r, n, "start")).cloned().unwrap_or_default();
            let ends = seen.get(&(r, n, "end")).cloned().unwrap_or_default();
            assert!(
                starts.len() == 1 && starts == ends,
                "run {r} node {n}: started on {starts:?}, ended on {ends:?}"
            );
        }
    }
    assert_eq!(
        seen[&(run, node, "end")],
        [a],
        "the step in flight finished where it began"
    );
    assert_eq!(
        seen[&(run, NODES[3], "end")],
        [b],
        "the run went on on the other replica"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_replica_drained_by_sigterm_hands_its_runs_to_the_other() {
    let (url, _guard) = graphloom_postgres::testing::test_database().await;
    drain_and_continue(&url, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_server_drained_by_sigterm_continues_its_runs_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("server.db").display());
    drain_and_continue(&db, false).await;
}
