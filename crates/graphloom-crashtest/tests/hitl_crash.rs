//! The human-in-the-loop middleware's promise under SIGKILL: after the review, the
//! approved `transfer` takes effect exactly once, even when the worker is killed while it
//! executes and the run is resumed; it gets the same idempotency key every time it runs;
//! the rejected `purge` never runs; the unreviewed sibling `lookup` never runs before the
//! review; and the final state answers each tool call exactly once (the rejection with
//! an error tool message).
//!
//! Each round is a fresh thread: `hitl-worker --phase start` (pauses at the review), then
//! `--phase approve`, killed at a scheduled point of `transfer`'s work (before its effect,
//! after its effect but before it returns, or anywhere), then `--phase approve` again until
//! it prints `DONE`.
//!
//! `GRAPHLOOM_HITL_KILLS` sets the number of rounds, each with one kill (default 5).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::{MessageKind, RunConfig};
use graphloom_llm::{Reply, ScriptedModel};
use graphloom_prebuilt::{create_agent, Tool};
use rand::Rng;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// `transfer` works 150 ms, writes its effect, works 150 ms more, then returns.
const EFFECT_AT_MS: u64 = 150;
const RETURNS_AT_MS: u64 = 300;

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// What one worker process did.
#[derive(Debug, Default)]
struct Run {
    stdout: Vec<String>,
    killed: bool,
    /// At the kill: `transfer` executions started and whether its effect was in the ledger.
    at_kill: Option<(usize, bool)>,
}

impl Run {
    fn said(&self, word: &str) -> bool {
        self.stdout.iter().any(|l| l == word)
    }
}

/// Run the worker; with `kill_after`, wait until a new `transfer` execution has started
/// (a new `.calls` line), then kill it that long after.
async fn run_worker(
    db: &Path,
    ledger: &Path,
    thread: &str,
    phase: &str,
    kill_after: Option<Duration>,
) -> Run {
    let calls = with_suffix(ledger, ".calls");
    let calls_before = lines(&calls).len();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hitl-worker"))
        .arg("--db")
        .arg(db)
        .arg("--ledger")
        .arg(ledger)
        .args(["--thread", thread, "--phase", phase])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("worker starts");
    let stdout = child.stdout.take().expect("stdout");
    let reader = tokio::spawn(async move {
        let mut out = Vec::new();
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            out.push(line);
        }
        out
    });
    let mut run = Run::default();
    if let Some(after) = kill_after {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut started = false;
        while Instant::now() < deadline {
            if lines(&calls).len() > calls_before {
                started = true;
                break;
            }
            if child.try_wait().expect("try_wait").is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        if started {
            tokio::time::sleep(after).await;
            if child.try_wait().expect("try_wait").is_none() {
                let runs = lines(&calls).len();
                let effect = !lines(ledger).is_empty();
                child.start_kill().expect("kill");
                run.killed = true;
                run.at_kill = Some((runs, effect));
            }
        }
    }
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("worker exits")
        .expect("wait");
    run.stdout = reader.await.expect("reader");
    if !run.killed {
        assert!(
            status.success(),
            "{phase} worker for {thread} failed: {status} {:?}",
            run.stdout
        );
    }
    run
}

#[derive(Debug, Default)]
struct Tally {
    rounds: usize,
    kills: usize,
    /// Kills that landed while `transfer` executed (it ran again on resume).
    mid_tool: usize,
    /// Of those, kills after the effect was written: only the key kept it single.
    after_effect: usize,
    restarts: usize,
    transfer_runs: usize,
    lookup_runs: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviewed_tool_takes_effect_once_and_rejected_never_across_sigkills() {
    let rounds: usize = std::env::var("GRAPHLOOM_HITL_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hitl.db");
    // Create the schema once so no kill lands in the middle of it.
    let saver = graphloom_sqlite::SqliteSaver::open(&db).await.unwrap();
    // A reader of the threads' final state (same graph shape, no tools needed).
    let reader = create_agent(
        Arc::new(ScriptedModel::new(Vec::<Reply>::new())),
        Vec::<Arc<dyn Tool>>::new(),
    )
    .state_field(graphloom_prebuilt::StateField::new::<serde_json::Value>(
        "hitl_edited_tool_calls",
        graphloom_core::JsonReducer::LastValue,
    ))
    .checkpointer(saver)
    .build()
    .unwrap();

    let mut t = Tally::default();
    let mut rng = rand::rng();
    for round in 0..rounds {
        let thread = format!("hitl-{round}");
        let ledger = dir.path().join(format!("{thread}.ledger"));
        let calls = with_suffix(&ledger, ".calls");
        let lookups = with_suffix(&ledger, ".lookups");
        let purges = with_suffix(&ledger, ".purges");

        let start = run_worker(&db, &ledger, &thread, "start", None).await;
        assert!(
            start.said("PAUSED"),
            "{thread}: start did not pause: {:?}",
            start.stdout
        );
        assert!(lines(&calls).is_empty(), "{thread}: transfer ran before approval");
        assert!(
            lines(&lookups).is_empty(),
            "{thread}: a sibling ran before the verdict"
        );

        // Kill points, measured from the start of `transfer`: before its effect, after its
        // effect (before it returns and the tool node's writes are saved), or anywhere.
        let delay_ms = match round % 3 {
            0 => rng.random_range(20..EFFECT_AT_MS - 30),
            1 => rng.random_range(EFFECT_AT_MS + 40..RETURNS_AT_MS - 30),
            _ => rng.random_range(20..RETURNS_AT_MS + 100),
        };
        let first = run_worker(
            &db,
            &ledger,
            &thread,
            "approve",
            Some(Duration::from_millis(delay_ms)),
        )
        .await;
        let mut done = first.said("DONE");
        if first.killed {
            t.kills += 1;
        }
        let mut restarts = 0;
        while !done {
            restarts += 1;
            assert!(restarts <= 5, "{thread}: approve never finished");
            done = run_worker(&db, &ledger, &thread, "approve", None)
                .await
                .said("DONE");
        }
        t.restarts += restarts;
        t.rounds += 1;

        // The effect: exactly once, under the transfer's idempotency key.
        let effect = lines(&ledger);
        assert_eq!(
            effect.len(),
            1,
            "{thread}: transfer took effect {} times: {effect:?}",
            effect.len()
        );
        let key = &effect[0];
        assert_eq!(key.len(), 32, "{thread}: odd idempotency key {key}");
        let runs = lines(&calls);
        assert!(!runs.is_empty(), "{thread}: transfer never ran");
        assert!(
            runs.iter().all(|l| *l == format!("run {key}")),
            "{thread}: the key changed between executions: {runs:?} vs {key}"
        );
        // The sibling runs with the approved call, once per execution of the tool node, with
        // its own stable key; never before the verdict (checked above).
        let looked = lines(&lookups);
        assert_eq!(
            looked.len(),
            runs.len(),
            "{thread}: lookup ran {} times for {} executions of the tool node",
            looked.len(),
            runs.len()
        );
        assert!(
            looked.iter().all(|l| l == &looked[0]),
            "{thread}: lookup keys differ: {looked:?}"
        );
        assert_ne!(&looked[0], key, "{thread}: sibling shares the transfer's key");
        assert!(lines(&purges).is_empty(), "{thread}: the rejected purge ran");
        t.transfer_runs += runs.len();
        t.lookup_runs += looked.len();

        if let Some((_, effect_at_kill)) = first.at_kill {
            if runs.len() > 1 {
                t.mid_tool += 1;
                if effect_at_kill {
                    t.after_effect += 1;
                }
            }
        }
        // Without a kill, nothing ran twice; one kill re-runs the tool node at most once.
        let most = if first.killed { 2 } else { 1 };
        assert!(
            runs.len() <= most,
            "{thread}: transfer ran {} times after {} kill(s)",
            runs.len(),
            usize::from(first.killed)
        );

        // The final state answers each call once, and ends with the model's answer.
        let st = reader.get_state(&RunConfig::thread(&thread)).await.unwrap();
        assert!(
            st.next.is_empty() && st.interrupts.is_empty(),
            "{thread}: not finished"
        );
        let msgs = st.values.messages.to_vec();
        let mut answers: BTreeMap<String, usize> = BTreeMap::new();
        for m in msgs.iter().filter(|m| m.kind == MessageKind::Tool) {
            let id = m.tool_call_id.clone().unwrap_or_default();
            let want = if id == "call_purge" { "error" } else { "success" };
            assert_eq!(
                m.extra.get("status").and_then(|s| s.as_str()),
                Some(want),
                "{thread}: tool message {m:?}"
            );
            *answers.entry(id).or_default() += 1;
        }
        assert_eq!(
            answers,
            BTreeMap::from([
                ("call_lookup".to_owned(), 1),
                ("call_purge".to_owned(), 1),
                ("call_transfer".to_owned(), 1)
            ]),
            "{thread}: tool messages per call"
        );
        let kinds: Vec<MessageKind> = msgs.iter().map(|m| m.kind).collect();
        assert_eq!(
            kinds,
            vec![
                MessageKind::Human,
                MessageKind::Ai,
                MessageKind::Tool,
                MessageKind::Tool,
                MessageKind::Tool,
                MessageKind::Ai
            ],
            "{thread}: messages"
        );
        eprintln!(
            "{thread}: kill at +{delay_ms} ms (killed={}, at_kill={:?}), transfer runs={}, lookup runs={}, restarts={restarts}",
            first.killed,
            first.at_kill,
            runs.len(),
            looked.len()
        );
    }
    println!("human in the loop under SIGKILL: {t:?}");
    assert!(
        t.mid_tool >= 1,
        "no kill landed while the approved tool executed: the test is void ({t:?})"
    );
    if rounds >= 2 {
        assert!(
            t.after_effect >= 1,
            "no kill landed between the effect and the saved result: dedup was not exercised ({t:?})"
        );
    }
}
