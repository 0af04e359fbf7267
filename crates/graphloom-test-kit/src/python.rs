//! Python virtualenvs for tests that use a real Python tool as the judge (the official
//! `langgraph-sdk`, LangGraph itself for the differential test).
//!
//! A venv lives under `$HOME/.cache/graphloom/<name>`, outside any clone, so repeated runs
//! reuse it. It is created and filled with pinned packages on first use, through
//! [`first_use::prepare`](crate::first_use::prepare): several test processes asking for
//! the same new venv at once get one venv, made by one of them, and none of them sees it
//! before `pip` and the packages are in it. A venv made for other packages is made again.

use crate::first_use;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The python of venv `name` with `packages` (pip requirement strings pinned with `==`)
/// installed, creating and filling the venv when needed.
///
/// # Panics
/// When `python3 -m venv` or `pip install` fails (the message says which, with its output):
/// the test that asked for the venv cannot run without it.
pub fn venv(name: &str, packages: &[&str]) -> PathBuf {
    let dir = first_use::cache_dir(name);
    // The stamp names the packages and the interpreter the venv was made from.
    let stamp = format!("{}\n{}", base_python(), packages.join("\n"));
    first_use::prepare(&dir, &stamp, |dir| make(dir, packages));
    dir.join("bin/python")
}

/// The interpreter `python3` resolves to, so that a venv is remade when it changes.
fn base_python() -> String {
    Command::new("python3")
        .args(["-c", "import sys; print(sys.executable, sys.version)"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

#[allow(clippy::expect_used)]
fn make(dir: &Path, packages: &[&str]) {
    let out = Command::new("python3")
        .args(["-m", "venv"])
        .arg(dir)
        .output()
        .expect("python3 must be installed for this test");
    assert!(
        out.status.success(),
        "python3 -m venv {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let python = dir.join("bin/python");
    if packages.is_empty() {
        return;
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
}

/// Whether every `name==version` of `packages` is installed at that version.
fn pinned(python: &Path, packages: &[&str]) -> bool {
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
