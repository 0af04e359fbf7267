//! Python virtualenvs for tests that use a real Python tool as the judge (the official
//! `langgraph-sdk`, LangGraph itself for the differential test).
//!
//! A venv lives under `$HOME/.cache/graphloom/<name>`, outside any clone, so repeated runs
//! reuse it; it is created and filled with pinned packages on first use. A venv whose
//! packages are not at the pinned versions is refilled.

use std::path::PathBuf;
use std::process::Command;

/// The python of venv `name` with `packages` (pip requirement strings pinned with `==`)
/// installed, creating and filling the venv when needed.
///
/// # Panics
/// When `python3 -m venv` or `pip install` fails (the message says which, with its output):
/// the test that asked for the venv cannot run without it.
#[allow(clippy::expect_used)]
pub fn venv(name: &str, packages: &[&str]) -> PathBuf {
    let home = std::env::var_os("HOME").expect("HOME is not set");
    let dir = PathBuf::from(home).join(".cache/graphloom").join(name);
    let python = dir.join("bin/python");
    if python.exists() && pinned(&python, packages) {
        return python;
    }
    if !python.exists() {
        if let Some(parent) = dir.parent() {
            std::fs::create_dir_all(parent).expect("create the venv's parent directory");
        }
        let out = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&dir)
            .output()
            .expect("python3 must be installed for this test");
        assert!(
            out.status.success(),
            "python3 -m venv {} failed:\n{}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = Command::new(&python)
        .args(["-m", "pip", "install", "--disable-pip-version-check", "-q"])
        .args(packages)
        .output()
        .expect("run pip");
    assert!(
        out.status.success(),
        "pip install {packages:?} into {} failed:\n{}\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        pinned(&python, packages),
        "{packages:?} installed into {} but not at the pinned versions",
        dir.display()
    );
    python
}

/// Whether every `name==version` of `packages` is installed at that version.
fn pinned(python: &std::path::Path, packages: &[&str]) -> bool {
    let checks: Vec<String> = packages
        .iter()
        .filter_map(|p| p.split_once("=="))
        .map(|(name, version)| {
            let name = name.split('[').next().unwrap_or(name);
            format!("assert m.version({name:?}) == {version:?}")
        })
        .collect();
    let script = format!("import importlib.metadata as m\n{}", checks.join("\n"));
    Command::new(python)
        .args(["-c", &script])
        .output()
        .is_ok_and(|o| o.status.success())
}
