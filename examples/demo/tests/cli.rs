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
        err.contains("OPENAI_API_KEY") && err.contains("GRAPHLOOM_MODEL=scripted"),
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

/// Each seed graph's conditional edges, as the seeds draw them: only to the destinations
/// their routers declare (no fan-out to every node).
#[test]
fn draw_shows_only_declared_destinations() {
    let dir = tempfile::tempdir().unwrap();
    let out = graphloom(dir.path(), &["draw", "permit_filing"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let m = text(&out.stdout);
    let mut dotted: Vec<&str> = m.lines().map(str::trim).filter(|l| l.contains("-.->")).collect();
    dotted.sort_unstable();
    let expected = [
        "approval_node -.-> output_format;",
        "approval_node -.-> synthesis_llm_call;",
        "initial_llm_call -.-> output_format;",
        "initial_llm_call -.-> skill_select_node;",
        "initial_llm_call -.-> tool_node;",
        "output_format -.-> __end__;",
        "output_format -.-> approval_node;",
        "output_format -.-> system_prompt_node;",
        "resume_guard -.-> initial_llm_call;",
        "resume_guard -.-> output_format;",
        "resume_guard -.-> tool_node;",
        "skill_select_node -.-> approval_node;",
        "skill_select_node -.-> skill_inject_node;",
        "synthesis_llm_call -.-> output_format;",
        "synthesis_llm_call -.-> tool_node;",
        "tool_node -.-> initial_llm_call;",
        "tool_node -.-> output_format;",
        "tool_node -.-> synthesis_llm_call;",
    ];
    assert_eq!(dotted, expected, "{m}");
    for (graph, most) in [
        ("fraud_investigation", 2),
        ("support_chat", 7),
        // A create_agent agent: the model's turn goes to the tools, the end, or back to
        // the model when every call of the turn was answered already (a structured-output
        // retry, a reviewer's `respond`).
        ("chat_runtime", 3),
        ("memory_supervisor", 4),
    ] {
        let out = graphloom(dir.path(), &["draw", graph]);
        let m = text(&out.stdout);
        let n = m
            .lines()
            .filter(|l| l.contains("-.->") || l.contains(".->"))
            .count();
        assert!(n > 0 && n <= most, "{graph}: {n} conditional edges\n{m}");
    }
}

/// `--format svg` and `--format png` render with the built-in renderer: every node is in
/// the SVG, the PNG is a PNG of the drawing's size.
#[test]
fn draw_writes_svg_and_png_without_external_tools() {
    let dir = tempfile::tempdir().unwrap();
    let out = graphloom(
        dir.path(),
        &[
            "draw",
            "memory_supervisor",
            "--format",
            "svg",
            "--expand",
            "-o",
            "g.svg",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let svg = std::fs::read_to_string(dir.path().join("g.svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{svg}");
    for node in [
        "supervisor",
        "memory_writer|score",
        "recall_agent|tools",
        "assistant|agent",
    ] {
        assert!(svg.contains(&format!("data-node=\"{node}\"")), "{node} missing");
    }
    let out = graphloom(dir.path(), &["draw", "permit_filing", "--format", "png"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let png = std::fs::read(dir.path().join("permit_filing.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert!(height > width && width > 400, "{width}x{height}: a tall pipeline");
}

#[test]
fn run_names_the_scripted_model_prints_tokens_once_and_ends_with_the_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let out = graphloom(dir.path(), &["run", "support_chat"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let first = stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("graph support_chat")
            && first.contains("model scripted")
            && first.contains("no LLM is called"),
        "{first}"
    );
    // The answer streams token by token: once, not again as events or as a final echo.
    assert_eq!(stdout.matches("e-mailed to you").count(), 1, "{stdout}");
    assert!(!stdout.contains("on_chat_model_stream"), "{stdout}");
    assert!(stdout.contains("✓ done ("), "{stdout}");
    assert!(stdout.contains("--custom shows them"), "{stdout}");
    let custom = graphloom(dir.path(), &["run", "support_chat", "--custom"]);
    assert!(text(&custom.stdout).contains("on_chat_model_stream"));

    // A state without messages ends with a summary; --full prints all of it.
    let short = graphloom(dir.path(), &["run", "fraud_investigation"]);
    assert!(short.status.success(), "{}", text(&short.stderr));
    let s = text(&short.stdout);
    assert!(s.contains("  status: COMPLETED") && s.contains("--full"), "{s}");
    let full = graphloom(dir.path(), &["run", "fraud_investigation", "--full"]);
    let f = text(&full.stdout);
    assert!(
        s.lines().count() * 5 < f.lines().count(),
        "the summary is short: {} vs {} lines",
        s.lines().count(),
        f.lines().count()
    );
    assert!(f.contains("\"status\": \"COMPLETED\""), "{f}");
}

#[test]
fn failures_end_as_failures_and_say_how_to_continue() {
    let dir = tempfile::tempdir().unwrap();
    // The graph finishes, but its own state says the investigation failed.
    let out = graphloom(
        dir.path(),
        &[
            "run",
            "fraud_investigation",
            "--input",
            r#"{"transaction_id": "TX-NOPE"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("✗ failed") && stdout.contains("status FAILED"),
        "{stdout}"
    );
    assert!(!stdout.contains("✓ done"), "{stdout}");

    // A node fails (the model's server is not there): the thread says where and how to go on.
    let out = Command::new(env!("CARGO_BIN_EXE_graphloom"))
        .current_dir(dir.path())
        .env("GRAPHLOOM_MODEL", "openai-compatible:absent")
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .env("OPENAI_API_KEY", "k")
        .args(["run", "chat_runtime", "--thread", "f1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("model openai-compatible:absent"), "{stdout}");
    assert!(
        stdout.contains("✗ failed") && stdout.contains("--continue"),
        "{stdout}"
    );
    let show = text(&graphloom(dir.path(), &["threads", "show", "f1"]).stdout);
    assert!(
        show.contains("failed in model:") && show.contains("--thread f1 --continue"),
        "{show}"
    );
    // Without new input the stopped thread continues where it stopped, and finishes.
    let again = graphloom(dir.path(), &["run", "chat_runtime", "--thread", "f1"]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    let stdout = text(&again.stdout);
    assert!(
        stdout.contains("continuing from") && stdout.contains("✓ done"),
        "{stdout}"
    );
    let show = text(&graphloom(dir.path(), &["threads", "show", "f1"]).stdout);
    assert!(!show.contains("failed in") && show.contains("next []"), "{show}");
}

#[test]
fn bad_input_and_bad_places_are_refused_before_anything_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let out = graphloom(
        dir.path(),
        &[
            "run",
            "support_chat",
            "--thread",
            "x",
            "--input",
            r#"{"message": "hi"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("--input does not fit graph `support_chat`") && err.contains("message"),
        "{err}"
    );
    assert!(text(&out.stdout).is_empty(), "nothing ran: {}", text(&out.stdout));
    let list = text(&graphloom(dir.path(), &["threads", "list"]).stdout);
    assert!(!list.contains('x') || list.contains("no threads"), "{list}");

    let out = graphloom(dir.path(), &["run", "chat_runtime", "--db", "/proc/absent/x.db"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert_eq!(err.matches("unable to open database file").count(), 1, "{err}");

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_graphloom"))
        .current_dir(dir.path())
        .env("GRAPHLOOM_MODEL", "scripted")
        .args(["serve", "--addr", &addr, "--db", "served.db"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("in use") && err.contains("--addr"), "{err}");
    assert!(!dir.path().join("served.db").exists(), "no database was made");
}
