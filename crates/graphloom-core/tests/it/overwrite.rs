//! Overwrite (LangGraph's `Overwrite(value)`): a write that replaces a reducer field's value
//! instead of going through the reducer, in typed state (`FooUpdate::items_overwrite`) and in
//! `JsonState` (`JsonUpdate::overwrite`, or `{"__overwrite__": value}`); two in one step are a
//! conflict; it survives the pending-write round trip of an interrupted step.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::*;
use serde_json::{json, Value};
use std::sync::Arc;

#[derive(State, Clone, Default, Debug)]
struct Notes {
    #[reducer(append)]
    items: Seq<String>,
    #[reducer(add)]
    total: i64,
    #[reducer(add_messages)]
    messages: Seq<Message>,
    topic: String,
}

fn items(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test]
async fn an_overwrite_replaces_the_field_and_every_other_write_of_its_step() {
    // `a` (merged first) overwrites, `b` (merged after it) appends: the overwrite wins,
    // whatever the order, as in LangGraph.
    let g = StateGraph::<Notes>::new()
        .add_node("a", |_s, _rt| async {
            Ok(NotesUpdate::new()
                .items_overwrite(items(&["fresh"]).into())
                .total_overwrite(100))
        })
        .add_node("b", |_s, _rt| async {
            Ok(NotesUpdate::new().items(items(&["appended"])).total(5))
        })
        .add_node("c", |_s, _rt| async {
            Ok(NotesUpdate::new().items(items(&["after"])).total(1))
        })
        .add_edge(START, "a")
        .add_edge(START, "b")
        .add_join(["a", "b"], "c")
        .add_edge("c", END)
        .compile()
        .unwrap();
    let out = g
        .invoke(
            NotesUpdate::new().items(items(&["old", "older"])).total(7),
            RunConfig::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.values.items.to_vec(), vec!["fresh", "after"]);
    assert_eq!(out.values.total, 101);
}

#[tokio::test]
async fn two_overwrites_of_one_field_in_a_step_are_a_conflict_naming_the_nodes() {
    let g = StateGraph::<Notes>::new()
        .add_node("x", |_s, _rt| async {
            Ok(NotesUpdate::new().items_overwrite(Seq::new()))
        })
        .add_node("y", |_s, _rt| async {
            Ok(NotesUpdate::new().items_overwrite(Seq::new()))
        })
        .add_edge(START, "x")
        .add_edge(START, "y")
        .add_edge("x", END)
        .add_edge("y", END)
        .compile()
        .unwrap();
    let err = g
        .invoke(NotesUpdate::new(), RunConfig::default())
        .await
        .unwrap_err();
    match err {
        Error::State {
            source: StateError::OverwriteConflict { field, nodes },
            ..
        } => {
            assert_eq!(field, "items");
            assert_eq!(nodes, vec!["x".to_string(), "y".to_string()]);
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_typed_overwrite_has_langgraphs_json_form_both_ways() {
    let shape = Notes::default();
    let u = NotesUpdate::new().items_overwrite(items(&["a"]).into()).total(2);
    assert_eq!(
        shape.update_to_json(&u).unwrap(),
        json!({"items": {"__overwrite__": ["a"]}, "total": 2})
    );
    // Read back (a pending write, a request body), and the dataclass form LangGraph's
    // server produces.
    for v in [
        json!({"items": {"__overwrite__": ["a"]}, "total": 2}),
        json!({"items": {"type": "__overwrite__", "value": ["a"]}, "total": 2}),
    ] {
        let back = shape.update_from_json(v).unwrap();
        assert_eq!(
            shape.update_to_json(&back).unwrap(),
            json!({"items": {"__overwrite__": ["a"]}, "total": 2})
        );
        assert_eq!(shape.update_fields(&back), vec!["items", "total"]);
    }
    // A plain write stays a plain write; a bad overwrite names the field.
    let plain = shape.update_from_json(json!({"items": ["b"]})).unwrap();
    assert_eq!(shape.update_to_json(&plain).unwrap(), json!({"items": ["b"]}));
    match shape.update_from_json(json!({"total": {"__overwrite__": "ten"}})) {
        Err(StateError::Decode { field, .. }) => assert_eq!(field, "total"),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn an_overwrite_of_messages_replaces_the_history() {
    let g = StateGraph::<Notes>::new()
        .add_node("trim", |s: Arc<Notes>, _rt| async move {
            let last: Vec<Message> = s.messages.iter().last().cloned().into_iter().collect();
            Ok(NotesUpdate::new().messages_overwrite(last.into()))
        })
        .add_edge(START, "trim")
        .add_edge("trim", END)
        .compile()
        .unwrap();
    let out = g
        .invoke(
            NotesUpdate::new().messages(vec![
                Message::human("one"),
                Message::ai("two"),
                Message::human("three"),
            ]),
            RunConfig::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.values.messages.len(), 1);
    assert_eq!(out.values.messages.to_vec()[0].text(), "three");
}

#[tokio::test]
async fn an_overwrite_saved_as_a_pending_write_is_applied_on_resume() {
    // `a` overwrites and finishes; its sibling interrupts. On resume `a` does not run again:
    // its saved write (JSON) is decoded back into an overwrite.
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let r = Arc::clone(&runs);
    let g = StateGraph::<Notes>::new()
        .add_node("a", move |_s, _rt| {
            r.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async { Ok(NotesUpdate::new().items_overwrite(items(&["only"]).into())) }
        })
        .add_node("ask", |_s, rt: Runtime| async move {
            let v = rt.interrupt("more?")?;
            Ok(NotesUpdate::new().items(vec![v.as_str().unwrap_or_default().to_owned()]))
        })
        .add_edge(START, "a")
        .add_edge(START, "ask")
        .add_edge("a", END)
        .add_edge("ask", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let cfg = RunConfig::thread("ow");
    let paused = g
        .invoke(NotesUpdate::new().items(items(&["x", "y"])), cfg.clone())
        .await
        .unwrap();
    assert_eq!(paused.status, RunStatus::Interrupted);
    let done = g.resume(Command::resume("z"), cfg.clone()).await.unwrap();
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(done.values.items.to_vec(), vec!["only"]);
    // And the saved checkpoint holds it.
    let st = g.get_state(&cfg).await.unwrap();
    assert_eq!(st.values.items.to_vec(), vec!["only"]);
}

fn upd(v: Value) -> JsonUpdate {
    v.as_object().cloned().unwrap().into()
}

#[tokio::test]
async fn json_state_overwrites_through_the_api_and_the_serialised_form() {
    let shape = JsonState::from_reducer_names([
        ("log", "append"),
        ("n", "add"),
        ("messages", "add_messages"),
        ("topic", "last"),
    ])
    .unwrap();
    let g = StateGraph::with_shape(shape.clone())
        .add_node("a", |_s: Arc<JsonState>, _rt| async {
            Ok(NodeOutput::Update(
                JsonUpdate::new().overwrite("log", json!(["reset"])),
            ))
        })
        .add_node("b", |_s: Arc<JsonState>, _rt| async {
            Ok(NodeOutput::Update(upd(
                json!({"log": ["b"], "n": {"__overwrite__": 40}}),
            )))
        })
        .add_node("c", |_s: Arc<JsonState>, _rt| async {
            Ok(NodeOutput::Update(upd(json!({"n": 2}))))
        })
        .add_edge(START, "a")
        .add_edge(START, "b")
        .add_join(["a", "b"], "c")
        .add_edge("c", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let out = g
        .invoke_input(
            RunInput::Json(json!({"log": ["start"], "n": 1, "messages": ["hi", "there"]})),
            RunConfig::thread("j"),
        )
        .await
        .unwrap();
    assert_eq!(out.values.get("log"), Some(json!(["reset"])));
    assert_eq!(out.values.get("n"), Some(json!(42)));

    // From a client (the server's input path): messages inside an overwrite are read in
    // any accepted form and stored in the type form.
    let out = g
        .invoke_input(
            RunInput::Json(json!({"messages": {"__overwrite__": [{"role": "user", "content": "only"}]}})),
            RunConfig::thread("j"),
        )
        .await
        .unwrap();
    let msgs = out.values.get("messages").unwrap();
    assert_eq!(msgs.as_array().unwrap().len(), 1);
    assert_eq!(msgs[0]["type"], "human");
    assert!(msgs[0]["id"].is_string());

    // The update's JSON form is LangGraph's.
    assert_eq!(
        shape
            .update_to_json(&JsonUpdate::new().overwrite("log", json!([1])))
            .unwrap(),
        json!({"log": {"__overwrite__": [1]}})
    );

    // Two overwrites of one channel in a step: a conflict naming both nodes.
    let conflict = StateGraph::with_shape(shape)
        .add_node("x", |_s: Arc<JsonState>, _rt| async {
            Ok(NodeOutput::Update(JsonUpdate::new().overwrite("log", json!([]))))
        })
        .add_node("y", |_s: Arc<JsonState>, _rt| async {
            Ok(NodeOutput::Update(upd(json!({"log": {"__overwrite__": []}}))))
        })
        .add_edge(START, "x")
        .add_edge(START, "y")
        .add_edge("x", END)
        .add_edge("y", END)
        .compile()
        .unwrap();
    match conflict
        .invoke_input(RunInput::Json(json!({})), RunConfig::default())
        .await
        .unwrap_err()
    {
        Error::State {
            source: StateError::OverwriteConflict { field, nodes },
            ..
        } => {
            assert_eq!(field, "log");
            assert_eq!(nodes, vec!["x".to_string(), "y".to_string()]);
        }
        other => panic!("unexpected {other:?}"),
    }
}
