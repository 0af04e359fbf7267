//! `messages` stream mode as LangGraph has it: the messages a node returns are emitted
//! whole, once, with the node's metadata, unless they were streamed already or were part
//! of the node's input; messages of a subgraph carry its namespace, or surface through the
//! parent's node when subgraphs are not streamed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::*;
use serde_json::{json, Value};
use std::sync::Arc;

#[derive(State, Clone, Default, Debug)]
struct Chat {
    #[reducer(add_messages)]
    messages: Seq<Message>,
    /// A field of one message, not merged by id.
    last_note: Option<Message>,
}

struct Run {
    /// `(ns, message, metadata)` of every `messages` event.
    events: Vec<(Vec<String>, Value, Value)>,
    state: Chat,
}

async fn run(g: &CompiledGraph<Chat>, input: ChatUpdate, opts: StreamOptions) -> Run {
    run_with(g, input, opts, RunConfig::thread("t")).await
}

async fn run_with(g: &CompiledGraph<Chat>, input: ChatUpdate, opts: StreamOptions, cfg: RunConfig) -> Run {
    let mut events = Vec::new();
    let mut state = None;
    let mut s = g.stream(RunInput::Update(input), cfg, opts);
    while let Some(ev) = s.next().await {
        match ev {
            RunEvent::Part(p) if p.mode == StreamMode::Messages => {
                let d = p.data_json().unwrap();
                events.push((p.ns.clone(), d[0].clone(), d[1].clone()));
            }
            RunEvent::Part(_) => {}
            RunEvent::End(out) => state = Some(out.unwrap().values),
        }
    }
    Run {
        events,
        state: state.unwrap(),
    }
}

fn hi() -> ChatUpdate {
    ChatUpdate::new().messages(vec![Message::human("hi")])
}

fn messages_mode() -> StreamOptions {
    StreamOptions::modes([StreamMode::Messages])
}

#[tokio::test]
async fn returned_messages_are_emitted_whole_once_with_the_nodes_metadata() {
    let g = StateGraph::<Chat>::new()
        .add_node("agent", |_s: Arc<Chat>, _rt| async move {
            Ok(ChatUpdate::new().messages(vec![Message::ai("hello")]))
        })
        .add_node("tools", |_s: Arc<Chat>, _rt| async move {
            Ok(ChatUpdate::new().messages(vec![
                Message::tool("r1", "c1").with_id("t1"),
                Message::tool("r2", "c2"),
            ]))
        })
        .add_edge(START, "agent")
        .add_edge("agent", "tools")
        .add_edge("tools", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let r = run(&g, hi(), messages_mode()).await;
    let kinds: Vec<(&str, &str)> = r
        .events
        .iter()
        .map(|(_, m, meta)| {
            (
                m["type"].as_str().unwrap(),
                meta["langgraph_node"].as_str().unwrap(),
            )
        })
        .collect();
    // The input's human message is not a node's output: it is not emitted.
    assert_eq!(kinds, [("ai", "agent"), ("tool", "tools"), ("tool", "tools")]);
    let stored: Vec<Option<String>> = r.state.messages.iter().map(|m| m.id.clone()).collect();
    let emitted: Vec<Value> = r.events.iter().map(|(_, m, _)| m["id"].clone()).collect();
    assert_eq!(
        emitted,
        stored[1..].iter().map(|id| json!(id)).collect::<Vec<_>>(),
        "emitted ids are the stored ids"
    );
    assert_eq!(emitted[1], "t1");
    let (ns, _, meta) = &r.events[0];
    assert!(ns.is_empty());
    assert_eq!(meta["langgraph_step"], 1);
    assert!(!meta["langgraph_triggers"].as_array().unwrap().is_empty());
    assert_eq!(meta["langgraph_path"], json!(["__pregel_pull", "agent"]));
    assert!(meta["langgraph_checkpoint_ns"]
        .as_str()
        .unwrap()
        .starts_with("agent:"));
    assert_eq!(meta["thread_id"], "t");
}

#[tokio::test]
async fn streamed_and_input_messages_are_not_emitted_again() {
    let g = StateGraph::<Chat>::new()
        .add_node("talk", |_s: Arc<Chat>, rt: Runtime| async move {
            for tok in ["Hel", "lo"] {
                rt.emit_message(json!({"type": "AIMessageChunk", "id": "m1", "content": tok}));
            }
            Ok(ChatUpdate::new().messages(vec![Message::ai("Hello").with_id("m1")]))
        })
        .add_node("edit", |s: Arc<Chat>, _rt| async move {
            // Rewrites a message it was given: not news, so not emitted.
            let first = s.messages.get(0).cloned().unwrap();
            Ok(ChatUpdate::new()
                .messages(vec![Message::human("hi there").with_id(first.id.clone().unwrap())]))
        })
        .add_edge(START, "talk")
        .add_edge("talk", "edit")
        .add_edge("edit", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let r = run(&g, hi(), messages_mode()).await;
    let types: Vec<&str> = r
        .events
        .iter()
        .map(|(_, m, _)| m["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["AIMessageChunk", "AIMessageChunk"], "{:?}", r.events);
    assert_eq!(r.state.messages.get(0).unwrap().text(), "hi there");
}

/// A run asking for the models' chunks alone gets them, and nothing of the messages its
/// nodes return (which the same graph emits whole by default); the state is the same.
#[tokio::test]
async fn a_run_asking_for_model_chunks_alone_gets_no_returned_messages() {
    let g = StateGraph::<Chat>::new()
        .add_node("talk", |_s: Arc<Chat>, rt: Runtime| async move {
            for tok in ["Hel", "lo"] {
                rt.emit_message(json!({"type": "AIMessageChunk", "id": "m1", "content": tok}));
            }
            Ok(ChatUpdate::new().messages(vec![Message::ai("Hello").with_id("m1")]))
        })
        .add_node("reply", |_s: Arc<Chat>, _rt| async move {
            Ok(ChatUpdate::new().messages(vec![Message::ai("returned").with_id("m2")]))
        })
        .add_edge(START, "talk")
        .add_edge("talk", "reply")
        .add_edge("reply", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let kinds = |r: &Run| -> Vec<String> {
        r.events
            .iter()
            .map(|(_, m, _)| format!("{}:{}", m["type"].as_str().unwrap(), m["id"].as_str().unwrap()))
            .collect()
    };
    let all = run_with(&g, hi(), messages_mode(), RunConfig::thread("all")).await;
    assert_eq!(
        kinds(&all),
        ["AIMessageChunk:m1", "AIMessageChunk:m1", "ai:m2"],
        "{:?}",
        all.events
    );
    let cfg = RunConfig {
        message_events: MessageEvents::ModelChunks,
        ..RunConfig::thread("chunks")
    };
    let chunks = run_with(&g, hi(), messages_mode(), cfg).await;
    assert_eq!(
        kinds(&chunks),
        ["AIMessageChunk:m1", "AIMessageChunk:m1"],
        "{:?}",
        chunks.events
    );
    let texts = |r: &Run| -> Vec<String> { r.state.messages.iter().map(Message::text).collect() };
    assert_eq!(texts(&chunks), ["hi", "Hello", "returned"]);
    assert_eq!(texts(&chunks), texts(&all));
}

#[tokio::test]
async fn command_updates_and_single_message_fields_count_too() {
    let g = StateGraph::<Chat>::new()
        .add_node("route", |_s: Arc<Chat>, _rt| async move {
            Ok(Command::<Chat>::new()
                .update(
                    ChatUpdate::new()
                        .messages(vec![Message::ai("routing")])
                        .last_note(Some(Message::system("note"))),
                )
                .goto("done"))
        })
        .add_node("done", |_s: Arc<Chat>, _rt| async move { Ok(ChatUpdate::new()) })
        .add_edge(START, "route")
        .destinations("route", ["done"])
        .add_edge("done", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let r = run(&g, hi(), messages_mode()).await;
    let texts: Vec<&str> = r
        .events
        .iter()
        .map(|(_, m, _)| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["routing", "note"]);
    assert_eq!(
        r.state.last_note.as_ref().and_then(|m| m.id.clone()),
        r.events[1].1["id"].as_str().map(str::to_owned)
    );
}

#[tokio::test]
async fn packet_tasks_report_their_push_path() {
    let g = StateGraph::<Chat>::new()
        .add_packet_node("greet", |name: String, _rt| async move {
            Ok(ChatUpdate::new().messages(vec![Message::ai(format!("hi {name}"))]))
        })
        .add_conditional_edges(START, |_s: &Chat| {
            ["ann", "bo"].map(|n| Send::new("greet", n.to_owned())).to_vec()
        })
        .add_edge("greet", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let r = run(&g, hi(), messages_mode()).await;
    let mut paths: Vec<Value> = r
        .events
        .iter()
        .map(|(_, _, meta)| meta["langgraph_path"].clone())
        .collect();
    paths.sort_by_key(Value::to_string);
    assert_eq!(paths, [json!(["__pregel_push", 0]), json!(["__pregel_push", 1])]);
}

fn nested() -> CompiledGraph<Chat> {
    let inner = StateGraph::<Chat>::new()
        .name("inner")
        .add_node("writer", |_s: Arc<Chat>, _rt| async move {
            Ok(ChatUpdate::new().messages(vec![Message::ai("from inside")]))
        })
        .add_edge(START, "writer")
        .add_edge("writer", END)
        .compile()
        .unwrap();
    StateGraph::<Chat>::new()
        .add_subgraph_shared("team", inner)
        .add_edge(START, "team")
        .add_edge("team", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap()
}

#[tokio::test]
async fn subgraph_messages_carry_their_namespace_or_surface_through_the_parent_node() {
    let g = nested();
    let r = run(&g, hi(), messages_mode().with_subgraphs()).await;
    assert_eq!(
        r.events.len(),
        1,
        "emitted inside, not again by the parent: {:?}",
        r.events
    );
    let (ns, m, meta) = &r.events[0];
    assert!(ns.len() == 1 && ns[0].starts_with("team:"), "{ns:?}");
    assert_eq!(
        (m["content"].as_str(), meta["langgraph_node"].as_str()),
        (Some("from inside"), Some("writer"))
    );

    let r = run(&nested(), hi(), messages_mode()).await;
    assert_eq!(r.events.len(), 1, "{:?}", r.events);
    let (ns, m, meta) = &r.events[0];
    assert!(ns.is_empty());
    assert_eq!(
        (m["content"].as_str(), meta["langgraph_node"].as_str()),
        (Some("from inside"), Some("team"))
    );
    assert_eq!(m["id"], json!(r.state.messages.last().unwrap().id));
}

#[tokio::test]
async fn a_node_finds_its_runtime_in_scope_only_while_messages_are_streamed() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let inner = StateGraph::<Chat>::new()
        .add_node("deep", move |_s: Arc<Chat>, _rt| {
            let log = Arc::clone(&log);
            async move {
                let cur = message_stream::current().map(|rt| rt.node().to_owned());
                log.lock().unwrap().push(("deep", cur));
                Ok(ChatUpdate::new())
            }
        })
        .add_edge(START, "deep")
        .add_edge("deep", END)
        .compile()
        .unwrap();
    let log = Arc::clone(&seen);
    let g = StateGraph::<Chat>::new()
        .add_node("top", move |_s: Arc<Chat>, _rt| {
            let log = Arc::clone(&log);
            async move {
                let cur = message_stream::current().map(|rt| rt.node().to_owned());
                let masked = message_stream::without(|| message_stream::current().is_some());
                log.lock().unwrap().push(("top", cur));
                log.lock().unwrap().push(("masked", masked.then(String::new)));
                Ok(ChatUpdate::new())
            }
        })
        .add_subgraph_shared("sub", inner)
        .add_edge(START, "top")
        .add_edge("top", "sub")
        .add_edge("sub", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let take = || std::mem::take(&mut *seen.lock().unwrap());
    run(&g, hi(), StreamOptions::modes([StreamMode::Updates])).await;
    assert_eq!(take(), [("top", None), ("masked", None), ("deep", None)]);
    run(&g, hi(), messages_mode()).await;
    assert_eq!(
        take(),
        [("top", Some("top".to_owned())), ("masked", None), ("deep", None)],
        "a subgraph nobody streams sees no runtime, not its parent's"
    );
    run(&g, hi(), messages_mode().with_subgraphs()).await;
    assert_eq!(
        take(),
        [
            ("top", Some("top".to_owned())),
            ("masked", None),
            ("deep", Some("deep".to_owned()))
        ]
    );
}

#[tokio::test]
async fn json_state_graphs_emit_their_message_channels() {
    let shape = JsonState::from_reducer_names([("messages", "add_messages"), ("n", "add")]).unwrap();
    let g = StateGraph::with_shape(shape)
        .add_node("bot", |_s: Arc<JsonState>, _rt| async move {
            Ok(JsonUpdate::new()
                .set("messages", json!([{"role": "assistant", "content": "yo"}]))
                .set("n", 1))
        })
        .add_edge(START, "bot")
        .add_edge("bot", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let mut events = Vec::new();
    let mut end = None;
    let mut s = g.stream(
        RunInput::Json(json!({"messages": ["hi"]})),
        RunConfig::thread("j"),
        messages_mode(),
    );
    while let Some(ev) = s.next().await {
        match ev {
            RunEvent::Part(p) => events.push(p.data_json().unwrap()),
            RunEvent::End(out) => end = Some(out.unwrap().values),
        }
    }
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0][0]["type"], "ai", "stored and emitted in the type form");
    let stored = end.unwrap().get("messages").unwrap();
    assert_eq!(events[0][0]["id"], stored[1]["id"]);
}
