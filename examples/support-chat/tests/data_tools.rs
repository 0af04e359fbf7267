//! The tools answer from the bundled data (an order table, a ranked article set) and the
//! verifier re-plans when a result, however non-empty, does not answer the question.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{custom_statuses, in_memory, named, plan, planner_requests, turn};
use graphloom_llm::{Reply, ScriptedModel};
use serde_json::Value;
use std::time::Duration;
use support_chat::{default_tools, run_tool, SupportConfig, ToolOutput, ToolStatus};

async fn call(tool: &str, query: &str) -> ToolOutput {
    let tools = default_tools();
    run_tool(
        tools.get(tool).unwrap(),
        "c1",
        query,
        Duration::from_secs(5),
        1,
        Duration::ZERO,
    )
    .await
}

fn titles(out: &ToolOutput) -> Vec<&str> {
    out.output["articles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["title"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn kb_search_ranks_articles_by_how_well_they_match() {
    let out = call("kb_search", "how long do refunds take").await;
    assert_eq!(out.status, ToolStatus::Ok);
    assert_eq!(titles(&out)[0], "Refunds");
    // Both mention resetting a password; the article about it ranks first.
    let out = call("kb_search", "reset password").await;
    assert_eq!(titles(&out), ["Reset your password", "Account locked"]);
    let scores: Vec<f64> = out.output["articles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["score"].as_f64().unwrap())
        .collect();
    assert!(scores[0] > scores[1], "{scores:?}");
    // Word forms match: "shipped" finds the shipping articles.
    let out = call("kb_search", "when is my order shipped").await;
    assert!(titles(&out).contains(&"Shipping times"), "{:?}", titles(&out));
    // No shared term, no result.
    let out = call("kb_search", "xyzzy plugh").await;
    assert_eq!(out.status, ToolStatus::Empty);
}

#[tokio::test]
async fn order_lookup_reads_the_order_table() {
    let out = call("order_lookup", "where is order 2087?").await;
    assert_eq!(out.status, ToolStatus::Ok);
    assert_eq!(out.output["order"], "2087");
    assert_eq!(out.output["status"], "processing");
    assert_eq!(out.output["eta_days"], 5);
    assert_eq!(out.output["carrier"], Value::Null);
    assert_eq!(out.output["customer_email"], "[EMAIL]");
    let out = call("order_lookup", "order 1235").await;
    assert_eq!(out.output["status"], "delivered");
    assert_eq!(out.output["eta_days"], Value::Null);
    // An order that is not in the table is found empty, not invented.
    let out = call("order_lookup", "order 9999").await;
    assert_eq!(out.status, ToolStatus::Empty);
    let out = call("order_lookup", "my order").await;
    assert_eq!(out.status, ToolStatus::Error);
}

#[tokio::test]
async fn a_result_that_does_not_answer_the_question_is_replanned() {
    let model = ScriptedModel::new([
        // Articles come back, about shipping: not an answer to a password question.
        plan(&[("kb_search", "shipping")]),
        plan(&[("kb_search", "reset password")]),
        Reply::text("Open Settings > Security > Reset password."),
    ]);
    let g = in_memory(&model, default_tools(), SupportConfig::default());
    let (out, events) = turn(&g, "t-irrelevant", "How do I reset my password?").await;
    let s = out.unwrap().values;
    let ends: Vec<&str> = named(&events, "on_tool_end")
        .iter()
        .map(|e| e.data["status"].as_str().unwrap())
        .collect();
    assert_eq!(ends, ["ok", "ok"]);
    assert_eq!(custom_statuses(&events), ["planning_retry"]);
    assert_eq!(s.retry_count, 1);
    let replan = planner_requests(&model)[1].messages.last().unwrap().text();
    assert!(
        replan.contains(
            "kb_search found results for \"shipping\" that do not answer \"How do I reset my password?\""
        ),
        "{replan}"
    );
    assert_eq!(s.phase, "done");
}

#[tokio::test]
async fn another_order_than_the_one_asked_about_is_not_an_answer() {
    let model = ScriptedModel::new([
        plan(&[("order_lookup", "order 1234")]),
        plan(&[("order_lookup", "order 4402")]),
        Reply::text("Order 4402 is out for delivery."),
    ]);
    let g = in_memory(&model, default_tools(), SupportConfig::default());
    let (out, events) = turn(&g, "t-wrong-order", "Where is order 4402?").await;
    let s = out.unwrap().values;
    assert_eq!(custom_statuses(&events), ["planning_retry"]);
    let last = s.tool_outputs.last().unwrap();
    assert_eq!(last.output["order"], "4402");
    assert_eq!(last.output["status"], "out_for_delivery");
}
