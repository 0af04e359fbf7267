//! SIGKILL the worker at random points, restart it, and check that nothing reported done is
//! lost, no finished task runs again, and the external ledger has each key exactly once.
//!
//! `GRAPHLOOM_CRASH_KILLS` sets the number of kills per backend (default 50).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::checkpoint::{CheckpointConfig, Checkpointer};
use graphloom_crashtest::ROUNDS;
use rand::Rng;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

#[derive(Default, Debug)]
struct Tally {
    kills: usize,
    resumes: usize,
    failures_resumed: usize,
    lost: usize,
    threads_done: usize,
}

/// One worker process: run it, kill it after `kill_after` if still running. Returns the
/// highest step it reported, whether it was killed mid-run, and whether it said DONE.
async fn run_worker(db: &str, dir: &Path, thread: &str, kill_after: Option<Duration>) -> (i64, bool, bool) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_crash-worker"))
        .args(["--db", db, "--dir"])
        .arg(dir)
        .args(["--thread", thread])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("worker starts");
    let stdout = child.stdout.take().expect("stdout");
    let reader = tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        let (mut max_step, mut done) = (i64::MIN, false);
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(n) = line.strip_prefix("STEP ").and_then(|n| n.parse::<i64>().ok()) {
                max_step = max_step.max(n);
            } else if line == "DONE" {
                done = true;
            }
        }
        (max_step, done)
    });
    let mut killed = false;
    if let Some(after) = kill_after {
        match tokio::time::timeout(after, child.wait()).await {
            Ok(_) => {}
            Err(_) => {
                child.start_kill().expect("kill");
                killed = true;
            }
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(120), child.wait())
        .await
        .expect("worker exits");
    let (max_step, done) = reader.await.expect("reader");
    (max_step, killed, done)
}

async fn latest_step(saver: &impl Checkpointer, thread: &str) -> i64 {
    saver
        .get_tuple(&CheckpointConfig::thread(thread))
        .await
        .expect("read after kill")
        .map_or(-2, |t| t.metadata.step)
}

async fn torture(db: &str, saver: &impl Checkpointer, dir: &Path, label: &str) {
    let kills: usize = std::env::var("GRAPHLOOM_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let mut t = Tally::default();
    let mut thread_no = 0usize;
    let mut threads = Vec::new();
    let mut rng = rand::rng();
    let mut attempts = 0usize;
    while t.kills < kills {
        attempts += 1;
        assert!(
            attempts < kills * 40,
            "{label}: too many attempts without reaching {kills} kills"
        );
        let thread = format!("{label}-{thread_no}");
        if threads.last() != Some(&thread) {
            threads.push(thread.clone());
        }
        let before = latest_step(saver, &thread).await;
        let delay = Duration::from_millis(rng.random_range(5..120));
        let (reported, killed, done) = run_worker(db, dir, &thread, Some(delay)).await;
        let after = latest_step(saver, &thread).await;
        if reported > after {
            t.lost += 1;
            eprintln!("{label}: step {reported} was reported done but the thread is at {after}");
        }
        if killed {
            t.kills += 1;
        } else if !done {
            t.failures_resumed += 1;
        }
        if before > -2 {
            t.resumes += 1;
        }
        if done {
            t.threads_done += 1;
            thread_no += 1;
        }
    }
    // Finish every thread without kills.
    for thread in &threads {
        let mut finished = false;
        for _ in 0..(ROUNDS as usize * 3 + 5) {
            let (_, _, done) = run_worker(db, dir, thread, None).await;
            if done {
                finished = true;
                break;
            }
            t.failures_resumed += 1;
        }
        assert!(finished, "{label}: thread {thread} never finished");
    }

    // Ledger: each key exactly once, one key per round per thread.
    let ledger = std::fs::read_to_string(dir.join("ledger.txt")).unwrap_or_default();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for line in ledger.lines() {
        *counts.entry(line).or_default() += 1;
    }
    let duplicates: usize = counts.values().map(|c| c - 1).sum();
    let rerun = std::fs::read_to_string(dir.join("violations.txt")).unwrap_or_default();
    let reruns = rerun.lines().count();
    println!(
        "{label}: kills={} resumes={} failed-runs-resumed={} threads={} duplicates={duplicates} reruns={reruns} lost={}",
        t.kills,
        t.resumes,
        t.failures_resumed,
        threads.len(),
        t.lost
    );
    assert_eq!(duplicates, 0, "{label}: ledger keys written twice");
    assert_eq!(
        counts.len(),
        threads.len() * ROUNDS as usize,
        "{label}: one ledger key per round"
    );
    assert_eq!(reruns, 0, "{label}: finished tasks ran again:\n{rerun}");
    assert_eq!(t.lost, 0, "{label}: steps reported done were lost");

    // Every round's three writes applied exactly once.
    let saver_state = |thread: &str| {
        let thread = thread.to_owned();
        async move {
            saver
                .get_tuple(&CheckpointConfig::thread(thread))
                .await
                .unwrap()
                .unwrap()
        }
    };
    for thread in &threads {
        let tuple = saver_state(thread).await;
        let done = tuple.checkpoint.channel_values.get("done").cloned();
        let Some(graphloom_core::checkpoint::ChannelValue::Full(serde_json::Value::Array(entries))) = done
        else {
            panic!("{label}: no done list for {thread}");
        };
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for e in &entries {
            *seen.entry(e.as_str().unwrap_or_default().to_owned()).or_default() += 1;
        }
        assert_eq!(
            entries.len(),
            ROUNDS as usize * 3,
            "{label}: {thread} applied {} writes",
            entries.len()
        );
        assert!(
            seen.values().all(|&c| c == 1),
            "{label}: a write was applied twice in {thread}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_survives_random_sigkills() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.db");
    let db = format!("sqlite:{}", path.display());
    // Create the schema once so the first kill cannot land in the middle of it.
    let saver = graphloom_sqlite::SqliteSaver::open(&path).await.unwrap();
    torture(&db, &saver, dir.path(), "sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_survives_random_sigkills() {
    let dir = tempfile::tempdir().unwrap();
    let (url, _guard) = graphloom_postgres::testing::test_database().await;
    let saver = graphloom_postgres::PostgresSaver::connect(&url).await.unwrap();
    torture(&url, &saver, dir.path(), "postgres").await;
}
