//! `#[tool]`: an async function becomes a `FnTool` with its doc comment as description.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::{Message, ToolCall};
use graphloom_prebuilt::{tool, Tool, ToolError, ToolNode, ToolRuntime};
use serde_json::json;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Refund {
    /// Order id.
    order: String,
}

/// Refund an order.
///
/// Only for paid orders.
#[tool(mutating, injected = ["user_id"])]
async fn refund(args: Refund, rt: ToolRuntime) -> Result<String, ToolError> {
    let user = rt
        .injected("user_id")
        .and_then(|v| v.as_str())
        .unwrap_or("?")
        .to_owned();
    Ok(format!("{user} refunded {}", args.order))
}

#[tool(name = "echo_text", description = "Echo the text")]
pub(crate) async fn echo(args: Refund, _rt: ToolRuntime) -> Result<serde_json::Value, ToolError> {
    Ok(json!({"echo": args.order}))
}

#[tokio::test]
async fn the_macro_builds_a_tool_from_an_async_fn() {
    let t = refund_tool();
    assert_eq!(t.name(), "refund");
    assert_eq!(t.description(), "Refund an order.\n\nOnly for paid orders.");
    assert!(t.mutating());
    assert_eq!(t.injected(), ["user_id".to_owned()]);
    assert_eq!(t.schema()["properties"]["order"]["description"], "Order id.");

    let e = echo_tool();
    assert_eq!(
        (e.name(), e.description(), e.mutating()),
        ("echo_text", "Echo the text", false)
    );
    let msg = Message::ai_with_tool_calls(
        "",
        vec![ToolCall {
            id: "e1".into(),
            name: "echo_text".into(),
            args: json!({"order": "A7"}),
        }],
    );
    let out = ToolNode::new([e.arc()])
        .run_message(&msg, json!({}), None)
        .await
        .unwrap();
    assert_eq!(out[0].text(), r#"{"echo":"A7"}"#);
    // The function itself is untouched.
    let direct = refund(
        Refund { order: "B1".into() },
        ToolRuntime::detached(json!({"user_id": "u9"}), "x"),
    )
    .await
    .unwrap();
    assert_eq!(direct, "u9 refunded B1");
}
