//! A run request is typed from the HTTP edge to the worker: its options are parsed once
//! (a misspelt one is a 422 naming it, and nothing is written), the run row keeps the
//! request as resolved (`kwargs`), and the worker reads it back typed (a stored request
//! that does not read ends its run with an error instead of a guess).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{human, TestServer};
use graphloom_server::db::{Db, NewRun, SqliteDb};
use graphloom_server::models::{MultitaskStrategy, Run, RunStatus};
use graphloom_server::ServerConfig;
use serde_json::{json, Value};
use std::time::Duration;

/// Every route that creates runs, and whether it takes a list.
fn run_routes(t: &str) -> Vec<(String, bool)> {
    vec![
        (format!("/threads/{t}/runs"), false),
        (format!("/threads/{t}/runs/stream"), false),
        (format!("/threads/{t}/runs/wait"), false),
        ("/runs".to_owned(), false),
        ("/runs/stream".to_owned(), false),
        ("/runs/wait".to_owned(), false),
        ("/runs/batch".to_owned(), true),
    ]
}

#[tokio::test]
async fn a_misspelt_run_option_is_a_422_naming_it_and_queues_nothing() {
    let s = TestServer::sqlite(|_| {}).await;
    let t = s.thread().await;
    let bad = [
        ("multitask_strategy", json!("later"), "multitask_strategy"),
        ("stream_mode", json!(["values", "telepathy"]), "stream_mode[1]"),
        ("stream_mode", json!(3), "stream_mode"),
        ("durability", json!("eventually"), "durability"),
        ("if_not_exists", json!("maybe"), "if_not_exists"),
        ("on_disconnect", json!("hang_up"), "on_disconnect"),
        ("on_completion", json!("shred"), "on_completion"),
        ("interrupt_before", json!("reply"), "interrupt_before"),
        ("interrupt_after", json!(["reply", 7]), "interrupt_after[1]"),
        ("command", json!({"goto": {"node": 1}}), "command.goto"),
        ("command", json!("resume"), "command"),
        ("checkpoint", json!("c1"), "checkpoint"),
    ];
    for (field, value, path) in bad {
        for (route, batch) in run_routes(&t) {
            let mut one = json!({"assistant_id": "echo", "input": human("hi")});
            if field == "command" {
                one.as_object_mut().unwrap().remove("input");
            }
            one[field] = value.clone();
            let body = if batch { json!([one]) } else { one };
            let (st, e) = s.post(&route, body).await;
            assert_eq!(st, 422, "{route} {field}={value}: {e}");
            let detail = e["detail"].as_str().unwrap();
            assert!(
                detail.starts_with(&format!(
                    "invalid body: {}{path}: ",
                    if batch { "[0]." } else { "" }
                )),
                "{route} {field}={value}: {detail}"
            );
        }
    }
    // Nothing was queued, and no thread was made for the stateless runs.
    assert_eq!(s.get(&format!("/threads/{t}/runs")).await.1, json!([]));
    assert_eq!(s.post("/threads/count", json!({})).await.1, json!(1));
    s.stop().await;
}

#[tokio::test]
async fn a_runs_kwargs_show_its_request_as_resolved() {
    let s = TestServer::sqlite(|_| {}).await;
    let t = s.thread().await;
    let (st, run) = s
        .post(
            &format!("/threads/{t}/runs"),
            json!({
                "assistant_id": "echo", "input": human("hi"), "stream_mode": "updates",
                "interrupt_before": "*", "durability": "exit", "metadata": {"m": 1},
                "checkpoint": {"checkpoint_id": null}, "config": {"tags": ["x"]},
                "multitask_strategy": "reject", "after_seconds": 0,
            }),
        )
        .await;
    assert_eq!(st, 200, "{run}");
    let done = s.wait_run(&t, run["run_id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "interrupted", "{done}");
    assert_eq!(done["multitask_strategy"], "reject");
    assert_eq!(done["metadata"], json!({"m": 1}));
    let kw = &done["kwargs"];
    let expected = json!({
        "input": human("hi"),
        "command": null,
        "config": {"tags": ["x"]},
        "context": {},
        "metadata": {"m": 1},
        "stream_mode": ["updates"],
        "stream_subgraphs": false,
        "stream_resumable": false,
        "interrupt_before": "*",
        "interrupt_after": null,
        "checkpoint_id": null,
        "durability": "exit",
        "on_disconnect": "continue",
        "webhook": null,
        "feedback_keys": null,
        "graph_id": "echo",
        "assistant_id": graphloom_server::system_assistant_id("echo"),
        "temporary": false,
    });
    assert_eq!(kw, &expected, "the owner stays hidden, the rest as resolved");
    // A resume: the command as given.
    let t = s.thread().await;
    let (st, out) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "approval", "input": human("may I?")}),
        )
        .await;
    assert_eq!(st, 200, "{out}");
    let (st, out) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "approval", "command": {"resume": "yes"}}),
        )
        .await;
    assert_eq!((st, &out["decision"]), (200, &json!("yes")), "{out}");
    let (_, runs) = s.get(&format!("/threads/{t}/runs?limit=1")).await;
    assert_eq!(runs[0]["kwargs"]["command"], json!({"resume": "yes"}));
    assert_eq!(runs[0]["kwargs"]["input"], Value::Null);
    assert_eq!(runs[0]["kwargs"]["stream_mode"], json!(["values"]));
    s.stop().await;
}

#[tokio::test]
async fn a_stored_run_whose_request_does_not_read_ends_with_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graphloom.db");
    let first = TestServer::start(ServerConfig::sqlite(&path)).await;
    let t = first.thread().await;
    first.stop().await;
    // A row no server writes: `stream_mode` a number.
    let db = SqliteDb::open(&path).await.unwrap();
    let run = Run {
        run_id: uuid::Uuid::now_v7().to_string(),
        thread_id: t.clone(),
        assistant_id: graphloom_server::system_assistant_id("echo"),
        created_at: String::new(),
        updated_at: String::new(),
        status: RunStatus::Pending,
        metadata: serde_json::Map::new(),
        kwargs: json!({"input": human("x"), "graph_id": "echo", "owner": "", "stream_mode": 5}),
        multitask_strategy: MultitaskStrategy::Enqueue,
        cancel_reason: None,
        ordinal: 0,
    };
    let new = NewRun {
        run,
        owner: String::new(),
        delay: None,
        reject_if_busy: false,
        cancel_active: None,
        thread_metadata: None,
        claim: None,
        create_thread: None,
    };
    let run_id = db.create_run(&new).await.unwrap().run_id;
    drop(db);
    let s = TestServer::start(ServerConfig::sqlite(&path)).await;
    let run = tokio::time::timeout(Duration::from_secs(30), s.wait_run(&t, &run_id))
        .await
        .expect("the run was not taken up");
    assert_eq!(run["status"], "error", "{run}");
    // Its end, from the worker that refused it: the field and why.
    let (st, joined) = s.get(&format!("/threads/{t}/runs/{run_id}/join")).await;
    assert_eq!(st, 200, "{joined}");
    let err: &Value = &joined["__error__"];
    assert_eq!(err["error"], "ValueError", "{joined}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("stream_mode: invalid type"),
        "{joined}"
    );
    // The server goes on running others.
    let (st, out) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "echo", "input": human("next")}),
        )
        .await;
    assert_eq!((st, &out["messages"][1]["content"]), (200, &json!("echo: next")));
    s.stop().await;
}
