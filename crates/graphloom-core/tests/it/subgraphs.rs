//! Compiled graphs as nodes: namespaces, interrupts inside, streaming, Command to parent.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use futures::StreamExt;
use graphloom_core::checkpoint::{Checkpointer, InMemorySaver, ListQuery};
use graphloom_core::*;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(State, Clone, Default, Debug)]
struct Parent {
    #[reducer(append)]
    log: Seq<String>,
    topic: String,
}

#[derive(State, Clone, Default, Debug)]
struct Child {
    topic: String,
    #[reducer(append)]
    steps: Seq<String>,
}

fn child(prep_calls: Arc<AtomicUsize>, ask: bool) -> CompiledGraph<Child> {
    StateGraph::<Child>::new()
        .name("child")
        .add_node("prep", move |s: Arc<Child>, _rt| {
            prep_calls.fetch_add(1, Ordering::SeqCst);
            async move { Ok(ChildUpdate::new().steps(vec![format!("prep {}", s.topic)])) }
        })
        .add_node("review", move |_s, rt: Runtime| async move {
            let verdict = if ask {
                rt.interrupt("ok?")?.to_string()
            } else {
                "auto".to_string()
            };
            Ok(ChildUpdate::new().steps(vec![format!("review {verdict}")]))
        })
        .add_edge(START, "prep")
        .add_edge("prep", "review")
        .add_edge("review", END)
        .compile()
        .unwrap()
}

fn parent(saver: InMemorySaver, sub: CompiledGraph<Child>) -> CompiledGraph<Parent> {
    StateGraph::<Parent>::new()
        .add_node("before", |_s, _rt| async {
            Ok(ParentUpdate::new().log(vec!["before".into()]))
        })
        .add_subgraph(
            "sub",
            sub,
            |p: &Parent| ChildUpdate::new().topic(p.topic.clone()),
            |c: &Child| ParentUpdate::new().log(c.steps.to_vec()),
        )
        .add_node("after", |_s, _rt| async {
            Ok(ParentUpdate::new().log(vec!["after".into()]))
        })
        .add_edge(START, "before")
        .add_sequence(["before", "sub", "after"])
        .add_edge("after", END)
        .checkpointer(saver)
        .compile()
        .unwrap()
}

#[tokio::test]
async fn subgraph_maps_state_in_and_out_and_checkpoints_in_its_own_namespace() {
    let saver = InMemorySaver::new();
    let g = parent(saver.clone(), child(Arc::new(AtomicUsize::new(0)), false));
    let out = g
        .invoke(ParentUpdate::new().topic("cats".into()), RunConfig::thread("s"))
        .await
        .unwrap();
    assert_eq!(
        out.values.log.to_vec(),
        vec!["before", "prep cats", "review auto", "after"]
    );
    let all = saver
        .list(&ListQuery {
            thread_id: Some("s".into()),
            ..ListQuery::default()
        })
        .await
        .unwrap();
    let child_ns: Vec<&str> = all
        .iter()
        .map(|t| t.config.checkpoint_ns.as_str())
        .filter(|ns| !ns.is_empty())
        .collect();
    assert!(!child_ns.is_empty());
    assert!(child_ns.iter().all(|ns| ns.starts_with("sub:")), "{child_ns:?}");
    // The root history only shows root checkpoints.
    let root = g
        .get_state_history(&RunConfig::thread("s"), HistoryQuery::default())
        .await
        .unwrap();
    assert!(root.iter().all(|s| s.config.checkpoint_ns.is_empty()));
}

#[tokio::test]
async fn interrupt_inside_a_subgraph_pauses_the_parent_and_resumes_inside() {
    let prep_calls = Arc::new(AtomicUsize::new(0));
    let g = parent(InMemorySaver::new(), child(Arc::clone(&prep_calls), true));
    let cfg = RunConfig::thread("si");
    let out = g
        .invoke(ParentUpdate::new().topic("dogs".into()), cfg.clone())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    assert_eq!(out.interrupts.len(), 1);
    assert_eq!(out.interrupts[0].value, json!("ok?"));
    let st = g.get_state(&cfg).await.unwrap();
    assert_eq!(st.next, vec!["sub".to_string()]);
    assert_eq!(st.interrupts.len(), 1);

    let done = g.resume(Command::resume("yes"), cfg.clone()).await.unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(
        done.values.log.to_vec(),
        vec!["before", "prep dogs", "review \"yes\"", "after"]
    );
    // The child's finished node did not run again on resume.
    assert_eq!(prep_calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn subgraph_events_stream_with_their_namespace_only_when_asked() {
    let g = parent(InMemorySaver::new(), child(Arc::new(AtomicUsize::new(0)), false));
    let collect = |subgraphs: bool| {
        let g = g.clone();
        async move {
            let mut opts = StreamOptions::modes([StreamMode::Updates]);
            if subgraphs {
                opts = opts.with_subgraphs();
            }
            g.stream(
                RunInput::Update(ParentUpdate::new().topic("t".into())),
                RunConfig::thread(format!("ss{subgraphs}")),
                opts,
            )
            .filter_map(|e| async move {
                match e {
                    RunEvent::Part(p) => Some((p.ns.clone(), p.data_json().unwrap())),
                    RunEvent::End(_) => None,
                }
            })
            .collect::<Vec<_>>()
            .await
        }
    };
    let root_only = collect(false).await;
    assert_eq!(root_only.len(), 3);
    assert!(root_only.iter().all(|(ns, _)| ns.is_empty()));
    let with_sub = collect(true).await;
    let nested: Vec<_> = with_sub.iter().filter(|(ns, _)| !ns.is_empty()).collect();
    assert_eq!(nested.len(), 2);
    assert!(nested[0].0[0].starts_with("sub:"));
    assert!(nested[0].1.get("prep").is_some());
}

#[tokio::test]
async fn command_to_parent_routes_the_parent_graph() {
    let escalate = StateGraph::<Child>::new()
        .add_node("check", |_s, _rt| async {
            Ok(Command::<Child>::to_parent(
                Some(json!({"log": ["escalated"]})),
                "human",
            ))
        })
        .add_edge(START, "check")
        .add_edge("check", END)
        .compile()
        .unwrap();
    let g = StateGraph::<Parent>::new()
        .add_subgraph(
            "sub",
            escalate,
            |_p: &Parent| ChildUpdate::new(),
            |_c: &Child| ParentUpdate::new(),
        )
        .add_node("human", |_s, _rt| async {
            Ok(ParentUpdate::new().log(vec!["human".into()]))
        })
        .add_node("bot", |_s, _rt| async {
            Ok(ParentUpdate::new().log(vec!["bot".into()]))
        })
        .destinations("sub", ["human", "bot"])
        .add_edge(START, "sub")
        .add_edge("human", END)
        .add_edge("bot", END)
        .compile()
        .unwrap();
    let out = g.invoke(ParentUpdate::new(), RunConfig::default()).await.unwrap();
    assert_eq!(out.values.log.to_vec(), vec!["escalated", "human"]);
}

#[derive(State, Clone, Default, Debug)]
struct Shared {
    #[reducer(append)]
    log: Seq<String>,
    topic: String,
}

#[tokio::test]
async fn shared_key_subgraph_hands_back_only_its_changes() {
    let inner = StateGraph::<Shared>::new()
        .add_node("c1", |s: Arc<Shared>, _rt| async move {
            Ok(SharedUpdate::new().log(vec![format!("c1 saw {} entries on {}", s.log.len(), s.topic)]))
        })
        .add_node("c2", |_s, _rt| async {
            Ok(SharedUpdate::new().log(vec!["c2".into()]).topic("changed".into()))
        })
        .add_edge(START, "c1")
        .add_edge("c1", "c2")
        .add_edge("c2", END)
        .compile()
        .unwrap();
    let g = StateGraph::<Shared>::new()
        .add_node("p", |_s, _rt| async {
            Ok(SharedUpdate::new().log(vec!["p".into()]))
        })
        .add_subgraph_shared("sub", inner)
        .add_edge(START, "p")
        .add_edge("p", "sub")
        .add_edge("sub", END)
        .compile()
        .unwrap();
    let out = g
        .invoke(SharedUpdate::new().topic("t".into()), RunConfig::default())
        .await
        .unwrap();
    // The child saw the parent's list, and the parent got the child's two entries once.
    assert_eq!(out.values.log.to_vec(), vec!["p", "c1 saw 1 entries on t", "c2"]);
    assert_eq!(out.values.topic, "changed");
}

#[tokio::test]
async fn subgraphs_inherit_the_run_durability() {
    for (durability, expect_child_checkpoints) in [(Durability::Exit, 1usize), (Durability::Sync, 4)] {
        let saver = InMemorySaver::new();
        let g = parent(saver.clone(), child(Arc::new(AtomicUsize::new(0)), false));
        let thread = format!("dur-{durability:?}");
        g.invoke(
            ParentUpdate::new(),
            RunConfig::thread(thread.clone()).durability(durability),
        )
        .await
        .unwrap();
        let all = saver
            .list(&ListQuery {
                thread_id: Some(thread),
                ..ListQuery::default()
            })
            .await
            .unwrap();
        let child_count = all.iter().filter(|t| !t.config.checkpoint_ns.is_empty()).count();
        assert_eq!(child_count, expect_child_checkpoints, "{durability:?}");
    }
}

#[test]
fn subgraphs_are_listed_with_their_schemas_and_nested_namespaces() {
    let inner = child(Arc::new(AtomicUsize::new(0)), false);
    let middle = StateGraph::<Child>::new()
        .name("middle")
        .add_subgraph_shared("inner", inner.clone())
        .add_edge(START, "inner")
        .add_edge("inner", END)
        .compile()
        .unwrap();
    let top = parent(InMemorySaver::new(), child(Arc::new(AtomicUsize::new(0)), false));
    let listed = top.subgraphs(false);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].0, "sub");
    assert_eq!(listed[0].1.name, "child");
    assert_eq!(listed[0].1.state_schema, inner.state_schema());
    assert!(listed[0].1.mermaid.contains("prep"), "{}", listed[0].1.mermaid);
    assert_ne!(listed[0].1.state_schema, top.state_schema());

    // A subgraph inside a subgraph: one level without recursion, `outer|inner` with it.
    let two = StateGraph::<Parent>::new()
        .add_subgraph(
            "outer",
            middle,
            |p: &Parent| ChildUpdate::new().topic(p.topic.clone()),
            |c: &Child| ParentUpdate::new().log(c.steps.to_vec()),
        )
        .add_node("plain", |_s, _rt| async { Ok(ParentUpdate::new()) })
        .add_edge(START, "outer")
        .add_edge("outer", "plain")
        .add_edge("plain", END)
        .compile()
        .unwrap();
    let names = |recurse| {
        two.subgraphs(recurse)
            .into_iter()
            .map(|(ns, _)| ns)
            .collect::<Vec<_>>()
    };
    assert_eq!(names(false), vec!["outer"]);
    assert_eq!(names(true), vec!["outer", "outer|inner"]);
    let nested = two.subgraphs(true);
    assert_eq!(nested[1].1.name, "child");
    assert_eq!(nested[0].1.subgraphs.keys().collect::<Vec<_>>(), vec!["inner"]);
    // A graph without subgraph nodes lists none.
    assert!(inner.subgraphs(true).is_empty());
}

/// The task observer hears about the root graph's tasks only (a subgraph is one task of
/// its parent), in order, with their time; an interrupt inside the subgraph is no failure.
#[tokio::test]
async fn the_task_observer_sees_root_tasks_only() {
    let seen: Arc<std::sync::Mutex<Vec<(String, bool)>>> = Arc::default();
    let observer = {
        let seen = Arc::clone(&seen);
        TaskObserver::new(move |t| {
            assert!(t.elapsed < std::time::Duration::from_secs(5));
            seen.lock().unwrap().push((t.node.to_owned(), t.failed));
        })
    };
    let cfg = RunConfig {
        on_task_end: Some(observer),
        ..RunConfig::thread("observed")
    };
    let g = parent(InMemorySaver::new(), child(Arc::default(), false));
    g.invoke(ParentUpdate::new().topic("x".into()), cfg.clone())
        .await
        .unwrap();
    let names = |v: &[(String, bool)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&seen.lock().unwrap()), ["before", "sub", "after"]);
    assert!(seen.lock().unwrap().iter().all(|(_, failed)| !failed));

    seen.lock().unwrap().clear();
    let asking = parent(InMemorySaver::new(), child(Arc::default(), true));
    let out = asking
        .invoke(ParentUpdate::new().topic("y".into()), cfg)
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    assert_eq!(
        *seen.lock().unwrap(),
        [("before".to_owned(), false), ("sub".to_owned(), false)]
    );
}
