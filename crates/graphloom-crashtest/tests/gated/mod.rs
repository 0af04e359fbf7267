//! The harness of the crash tests of a gated tool call (`approval_crash.rs`,
//! `hitl_crash.rs`): a worker process (`--phase start` pauses the thread at the gate,
//! `--phase approve` answers it), killed at a scheduled point of the approved `transfer`'s
//! work and run again until it prints `DONE`, and what every round must show: the
//! transfer's effect exactly once under one idempotency key, the ungated `lookup` never
//! before the verdict and once per execution of the tool node.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use graphloom_core::{Message, MessageKind};
use rand::Rng;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// `transfer` works 150 ms, writes its effect, works 150 ms more, then returns.
const EFFECT_AT_MS: u64 = 150;
const RETURNS_AT_MS: u64 = 300;

/// `path` with `suffix` added to its file name.
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// The lines of a ledger file (none when it is missing).
pub fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The rounds to run: the environment variable `var`, or 5.
pub fn rounds(var: &str) -> usize {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(5)
}

/// What one worker process did.
#[derive(Debug, Default)]
pub struct Run {
    pub stdout: Vec<String>,
    pub killed: bool,
    /// At the kill: `transfer` executions started and whether its effect was in the ledger.
    pub at_kill: Option<(usize, bool)>,
}

impl Run {
    pub fn said(&self, word: &str) -> bool {
        self.stdout.iter().any(|l| l == word)
    }
}

/// Run the worker `bin`; with `kill_after`, wait until a new `transfer` execution has
/// started (a new `.calls` line), then kill it that long after.
async fn run_worker(
    bin: &str,
    db: &Path,
    ledger: &Path,
    thread: &str,
    phase: &str,
    kill_after: Option<Duration>,
) -> Run {
    let calls = with_suffix(ledger, ".calls");
    let calls_before = lines(&calls).len();
    let mut child = Command::new(bin)
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

/// What the rounds did.
#[derive(Debug, Default)]
pub struct Tally {
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

impl Tally {
    /// Print the tally (`what` says of which test) and check that the kills landed where
    /// they test something: at least one while the approved tool executed, and (with two
    /// rounds or more) one between its effect and its saved result.
    pub fn conclude(&self, what: &str, rounds: usize) {
        println!("{what} under SIGKILL: {self:?}");
        assert!(
            self.mid_tool >= 1,
            "no kill landed while the approved tool executed: the test is void ({self:?})"
        );
        if rounds >= 2 {
            assert!(
                self.after_effect >= 1,
                "no kill landed between the effect and the saved result: dedup was not exercised ({self:?})"
            );
        }
    }
}

/// How the ungated sibling `lookup` runs beside the reviewed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sibling {
    /// In the same task as the reviewed call (one tool node task per message): once per
    /// execution of the tool node.
    SharesTask,
    /// In a task of its own (a `Send` per call): a finished lookup keeps its writes and
    /// is not run again when the reviewed call's task is.
    OwnTask,
}

/// One round of the crash test on thread `thread` with worker `bin` (see the module docs),
/// checked up to the thread's final state; its ledger, for the caller's own checks.
pub async fn round(
    bin: &str,
    db: &Path,
    dir: &Path,
    thread: &str,
    n: usize,
    sibling: Sibling,
    t: &mut Tally,
) -> PathBuf {
    let ledger = dir.join(format!("{thread}.ledger"));
    let calls = with_suffix(&ledger, ".calls");
    let lookups = with_suffix(&ledger, ".lookups");

    let start = run_worker(bin, db, &ledger, thread, "start", None).await;
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
    let mut rng = rand::rng();
    let delay_ms = match n % 3 {
        0 => rng.random_range(20..EFFECT_AT_MS - 30),
        1 => rng.random_range(EFFECT_AT_MS + 40..RETURNS_AT_MS - 30),
        _ => rng.random_range(20..RETURNS_AT_MS + 100),
    };
    let first = run_worker(
        bin,
        db,
        &ledger,
        thread,
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
        done = run_worker(bin, db, &ledger, thread, "approve", None)
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
    // The sibling runs with the approved call, with its own stable key; never before the
    // verdict (checked above). Sharing the task, once per execution of the tool node; in
    // a task of its own, at most that (a kill before its writes were saved re-runs it).
    let looked = lines(&lookups);
    match sibling {
        Sibling::SharesTask => assert_eq!(
            looked.len(),
            runs.len(),
            "{thread}: lookup ran {} times for {} executions of the tool node",
            looked.len(),
            runs.len()
        ),
        Sibling::OwnTask => assert!(
            !looked.is_empty() && looked.len() <= runs.len(),
            "{thread}: lookup ran {} times for {} executions of the transfer",
            looked.len(),
            runs.len()
        ),
    }
    assert!(
        looked.iter().all(|l| l == &looked[0]),
        "{thread}: lookup keys differ: {looked:?}"
    );
    assert_ne!(&looked[0], key, "{thread}: sibling shares the transfer's key");
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
    eprintln!(
        "{thread}: kill at +{delay_ms} ms (killed={}, at_kill={:?}), transfer runs={}, lookup runs={}, restarts={restarts}",
        first.killed,
        first.at_kill,
        runs.len(),
        looked.len()
    );
    ledger
}

/// Check a finished thread's messages: each tool call answered once, with the status
/// `answers` gives it (call id -> `success` or `error`), and the messages of these kinds.
pub fn check_final(thread: &str, msgs: &[Message], answers: &[(&str, &str)], kinds: &[MessageKind]) {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for m in msgs.iter().filter(|m| m.kind == MessageKind::Tool) {
        let id = m.tool_call_id.clone().unwrap_or_default();
        let want = answers.iter().find(|(c, _)| *c == id).map(|(_, s)| *s);
        assert_eq!(
            m.extra.get("status").and_then(|s| s.as_str()),
            Some(want.unwrap_or("success")),
            "{thread}: tool message {m:?}"
        );
        *seen.entry(id).or_default() += 1;
    }
    let want: BTreeMap<String, usize> = answers.iter().map(|(c, _)| ((*c).to_owned(), 1)).collect();
    assert_eq!(seen, want, "{thread}: tool messages per call");
    let got: Vec<MessageKind> = msgs.iter().map(|m| m.kind).collect();
    assert_eq!(got, kinds, "{thread}: messages");
}
