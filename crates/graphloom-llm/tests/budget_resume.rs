//! Budgets inside real graphs: a run that reaches its model-call budget ends with
//! `Error::BudgetExceeded` and a resumable checkpoint; raising the budget and continuing
//! finishes it, and the model server sees exactly the calls the budgets allowed.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(feature = "openai")]

mod common;

use common::{MockReply, MockServer};
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::{
    Error as RunError, Message, Routes, RunConfig, RunInput, RunStatus, Send, Seq, State, StateGraph, END,
    START,
};
use graphloom_llm::{
    Budget, BudgetedModel, ChatModel, ChatOptions, NodeResultExt, OpenAiModel, Reply, ScriptedModel, Usage,
    UsageTracker,
};
use serde_json::json;
use std::sync::Arc;

#[derive(State, Clone, Default, Debug)]
struct Agent {
    #[reducer(add_messages)]
    messages: Seq<Message>,
    turns: u32,
}

fn agent_graph<M: ChatModel + Clone + 'static>(model: M, turns: u32) -> graphloom_core::CompiledGraph<Agent> {
    StateGraph::<Agent>::new()
        .add_node("agent", move |s: Arc<Agent>, _rt| {
            let model = model.clone();
            async move {
                let history = s.messages.to_vec();
                let answer = model.invoke(&history, &ChatOptions::new()).await.node()?;
                Ok(AgentUpdate::new().messages(vec![answer]).turns(s.turns + 1))
            }
        })
        .add_edge(START, "agent")
        .add_conditional_edges(
            "agent",
            move |s: &Agent| if s.turns >= turns { END } else { "agent" },
        )
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap()
}

fn completion() -> serde_json::Value {
    // No id: each answer gets a fresh one (the same id would make add_messages replace).
    json!({"model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "thinking..."}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
}

#[tokio::test]
async fn call_budget_stops_the_run_and_raising_it_resumes_to_the_end() {
    let server = MockServer::repeating(MockReply::json(completion())).await;
    let http = OpenAiModel::new("gpt-4o-mini")
        .base_url(server.v1())
        .api_key("k")
        .unwrap();
    let tracker = UsageTracker::shared();
    let model = BudgetedModel::new(http, Arc::clone(&tracker), Budget::unlimited().calls(3));
    let graph = agent_graph(model.clone(), 5);
    let cfg = RunConfig::thread("budget-1");

    let err = graph
        .invoke(
            AgentUpdate::new().messages(vec![Message::human("go")]),
            cfg.clone(),
        )
        .await
        .unwrap_err();
    match &err {
        RunError::BudgetExceeded {
            node,
            budget,
            message,
        } => {
            assert_eq!(node, "agent");
            assert_eq!(budget, "model_calls");
            assert!(message.contains("limit 3"), "{message}");
        }
        other => panic!("expected a budget error, got {other:?}"),
    }
    assert_eq!(server.request_count(), 3, "no call past the cap");
    let snapshot = graph.get_state(&cfg).await.unwrap();
    assert_eq!(snapshot.values.turns, 3);
    assert_eq!(snapshot.next, vec!["agent".to_owned()]);

    // Continuing without raising the budget fails again, still without calling the model.
    let again = graph
        .invoke_input(RunInput::Continue, cfg.clone())
        .await
        .unwrap_err();
    assert!(matches!(again, RunError::BudgetExceeded { .. }));
    assert_eq!(server.request_count(), 3);

    model.set_budget(Budget::unlimited().calls(10));
    let out = graph.invoke_input(RunInput::Continue, cfg.clone()).await.unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(out.values.turns, 5);
    assert_eq!(out.values.messages.len(), 6);
    assert_eq!(
        server.request_count(),
        5,
        "exactly the allowed calls reached the server"
    );

    let totals = tracker.totals();
    assert_eq!(totals.calls, 5);
    assert_eq!((totals.input_tokens, totals.output_tokens), (50, 25));
    assert!(totals.cost_usd > 0.0, "gpt-4o-mini has a price");
    assert_eq!(tracker.events().len(), 5);
}

#[derive(State, Clone, Default, Debug)]
struct Fan {
    jobs: Vec<u32>,
    #[reducer(append)]
    answers: Seq<String>,
}

#[tokio::test]
async fn parallel_calls_never_exceed_the_budget_and_finished_ones_are_not_repeated() {
    let script = ScriptedModel::repeating([Reply::text("done")]);
    let model = BudgetedModel::new(
        script.clone(),
        UsageTracker::shared(),
        Budget::unlimited().calls(3),
    );
    let m = model.clone();
    let graph = StateGraph::<Fan>::new()
        .add_packet_node("worker", move |job: u32, _rt| {
            let model = m.clone();
            async move {
                let answer = model
                    .invoke(&[Message::human(format!("job {job}"))], &ChatOptions::new())
                    .await
                    .node()?;
                Ok(FanUpdate::new().answers(vec![format!("{job}:{}", answer.text())]))
            }
        })
        .add_conditional_edges(START, |s: &Fan| {
            s.jobs.iter().map(|&j| Send::new("worker", j)).collect::<Routes>()
        })
        .add_edge("worker", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let cfg = RunConfig::thread("fan");
    let err = graph
        .invoke(FanUpdate::new().jobs((0..5).collect()), cfg.clone())
        .await
        .unwrap_err();
    assert!(matches!(err, RunError::BudgetExceeded { .. }), "{err:?}");
    assert_eq!(script.calls(), 3, "five parallel workers, three calls allowed");

    model.set_budget(Budget::unlimited().calls(5));
    let out = graph.invoke_input(RunInput::Continue, cfg).await.unwrap();
    assert_eq!(out.values.answers.len(), 5);
    assert_eq!(script.calls(), 5, "the three finished workers were not run again");
}

#[tokio::test]
async fn token_and_cost_budgets_refuse_the_next_call_and_cap_max_tokens() {
    let script =
        ScriptedModel::repeating([Reply::text("x").with_usage(Usage::new(100, 40))]).named("priced-1");
    let tracker = Arc::new(UsageTracker::with_prices(
        graphloom_llm::PriceTable::empty().with_price("priced", 1000.0, 1000.0),
    ));
    let model = BudgetedModel::new(
        script.clone(),
        Arc::clone(&tracker),
        Budget::unlimited().output_tokens(100),
    );
    let hi = [Message::human("hi")];
    model.invoke(&hi, &ChatOptions::new()).await.unwrap();
    model
        .invoke(&hi, &ChatOptions::new().max_tokens(500))
        .await
        .unwrap();
    let reqs = script.requests();
    assert_eq!(reqs[0].options.max_tokens, Some(100));
    assert_eq!(
        reqs[1].options.max_tokens,
        Some(60),
        "capped to what the budget has left"
    );
    model.invoke(&hi, &ChatOptions::new()).await.unwrap();
    let err = model.invoke(&hi, &ChatOptions::new()).await.unwrap_err();
    assert!(
        matches!(&err, graphloom_llm::Error::BudgetExceeded { budget, .. } if budget == "output_tokens"),
        "{err:?}"
    );
    assert_eq!(script.calls(), 3);

    // Each call costs (100 + 40) * $1000 / 1M = $0.14.
    model.set_budget(Budget::unlimited().cost_usd(0.5));
    model.invoke(&hi, &ChatOptions::new()).await.unwrap();
    let err = model.invoke(&hi, &ChatOptions::new()).await.unwrap_err();
    assert!(
        matches!(&err, graphloom_llm::Error::BudgetExceeded { budget, .. } if budget == "cost_usd"),
        "{err:?}"
    );
    assert!((tracker.totals().cost_usd - 0.56).abs() < 1e-9);

    model.set_budget(Budget::unlimited().wall_time(std::time::Duration::ZERO));
    let err = model.invoke(&hi, &ChatOptions::new()).await.unwrap_err();
    assert!(matches!(&err, graphloom_llm::Error::BudgetExceeded { budget, .. } if budget == "wall_time"));
    assert_eq!(script.calls(), 4);
}
