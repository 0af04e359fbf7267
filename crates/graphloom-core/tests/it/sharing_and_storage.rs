//! State is not deep-copied per step, and checkpoint storage grows with what changed.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use futures::StreamExt;
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::store::{PutOptions, Store as _};
use graphloom_core::*;
use serde_json::json;
use std::sync::Arc;

#[derive(State, Clone, Default, Debug)]
struct Chat {
    #[reducer(add_messages)]
    messages: Seq<Message>,
    #[reducer(add)]
    ticks: i64,
}

#[tokio::test]
async fn steps_that_do_not_touch_messages_share_them_with_the_previous_step() {
    let g = StateGraph::<Chat>::new()
        .add_node("tick", |_s, _rt| async { Ok(ChatUpdate::new().ticks(1)) })
        .add_edge(START, "tick")
        .add_conditional_edges_map(
            "tick",
            |s: &Chat| if s.ticks < 50 { "tick" } else { END },
            [("tick", "tick"), (END, END)],
        )
        .compile()
        .unwrap();
    let history: Vec<Message> = (0..1000)
        .map(|i| Message::human(format!("message {i}")))
        .collect();
    // Every step's state is kept alive by the stream consumer, so a deep copy would show.
    let states: Vec<Chat> = g
        .stream(
            RunInput::Update(ChatUpdate::new().messages(history)),
            RunConfig::default(),
            StreamOptions::modes([StreamMode::Values]),
        )
        .filter_map(|e| async move {
            match e {
                RunEvent::Part(p) => p.values::<Chat>().cloned(),
                RunEvent::End(_) => None,
            }
        })
        .collect()
        .await;
    assert_eq!(states.len(), 51);
    for w in states.windows(2) {
        assert!(
            w[0].messages.as_vector().ptr_eq(w[1].messages.as_vector()),
            "messages were copied"
        );
    }
}

#[tokio::test]
async fn thousand_turn_thread_stores_at_most_five_times_the_message_bytes() {
    let saver = InMemorySaver::new();
    let g = StateGraph::<Chat>::new()
        .add_node("echo", |_s, _rt| async { Ok(ChatUpdate::new().ticks(1)) })
        .add_edge(START, "echo")
        .add_edge("echo", END)
        .checkpointer(saver.clone())
        .compile()
        .unwrap();
    let body = "x".repeat(2048);
    let mut raw = 0usize;
    for turn in 0..1000 {
        let m = Message::human(body.clone()).with_id(format!("m{turn}"));
        raw += serde_json::to_vec(&m).unwrap().len();
        g.invoke(ChatUpdate::new().messages(vec![m]), RunConfig::thread("long"))
            .await
            .unwrap();
    }
    let stored = saver.stored_bytes();
    let ratio = stored as f64 / raw as f64;
    println!("stored {stored} bytes for {raw} raw message bytes ({ratio:.2}x)");
    assert!(
        ratio <= 5.0,
        "stored {stored} bytes for {raw} raw message bytes ({ratio:.2}x)"
    );
    let st = g.get_state(&RunConfig::thread("long")).await.unwrap();
    assert_eq!(st.values.messages.len(), 1000);
    assert_eq!(st.values.ticks, 1000);
    assert_eq!(st.values.messages.get(999).unwrap().id.as_deref(), Some("m999"));
}

#[tokio::test]
async fn nodes_reach_the_store_across_threads() {
    let store = InMemoryStore::new();
    let g = StateGraph::<Chat>::new()
        .add_node("remember", |s: Arc<Chat>, rt: Runtime| async move {
            let store = rt.store().ok_or_else(|| NodeError::fatal("no store"))?;
            let ns = vec!["users".to_string(), "u1".to_string()];
            let prior = store
                .get(&ns, "fact")
                .await
                .map_err(|e| NodeError::fatal(e.to_string()))?;
            let text = s.messages.last().map(Message::text).unwrap_or_default();
            store
                .put(&ns, "fact", json!({"text": text}), PutOptions::default())
                .await
                .map_err(|e| NodeError::fatal(e.to_string()))?;
            let seen = prior
                .map(|i| i.value["text"].as_str().unwrap_or_default().to_owned())
                .unwrap_or_default();
            Ok(ChatUpdate::new().messages(vec![Message::ai(format!("previously: {seen}"))]))
        })
        .add_edge(START, "remember")
        .add_edge("remember", END)
        .store(store.clone())
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    g.invoke(
        ChatUpdate::new().messages(vec![Message::human("likes tea")]),
        RunConfig::thread("a"),
    )
    .await
    .unwrap();
    let out = g
        .invoke(
            ChatUpdate::new().messages(vec![Message::human("hi")]),
            RunConfig::thread("b"),
        )
        .await
        .unwrap();
    assert_eq!(
        out.values.messages.last().unwrap().text(),
        "previously: likes tea"
    );
    let item = store
        .get(&["users".to_string(), "u1".to_string()], "fact")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(item.value["text"], "hi");
}

#[tokio::test]
async fn context_reaches_nodes_and_checkpoints_record_run_metadata() {
    struct Tenant(&'static str);
    let g = StateGraph::<Chat>::new()
        .add_node("who", |_s, rt: Runtime| async move {
            let t = rt.context::<Tenant>().map(|t| t.0).unwrap_or("none");
            Ok(ChatUpdate::new().messages(vec![Message::ai(t)]))
        })
        .add_edge(START, "who")
        .add_edge("who", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let cfg = RunConfig::thread("ctx")
        .context(Tenant("acme"))
        .metadata("user", "u7")
        .run_id("run-1");
    let out = g.invoke(ChatUpdate::new(), cfg.clone()).await.unwrap();
    assert_eq!(out.values.messages.get(0).unwrap().text(), "acme");
    let st = g.get_state(&RunConfig::thread("ctx")).await.unwrap();
    let meta = st.metadata.unwrap();
    assert_eq!(meta.run_id.as_deref(), Some("run-1"));
    assert_eq!(meta.extra.get("user"), Some(&json!("u7")));
}

#[test]
fn derived_schema_describes_fields() {
    let schema = Chat::default().json_schema();
    assert!(schema["properties"]["messages"].is_object());
    assert!(schema["properties"]["ticks"].is_object());
}

#[derive(State, Clone, Default, Debug)]
struct Docs {
    #[reducer(append)]
    docs: Seq<Arc<serde_json::Value>>,
    last: Option<Seq<Arc<serde_json::Value>>>,
    count: i64,
}

#[tokio::test]
async fn lists_of_shared_json_are_checkpointed_as_the_shared_items() {
    let doc = Arc::new(json!({"big": vec![1; 100]}));
    let s = Docs {
        docs: std::iter::repeat_n(Arc::clone(&doc), 3).collect(),
        last: Some(std::iter::repeat_n(Arc::clone(&doc), 2).collect()),
        count: 1,
    };
    let items = s.field_shared_items(0).expect("a Seq<Arc<Value>> is shared");
    assert_eq!(items.len(), 3);
    assert!(items.iter().all(|i| Arc::ptr_eq(i, &doc)), "items were copied");
    assert_eq!(s.field_shared_items(1).map(|v| v.len()), Some(2));
    assert!(s.field_shared_items(2).is_none(), "an integer is not a list");

    // A run with a saver stores them and reads back the same JSON.
    let doc2 = Arc::clone(&doc);
    let g = StateGraph::<Docs>::new()
        .add_node("add", move |s: Arc<Docs>, _rt| {
            let doc = Arc::clone(&doc2);
            async move {
                Ok(DocsUpdate::new()
                    .docs(vec![doc])
                    .last(Some(s.docs.clone()))
                    .count(s.count + 1))
            }
        })
        .add_edge(START, "add")
        .add_conditional_edges_map(
            "add",
            |s: &Docs| if s.count < 5 { "add" } else { END },
            [("add", "add"), (END, END)],
        )
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let cfg = RunConfig::thread("shared-docs");
    let out = g.invoke(DocsUpdate::new().count(0), cfg.clone()).await.unwrap();
    assert_eq!(out.values.docs.len(), 5);
    // Read back from the saver (decoded from what the checkpoints stored).
    let state = g.get_state(&cfg).await.unwrap();
    assert_eq!(state.values.docs.len(), 5);
    assert_eq!(state.values.last.as_ref().map(Seq::len), Some(4));
    assert_eq!(state.values.docs.last().map(|d| &**d), Some(&*doc));
}
