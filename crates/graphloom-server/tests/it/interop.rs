//! The official MCP and A2A Python clients, pinned, in a venv under
//! `$HOME/.cache/graphloom/interop-venv`, and a runner for the scripts that drive them.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The MCP client.
pub const MCP: &str = "mcp==2.3.0";
/// The A2A client (with what its HTTP client needs).
pub const A2A: &str = "a2a-sdk[http-server]==1.3.0";

/// The venv's python, with both clients installed.
pub async fn python() -> PathBuf {
    tokio::task::spawn_blocking(|| graphloom_test_kit::python::venv("interop-venv", &[MCP, A2A]))
        .await
        .unwrap()
}

/// Run `tests/interop/<script>` with `args`; its last stdout line, a JSON summary whose
/// `ok` is true (else the test fails with the script's output).
pub async fn drive(python: &Path, script: &str, args: &[&str]) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/interop")
        .join(script);
    let child = tokio::process::Command::new(python)
        .arg(&path)
        .args(args)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{script} did not finish within 120 s"))
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{script} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    let last = stdout.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    let summary: Value = serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("last stdout line of {script} is not JSON ({e}): {last:?}\n{stderr}"));
    assert_eq!(summary["ok"], true, "{summary}");
    summary
}
