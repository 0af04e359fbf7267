//! The official Python client's `crons` methods against the server: `tests/sdk/crons.py`
//! creates, searches, counts, updates and deletes crons through the SDK, checks the errors
//! of bad input, and sees a tick's run. The SDK lives in the venv the SDK test uses.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::TestServer;
use graphloom_server::ServerConfig;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

const SDK: &str = "langgraph-sdk==0.4.14";
const VALIDATOR: &str = "openapi-spec-validator==0.9.0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_drives_the_crons() {
    let python =
        tokio::task::spawn_blocking(|| graphloom_test_kit::python::venv("sdk-venv", &[SDK, VALIDATOR]))
            .await
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("graphloom.db");
    let mut cfg = ServerConfig::sqlite(&db);
    cfg.crons.poll = Duration::from_millis(50);
    let s = TestServer::start(cfg).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/crons.py");
    let child = std::process::Command::new(&python)
        .arg(&script)
        .arg(&s.url)
        .arg(&db)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let waited = tokio::time::timeout(
        Duration::from_secs(90),
        tokio::task::spawn_blocking(move || child.wait_with_output()),
    )
    .await;
    let Ok(out) = waited else {
        let _ = std::process::Command::new("kill").arg(pid.to_string()).status();
        panic!("crons.py did not finish within 90 s");
    };
    let out = out.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "crons.py failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
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
    s.stop().await;
}
