//! Stream modes, several at once, and exactly one terminal event.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use futures::StreamExt;
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::*;
use serde_json::{json, Value};
use std::sync::Arc;

#[derive(State, Clone, Default, Debug)]
struct Talk {
    #[reducer(add_messages)]
    messages: Seq<Message>,
}

fn graph() -> CompiledGraph<Talk> {
    StateGraph::<Talk>::new()
        .add_node("model", |_s, rt: Runtime| async move {
            rt.write(json!({"progress": 0.5}));
            for tok in ["Hel", "lo"] {
                rt.emit_message(json!({"type": "AIMessageChunk", "content": tok}));
            }
            Ok(TalkUpdate::new().messages(vec![Message::ai("Hello").with_id("m1")]))
        })
        .add_node("fail", |_s, _rt| async {
            Err::<NodeOutput<Talk>, _>(NodeError::fatal("boom"))
        })
        .add_edge(START, "model")
        .add_edge("fail", END)
        .add_conditional_edges(
            "model",
            |s: &Talk| if s.messages.len() > 5 { "fail" } else { END },
        )
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap()
}

async fn run(modes: &[StreamMode], input: Vec<Message>) -> (Vec<StreamPart>, Vec<RunEvent<Talk>>) {
    let events: Vec<RunEvent<Talk>> = graph()
        .stream(
            RunInput::Update(TalkUpdate::new().messages(input)),
            RunConfig::thread("s"),
            StreamOptions::modes(modes.iter().copied()),
        )
        .collect()
        .await;
    let parts = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::Part(p) => Some(p.clone()),
            RunEvent::End(_) => None,
        })
        .collect();
    (parts, events)
}

#[tokio::test]
async fn values_mode_emits_the_typed_state_after_each_step() {
    let (parts, events) = run(&[StreamMode::Values], vec![Message::human("hi")]).await;
    assert_eq!(parts.len(), 2);
    let first: &Talk = parts[0].values::<Talk>().unwrap();
    assert_eq!(first.messages.len(), 1);
    let last = parts[1].data_json().unwrap();
    assert_eq!(last["messages"][1]["content"], "Hello");
    let ends = events.iter().filter(|e| matches!(e, RunEvent::End(_))).count();
    assert_eq!(ends, 1);
    assert!(matches!(events.last(), Some(RunEvent::End(Ok(_)))));
}

#[tokio::test]
async fn several_modes_at_once_in_order() {
    let (parts, _) = run(
        &[
            StreamMode::Updates,
            StreamMode::Custom,
            StreamMode::Messages,
            StreamMode::Tasks,
            StreamMode::Checkpoints,
        ],
        vec![Message::human("hi")],
    )
    .await;
    let modes: Vec<&str> = parts.iter().map(|p| p.mode.as_str()).collect();
    // Two chunks (without an id), then the returned message `m1` whole: as in LangGraph,
    // a returned message not streamed under its id is emitted when the node ends. The
    // node's update comes as it ends, before its task result (LangGraph's order).
    assert_eq!(
        modes,
        vec![
            "checkpoints",
            "tasks",
            "custom",
            "messages",
            "messages",
            "messages",
            "updates",
            "tasks",
            "checkpoints"
        ]
    );
    let whole = parts
        .iter()
        .filter(|p| p.mode == StreamMode::Messages)
        .nth(2)
        .unwrap()
        .data_json()
        .unwrap();
    assert_eq!(
        (whole[0]["type"].as_str(), whole[0]["id"].as_str()),
        (Some("ai"), Some("m1"))
    );
    let custom = parts.iter().find(|p| p.mode == StreamMode::Custom).unwrap();
    assert_eq!(custom.data_json().unwrap(), json!({"progress": 0.5}));
    let msg = parts
        .iter()
        .find(|p| p.mode == StreamMode::Messages)
        .unwrap()
        .data_json()
        .unwrap();
    assert_eq!(msg[0]["content"], "Hel");
    assert_eq!(msg[1]["langgraph_node"], "model");
    let upd = parts.iter().find(|p| p.mode == StreamMode::Updates).unwrap();
    let (node, update) = upd.update::<TalkUpdate>().unwrap();
    assert_eq!(node, "model");
    assert_eq!(update.messages.as_ref().unwrap()[0].text(), "Hello");
    let task_result = parts
        .iter()
        .filter(|p| p.mode == StreamMode::Tasks)
        .nth(1)
        .unwrap()
        .data_json()
        .unwrap();
    assert_eq!(task_result["name"], "model");
    assert!(task_result["error"].is_null());
    let cp = parts.last().unwrap().data_json().unwrap();
    assert!(cp["next"].as_array().unwrap().is_empty());
    assert!(cp["config"]["configurable"]["checkpoint_id"].is_string());
    // Each checkpoint event names the one before it as its parent.
    let first_cp = parts[0].data_json().unwrap();
    assert_eq!(first_cp["tasks"][0]["name"], "model");
    assert_eq!(
        cp["parent_config"]["configurable"]["checkpoint_id"],
        first_cp["config"]["configurable"]["checkpoint_id"]
    );
    assert_ne!(cp["parent_config"], cp["config"]);
}

/// A run asking for checkpoint envelopes gets, in `checkpoints` events, each checkpoint's
/// config, its parent's and its metadata, and nothing of its state or next tasks; `debug`
/// events of the same run still carry the whole checkpoint.
#[tokio::test]
async fn checkpoint_envelopes_leave_out_the_state() {
    let stream = |envelope: bool| {
        let cfg = RunConfig {
            checkpoint_events: if envelope {
                CheckpointEvents::Envelope
            } else {
                CheckpointEvents::Full
            },
            ..RunConfig::thread(if envelope { "envelope" } else { "full" })
        };
        graph()
            .stream(
                RunInput::Update(TalkUpdate::new().messages(vec![Message::human("hi")])),
                cfg,
                StreamOptions::modes([StreamMode::Checkpoints, StreamMode::Debug]),
            )
            .filter_map(|e| async move {
                match e {
                    RunEvent::Part(p) => Some((p.mode, p.data_json().unwrap())),
                    RunEvent::End(_) => None,
                }
            })
            .collect::<Vec<_>>()
    };
    let (full, envelopes) = (stream(false).await, stream(true).await);
    let of = |parts: &[(StreamMode, Value)], mode| -> Vec<Value> {
        parts
            .iter()
            .filter(|p| p.0 == mode)
            .map(|p| p.1.clone())
            .collect()
    };
    let cps = of(&envelopes, StreamMode::Checkpoints);
    assert_eq!(cps.len(), 2);
    for (cp, whole) in cps.iter().zip(of(&full, StreamMode::Checkpoints)) {
        let mut keys: Vec<&String> = cp.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["config", "metadata", "parent_config"], "{cp}");
        assert_eq!(cp["metadata"], whole["metadata"]);
        assert!(whole["values"]["messages"].is_array(), "{whole}");
        let id = &cp["config"]["configurable"];
        assert!(
            id["checkpoint_id"].is_string() && id["thread_id"] == "envelope",
            "{cp}"
        );
        assert_eq!(id["checkpoint_ns"], "");
    }
    // The second names the first as its parent.
    assert_eq!(cps[1]["parent_config"], cps[0]["config"]);
    assert_eq!(
        (&cps[0]["metadata"]["step"], &cps[1]["metadata"]["step"]),
        (&json!(0), &json!(1))
    );
    // Debug events are whole either way.
    let debug = of(&envelopes, StreamMode::Debug);
    let last = debug.iter().rev().find(|d| d["type"] == "checkpoint").unwrap();
    assert_eq!(last["payload"]["values"]["messages"][1]["content"], "Hello");
    assert!(last["payload"]["next"].as_array().unwrap().is_empty());
    assert_eq!(last["payload"]["config"], cps[1]["config"]);
}

#[tokio::test]
async fn debug_mode_wraps_tasks_and_checkpoints() {
    let (parts, _) = run(&[StreamMode::Debug], vec![Message::human("hi")]).await;
    let types: Vec<Value> = parts
        .iter()
        .map(|p| p.data_json().unwrap()["type"].clone())
        .collect();
    assert_eq!(
        types,
        vec![
            json!("checkpoint"),
            json!("task"),
            json!("task_result"),
            json!("checkpoint")
        ]
    );
}

#[tokio::test]
async fn a_failing_run_ends_its_stream_with_one_error_event() {
    let many: Vec<Message> = (0..6).map(|i| Message::human(format!("m{i}"))).collect();
    let (_, events) = run(&[StreamMode::Values], many).await;
    let ends: Vec<&RunEvent<Talk>> = events.iter().filter(|e| matches!(e, RunEvent::End(_))).collect();
    assert_eq!(ends.len(), 1);
    assert!(matches!(events.last(), Some(RunEvent::End(Err(Error::Node { node, .. }))) if node == "fail"));
}

#[tokio::test]
async fn messages_are_not_built_when_nobody_listens() {
    let g = StateGraph::<Talk>::new()
        .add_node("probe", |_s, rt: Runtime| async move {
            Ok(TalkUpdate::new().messages(vec![Message::ai(format!("{}", rt.wants_messages()))]))
        })
        .add_edge(START, "probe")
        .add_edge("probe", END)
        .compile()
        .unwrap();
    let out = g.invoke(TalkUpdate::new(), RunConfig::default()).await.unwrap();
    assert_eq!(out.values.messages.get(0).unwrap().text(), "false");
    let _ = Arc::new(0);
}

/// A failing task is reported to the task observer as failed.
#[tokio::test]
async fn the_task_observer_hears_of_a_failed_task() {
    let seen: Arc<std::sync::Mutex<Vec<(String, bool)>>> = Arc::default();
    let cfg = RunConfig {
        on_task_end: Some(TaskObserver::new({
            let seen = Arc::clone(&seen);
            move |t| seen.lock().unwrap().push((t.node.to_owned(), t.failed))
        })),
        ..RunConfig::thread("fails")
    };
    let many: Vec<Message> = (0..6).map(|i| Message::human(format!("m{i}"))).collect();
    let err = graph()
        .invoke(TalkUpdate::new().messages(many), cfg)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("boom"), "{err}");
    assert_eq!(
        *seen.lock().unwrap(),
        [("model".to_owned(), false), ("fail".to_owned(), true)]
    );
}

/// Regression: a node that panicked (on the task that runs a lone node) ended the stream
/// with `Cancelled`, so a server took the run for stopped and queued it again, forever.
#[tokio::test]
async fn a_panicking_node_ends_the_stream_with_a_node_error() {
    let g = StateGraph::<Talk>::new()
        .add_node("bad", |_s, _rt| async {
            let v: Vec<u8> = Vec::new();
            let i = v.len() + 3;
            Ok(TalkUpdate::new().messages(vec![Message::ai(format!("{}", v[i]))]))
        })
        .add_edge(START, "bad")
        .add_edge("bad", END)
        .compile()
        .unwrap();
    let events: Vec<RunEvent<Talk>> = g
        .stream(
            RunInput::Update(TalkUpdate::new()),
            RunConfig::default(),
            StreamOptions::modes([StreamMode::Values]),
        )
        .collect()
        .await;
    let ends: Vec<_> = events.iter().filter(|e| matches!(e, RunEvent::End(_))).collect();
    assert_eq!(ends.len(), 1);
    match events.last() {
        Some(RunEvent::End(Err(Error::Node { message, .. }))) => {
            assert!(
                message.contains("panicked") && message.contains("index out of bounds"),
                "{message}"
            );
        }
        other => panic!("expected a node error, got {other:?}"),
    }
}
