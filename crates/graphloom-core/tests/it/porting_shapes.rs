//! The LangGraph call shapes a port writes, accepted as they are: `add_edge([a, b], c)`,
//! `invoke(None, cfg)`, running the config `update_state` returns, `get_state_history(cfg,
//! None)`, the prelude; and the stream behaviours the port's clients see: each task's
//! update as the task ends, a resumed run starting with its values.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use graphloom_core::prelude::*;
use graphloom_core::{MessageKind, Seq};
use std::sync::Arc;
use tokio::sync::Notify;

#[derive(State, Clone, Default, Debug)]
struct Log {
    #[reducer(append)]
    log: Vec<String>,
}

fn push(
    name: &'static str,
) -> impl Fn(Arc<Log>, Runtime) -> futures::future::Ready<Result<LogUpdate, NodeError>> + Clone {
    move |_s, _rt| futures::future::ready(Ok(LogUpdate::new().log(vec![name.to_owned()])))
}

/// `a -> b`, `[a, b] -> c` written as LangGraph writes it; `b` pauses before it runs.
fn graph() -> CompiledGraph<Log> {
    StateGraph::<Log>::new()
        .add_node("a", push("a"))
        .add_node("b", push("b"))
        .add_node("c", push("c"))
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge(["a", "b"], "c")
        .add_edge("c", END)
        .interrupt_before(NodeSet::of(["b"]))
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap()
}

#[tokio::test]
async fn langgraph_call_shapes_run_as_they_read() {
    let g = graph();
    let cfg = RunConfig::thread("t");
    let paused = g
        .invoke(LogUpdate::new().log(vec!["in".into()]), cfg.clone())
        .await
        .unwrap();
    assert_eq!(paused.status, RunStatus::Interrupted);
    assert_eq!(g.get_state(&cfg).await.unwrap().next, vec!["b".to_string()]);

    // `invoke(None, cfg)` continues past the static interrupt; the join waits for `b`.
    let done = g.invoke(None, &cfg).await.unwrap();
    assert_eq!(done.values.log, ["in", "a", "b", "c"]);

    // `get_state_history(cfg)` (no query): every checkpoint, newest first.
    let history = g.get_state_history(&cfg, None).await.unwrap();
    assert_eq!(history.len(), 5);
    let before_b = history.iter().find(|s| s.next == ["b"]).unwrap();

    // Fork: edit the checkpoint before `b` and run the config `update_state` returns.
    let at = cfg
        .clone()
        .checkpoint_id(before_b.config.checkpoint_id.clone().unwrap());
    let fork = g
        .update_state(&at, Some(LogUpdate::new().log(vec!["edited".into()])), None)
        .await
        .unwrap();
    let forked = g.invoke(None, fork).await.unwrap();
    assert_eq!(forked.values.log, ["in", "a", "edited", "b", "c"]);
    // The fork is the thread's newest state; the first run's checkpoints are still there.
    assert_eq!(g.get_state(&cfg).await.unwrap().values.log, forked.values.log);
    assert!(g.get_state_history(&cfg, None).await.unwrap().len() > history.len());
}

#[tokio::test]
async fn a_join_from_add_edge_and_from_add_join_draw_the_same() {
    let joined = |list: bool| {
        let b = StateGraph::<Log>::new()
            .add_node("a", push("a"))
            .add_node("b", push("b"))
            .add_node("c", push("c"))
            .add_edge(START, "a")
            .add_edge(START, "b");
        let b = if list {
            b.add_edge(vec!["a", "b"], "c")
        } else {
            b.add_join(["a", "b"], "c")
        };
        b.add_edge("c", END).compile().unwrap().draw_mermaid()
    };
    assert_eq!(joined(true), joined(false));
}

#[tokio::test]
async fn the_prelude_builds_packets_and_keeps_the_send_marker() {
    // `Send` in this module is still `std::marker::Send` (a glob import of the crate would
    // shadow it with the packet type).
    fn spawnable<T: Send + 'static>(_: &T) {}
    #[derive(State, Clone, Default, Debug, serde::Serialize)]
    struct Fan {
        #[reducer(append)]
        out: Vec<i64>,
        item: i64,
    }
    let g = StateGraph::<Fan>::new()
        .add_node("plan", |_s, _rt| async { Ok(FanUpdate::new()) })
        .add_node("work", |s: Arc<Fan>, _rt| async move {
            Ok(FanUpdate::new().out(vec![s.item * 10]))
        })
        .add_edge(START, "plan")
        .add_conditional_edges("plan", |_s: &Fan| {
            (1..=3)
                .map(|i| {
                    send(
                        "work",
                        Fan {
                            item: i,
                            ..Fan::default()
                        },
                    )
                })
                .collect::<Vec<_>>()
        })
        .add_edge("work", END)
        .compile()
        .unwrap();
    spawnable(&g);
    let mut out = g
        .invoke(FanUpdate::new(), RunConfig::default())
        .await
        .unwrap()
        .values
        .out;
    out.sort_unstable();
    assert_eq!(out, [10, 20, 30]);
}

#[tokio::test]
async fn a_fast_branch_streams_its_update_before_a_slow_sibling_ends() {
    let release = Arc::new(Notify::new());
    let gate = Arc::clone(&release);
    let g = StateGraph::<Log>::new()
        .add_node("fast", push("fast"))
        .add_node("slow", move |_s, _rt| {
            let gate = Arc::clone(&gate);
            async move {
                gate.notified().await;
                Ok(LogUpdate::new().log(vec!["slow".into()]))
            }
        })
        .add_edge(START, "fast")
        .add_edge(START, "slow")
        .add_edge("fast", END)
        .add_edge("slow", END)
        .compile()
        .unwrap();
    let mut s = g.stream(
        RunInput::Update(LogUpdate::new()),
        RunConfig::default(),
        StreamOptions::modes([StreamMode::Updates]),
    );
    // `slow` cannot end until `fast`'s update has been seen: a stream that held updates
    // to the end of the step would never get here.
    let first = tokio::time::timeout(std::time::Duration::from_secs(10), s.next())
        .await
        .expect("the fast branch's update arrives while the slow one waits");
    let RunEvent::Part(p) = first.unwrap() else {
        panic!("expected a part")
    };
    assert_eq!(
        p.data_json().unwrap(),
        serde_json::json!({"fast": {"log": ["fast"]}})
    );
    release.notify_one();
    let rest: Vec<_> = s.collect().await;
    let nodes: Vec<String> = rest
        .iter()
        .filter_map(|e| match e {
            RunEvent::Part(p) => p
                .data_json()
                .ok()
                .map(|v| v.as_object().unwrap().keys().cloned().collect()),
            RunEvent::End(r) => {
                assert!(r.is_ok());
                None
            }
        })
        .collect();
    assert_eq!(nodes, ["slow"]);
}

#[tokio::test]
async fn a_resumed_run_streams_the_values_it_starts_from_first() {
    let g = graph();
    let cfg = RunConfig::thread("t");
    g.invoke(LogUpdate::new().log(vec!["in".into()]), cfg.clone())
        .await
        .unwrap();
    let parts: Vec<_> = g
        .stream(None, cfg, StreamOptions::modes([StreamMode::Values]))
        .filter_map(|e| async move {
            match e {
                RunEvent::Part(p) => Some(p.values::<Log>().unwrap().log.clone()),
                RunEvent::End(_) => None,
            }
        })
        .collect()
        .await;
    assert_eq!(
        parts,
        [vec!["in", "a"], vec!["in", "a", "b"], vec!["in", "a", "b", "c"]]
    );
}

#[test]
fn the_defaults_a_port_meets_are_those_the_guide_states() {
    // LangGraph: 10,007 steps and `async` durability.
    assert_eq!(graphloom_core::DEFAULT_RECURSION_LIMIT, 100);
    assert_eq!(RunConfig::thread("t").durability, Durability::Sync);
    assert_eq!(RunConfig::default().recursion_limit, 100);
}

#[derive(State, Clone, Default, Debug)]
struct Chat {
    #[reducer(add_messages)]
    messages: Seq<Message>,
}

#[tokio::test]
async fn a_typed_node_returns_role_form_messages_without_json() {
    // LangGraph: `return {"messages": [("assistant", "hi")]}`.
    let g = StateGraph::<Chat>::new()
        .add_node("reply", |_s, _rt| async {
            Ok(ChatUpdate::new().messages(vec![
                Message::try_from(("assistant", "hi"))?,
                Message::from_role("user", "and you?")?,
            ]))
        })
        .add_edge(START, "reply")
        .add_edge("reply", END)
        .compile()
        .unwrap();
    let out = g.invoke(ChatUpdate::new(), RunConfig::default()).await.unwrap();
    let kinds: Vec<_> = out.values.messages.iter().map(|m| (m.kind, m.text())).collect();
    assert_eq!(
        kinds,
        [
            (MessageKind::Ai, "hi".to_owned()),
            (MessageKind::Human, "and you?".to_owned())
        ]
    );

    // An unknown role fails the node, the typed error as its source.
    let g = StateGraph::<Chat>::new()
        .add_node("robot", |_s, _rt| async {
            Ok(ChatUpdate::new().messages(vec![Message::try_from(("robot", "beep"))?]))
        })
        .add_edge(START, "robot")
        .add_edge("robot", END)
        .compile()
        .unwrap();
    let err = g
        .invoke(ChatUpdate::new(), RunConfig::default())
        .await
        .unwrap_err();
    assert_eq!(
        err.find_source::<graphloom_core::messages::RoleError>(),
        Some(&graphloom_core::messages::RoleError::Unknown("robot".into()))
    );
}
