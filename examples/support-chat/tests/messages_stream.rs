//! What a client following the `messages` stream sees of a turn: the answer's tokens, not
//! the planner's (its plan is the graph's own, tagged `nostream`, and never in the state).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{direct, in_memory};
use futures::StreamExt;
use graphloom_core::{Message, RunConfig, RunEvent, RunInput, StreamMode, StreamOptions};
use graphloom_llm::{Reply, ScriptedModel};
use support_chat::{default_tools, AgentStateUpdate, SupportConfig};

#[tokio::test]
async fn the_planners_tokens_stay_out_of_the_messages_stream() {
    let model = ScriptedModel::new([direct(), Reply::text("Reset it from the login page.")]);
    let g = in_memory(&model, default_tools(), SupportConfig::default());
    let input = AgentStateUpdate::new()
        .user_id("u-1".to_owned())
        .messages(vec![Message::human("How do I reset my password?")]);
    let mut stream = g.stream(
        RunInput::Update(input),
        RunConfig::thread("t-stream"),
        StreamOptions::modes([StreamMode::Messages]),
    );
    let mut nodes = Vec::new();
    let mut text = String::new();
    let mut end = None;
    while let Some(ev) = stream.next().await {
        match ev {
            RunEvent::Part(p) if p.mode == StreamMode::Messages => {
                let d = p.data_json().unwrap();
                nodes.push(d[1]["langgraph_node"].as_str().unwrap().to_owned());
                if d[0]["type"] == "AIMessageChunk" {
                    text.push_str(d[0]["content"].as_str().unwrap_or_default());
                }
            }
            RunEvent::Part(_) => {}
            RunEvent::End(out) => end = Some(out.unwrap().values),
        }
    }
    let state = end.unwrap();
    assert_eq!(model.calls(), 2, "the planner and the answer were both asked");
    assert!(!nodes.is_empty());
    assert!(!nodes.iter().any(|n| n == "planner"), "planner events: {nodes:?}");
    assert_eq!(text, "Reset it from the login page.");
    assert_eq!(state.messages.last().unwrap().text(), text);
}
