//! The official Python client's `crons` methods against the server, on SQLite and on
//! PostgreSQL: `tests/sdk/crons.py` creates, searches, counts, updates and deletes crons
//! through the SDK, checks the errors of bad input, and sees a tick's run. The script asks
//! this test to make a tick due (`DUE <cron id>` on its stdout); the test moves the cron's
//! `next_run_date` into the past through the server's own database and answers `ok`. The SDK
//! lives in the venv the SDK test uses.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::TestServer;
use graphloom_server::db::{CronDb, CronPatch, PgDb, SqliteDb};
use graphloom_server::ServerConfig;
use graphloom_server_db::kit::now_micros;
use serde_json::Value;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const SDK: &str = "langgraph-sdk==0.4.14";
const VALIDATOR: &str = "openapi-spec-validator==0.9.0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_drives_the_crons_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("graphloom.db");
    let mut cfg = ServerConfig::sqlite(&db);
    cfg.crons.poll = Duration::from_millis(50);
    let s = TestServer::start(cfg).await;
    let handle = SqliteDb::open(&db).await.unwrap();
    drive(&s.url, &handle).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_drives_the_crons_on_postgres() {
    let (url, _guard) = graphloom_postgres::testing::test_database().await;
    let mut cfg = ServerConfig::postgres(url.clone());
    cfg.crons.poll = Duration::from_millis(50);
    let s = TestServer::start(cfg).await;
    let handle = PgDb::connect(&url).await.unwrap();
    drive(&s.url, &handle).await;
    s.stop().await;
}

/// Run `crons.py` against the server at `url`, making ticks due through `db`, and check its
/// summary names every check.
async fn drive(url: &str, db: &dyn CronDb) {
    let python =
        tokio::task::spawn_blocking(|| graphloom_test_kit::python::venv("sdk-venv", &[SDK, VALIDATOR]))
            .await
            .unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/crons.py");
    let mut child = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(url)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr_pipe = child.stderr.take().unwrap();
    let stderr_task = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr_pipe.read_to_string(&mut text).await;
        text
    });
    let talk = async {
        let mut out = Vec::new();
        while let Some(line) = stdout.next_line().await.unwrap() {
            if let Some(cron_id) = line.strip_prefix("DUE ") {
                let patch = CronPatch {
                    next_run_us: Some(Some(now_micros() - 5_000_000)),
                    ..CronPatch::default()
                };
                let found = db.patch_cron("", cron_id.trim(), &patch).await.unwrap();
                stdin
                    .write_all(if found.is_some() {
                        b"ok\n"
                    } else {
                        b"no such cron\n"
                    })
                    .await
                    .unwrap();
                stdin.flush().await.unwrap();
            }
            out.push(line);
        }
        (out, child.wait().await.unwrap())
    };
    let Ok((stdout, status)) = tokio::time::timeout(Duration::from_secs(90), talk).await else {
        panic!("crons.py did not finish within 90 s");
    };
    let stderr = stderr_task.await.unwrap();
    let stdout = stdout.join("\n");
    assert!(
        status.success(),
        "crons.py failed ({status}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    let last = stdout.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    let summary: Value = serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("last stdout line is not JSON ({e}): {last:?}\n{stderr}"));
    assert_eq!(summary["ok"], true, "{summary}");
    for want in [
        "crons_create",
        "crons_search",
        "crons_update",
        "crons_bad_input",
        "crons_fire",
        "crons_delete",
        "crons_sync_client",
    ] {
        assert!(
            summary["checks"].as_array().unwrap().iter().any(|c| c == want),
            "crons.py did not report check {want:?}: {summary}"
        );
    }
}
