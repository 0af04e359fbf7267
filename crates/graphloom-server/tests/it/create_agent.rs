//! A `create_agent` agent served as a hosted graph: runs over HTTP with the JSON context
//! reaching its tools, the human-in-the-loop interrupt in LangChain's shape, a resume
//! with decisions, a malformed decision that leaves the interrupt pending, its drawing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{human, TestServer};
use graphloom_core::{CompiledGraph, Message, MessageKind, ToolCall};
use graphloom_llm::{Reply, ScriptedModel};
use graphloom_prebuilt::middleware::hitl::{HumanInTheLoop, InterruptOn};
use graphloom_prebuilt::middleware::limits::ModelCallLimit;
use graphloom_prebuilt::{create_agent, AgentGraphState, ContextExt, FnTool, ToolError};
use graphloom_server::{factory, GraphDeps};
use serde_json::{json, Value};
use std::sync::Arc;

#[derive(Clone, serde::Deserialize)]
struct Tenant {
    tenant: String,
}

fn agent(deps: &GraphDeps) -> graphloom_core::Result<CompiledGraph<AgentGraphState>> {
    let model = ScriptedModel::responding(|msgs: &[Message], _| match msgs.last().map(|m| m.kind) {
        Some(MessageKind::Tool) => Reply::text(format!(
            "Done: {}",
            msgs.last().map(Message::text).unwrap_or_default()
        )),
        _ => Reply::tool_calls(
            "",
            vec![ToolCall {
                id: "call_r".into(),
                name: "refund".into(),
                args: json!({"order": "A7"}),
            }],
        ),
    })
    .keep_requests(0);
    let refund = FnTool::new("refund", "Refund an order", |a: Value, rt| async move {
        let tenant = rt.typed_context::<Tenant>().map(|t| t.tenant).unwrap_or_default();
        Ok::<_, ToolError>(format!(
            "refunded {} for {tenant}",
            a["order"].as_str().unwrap_or_default()
        ))
    });
    Ok(create_agent(Arc::new(model), [refund.arc()])
        .name("support")
        .system_prompt("You refund orders.")
        .middleware(HumanInTheLoop::new().interrupt_on("refund", InterruptOn::all()))
        .middleware(ModelCallLimit::new().run_limit(5))
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .store_dyn(Arc::clone(&deps.store))
        .build()?)
}

#[tokio::test]
async fn an_agent_is_served_with_its_interrupts_context_and_drawing() {
    let s = TestServer::sqlite_with(|_| {}, |b| b.graph("support", factory(agent))).await;
    let t = s.thread().await;
    let (code, v) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "support", "input": human("refund A7"), "context": {"tenant": "acme"}}),
        )
        .await;
    assert_eq!(code, 200, "{v}");
    let ints = v["__interrupt__"].as_array().unwrap();
    assert_eq!(ints[0]["value"]["action_requests"][0]["name"], "refund", "{v}");
    assert_eq!(
        ints[0]["value"]["review_configs"][0]["allowed_decisions"],
        json!(["approve", "edit", "reject", "respond"])
    );

    // A malformed decision: the run pauses again with the reason; nothing ran.
    let (code, v) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "support", "command": {"resume": {"decisions": [{"type": "maybe"}]}}, "context": {"tenant": "acme"}}),
        )
        .await;
    assert_eq!(code, 200, "{v}");
    let error = v["__interrupt__"][0]["value"]["error"].as_str().unwrap();
    assert!(error.contains("decisions"), "{error}");
    let (_, th) = s.get(&format!("/threads/{t}")).await;
    assert_eq!(th["status"], "interrupted");

    let (code, v) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "support", "command": {"resume": {"decisions": [{"type": "approve"}]}}, "context": {"tenant": "acme"}}),
        )
        .await;
    assert_eq!(code, 200, "{v}");
    let messages = v["messages"].as_array().unwrap();
    let texts: Vec<&str> = messages.iter().filter_map(|m| m["content"].as_str()).collect();
    assert_eq!(texts[2], "refunded A7 for acme", "{v}");
    assert_eq!(texts[3], "Done: refunded A7 for acme");
    assert_eq!(messages[3]["name"], "support");
    assert!(v["thread_model_call_count"].as_u64().unwrap() >= 2, "{v}");

    // The drawing shows the agent's nodes, the middleware hooks among them.
    let assistant = {
        let (_, list) = s.post("/assistants/search", json!({"graph_id": "support"})).await;
        list[0]["assistant_id"].as_str().unwrap().to_owned()
    };
    let (code, graph) = s.get(&format!("/assistants/{assistant}/graph")).await;
    assert_eq!(code, 200);
    let nodes: Vec<&str> = graph["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["id"].as_str())
        .collect();
    for want in [
        "model",
        "tools",
        "HumanInTheLoopMiddleware.after_model",
        "ModelCallLimitMiddleware.before_model",
    ] {
        assert!(nodes.contains(&want), "{want} missing from {nodes:?}");
    }
    let schema = {
        let (_, v) = s.get(&format!("/assistants/{assistant}/schemas")).await;
        v
    };
    let props: Value = schema["state_schema"]["properties"].clone();
    assert!(props.get("thread_model_call_count").is_some(), "{schema}");
    s.stop().await;
}
