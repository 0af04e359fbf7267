//! End to end: runs with interrupts persist in a file and resume through a new saver, as
//! after a process restart.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::Checkpointer;
use graphloom_core::store::{namespace, PutOptions, Store};
use graphloom_core::*;
use graphloom_sqlite::{SqliteSaver, SqliteStore};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

#[derive(State, Clone, Default, Debug)]
struct Trip {
    #[reducer(add_messages)]
    messages: Seq<Message>,
    destination: Option<String>,
    approved: Option<bool>,
    #[reducer(append)]
    log: Seq<String>,
}

fn graph(saver: SqliteSaver, store: SqliteStore) -> CompiledGraph<Trip> {
    StateGraph::<Trip>::new()
        .add_node("plan", |s: Arc<Trip>, rt: Runtime| async move {
            let dest = rt.interrupt(json!({"ask": "where to?", "seen": s.messages.len()}))?;
            let dest = dest.as_str().unwrap_or_default().to_owned();
            let store = rt.store().ok_or_else(|| NodeError::fatal("no store"))?;
            store
                .put(
                    &namespace(["trips"]),
                    "last",
                    json!({"destination": dest}),
                    PutOptions::new(),
                )
                .await
                .map_err(|e| NodeError::fatal(e.to_string()))?;
            Ok(TripUpdate::new()
                .destination(Some(dest.clone()))
                .log(vec![format!("planned {dest}")])
                .messages(vec![Message::ai(format!("going to {dest}"))]))
        })
        .add_node("approve", |s: Arc<Trip>, rt: Runtime| async move {
            let dest = s.destination.clone().unwrap_or_default();
            let ok = rt.interrupt(format!("approve {dest}?"))?;
            Ok(TripUpdate::new()
                .approved(ok.as_bool())
                .log(vec![format!("approval {ok}")]))
        })
        .add_node("book", |s: Arc<Trip>, _rt| async move {
            Ok(TripUpdate::new().log(vec![format!(
                "booked {}",
                s.destination.clone().unwrap_or_default()
            )]))
        })
        .add_edge(START, "plan")
        .add_edge("plan", "approve")
        .add_conditional_edges_map(
            "approve",
            |s: &Trip| if s.approved == Some(true) { "book" } else { END },
            [("book", "book"), (END, END)],
        )
        .add_edge("book", END)
        .checkpointer(saver)
        .store(store)
        .compile()
        .unwrap()
}

async fn open(path: &Path) -> CompiledGraph<Trip> {
    graph(
        SqliteSaver::open(path).await.unwrap(),
        SqliteStore::open(path).await.unwrap(),
    )
}

#[tokio::test]
async fn interrupted_runs_resume_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let cfg = RunConfig::thread("trip-1");

    // Process 1: start, pause at the first interrupt.
    let g = open(&path).await;
    let out = g
        .invoke(
            TripUpdate::new().messages(vec![Message::human("plan a trip")]),
            cfg.clone(),
        )
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    assert_eq!(out.interrupts[0].value, json!({"ask": "where to?", "seen": 1}));
    drop(g);

    // Process 2: sees the pending interrupt, answers it, pauses at the second.
    let g = open(&path).await;
    let st = g.get_state(&cfg).await.unwrap();
    assert_eq!(st.next, vec!["plan".to_string()]);
    assert_eq!(st.interrupts.len(), 1);
    let out = g.resume(Command::resume("Lisbon"), cfg.clone()).await.unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    assert_eq!(out.interrupts[0].value, json!("approve Lisbon?"));
    drop(g);

    // Process 3: approves; the run completes with state from all three processes.
    let g = open(&path).await;
    let done = g.resume(Command::resume(true), cfg.clone()).await.unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(done.values.destination.as_deref(), Some("Lisbon"));
    assert_eq!(done.values.approved, Some(true));
    assert_eq!(
        done.values.log.to_vec(),
        vec!["planned Lisbon", "approval true", "booked Lisbon"]
    );
    assert_eq!(done.values.messages.len(), 2);
    drop(g);

    // Process 4: history and the store survived; another thread is independent.
    let saver = SqliteSaver::open(&path).await.unwrap();
    let store = SqliteStore::open(&path).await.unwrap();
    let history = saver
        .list(&checkpoint::ListQuery::thread("trip-1"))
        .await
        .unwrap();
    assert!(history.len() >= 4, "{} checkpoints", history.len());
    assert!(history
        .windows(2)
        .all(|w| w[0].checkpoint.id > w[1].checkpoint.id));
    let last = store.get(&namespace(["trips"]), "last").await.unwrap().unwrap();
    assert_eq!(last.value, json!({"destination": "Lisbon"}));
    let g = graph(saver.clone(), store);
    let other = RunConfig::thread("trip-2");
    let out = g
        .invoke(
            TripUpdate::new().messages(vec![Message::human("again")]),
            other.clone(),
        )
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    let refused = {
        g.resume(Command::resume("Oslo"), other.clone()).await.unwrap();
        g.resume(Command::resume(false), other.clone()).await.unwrap()
    };
    assert_eq!(refused.status, RunStatus::Done);
    assert_eq!(
        refused.values.log.to_vec(),
        vec!["planned Oslo", "approval false"]
    );
    assert_eq!(
        g.get_state(&cfg).await.unwrap().values.log.to_vec(),
        vec!["planned Lisbon", "approval true", "booked Lisbon"]
    );

    // Deleting a thread removes it for good.
    saver.delete_thread("trip-2").await.unwrap();
    drop(g);
    let g = open(&path).await;
    assert!(g.get_state(&other).await.unwrap().values.log.is_empty());
}
