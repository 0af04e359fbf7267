//! The `graphloom` command end to end: run a seed example, inspect its thread, draw it, and
//! the errors a person gets for bad input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::process::{Command, Output};

fn graphloom(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_graphloom"))
        .current_dir(dir)
        .env_remove("GRAPHLOOM_MODEL")
        .args(args)
        .output()
        .expect("graphloom runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn run_a_seed_example_then_inspect_its_thread() {
    let dir = tempfile::tempdir().unwrap();
    let out = graphloom(dir.path(), &["run", "chat_runtime", "--json", "--thread", "t1"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect();
    assert!(
        lines.iter().any(|l| l["mode"] == "tasks"),
        "task events are streamed"
    );
    let end = lines.last().unwrap();
    assert_eq!(end["end"], "done", "{end}");
    assert!(end["values"].is_object());

    let show = graphloom(dir.path(), &["threads", "show", "t1"]);
    assert!(show.status.success(), "{}", text(&show.stderr));
    assert!(text(&show.stdout).contains("next []"), "{}", text(&show.stdout));
    let list = graphloom(dir.path(), &["threads", "list"]);
    assert!(text(&list.stdout).contains("t1") && text(&list.stdout).contains("chat_runtime"));
    let hist = graphloom(dir.path(), &["threads", "history", "t1"]);
    assert!(text(&hist.stdout).lines().count() >= 2, "{}", text(&hist.stdout));
    let diff = graphloom(dir.path(), &["threads", "diff", "t1"]);
    assert!(
        text(&diff.stdout).contains(" += "),
        "appended items are shown: {}",
        text(&diff.stdout)
    );
}

#[test]
fn interrupts_pause_and_resume_non_interactively() {
    let dir = tempfile::tempdir().unwrap();
    let out = graphloom(dir.path(), &["run", "permit_filing", "--thread", "p1"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("--resume"),
        "a paused run says how to resume: {stdout}"
    );
    let show = graphloom(dir.path(), &["threads", "show", "p1"]);
    assert!(text(&show.stdout).contains("paused at"), "{}", text(&show.stdout));
    let resumed = graphloom(
        dir.path(),
        &[
            "run",
            "permit_filing",
            "--thread",
            "p1",
            "--resume",
            "{\"decision\": \"approve\"}",
            "--json",
        ],
    );
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    let last: Value = serde_json::from_str(text(&resumed.stdout).lines().last().unwrap()).unwrap();
    assert!(
        ["done", "interrupted"].contains(&last["end"].as_str().unwrap()),
        "{last}"
    );
    // The approved call ran: the resumed run streamed the approved tool's node.
    assert!(
        text(&resumed.stdout).contains("\"name\":\"tool_node\"") || last["end"] == "done",
        "{}",
        text(&resumed.stdout)
    );
}

#[test]
fn errors_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let out = graphloom(dir.path(), &["run", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("unknown graph `nope`") && err.contains("permit_filing"),
        "{err}"
    );

    let out = graphloom(
        dir.path(),
        &["run", "chat_runtime", "--input", "{\"messages\": [}"],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("line 1, column 15"), "{err}");

    let out = Command::new(env!("CARGO_BIN_EXE_graphloom"))
        .current_dir(dir.path())
        .env("GRAPHLOOM_MODEL", "openai:gpt-4o-mini")
        .env_remove("OPENAI_API_KEY")
        .args(["run", "chat_runtime"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("OPENAI_API_KEY") && err.contains("unset GRAPHLOOM_MODEL"),
        "{err}"
    );

    let out = graphloom(dir.path(), &["threads", "show", "missing"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no checkpoints"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn draw_prints_mermaid() {
    let dir = tempfile::tempdir().unwrap();
    let out = graphloom(dir.path(), &["draw", "fraud_investigation"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let m = text(&out.stdout);
    assert!(m.contains("planner") && m.contains("tool_executor"), "{m}");
}
