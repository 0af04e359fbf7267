//! `graphloom new`: the crate it writes builds and passes its own test offline against this
//! checkout, and its binary is the `graphloom` command for its graph.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

/// The target directory this test was built into: the generated crate shares it, so only
/// the crate itself (and graphloom's crates, when their features differ) is compiled.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // <target>/debug/deps/new_crate-<hash>
    exe.ancestors().nth(3).unwrap().to_path_buf()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_new_crate_builds_tests_and_runs_its_graph_offline() {
    // Always the same directory, under the target directory: the crate keeps one package id,
    // so each run rebuilds its artifacts in place instead of adding a new set.
    let target = target_dir();
    let dir = target.join("graphloom-new-test").join("my-agent");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    let made = graphloom_cli::new_crate(&dir).unwrap();
    assert_eq!(
        (made.name.as_str(), made.graph_id.as_str()),
        ("my-agent", "my_agent")
    );
    assert!(made.graphloom_source.starts_with("path "), "{made:?}");
    for f in [
        "Cargo.toml",
        "Cargo.lock",
        "src/lib.rs",
        "src/main.rs",
        "tests/graph.rs",
    ] {
        assert!(dir.join(f).is_file(), "{f}");
    }
    // A second time into the same directory is refused: nothing is overwritten.
    let again = graphloom_cli::new_crate(&dir).unwrap_err().to_string();
    assert!(again.contains("is not empty"), "{again}");

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(&cargo)
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", &target)
        .args(["test", "--offline"])
        .output()
        .unwrap();
    let log = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{log}");
    assert!(
        log.contains("answers_each_turn_and_remembers_the_thread ... ok"),
        "{log}"
    );

    // Its binary is `graphloom` for its graph: `graphs`, then a run with the scripted model.
    let bin = target
        .join("debug")
        .join(format!("my-agent{}", std::env::consts::EXE_SUFFIX));
    let out = Command::new(&bin)
        .current_dir(&dir)
        .arg("graphs")
        .output()
        .unwrap();
    assert!(text(&out.stdout).starts_with("my_agent"), "{}", text(&out.stdout));
    let out = Command::new(&bin)
        .current_dir(&dir)
        .env("GRAPHLOOM_MODEL", "scripted")
        .args(["run", "my_agent", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("You said: hello"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn bad_names_and_non_empty_directories_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let err = graphloom_cli::new_crate(&tmp.path().join("9lives"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("is not a crate name"), "{err}");
    let full = tmp.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("file"), "x").unwrap();
    let err = graphloom_cli::new_crate(&full).unwrap_err().to_string();
    assert!(err.contains("is not empty"), "{err}");
}
