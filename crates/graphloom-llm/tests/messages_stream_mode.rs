//! Model calls in real graphs: `messages` stream mode receives LangChain `AIMessageChunk`s
//! with the node's metadata (and a subgraph's namespace), from `stream_into` and from a
//! plain `invoke` alike, and the state receives the assembled message under the same id;
//! what a node returns that was not streamed follows whole.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use futures::StreamExt;
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::{
    CompiledGraph, Message, RunConfig, RunEvent, RunInput, Seq, State, StateGraph, StreamMode, StreamOptions,
    StreamPart, END, START,
};
use graphloom_llm::{
    stream_into, ChatModel, ChatOptions, DynChatModel, MessageExt, NodeResultExt, Reply, ScriptedModel,
    ToolCall,
};
use serde_json::{json, Value};
use std::sync::Arc;

#[derive(State, Clone, Default, Debug)]
struct Chat {
    #[reducer(add_messages)]
    messages: Seq<Message>,
}

fn chat_graph<M: ChatModel + Clone + 'static>(model: M) -> CompiledGraph<Chat> {
    StateGraph::<Chat>::new()
        .add_node("agent", move |s: Arc<Chat>, rt| {
            let model = model.clone();
            async move {
                let answer = stream_into(&rt, &model, &s.messages.to_vec(), &ChatOptions::new())
                    .await
                    .node()?;
                Ok(ChatUpdate::new().messages(vec![answer]))
            }
        })
        .add_edge(START, "agent")
        .add_edge("agent", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap()
}

async fn run(graph: &CompiledGraph<Chat>, opts: StreamOptions) -> (Vec<StreamPart>, Chat) {
    let events: Vec<RunEvent<Chat>> = graph
        .stream(
            RunInput::Update(ChatUpdate::new().messages(vec![Message::human("hi")])),
            RunConfig::thread("s"),
            opts,
        )
        .collect()
        .await;
    let mut parts = Vec::new();
    let mut end = None;
    for e in events {
        match e {
            RunEvent::Part(p) => parts.push(p),
            RunEvent::End(r) => end = Some(r.unwrap().values),
        }
    }
    (parts, end.unwrap())
}

fn message_events(parts: &[StreamPart]) -> Vec<(Vec<String>, Value, Value)> {
    parts
        .iter()
        .filter(|p| p.mode == StreamMode::Messages)
        .map(|p| {
            let d = p.data_json().unwrap();
            (p.ns.clone(), d[0].clone(), d[1].clone())
        })
        .collect()
}

#[tokio::test]
async fn messages_mode_receives_langchain_chunks_with_node_metadata() {
    let model = ScriptedModel::new([Reply::text("Hello streaming world")]);
    let graph = chat_graph(model.clone());
    let (parts, state) = run(&graph, StreamOptions::modes([StreamMode::Messages])).await;
    let events = message_events(&parts);
    assert!(events.len() >= 3, "one event per chunk: {events:?}");
    let final_msg = state.messages.last().unwrap();
    for (ns, chunk, meta) in &events {
        assert!(ns.is_empty());
        assert_eq!(chunk["type"], "AIMessageChunk");
        assert_eq!(
            chunk["id"],
            json!(final_msg.id),
            "chunks share the final message's id"
        );
        assert!(chunk["tool_call_chunks"].is_array());
        assert_eq!(meta["langgraph_node"], "agent");
        assert_eq!(meta["thread_id"], "s");
    }
    let text: String = events
        .iter()
        .map(|(_, c, _)| c["content"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Hello streaming world");
    assert_eq!(final_msg.text(), "Hello streaming world");
    let last = &events.last().unwrap().1;
    assert!(last["usage_metadata"]["output_tokens"].as_u64().unwrap() > 0);
    assert!(model.requests()[0].streamed);
}

#[tokio::test]
async fn tool_call_chunks_are_forwarded_and_assembled() {
    let call = ToolCall {
        id: "call_9".into(),
        name: "lookup".into(),
        args: json!({"order": "A-17", "verbose": true}),
    };
    let model = ScriptedModel::new([Reply::tool_calls("Checking.", vec![call.clone()])]);
    let (parts, state) = run(&chat_graph(model), StreamOptions::modes([StreamMode::Messages])).await;
    let events = message_events(&parts);
    let pieces: Vec<&Value> = events
        .iter()
        .flat_map(|(_, c, _)| c["tool_call_chunks"].as_array().unwrap())
        .collect();
    assert_eq!(pieces.len(), 2, "arguments streamed in two pieces");
    assert_eq!(pieces[0]["id"], "call_9");
    assert_eq!(pieces[0]["name"], "lookup");
    assert_eq!(pieces[1]["index"], 0);
    let args: String = pieces.iter().map(|p| p["args"].as_str().unwrap()).collect();
    assert_eq!(serde_json::from_str::<Value>(&args).unwrap(), call.args);
    assert_eq!(state.messages.last().unwrap().tool_calls, vec![call]);
}

#[tokio::test]
async fn without_messages_mode_the_model_is_invoked_not_streamed() {
    let model = ScriptedModel::new([Reply::text("plain")]);
    let (parts, state) = run(
        &chat_graph(model.clone()),
        StreamOptions::modes([StreamMode::Updates]),
    )
    .await;
    assert!(message_events(&parts).is_empty());
    assert_eq!(state.messages.last().unwrap().text(), "plain");
    assert!(!model.requests()[0].streamed);
}

fn parent_graph(model: ScriptedModel) -> CompiledGraph<Chat> {
    let child = StateGraph::<Chat>::new()
        .name("inner")
        .add_node("writer", move |s: Arc<Chat>, rt| {
            let model = model.clone();
            async move {
                let answer = stream_into(&rt, &model, &s.messages.to_vec(), &ChatOptions::new())
                    .await
                    .node()?;
                Ok(ChatUpdate::new().messages(vec![answer]))
            }
        })
        .add_edge(START, "writer")
        .add_edge("writer", END)
        .compile()
        .unwrap();
    StateGraph::<Chat>::new()
        .add_subgraph(
            "team",
            child,
            |s: &Chat| ChatUpdate::new().messages(s.messages.to_vec()),
            |c: &Chat| ChatUpdate::new().messages(c.messages.to_vec()),
        )
        .add_edge(START, "team")
        .add_edge("team", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap()
}

#[tokio::test]
async fn subgraph_chunks_carry_the_subgraph_namespace() {
    let model = ScriptedModel::new([Reply::text("from the subgraph")]);
    let (parts, state) = run(
        &parent_graph(model.clone()),
        StreamOptions::modes([StreamMode::Messages]).with_subgraphs(),
    )
    .await;
    let events = message_events(&parts);
    assert!(!events.is_empty());
    for (ns, chunk, meta) in &events {
        assert_eq!(ns.len(), 1, "{ns:?}");
        assert!(ns[0].starts_with("team:"), "{ns:?}");
        assert_eq!(chunk["type"], "AIMessageChunk");
        assert_eq!(meta["langgraph_node"], "writer");
        assert!(meta["langgraph_checkpoint_ns"]
            .as_str()
            .unwrap()
            .starts_with("team:"));
    }
    let text: String = events
        .iter()
        .map(|(_, c, _)| c["content"].as_str().unwrap())
        .collect();
    assert_eq!(text, "from the subgraph");
    assert_eq!(state.messages.last().unwrap().text(), "from the subgraph");
    assert!(model.requests()[0].streamed);

    // Without `with_subgraphs` the subgraph's model is not streamed; its answer surfaces
    // once, whole, when the parent's `team` node returns it (as LangGraph does).
    let model = ScriptedModel::new([Reply::text("quiet")]);
    let (parts, state) = run(
        &parent_graph(model.clone()),
        StreamOptions::modes([StreamMode::Messages]),
    )
    .await;
    let events = message_events(&parts);
    assert_eq!(events.len(), 1, "{events:?}");
    let (ns, msg, meta) = &events[0];
    assert!(ns.is_empty());
    assert_eq!(
        (msg["type"].as_str(), msg["content"].as_str()),
        (Some("ai"), Some("quiet"))
    );
    assert_eq!(msg["id"], json!(state.messages.last().unwrap().id));
    assert_eq!(meta["langgraph_node"], "team");
    assert!(!model.requests()[0].streamed);
}

/// A node that calls its model the plain way: `invoke` through `DynChatModel`.
fn plain_graph(model: Arc<dyn DynChatModel>) -> CompiledGraph<Chat> {
    StateGraph::<Chat>::new()
        .add_node("agent", move |s: Arc<Chat>, _rt| {
            let model = Arc::clone(&model);
            async move {
                let answer = model
                    .dyn_invoke(&s.messages.to_vec(), &ChatOptions::new())
                    .await
                    .node()?;
                Ok(ChatUpdate::new().messages(vec![answer]))
            }
        })
        .add_edge(START, "agent")
        .add_edge("agent", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap()
}

#[tokio::test]
async fn a_plain_invoke_in_a_node_streams_its_tokens_once() {
    let model = ScriptedModel::new([Reply::text("no opt in needed")]);
    // A budget around the model: the outer call forwards the chunks, the inner does not.
    let budgeted = graphloom_llm::BudgetedModel::new(
        model.clone(),
        graphloom_llm::UsageTracker::shared(),
        graphloom_llm::Budget::unlimited(),
    );
    let (parts, state) = run(
        &plain_graph(Arc::new(budgeted)),
        StreamOptions::modes([StreamMode::Messages]),
    )
    .await;
    let events = message_events(&parts);
    assert!(events.len() >= 3, "{events:?}");
    let answer = state.messages.last().unwrap();
    assert_eq!(answer.text(), "no opt in needed");
    for (_, chunk, meta) in &events {
        assert_eq!(chunk["type"], "AIMessageChunk", "no whole copy after the chunks");
        assert_eq!(chunk["id"], json!(answer.id));
        assert_eq!(meta["langgraph_node"], "agent");
        assert_eq!(meta["ls_provider"], "scripted");
        assert_eq!(meta["ls_model_name"], "scripted");
    }
    let text: String = events
        .iter()
        .map(|(_, c, _)| c["content"].as_str().unwrap())
        .collect();
    assert_eq!(text, "no opt in needed");
    assert_eq!(answer.usage().map(|u| u.output_tokens > 0), Some(true));
    assert!(model.requests()[0].streamed);

    // Without messages mode the same call is a plain invoke.
    let model = ScriptedModel::new([Reply::text("plain")]);
    let (parts, _) = run(
        &plain_graph(Arc::new(model.clone())),
        StreamOptions::modes([StreamMode::Updates]),
    )
    .await;
    assert!(message_events(&parts).is_empty());
    assert!(!model.requests()[0].streamed);
}

#[tokio::test]
async fn tool_messages_a_node_returns_follow_the_streamed_answer() {
    let call = ToolCall {
        id: "call_1".into(),
        name: "lookup".into(),
        args: json!({"q": "x"}),
    };
    let model: Arc<dyn DynChatModel> = Arc::new(ScriptedModel::new([Reply::tool_calls("", vec![call])]));
    let g = StateGraph::<Chat>::new()
        .add_node("agent", move |s: Arc<Chat>, _rt| {
            let model = Arc::clone(&model);
            async move {
                let answer = model
                    .dyn_invoke(&s.messages.to_vec(), &ChatOptions::new())
                    .await
                    .node()?;
                Ok(ChatUpdate::new().messages(vec![answer]))
            }
        })
        .add_node("tools", |s: Arc<Chat>, _rt| async move {
            let calls = s.messages.last().unwrap().tool_calls.clone();
            Ok(ChatUpdate::new().messages(
                calls
                    .iter()
                    .map(|c| Message::tool("found", c.id.clone()))
                    .collect(),
            ))
        })
        .add_edge(START, "agent")
        .add_edge("agent", "tools")
        .add_edge("tools", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let (parts, state) = run(&g, StreamOptions::modes([StreamMode::Messages])).await;
    let events = message_events(&parts);
    let (chunks, whole): (Vec<_>, Vec<_>) =
        events.iter().partition(|(_, c, _)| c["type"] == "AIMessageChunk");
    assert!(!chunks.is_empty());
    assert_eq!(whole.len(), 1, "{whole:?}");
    assert_eq!(whole[0].1["type"], "tool");
    assert_eq!(whole[0].1["tool_call_id"], "call_1");
    assert_eq!(whole[0].2["langgraph_node"], "tools");
    assert_eq!(whole[0].1["id"], json!(state.messages.last().unwrap().id));
}

#[cfg(feature = "openai")]
#[tokio::test]
async fn http_provider_tokens_reach_the_messages_stream() {
    use common::{data_frames, MockReply, MockServer};
    let chunk = |content: &str, finish: Option<&str>| {
        json!({"id": "chatcmpl-live", "model": "gpt-4o-mini",
            "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]})
    };
    let mut frames = data_frames(&[
        chunk("Str", None),
        chunk("eam", None),
        chunk("ed", Some("stop")),
        json!({"id": "chatcmpl-live", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3}}),
    ]);
    frames.push("data: [DONE]\n\n".to_owned());
    let server = MockServer::start(vec![MockReply::sse(frames)]).await;
    let model = graphloom_llm::OpenAiModel::new("gpt-4o-mini").base_url(server.v1());
    let (parts, state) = run(&chat_graph(model), StreamOptions::modes([StreamMode::Messages])).await;
    let events = message_events(&parts);
    let text: String = events
        .iter()
        .map(|(_, c, _)| c["content"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Streamed");
    assert!(events.iter().all(|(_, c, _)| c["id"] == "chatcmpl-live"));
    let last = state.messages.last().unwrap();
    assert_eq!(last.id.as_deref(), Some("chatcmpl-live"));
    assert_eq!(last.text(), "Streamed");
}

#[cfg(feature = "openai")]
#[tokio::test]
async fn a_providers_plain_invoke_in_a_node_streams_over_http() {
    use common::{data_frames, MockReply, MockServer};
    let chunk = |content: &str, finish: Option<&str>| {
        json!({"id": "chatcmpl-inv", "model": "gpt-4o-mini",
            "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]})
    };
    let mut frames = data_frames(&[chunk("Tok", None), chunk("ens", Some("stop"))]);
    frames.push("data: [DONE]\n\n".to_owned());
    let server = MockServer::start(vec![MockReply::sse(frames)]).await;
    let model = graphloom_llm::OpenAiModel::new("gpt-4o-mini").base_url(server.v1());
    let g = StateGraph::<Chat>::new()
        .add_node("agent", move |s: Arc<Chat>, _rt| {
            let model = model.clone();
            async move {
                // The concrete provider, not `DynChatModel`: it finds the node's runtime too.
                let answer = model
                    .invoke(&s.messages.to_vec(), &ChatOptions::new())
                    .await
                    .node()?;
                Ok(ChatUpdate::new().messages(vec![answer]))
            }
        })
        .add_edge(START, "agent")
        .add_edge("agent", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let (parts, state) = run(&g, StreamOptions::modes([StreamMode::Messages])).await;
    let events = message_events(&parts);
    let text: String = events
        .iter()
        .map(|(_, c, _)| c["content"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Tokens");
    assert!(events
        .iter()
        .all(|(_, c, m)| c["id"] == "chatcmpl-inv" && m["ls_provider"] == "openai"));
    assert_eq!(state.messages.last().unwrap().id.as_deref(), Some("chatcmpl-inv"));
    assert_eq!(
        server.requests()[0].body["stream"],
        true,
        "the call was made as a stream"
    );
}

/// A node that first asks `planner` (its answer stays inside the node), then answers with
/// `model`: only the answer belongs in the `messages` stream.
fn planner_graph(
    planner: Arc<dyn DynChatModel>,
    planner_opts: ChatOptions,
    model: ScriptedModel,
) -> CompiledGraph<Chat> {
    StateGraph::<Chat>::new()
        .add_node("agent", move |s: Arc<Chat>, _rt| {
            let (planner, planner_opts, model) = (Arc::clone(&planner), planner_opts.clone(), model.clone());
            async move {
                let plan = planner
                    .dyn_invoke(&s.messages.to_vec(), &planner_opts)
                    .await
                    .node()?;
                assert_eq!(plan.text(), "plan: answer directly");
                let answer = model
                    .invoke(&s.messages.to_vec(), &ChatOptions::new())
                    .await
                    .node()?;
                Ok(ChatUpdate::new().messages(vec![answer]))
            }
        })
        .add_edge(START, "agent")
        .add_edge("agent", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap()
}

#[tokio::test]
async fn a_call_tagged_nostream_stays_out_of_the_messages_stream() {
    use graphloom_llm::ChatModelExt;
    let tagged_per_call: Arc<dyn DynChatModel> =
        Arc::new(ScriptedModel::new([Reply::text("plan: answer directly")]));
    // The tag bound to the model itself, the model then used through `dyn`.
    let tagged_model: Arc<dyn DynChatModel> = Arc::new(
        ScriptedModel::new([Reply::text("plan: answer directly")])
            .with_options(ChatOptions::new().nostream()),
    );
    for (planner, opts) in [
        (tagged_per_call, ChatOptions::new().nostream()),
        (tagged_model, ChatOptions::new()),
    ] {
        let model = ScriptedModel::new([Reply::text("the answer")]);
        let (parts, state) = run(
            &planner_graph(planner, opts, model),
            StreamOptions::modes([StreamMode::Messages]),
        )
        .await;
        let events = message_events(&parts);
        let text: String = events
            .iter()
            .map(|(_, c, _)| c["content"].as_str().unwrap())
            .collect();
        assert_eq!(text, "the answer", "no planner tokens: {events:?}");
        assert_eq!(state.messages.last().unwrap().text(), "the answer");
    }
    // Untagged, the planner's tokens do stream (what the tag is for).
    let planner: Arc<dyn DynChatModel> = Arc::new(ScriptedModel::new([Reply::text("plan: answer directly")]));
    let model = ScriptedModel::new([Reply::text("the answer")]);
    let (parts, _) = run(
        &planner_graph(planner, ChatOptions::new(), model),
        StreamOptions::modes([StreamMode::Messages]),
    )
    .await;
    let text: String = message_events(&parts)
        .iter()
        .map(|(_, c, _)| c["content"].as_str().unwrap())
        .collect();
    assert_eq!(text, "plan: answer directlythe answer");
}
