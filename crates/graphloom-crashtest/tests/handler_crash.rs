//! An error handler's promise under SIGKILL: once a node's failure is saved and its
//! handler started, a process killed while the handler runs resumes into the handler, not
//! into the node. Each round is a fresh thread: `handler-worker --phase first` (killed as
//! soon as the handler says it runs), then `--phase resume`; the node ran once, the handler
//! twice, and the thread ends with the handler's update.
//!
//! `GRAPHLOOM_HANDLER_KILLS` sets the number of rounds (default 5).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// Bound on anything the test awaits.
const WAIT: Duration = Duration::from_secs(30);

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn worker(db: &Path, ledger: &Path, thread: &str, phase: &str) -> tokio::process::Child {
    Command::new(env!("CARGO_BIN_EXE_handler-worker"))
        .arg("--db")
        .arg(db)
        .arg("--ledger")
        .arg(ledger)
        .args(["--thread", thread, "--phase", phase])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("the worker starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_in_the_handler_resumes_into_the_handler_not_the_node() {
    let rounds: usize = std::env::var("GRAPHLOOM_HANDLER_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("handler.db");
    // Create the schema once so no kill lands in the middle of it.
    graphloom_sqlite::SqliteSaver::open(&db).await.unwrap();
    for n in 0..rounds {
        let thread = format!("handler-{n}");
        let ledger = dir.path().join(&thread);

        let mut first = worker(&db, &ledger, &thread, "first");
        let mut out = BufReader::new(first.stdout.take().unwrap()).lines();
        let said = tokio::time::timeout(WAIT, async {
            while let Some(line) = out.next_line().await.unwrap() {
                if line == "HANDLING" {
                    return true;
                }
            }
            false
        })
        .await
        .expect("the handler starts in time");
        assert!(said, "{thread}: the first worker ended before its handler ran");
        first.kill().await.unwrap();

        let resume = worker(&db, &ledger, &thread, "resume");
        let done = tokio::time::timeout(WAIT, resume.wait_with_output())
            .await
            .expect("the resume ends in time")
            .unwrap();
        let stdout = String::from_utf8_lossy(&done.stdout);
        assert!(done.status.success(), "{thread}: resume failed: {stdout}");
        assert!(
            stdout.lines().any(|l| l == "LOG refunded: card declined"),
            "{thread}: {stdout}"
        );
        let pay = ledger.with_extension("pay");
        let handler = ledger.with_extension("handler");
        assert_eq!(
            lines(&pay).len(),
            1,
            "{thread}: the node ran again after its failure was saved"
        );
        assert_eq!(
            lines(&handler).len(),
            2,
            "{thread}: the handler runs once per process"
        );
    }
}
