//! Interrupt response schemas: the schema travels with the interrupt, and a resume that
//! does not match it is refused before the node runs again, leaving the interrupt to be
//! answered again.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::*;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(State, Clone, Default, Debug)]
struct Review {
    verdict: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Decision {
    approved: bool,
    note: Option<String>,
}

fn schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {"approved": {"type": "boolean"}},
        "required": ["approved"],
    })
}

fn reviewed(runs: Arc<AtomicUsize>) -> CompiledGraph<Review> {
    StateGraph::<Review>::new()
        .add_node("review", move |_s, rt: Runtime| {
            runs.fetch_add(1, Ordering::SeqCst);
            async move {
                let answer = rt.interrupt_with_schema("ship it?", schema())?;
                Ok(ReviewUpdate::new().verdict(answer["approved"].to_string()))
            }
        })
        .add_edge(START, "review")
        .add_edge("review", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap()
}

#[tokio::test]
async fn a_resume_that_does_not_match_the_schema_is_refused_before_the_node_runs_again() {
    let runs = Arc::new(AtomicUsize::new(0));
    let g = reviewed(Arc::clone(&runs));
    let cfg = RunConfig::thread("t");
    let paused = g.invoke(ReviewUpdate::new(), cfg.clone()).await.unwrap();
    assert_eq!(paused.status, RunStatus::Interrupted);
    // The schema travels with the interrupt: in the run's output and the thread's state.
    assert_eq!(paused.interrupts[0].response_schema, Some(schema()));
    let st = g.get_state(&cfg).await.unwrap();
    assert_eq!(st.interrupts[0].response_schema, Some(schema()));
    assert_eq!(
        serde_json::to_value(&st.interrupts[0]).unwrap()["response_schema"],
        schema()
    );

    let err = g
        .resume(Command::resume(json!({"approved": "yes"})), cfg.clone())
        .await
        .unwrap_err();
    let Error::InvalidResume(msg) = &err else {
        panic!("{err}")
    };
    assert!(msg.contains("does not match its response schema"), "{msg}");
    assert!(msg.contains("/approved"), "the message says where: {msg}");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the node did not run again");
    // Nothing was saved: the interrupt is still pending, and a valid answer resumes it.
    let st = g.get_state(&cfg).await.unwrap();
    assert_eq!(st.interrupts.len(), 1);
    let done = g
        .resume(Command::resume(json!({"approved": true})), cfg)
        .await
        .unwrap();
    assert_eq!(done.values.verdict, "true");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_resume_by_id_is_checked_against_that_interrupts_schema() {
    let runs = Arc::new(AtomicUsize::new(0));
    let g = reviewed(runs);
    let cfg = RunConfig::thread("t");
    let paused = g.invoke(ReviewUpdate::new(), cfg.clone()).await.unwrap();
    let id = paused.interrupts[0].id.clone();
    let err = g
        .resume(
            Command::resume_map(std::collections::BTreeMap::from([(id.clone(), json!(42))])),
            cfg.clone(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidResume(m) if m.contains(&id)),
        "{err}"
    );
}

#[tokio::test]
async fn a_typed_interrupt_carries_its_types_schema_and_decodes_the_answer() {
    let g = StateGraph::<Review>::new()
        .add_node("review", |_s, rt: Runtime| async move {
            let d: Decision = rt.interrupt_for("ship it?")?;
            Ok(ReviewUpdate::new().verdict(format!("{} {}", d.approved, d.note.unwrap_or_default())))
        })
        .add_edge(START, "review")
        .add_edge("review", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let cfg = RunConfig::thread("t");
    let paused = g.invoke(ReviewUpdate::new(), cfg.clone()).await.unwrap();
    let schema = paused.interrupts[0].response_schema.clone().unwrap();
    assert_eq!(schema["required"], json!(["approved"]));
    let err = g
        .resume(Command::resume(json!({"note": "no verdict"})), cfg.clone())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidResume(_)), "{err}");
    let done = g
        .resume(Command::resume(json!({"approved": false, "note": "later"})), cfg)
        .await
        .unwrap();
    assert_eq!(done.values.verdict, "false later");
}

#[tokio::test]
async fn an_interrupt_without_a_schema_takes_any_answer_and_says_nothing_of_one() {
    let g = StateGraph::<Review>::new()
        .add_node("review", |_s, rt: Runtime| async move {
            let v = rt.interrupt("anything?")?;
            Ok(ReviewUpdate::new().verdict(v.to_string()))
        })
        .add_edge(START, "review")
        .add_edge("review", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let cfg = RunConfig::thread("t");
    let paused = g.invoke(ReviewUpdate::new(), cfg.clone()).await.unwrap();
    let json = serde_json::to_value(&paused.interrupts[0]).unwrap();
    assert!(json.get("response_schema").is_none(), "{json}");
    let done = g.resume(Command::resume(json!([1, 2])), cfg).await.unwrap();
    assert_eq!(done.values.verdict, "[1,2]");
}
