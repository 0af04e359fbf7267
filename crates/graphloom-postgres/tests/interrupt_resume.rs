//! End to end on PostgreSQL: a run pauses at an interrupt, the process's saver goes away,
//! and a new saver instance (a new pool, as another replica would have) resumes it; history
//! and time travel read back; finished tasks are not re-run when a sibling failed.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::{Checkpointer, ERROR};
use graphloom_core::*;
use graphloom_postgres::testing::test_database;
use graphloom_postgres::PostgresSaver;
use serde_json::json;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(State, Clone, Default, Debug)]
struct Form {
    #[reducer(append)]
    answers: Seq<String>,
    verdict: Option<String>,
}

fn approval_graph(saver: PostgresSaver, asked: Arc<AtomicUsize>) -> CompiledGraph<Form> {
    StateGraph::<Form>::new()
        .add_node("prepare", |_s, _rt| async {
            Ok(FormUpdate::new().answers(vec!["prepared".into()]))
        })
        .add_node("ask", move |s: Arc<Form>, rt: Runtime| {
            asked.fetch_add(1, Ordering::SeqCst);
            async move {
                let answer = rt.interrupt(json!({"question": "approve?", "seen": s.answers.len()}))?;
                Ok(FormUpdate::new().verdict(answer.as_str().map(String::from)))
            }
        })
        .add_node("finish", |_s, _rt| async {
            Ok(FormUpdate::new().answers(vec!["finished".into()]))
        })
        .add_edge(START, "prepare")
        .add_edge("prepare", "ask")
        .add_edge("ask", "finish")
        .add_edge("finish", END)
        .checkpointer(saver)
        .compile()
        .unwrap()
}

#[tokio::test]
async fn a_new_saver_instance_resumes_an_interrupted_run() {
    let (url, _db) = test_database().await;
    let asked = Arc::new(AtomicUsize::new(0));
    let cfg = RunConfig::thread("approval-1").metadata("tenant", "acme");

    // First "process": run until the interrupt, then drop everything and close the pool.
    let first = PostgresSaver::connect(&url).await.unwrap();
    let g = approval_graph(first.clone(), Arc::clone(&asked));
    let paused = g.invoke(FormUpdate::new(), cfg.clone()).await.unwrap();
    assert_eq!(paused.status, RunStatus::Interrupted);
    assert_eq!(paused.interrupts.len(), 1);
    assert_eq!(
        paused.interrupts[0].value,
        json!({"question": "approve?", "seen": 1})
    );
    drop(g);
    first.pool().close().await;

    // Second "process": a new saver on the same database.
    let second = PostgresSaver::connect(&url).await.unwrap();
    let g = approval_graph(second.clone(), Arc::clone(&asked));
    let st = g.get_state(&RunConfig::thread("approval-1")).await.unwrap();
    assert_eq!(st.next, vec!["ask".to_string()]);
    assert_eq!(st.interrupts, paused.interrupts);
    assert_eq!(st.values.answers.to_vec(), ["prepared"]);
    assert_eq!(
        st.metadata.as_ref().unwrap().extra.get("tenant"),
        Some(&json!("acme")),
        "run metadata survives in the checkpoint"
    );

    let done = g
        .resume(Command::resume("yes"), RunConfig::thread("approval-1"))
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(done.values.verdict.as_deref(), Some("yes"));
    assert_eq!(done.values.answers.to_vec(), ["prepared", "finished"]);
    assert_eq!(
        asked.load(Ordering::SeqCst),
        2,
        "the node re-runs from its start once"
    );
    assert!(g.get_state(&cfg).await.unwrap().interrupts.is_empty());

    // History, newest first; filters on metadata run in SQL.
    let history = g.get_state_history(&cfg, HistoryQuery::default()).await.unwrap();
    assert!(history.len() >= 4, "{}", history.len());
    assert!(history
        .windows(2)
        .all(|w| w[0].config.checkpoint_id > w[1].config.checkpoint_id));
    assert_eq!(history[0].values.answers.to_vec(), ["prepared", "finished"]);
    let tenant_only = second
        .list(&checkpoint::ListQuery {
            filter: serde_json::from_value(json!({"tenant": "acme"})).unwrap(),
            ..checkpoint::ListQuery::thread("approval-1")
        })
        .await
        .unwrap();
    assert!(!tenant_only.is_empty());
    assert!(
        tenant_only.len() < history.len(),
        "the resume run had no tenant metadata"
    );

    // Time travel: the paused checkpoint still reads back as it was.
    let then = g
        .get_state(&RunConfig::thread("approval-1").checkpoint_id(st.config.checkpoint_id.clone().unwrap()))
        .await
        .unwrap();
    assert_eq!(then.values.answers.to_vec(), ["prepared"]);
    assert_eq!(then.values.verdict, None);
    // `ask` has since finished against that checkpoint (its resume wrote there).
    let ask = then.tasks.iter().find(|t| t.name == "ask").unwrap();
    assert!(ask.finished);
}

#[derive(State, Clone, Default, Debug)]
struct Sum {
    #[reducer(add)]
    value: i64,
}

#[tokio::test]
async fn finished_tasks_are_not_rerun_when_a_sibling_failed() {
    let (url, _db) = test_database().await;
    let saver = PostgresSaver::connect(&url).await.unwrap();
    let (one_calls, two_calls) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let fixed = Arc::new(AtomicBool::new(false));
    let (c1, c2, f) = (Arc::clone(&one_calls), Arc::clone(&two_calls), Arc::clone(&fixed));
    let g = StateGraph::<Sum>::new()
        .add_node("one", move |_s, _rt| {
            c1.fetch_add(1, Ordering::SeqCst);
            async { Ok(SumUpdate::new().value(2)) }
        })
        .add_node("two", move |_s, _rt| {
            c2.fetch_add(1, Ordering::SeqCst);
            let ok = f.load(Ordering::SeqCst);
            async move {
                if ok {
                    Ok(SumUpdate::new().value(3))
                } else {
                    Err(NodeError::new("not yet"))
                }
            }
        })
        .add_edge(START, "one")
        .add_edge(START, "two")
        .add_edge("one", END)
        .add_edge("two", END)
        .checkpointer(saver.clone())
        .compile()
        .unwrap();
    let cfg = RunConfig::thread("t1");
    g.invoke(SumUpdate::new().value(1), cfg.clone())
        .await
        .unwrap_err();
    let state = g.get_state(&cfg).await.unwrap();
    let tuple = saver.get_tuple(&state.config).await.unwrap().unwrap();
    let channels: Vec<&str> = tuple.pending_writes.iter().map(|w| w.channel.as_str()).collect();
    assert!(
        channels.contains(&"value") && channels.contains(&ERROR),
        "{channels:?}"
    );

    fixed.store(true, Ordering::SeqCst);
    // A new saver instance (same graph definition) picks the pending writes up.
    let (c1, c2) = (Arc::clone(&one_calls), Arc::clone(&two_calls));
    let g = StateGraph::<Sum>::new()
        .add_node("one", move |_s, _rt| {
            c1.fetch_add(1, Ordering::SeqCst);
            async { Ok(SumUpdate::new().value(2)) }
        })
        .add_node("two", move |_s, _rt| {
            c2.fetch_add(1, Ordering::SeqCst);
            async { Ok(SumUpdate::new().value(3)) }
        })
        .add_edge(START, "one")
        .add_edge(START, "two")
        .add_edge("one", END)
        .add_edge("two", END)
        .checkpointer(PostgresSaver::connect(&url).await.unwrap())
        .compile()
        .unwrap();
    let out = g.invoke_input(RunInput::Continue, cfg.clone()).await.unwrap();
    assert_eq!(out.values.value, 6);
    assert_eq!(
        one_calls.load(Ordering::SeqCst),
        1,
        "`one` finished before: not run again"
    );
    assert_eq!(two_calls.load(Ordering::SeqCst), 2);
    assert!(g.get_state(&cfg).await.unwrap().next.is_empty());
}
