//! Static and dynamic interrupts and resuming them.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(State, Clone, Default, Debug)]
struct Form {
    #[reducer(append)]
    answers: Seq<String>,
}

fn answer(s: impl Into<String>) -> FormUpdate {
    FormUpdate::new().answers(vec![s.into()])
}

#[tokio::test]
async fn dynamic_interrupt_pauses_and_resume_reruns_the_node_from_its_start() {
    let runs = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&runs);
    let g = StateGraph::<Form>::new()
        .add_node("ask", move |_s, rt: Runtime| {
            r.fetch_add(1, Ordering::SeqCst);
            async move {
                let name = rt.interrupt(json!({"question": "name?"}))?;
                Ok(answer(name.as_str().unwrap_or_default()))
            }
        })
        .add_edge(START, "ask")
        .add_edge("ask", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let cfg = RunConfig::thread("d1");
    let out = g.invoke(FormUpdate::new(), cfg.clone()).await.unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    assert_eq!(out.interrupts.len(), 1);
    assert_eq!(out.interrupts[0].value, json!({"question": "name?"}));
    let st = g.get_state(&cfg).await.unwrap();
    assert_eq!(st.next, vec!["ask".to_string()]);
    assert_eq!(st.interrupts, out.interrupts);

    let done = g.resume(Command::resume("Ada"), cfg.clone()).await.unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(done.values.answers.to_vec(), vec!["Ada"]);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert!(g.get_state(&cfg).await.unwrap().interrupts.is_empty());
}

#[tokio::test]
async fn several_interrupts_in_one_node_are_matched_by_order() {
    let g = StateGraph::<Form>::new()
        .add_node("ask", |_s, rt: Runtime| async move {
            let a = rt.interrupt("first?")?;
            let b = rt.interrupt("second?")?;
            Ok(FormUpdate::new().answers(vec![a.to_string(), b.to_string()]))
        })
        .add_edge(START, "ask")
        .add_edge("ask", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let cfg = RunConfig::thread("m1");
    let first = g.invoke(FormUpdate::new(), cfg.clone()).await.unwrap();
    assert_eq!(first.interrupts[0].value, json!("first?"));
    let second = g.resume(Command::resume(1), cfg.clone()).await.unwrap();
    assert_eq!(second.status, RunStatus::Interrupted);
    assert_eq!(second.interrupts[0].value, json!("second?"));
    assert_ne!(first.interrupts[0].id, second.interrupts[0].id);
    let done = g.resume(Command::resume(2), cfg.clone()).await.unwrap();
    assert_eq!(done.values.answers.to_vec(), vec!["1", "2"]);
}

fn parallel(saver: InMemorySaver, done_calls: Arc<AtomicUsize>) -> CompiledGraph<Form> {
    StateGraph::<Form>::new()
        .add_node("left", |_s, rt: Runtime| async move {
            Ok(answer(format!("left={}", rt.interrupt("left?")?)))
        })
        .add_node("right", |_s, rt: Runtime| async move {
            Ok(answer(format!("right={}", rt.interrupt("right?")?)))
        })
        .add_node("plain", move |_s, _rt| {
            done_calls.fetch_add(1, Ordering::SeqCst);
            async { Ok(answer("plain")) }
        })
        .add_edge(START, "left")
        .add_edge(START, "right")
        .add_edge(START, "plain")
        .add_edge("left", END)
        .add_edge("right", END)
        .add_edge("plain", END)
        .checkpointer(saver)
        .compile()
        .unwrap()
}

#[tokio::test]
async fn parallel_interrupts_have_distinct_ids_and_resume_by_id() {
    let plain_calls = Arc::new(AtomicUsize::new(0));
    let g = parallel(InMemorySaver::new(), Arc::clone(&plain_calls));
    let cfg = RunConfig::thread("p1");
    let out = g.invoke(FormUpdate::new(), cfg.clone()).await.unwrap();
    assert_eq!(out.interrupts.len(), 2);
    let (left, right) = (&out.interrupts[0], &out.interrupts[1]);
    assert_eq!(
        (left.value.clone(), right.value.clone()),
        (json!("left?"), json!("right?"))
    );
    assert_ne!(left.id, right.id);

    // One value for two interrupts is refused, and runs nothing.
    let err = g.resume(Command::resume("x"), cfg.clone()).await.unwrap_err();
    assert!(
        matches!(&err, Error::InvalidResume(m) if m.contains("2 interrupts are pending")),
        "{err}"
    );
    // An unknown id is refused.
    let bad = BTreeMap::from([("nope".to_string(), json!(1))]);
    assert!(matches!(
        g.resume(Command::resume_map(bad), cfg.clone()).await,
        Err(Error::InvalidResume(_))
    ));

    // Resume only the right one: left interrupts again with the same id.
    let only_right = BTreeMap::from([(right.id.clone(), json!("R"))]);
    let partial = g
        .resume(Command::resume_map(only_right), cfg.clone())
        .await
        .unwrap();
    assert_eq!(partial.status, RunStatus::Interrupted);
    assert_eq!(partial.interrupts.len(), 1);
    assert_eq!(partial.interrupts[0].id, left.id);
    let st = g.get_state(&cfg).await.unwrap();
    assert_eq!(st.next, vec!["left".to_string()]);

    let done = g
        .resume(
            Command::resume_map(BTreeMap::from([(left.id.clone(), json!("L"))])),
            cfg.clone(),
        )
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(
        done.values.answers.to_vec(),
        vec!["left=\"L\"", "plain", "right=\"R\""]
    );
    // The sibling that finished in the first run never ran again.
    assert_eq!(plain_calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn resuming_a_thread_without_interrupts_is_refused() {
    let g = parallel(InMemorySaver::new(), Arc::new(AtomicUsize::new(0)));
    let err = g
        .resume(Command::resume(1), RunConfig::thread("empty"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidResume(_)), "{err}");
    let no_saver = StateGraph::<Form>::new()
        .add_node("a", |_s, _rt| async { Ok(NodeOutput::None) })
        .add_edge(START, "a")
        .add_edge("a", END)
        .compile()
        .unwrap();
    let err = no_saver
        .resume(Command::resume(1), RunConfig::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NoCheckpointer(_)));
}

fn chain(saver: InMemorySaver) -> StateGraph<Form> {
    StateGraph::<Form>::new()
        .add_node("a", |_s, _rt| async { Ok(answer("a")) })
        .add_node("b", |_s, _rt| async { Ok(answer("b")) })
        .add_node("c", |_s, _rt| async { Ok(answer("c")) })
        .add_sequence(["a", "b", "c"])
        .add_edge(START, "a")
        .add_edge("c", END)
        .checkpointer(saver)
}

#[tokio::test]
async fn static_interrupt_before_and_after_compiled_in() {
    let g = chain(InMemorySaver::new())
        .interrupt_before(NodeSet::of(["b"]))
        .interrupt_after(NodeSet::of(["b"]))
        .compile()
        .unwrap();
    let cfg = RunConfig::thread("s1");
    let out = g.invoke(FormUpdate::new(), cfg.clone()).await.unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    assert!(out.interrupts.is_empty());
    assert_eq!(out.values.answers.to_vec(), vec!["a"]);
    assert_eq!(g.get_state(&cfg).await.unwrap().next, vec!["b".to_string()]);
    let out = g.invoke_input(RunInput::Continue, cfg.clone()).await.unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    assert_eq!(out.values.answers.to_vec(), vec!["a", "b"]);
    assert_eq!(g.get_state(&cfg).await.unwrap().next, vec!["c".to_string()]);
    let out = g.invoke_input(RunInput::Continue, cfg.clone()).await.unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(out.values.answers.to_vec(), vec!["a", "b", "c"]);
}

#[tokio::test]
async fn static_interrupt_set_per_run() {
    let g = chain(InMemorySaver::new()).compile().unwrap();
    let cfg = RunConfig::thread("s2").interrupt_before(NodeSet::All);
    let out = g.invoke(FormUpdate::new(), cfg.clone()).await.unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    assert!(out.values.answers.is_empty());
    // Without the per-run interrupt, the same thread runs to the end.
    let out = g
        .invoke_input(RunInput::Continue, RunConfig::thread("s2"))
        .await
        .unwrap();
    assert_eq!(out.values.answers.to_vec(), vec!["a", "b", "c"]);
}

#[tokio::test]
async fn interrupt_appears_in_the_updates_stream() {
    use futures::StreamExt;
    let g = StateGraph::<Form>::new()
        .add_node("ask", |_s, rt: Runtime| async move {
            Ok(answer(rt.interrupt("q")?.to_string()))
        })
        .add_edge(START, "ask")
        .add_edge("ask", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let events: Vec<_> = g
        .stream(
            RunInput::Update(FormUpdate::new()),
            RunConfig::thread("st"),
            StreamOptions::modes([StreamMode::Updates]),
        )
        .collect()
        .await;
    let parts: Vec<serde_json::Value> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::Part(p) => Some(p.data_json().unwrap()),
            RunEvent::End(_) => None,
        })
        .collect();
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0]["__interrupt__"][0]["value"], json!("q"));
    assert!(matches!(events.last(), Some(RunEvent::End(Ok(o))) if o.status == RunStatus::Interrupted));
}

#[tokio::test]
async fn resuming_an_interrupt_of_an_older_checkpoint_forks_from_it() {
    let g = StateGraph::<Form>::new()
        .add_node("ask", |_s, rt: Runtime| async move {
            Ok(answer(rt.interrupt("q")?.to_string()))
        })
        .add_edge(START, "ask")
        .add_conditional_edges_map(
            "ask",
            |s: &Form| if s.answers.len() < 2 { "ask" } else { END },
            [("ask", "ask"), (END, END)],
        )
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let cfg = RunConfig::thread("fork-resume");
    g.invoke(FormUpdate::new(), cfg.clone()).await.unwrap();
    let first = g.get_state(&cfg).await.unwrap().config.checkpoint_id.unwrap();
    g.resume(Command::resume("one"), cfg.clone()).await.unwrap();
    // Go back to the first question and answer it differently.
    let out = g
        .resume(Command::resume("uno"), cfg.clone().checkpoint_id(&first))
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    assert_eq!(out.values.answers.to_vec(), vec!["\"uno\""]);
    let done = g.resume(Command::resume("dos"), cfg).await.unwrap();
    assert_eq!(done.values.answers.to_vec(), vec!["\"uno\"", "\"dos\""]);
}

/// The `updates` of a stream, as JSON, in order.
async fn updates_of(
    g: &CompiledGraph<Form>,
    input: RunInput<Form>,
    cfg: RunConfig,
) -> Vec<serde_json::Value> {
    use futures::StreamExt;
    g.stream(input, cfg, StreamOptions::modes([StreamMode::Updates]))
        .filter_map(|e| async move {
            match e {
                RunEvent::Part(p) => Some(p.data_json().unwrap()),
                RunEvent::End(_) => None,
            }
        })
        .collect()
        .await
}

#[tokio::test]
async fn a_static_interrupt_ends_the_updates_stream_with_an_empty_interrupt() {
    let g = chain(InMemorySaver::new())
        .interrupt_before(NodeSet::of(["b"]))
        .interrupt_after(NodeSet::of(["b"]))
        .compile()
        .unwrap();
    let cfg = RunConfig::thread("static-stream");
    // Before `b`: `a` ran, then the pause.
    let parts = updates_of(&g, RunInput::Update(FormUpdate::new()), cfg.clone()).await;
    assert_eq!(
        parts,
        vec![json!({"a": {"answers": ["a"]}}), json!({"__interrupt__": []})]
    );
    // After `b`: `b` ran, then the pause.
    let parts = updates_of(&g, RunInput::Continue, cfg.clone()).await;
    assert_eq!(
        parts,
        vec![json!({"b": {"answers": ["b"]}}), json!({"__interrupt__": []})]
    );
    // To the end: no interrupt.
    let parts = updates_of(&g, RunInput::Continue, cfg).await;
    assert_eq!(parts, vec![json!({"c": {"answers": ["c"]}})]);
}
