//! Running the Node scripts of `tests/js/` against a test server: `npm ci` from the
//! committed lock file (once, under a lock shared by the test processes; npm's cache
//! outside the clone), then `node <script> <url>`, whose last stdout line is
//! `{"ok": true, "checks": [..]}`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The directory of the Node package.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js")
}

/// Install the package's dependencies when they are missing or older than the lock file.
pub fn npm_ci() {
    let home = PathBuf::from(std::env::var_os("HOME").expect("HOME"));
    let cache = home.join(".cache/graphloom");
    std::fs::create_dir_all(&cache).unwrap();
    let lock = std::fs::File::create(cache.join("js-tests.lock")).unwrap();
    fs4::FileExt::lock(&lock).unwrap();
    let dir = dir();
    let stamp = dir.join("node_modules/.package-lock.json");
    let lockfile = std::fs::read(dir.join("package-lock.json")).unwrap();
    let installed = std::fs::read(dir.join("node_modules/.installed-from")).ok();
    if !stamp.exists() || installed.as_deref() != Some(lockfile.as_slice()) {
        let npm_cache = std::env::var_os("npm_config_cache").map_or_else(|| cache.join("npm"), PathBuf::from);
        let out = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir)
            .env("npm_config_cache", npm_cache)
            .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
            .output()
            .expect("npm must be installed for the JS client tests");
        assert!(
            out.status.success(),
            "npm ci failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(dir.join("node_modules/.installed-from"), &lockfile).unwrap();
    }
    fs4::FileExt::unlock(&lock).unwrap();
}

/// Run `node <script> <url>` with `env`, at most `limit`; the summary it printed last.
pub async fn node(script: &str, url: &str, env: &[(&str, String)], limit: Duration) -> Value {
    tokio::task::spawn_blocking(npm_ci).await.unwrap();
    let mut cmd = Command::new("node");
    cmd.arg(dir().join(script))
        .arg(url)
        .current_dir(dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd
        .spawn()
        .expect("node must be installed for the JS client tests");
    let pid = child.id();
    let waited = tokio::time::timeout(
        limit,
        tokio::task::spawn_blocking(move || child.wait_with_output()),
    )
    .await;
    let Ok(out) = waited else {
        let _ = Command::new("kill").arg(pid.to_string()).status();
        panic!("{script} did not finish within {limit:?}");
    };
    let out = out.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{script} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    let last = stdout.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    let summary: Value = serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("last line of {script} is not JSON ({e}): {last:?}\n{stderr}"));
    assert_eq!(summary["ok"], true, "{summary}");
    summary
}
