//! The functional API under SIGKILL: kill the worker at random points (mid-entrypoint,
//! mid-task, mid-save), run it again, and check that every finished task call's side
//! effect happened exactly once, no finished call ran again, and every round completed.
//!
//! `GRAPHLOOM_CRASH_KILLS` sets the number of kills (default 50).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::checkpoint::{CheckpointConfig, Checkpointer};
use graphloom_crashtest::func::{FUNC_ROUNDS, WAVES, WIDTH};
use rand::Rng;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// One worker process, killed after `kill_after` if still running. Returns the highest
/// step it reported, whether it was killed, and whether it said DONE.
async fn run_worker(db: &Path, dir: &Path, thread: &str, kill_after: Option<Duration>) -> (i64, bool, bool) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_func-worker"))
        .arg("--db")
        .arg(db)
        .arg("--dir")
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
        if tokio::time::timeout(after, child.wait()).await.is_err() {
            child.start_kill().expect("kill");
            killed = true;
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(120), child.wait())
        .await
        .expect("worker exits");
    let (max_step, done) = reader.await.expect("reader");
    (max_step, killed, done)
}

/// The thread's latest step, and how many task calls have a saved result there (calls
/// that finished in an entrypoint run that has not).
async fn latest(saver: &impl Checkpointer, thread: &str) -> (i64, usize) {
    saver
        .get_tuple(&CheckpointConfig::thread(thread))
        .await
        .expect("read after kill")
        .map_or((-2, 0), |t| {
            let saved = t
                .pending_writes
                .iter()
                .filter(|w| w.channel == graphloom_core::func::RETURN)
                .count();
            (t.metadata.step, saved)
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_task_calls_survive_random_sigkills_exactly_once() {
    let kills: usize = std::env::var("GRAPHLOOM_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let db = dir.join("func.db");
    // Create the schema once so the first kill cannot land in the middle of it.
    let saver = graphloom_sqlite::SqliteSaver::open(&db).await.unwrap();
    let (mut killed_count, mut lost, mut thread_no, mut attempts) = (0usize, 0usize, 0usize, 0usize);
    // Kills that left an entrypoint run with some (not all) of its calls finished.
    let mut mid_entrypoint = 0usize;
    let mut threads: Vec<String> = Vec::new();
    let mut rng = rand::rng();
    while killed_count < kills {
        attempts += 1;
        assert!(
            attempts < kills * 40,
            "too many attempts without reaching {kills} kills"
        );
        let thread = format!("func-{thread_no}");
        if threads.last() != Some(&thread) {
            threads.push(thread.clone());
        }
        let delay = Duration::from_millis(rng.random_range(5..150));
        let (reported, killed, done) = run_worker(&db, dir, &thread, Some(delay)).await;
        let (after, saved) = latest(&saver, &thread).await;
        if reported > after {
            lost += 1;
            eprintln!("step {reported} was reported done but {thread} is at {after}");
        }
        if killed {
            killed_count += 1;
            if saved > 0 && saved < WAVES * WIDTH {
                mid_entrypoint += 1;
            }
        }
        if done {
            thread_no += 1;
        }
    }
    // Finish every thread without kills (a failed round is continued by the next worker).
    for thread in &threads {
        let mut finished = false;
        for _ in 0..(FUNC_ROUNDS as usize * 2 + 5) {
            if run_worker(&db, dir, thread, None).await.2 {
                finished = true;
                break;
            }
        }
        assert!(finished, "thread {thread} never finished");
    }

    let ledger = std::fs::read_to_string(dir.join("ledger.txt")).unwrap_or_default();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for line in ledger.lines() {
        *counts.entry(line).or_default() += 1;
    }
    let duplicates: usize = counts.values().map(|c| c - 1).sum();
    let reruns = std::fs::read_to_string(dir.join("violations.txt")).unwrap_or_default();
    println!(
        "func: kills={killed_count} mid-entrypoint={mid_entrypoint} threads={} keys={} duplicates={duplicates} reruns={} lost={lost}",
        threads.len(),
        counts.len(),
        reruns.lines().count()
    );
    assert_eq!(duplicates, 0, "ledger keys written twice");
    assert_eq!(
        counts.len(),
        threads.len() * FUNC_ROUNDS as usize * WAVES * WIDTH,
        "one ledger key per task call per round"
    );
    assert_eq!(
        reruns.lines().count(),
        0,
        "finished task calls ran again:\n{reruns}"
    );
    assert_eq!(lost, 0, "steps reported done were lost");
    for thread in &threads {
        let tuple = saver
            .get_tuple(&CheckpointConfig::thread(thread.clone()))
            .await
            .unwrap()
            .unwrap();
        let output = tuple.checkpoint.channel_values.get("output").cloned();
        assert!(
            matches!(
                output,
                Some(graphloom_core::checkpoint::ChannelValue::Full(serde_json::Value::Number(ref n)))
                    if n.as_i64() == Some(FUNC_ROUNDS)
            ),
            "{thread} ended with {output:?}"
        );
    }
}
