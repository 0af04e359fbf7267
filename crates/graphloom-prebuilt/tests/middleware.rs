//! The standard middleware on real agents (scripted models): human in the loop, limits,
//! budgets, summarisation, context editing, fallback, retries, PII, tool selection, todo.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::{Command, Message, MessageKind, RunConfig, RunInput, RunStatus, ToolCall};
use graphloom_llm::{Budget, PriceTable, Reply, ScriptedModel, Usage};
use graphloom_prebuilt::middleware::budget::{BudgetExit, TokenBudget};
use graphloom_prebuilt::middleware::context_editing::ContextEditing;
use graphloom_prebuilt::middleware::fallback::ModelFallback;
use graphloom_prebuilt::middleware::hitl::{parse_response, DecisionType, HumanInTheLoop, InterruptOn};
use graphloom_prebuilt::middleware::limits::{ExitBehavior, ModelCallLimit, ToolCallLimit};
use graphloom_prebuilt::middleware::pii::{Pii, PiiKind, Redaction};
use graphloom_prebuilt::middleware::retry::{Backoff, ModelRetry, OnFailure, ToolRetry};
use graphloom_prebuilt::middleware::summarization::{Summarization, Trigger};
use graphloom_prebuilt::middleware::todo::{Todo, TodoList, TodoStatus};
use graphloom_prebuilt::middleware::tool_selection::ToolSelector;
use graphloom_prebuilt::{create_agent, AgentGraphState, AgentGraphUpdate, FnTool, ToolError};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Args {
    /// Input.
    x: String,
}

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        args,
    }
}

/// A tool named `name` that counts its runs in `runs` and echoes `x`.
fn counted(name: &'static str, runs: Arc<AtomicUsize>) -> FnTool {
    FnTool::new(name, "A tool", move |a: Args, _rt| {
        let runs = Arc::clone(&runs);
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok::<_, ToolError>(format!("{name}:{}", a.x))
        }
    })
}

fn input(text: &str) -> AgentGraphUpdate {
    AgentGraphUpdate::new().messages(vec![Message::human(text)])
}

fn kinds_texts(s: &AgentGraphState) -> Vec<(MessageKind, String)> {
    s.messages.iter().map(|m| (m.kind, m.text())).collect()
}

#[tokio::test]
async fn hitl_approval_text_shows_the_arguments_in_the_models_order() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Pay {
        to: String,
        amount: i64,
    }
    let pay = FnTool::new("pay", "Pay someone", |a: Pay, _rt| async move {
        Ok::<_, ToolError>(format!("paid {} to {}", a.amount, a.to))
    });
    // `to` before `amount`: not the keys' sorted order.
    let args: Value = serde_json::from_str(r#"{"to": "B2", "amount": 5}"#).unwrap();
    let model = ScriptedModel::new([
        Reply::tool_calls("", vec![call("p1", "pay", args)]),
        Reply::text("done"),
    ]);
    let agent = create_agent(Arc::new(model), [pay.arc()])
        .middleware(HumanInTheLoop::new().interrupt_on("pay", InterruptOn::all()))
        .checkpointer(InMemorySaver::new())
        .build()
        .unwrap();
    let paused = agent
        .invoke(input("pay"), RunConfig::thread("order"))
        .await
        .unwrap();
    let request = &paused.interrupts[0].value["action_requests"][0];
    assert_eq!(
        request["description"],
        "Tool execution requires approval\n\nTool: pay\nArgs: {'to': 'B2', 'amount': 5}"
    );
    assert_eq!(
        serde_json::to_string(&request["args"]).unwrap(),
        r#"{"to":"B2","amount":5}"#,
        "the interrupt's JSON keeps the order too"
    );
}

#[tokio::test]
async fn hitl_reviews_several_calls_in_one_interrupt_with_langchains_shapes() {
    let sends = Arc::new(AtomicUsize::new(0));
    let deletes = Arc::new(AtomicUsize::new(0));
    let reads = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new([
        Reply::tool_calls(
            "",
            vec![
                call("c1", "send", json!({"x": "hi"})),
                call("c2", "read", json!({"x": "inbox"})),
                call("c3", "delete", json!({"x": "all"})),
            ],
        ),
        Reply::text("done"),
    ]);
    let agent = create_agent(
        Arc::new(model.clone()),
        [
            counted("send", Arc::clone(&sends)).arc(),
            counted("read", Arc::clone(&reads)).arc(),
            counted("delete", Arc::clone(&deletes)).arc(),
        ],
    )
    .middleware(
        HumanInTheLoop::new()
            .interrupt_on("send", InterruptOn::all())
            .interrupt_on(
                "delete",
                InterruptOn::allow([DecisionType::Approve, DecisionType::Reject]),
            ),
    )
    .checkpointer(InMemorySaver::new())
    .build()
    .unwrap();
    let cfg = RunConfig::thread("hitl-1");
    let paused = agent.invoke(input("go"), cfg.clone()).await.unwrap();
    assert_eq!(paused.status, RunStatus::Interrupted);
    assert_eq!(paused.interrupts.len(), 1);
    let request = paused.interrupts[0].value.clone();
    assert_eq!(
        request["action_requests"],
        json!([
            {"name": "send", "args": {"x": "hi"}, "description": "Tool execution requires approval\n\nTool: send\nArgs: {'x': 'hi'}"},
            {"name": "delete", "args": {"x": "all"}, "description": "Tool execution requires approval\n\nTool: delete\nArgs: {'x': 'all'}"}
        ])
    );
    assert_eq!(
        request["review_configs"],
        json!([
            {"action_name": "send", "allowed_decisions": ["approve", "edit", "reject", "respond"]},
            {"action_name": "delete", "allowed_decisions": ["approve", "reject"]}
        ])
    );
    // Nothing ran while paused, the unreviewed call neither.
    assert_eq!(reads.load(Ordering::SeqCst), 0);

    // A malformed answer runs nothing and leaves the run paused, saying why.
    let bad = json!({"decisions": [{"type": "approve"}]});
    let e = parse_response(&request, &bad).unwrap_err();
    assert!(e.to_string().contains("Number of human decisions (1)"), "{e}");
    let again = agent.resume(Command::resume(bad), cfg.clone()).await.unwrap();
    assert_eq!(again.status, RunStatus::Interrupted);
    assert!(again.interrupts[0].value["error"]
        .as_str()
        .unwrap()
        .contains("does not match"));
    let not_allowed = json!({"decisions": [{"type": "approve"}, {"type": "respond", "message": "x"}]});
    let again = agent
        .resume(Command::resume(not_allowed), cfg.clone())
        .await
        .unwrap();
    assert_eq!(again.status, RunStatus::Interrupted);
    assert!(again.interrupts[0].value["error"]
        .as_str()
        .unwrap()
        .contains("not allowed for tool 'delete'"));
    assert_eq!(
        sends.load(Ordering::SeqCst) + reads.load(Ordering::SeqCst) + deletes.load(Ordering::SeqCst),
        0
    );

    let good = json!({"decisions": [
        {"type": "edit", "edited_action": {"name": "send", "args": {"x": "hello"}}},
        {"type": "reject", "message": "keep them"}
    ]});
    let done = agent.resume(Command::resume(good), cfg.clone()).await.unwrap();
    assert_eq!(done.status, RunStatus::Done, "{:?}", done.interrupts);
    assert_eq!(sends.load(Ordering::SeqCst), 1);
    assert_eq!(reads.load(Ordering::SeqCst), 1);
    assert_eq!(deletes.load(Ordering::SeqCst), 0);
    let t = kinds_texts(&done.values);
    // The rejection is answered at review time, the others when the tools run.
    assert_eq!(
        t[2],
        (
            MessageKind::Tool,
            "User rejected the tool call for `delete` with reason: keep them".into()
        )
    );
    assert!(
        t[3].1
            .starts_with("Note: a human reviewer replaced this tool call")
            && t[3].1.ends_with("Tool response:\nsend:hello"),
        "{}",
        t[3].1
    );
    assert_eq!(t[4], (MessageKind::Tool, "read:inbox".into()));
    assert_eq!(t[5], (MessageKind::Ai, "done".into()));
    assert_eq!(done.values.messages.get(2).unwrap().extra["status"], "error");
}

#[tokio::test]
async fn hitl_respond_answers_for_the_tool() {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new([
        Reply::tool_calls("", vec![call("c1", "ask_user", json!({"x": "color?"}))]),
        Reply::text("blue it is"),
    ]);
    let agent = create_agent(Arc::new(model), [counted("ask_user", Arc::clone(&runs)).arc()])
        .middleware(
            HumanInTheLoop::new().interrupt_on("ask_user", InterruptOn::allow([DecisionType::Respond])),
        )
        .checkpointer(InMemorySaver::new())
        .build()
        .unwrap();
    let cfg = RunConfig::thread("hitl-respond");
    agent.invoke(input("pick"), cfg.clone()).await.unwrap();
    let done = agent
        .resume(
            Command::resume(json!({"decisions": [{"type": "respond", "message": "blue"}]})),
            cfg,
        )
        .await
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let m = done.values.messages.get(2).unwrap();
    assert_eq!((m.kind, m.text()), (MessageKind::Tool, "blue".to_owned()));
    assert_eq!(m.extra["status"], "success");
}

#[tokio::test]
async fn model_call_limits_end_or_fail_per_run_and_thread() {
    let runs = Arc::new(AtomicUsize::new(0));
    let tool_loop =
        || ScriptedModel::repeating([Reply::tool_calls("", vec![call("c", "t", json!({"x": "1"}))])]);
    // Per run: ends with LangChain's message after two calls.
    let model = tool_loop();
    let agent = create_agent(Arc::new(model.clone()), [counted("t", Arc::clone(&runs)).arc()])
        .middleware(ModelCallLimit::new().run_limit(2))
        .checkpointer(InMemorySaver::new())
        .build()
        .unwrap();
    let out = agent
        .invoke(input("loop"), RunConfig::thread("mcl"))
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(model.calls(), 2);
    assert_eq!(
        out.values.messages.last().unwrap().text(),
        "Model call limits exceeded: run limit (2/2)"
    );
    // A new run of the thread starts its run count again.
    let out = agent
        .invoke(input("again"), RunConfig::thread("mcl"))
        .await
        .unwrap();
    assert_eq!(model.calls(), 4);
    assert_eq!(out.values.get::<u64>("thread_model_call_count"), Some(4));

    // Per thread, failing: the run ends with a typed error naming the limit.
    let model = tool_loop();
    let agent = create_agent(Arc::new(model.clone()), [counted("t", Arc::clone(&runs)).arc()])
        .middleware(
            ModelCallLimit::new()
                .thread_limit(1)
                .exit_behavior(ExitBehavior::Error),
        )
        .checkpointer(InMemorySaver::new())
        .build()
        .unwrap();
    let err = agent
        .invoke(input("loop"), RunConfig::thread("mcl-e"))
        .await
        .unwrap_err();
    let typed = err.find_source::<graphloom_prebuilt::Error>().expect("typed");
    assert!(
        matches!(typed, graphloom_prebuilt::Error::LimitExceeded { .. }),
        "{typed}"
    );
    assert!(err.to_string().contains("thread limit (1/1)"), "{err}");
    // A limit of nothing is refused at build time.
    assert!(create_agent(Arc::new(tool_loop()), [])
        .middleware(ModelCallLimit::new())
        .build()
        .is_err());
}

#[tokio::test]
async fn tool_call_limits_block_continue_and_end() {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new([
        Reply::tool_calls(
            "",
            vec![
                call("a", "search", json!({"x": "1"})),
                call("b", "search", json!({"x": "2"})),
                call("c", "other", json!({"x": "3"})),
            ],
        ),
        Reply::text("ok"),
    ]);
    let agent = create_agent(
        Arc::new(model),
        [
            counted("search", Arc::clone(&runs)).arc(),
            counted("other", Arc::clone(&runs)).arc(),
        ],
    )
    .middleware(ToolCallLimit::for_tool("search").run_limit(1))
    .build()
    .unwrap();
    let out = agent.invoke(input("s"), RunConfig::default()).await.unwrap();
    let t = kinds_texts(&out.values);
    assert_eq!(
        t[2],
        (
            MessageKind::Tool,
            "Tool call limit exceeded. Do not call 'search' again.".into()
        )
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(t.last().unwrap().1, "ok");

    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new([Reply::tool_calls(
        "",
        vec![
            call("a", "search", json!({"x": "1"})),
            call("b", "other", json!({"x": "2"})),
        ],
    )]);
    let agent = create_agent(
        Arc::new(model),
        [
            counted("search", Arc::clone(&runs)).arc(),
            counted("other", Arc::clone(&runs)).arc(),
        ],
    )
    .middleware(
        ToolCallLimit::new()
            .run_limit(0)
            .thread_limit(5)
            .exit_behavior(ExitBehavior::End),
    )
    .build()
    .unwrap();
    let out = agent.invoke(input("s"), RunConfig::default()).await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(
        out.values.messages.last().unwrap().text(),
        "Tool call limit reached: run limit exceeded (2/0 calls)."
    );
}

#[tokio::test]
async fn a_token_budget_stops_the_run_resumably_and_an_unpriced_cost_budget_is_refused() {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::repeating([
        Reply::tool_calls("", vec![call("c", "t", json!({"x": "1"}))]).with_usage(Usage::new(60, 10))
    ]);
    let budget = TokenBudget::new(Budget::unlimited().total_tokens(100));
    let handle = budget.shared();
    let agent = create_agent(Arc::new(model.clone()), [counted("t", Arc::clone(&runs)).arc()])
        .middleware(budget)
        .checkpointer(InMemorySaver::new())
        .build()
        .unwrap();
    let cfg = RunConfig::thread("budget");
    let err = agent.invoke(input("go"), cfg.clone()).await.unwrap_err();
    assert!(
        matches!(err, graphloom_core::Error::BudgetExceeded { .. }),
        "{err}"
    );
    assert_eq!(model.calls(), 2);
    // Raise the budget and continue from the checkpoint.
    handle.write().unwrap().max_total_tokens = Some(150);
    let err = agent
        .invoke_input(RunInput::Continue, cfg.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(err, graphloom_core::Error::BudgetExceeded { .. }),
        "{err}"
    );
    assert_eq!(model.calls(), 3);

    // End instead of failing.
    let model = ScriptedModel::repeating([
        Reply::tool_calls("", vec![call("c", "t", json!({"x": "1"}))]).with_usage(Usage::new(60, 50))
    ]);
    let agent = create_agent(Arc::new(model.clone()), [counted("t", Arc::clone(&runs)).arc()])
        .middleware(
            TokenBudget::new(Budget::unlimited().cost_usd(0.0001))
                .prices(PriceTable::empty().with_price("scripted", 1.0, 1.0))
                .exit_behavior(BudgetExit::End),
        )
        .checkpointer(InMemorySaver::new())
        .build()
        .unwrap();
    let cfg = RunConfig::thread("cost");
    let out = agent.invoke(input("a"), cfg.clone()).await.unwrap();
    assert_eq!(model.calls(), 1);
    assert!(
        out.values
            .messages
            .last()
            .unwrap()
            .text()
            .starts_with("Stopped: cost_usd budget exceeded"),
        "{}",
        out.values.messages.last().unwrap().text()
    );

    // A cost budget over a model without a price is an error at build time, not a free run.
    let err = create_agent(Arc::new(ScriptedModel::new([Reply::text("x")])), [])
        .middleware(TokenBudget::new(Budget::unlimited().cost_usd(1.0)))
        .build()
        .err()
        .unwrap();
    assert!(err.to_string().contains("has no price"), "{err}");
}

#[tokio::test]
async fn summarisation_replaces_old_messages_and_keeps_tool_pairs() {
    let summarizer = ScriptedModel::new([Reply::text("the user asked about a and b")]);
    let model = ScriptedModel::new([Reply::text("final")]);
    let agent = create_agent(Arc::new(model.clone()), [])
        .middleware(Summarization::new(Arc::new(summarizer.clone()), Trigger::Messages(4)).keep_messages(2))
        .build()
        .unwrap();
    let history = vec![
        Message::human("a?"),
        Message::ai("a."),
        Message::ai_with_tool_calls("", vec![call("t1", "x", json!({}))]),
        Message::tool("r1", "t1"),
        Message::human("b?"),
    ];
    let out = agent
        .invoke(AgentGraphUpdate::new().messages(history), RunConfig::default())
        .await
        .unwrap();
    let t = kinds_texts(&out.values);
    // Keeping 2 would cut between the call and its result: the call is kept too.
    assert_eq!(
        t[0].1,
        "Here is a summary of the conversation to date:\n\nthe user asked about a and b"
    );
    assert_eq!(t[1].0, MessageKind::Ai);
    assert_eq!(t[2], (MessageKind::Tool, "r1".into()));
    assert_eq!(t[3], (MessageKind::Human, "b?".into()));
    assert_eq!(t[4], (MessageKind::Ai, "final".into()));
    assert_eq!(summarizer.calls(), 1);
    assert!(summarizer.requests()[0].messages[1].text().contains("Human: a?"));
    assert_eq!(model.requests()[0].messages.len(), 4);
}

#[tokio::test]
async fn context_editing_clears_old_tool_results_in_the_request_only() {
    let model = ScriptedModel::new([Reply::text("ok")]);
    let agent = create_agent(Arc::new(model.clone()), [])
        .middleware(ContextEditing::new().trigger_tokens(10).keep(1))
        .build()
        .unwrap();
    let big = "x".repeat(200);
    let history = vec![
        Message::human("q"),
        Message::ai_with_tool_calls("", vec![call("1", "t", json!({})), call("2", "t", json!({}))]),
        Message::tool(big.clone(), "1"),
        Message::tool(big.clone(), "2"),
    ];
    let out = agent
        .invoke(AgentGraphUpdate::new().messages(history), RunConfig::default())
        .await
        .unwrap();
    let sent = &model.requests()[0].messages;
    assert_eq!(sent[2].text(), "[cleared]");
    assert_eq!(sent[3].text(), big);
    assert_eq!(out.values.messages.get(2).unwrap().text(), big);
}

#[tokio::test]
async fn fallback_and_retry_recover_from_provider_errors() {
    let transient = || {
        Reply::error(graphloom_llm::Error::Http {
            provider: "p".into(),
            status: 503,
            message: "overloaded".into(),
            attempts: 1,
        })
    };
    // Retry: two failures then an answer.
    let model = ScriptedModel::new([transient(), transient(), Reply::text("third time")]);
    let agent = create_agent(Arc::new(model.clone()), [])
        .middleware(ModelRetry::new().max_retries(2).backoff(Backoff::none()))
        .build()
        .unwrap();
    let out = agent.invoke(input("q"), RunConfig::default()).await.unwrap();
    assert_eq!(out.values.messages.last().unwrap().text(), "third time");
    assert_eq!(model.calls(), 3);
    // Out of retries, `Continue` answers with the failure instead of failing the run.
    let model = ScriptedModel::new([transient(), transient()]);
    let agent = create_agent(Arc::new(model), [])
        .middleware(
            ModelRetry::new()
                .max_retries(1)
                .backoff(Backoff::none())
                .on_failure(OnFailure::Continue),
        )
        .build()
        .unwrap();
    let out = agent.invoke(input("q"), RunConfig::default()).await.unwrap();
    assert!(out
        .values
        .messages
        .last()
        .unwrap()
        .text()
        .starts_with("Model call failed after 2 attempts"));
    // A non-transient error is not retried by default.
    let model = ScriptedModel::new([Reply::failure("bad request"), Reply::text("never")]);
    let agent = create_agent(Arc::new(model.clone()), [])
        .middleware(ModelRetry::new().backoff(Backoff::none()))
        .build()
        .unwrap();
    assert!(agent.invoke(input("q"), RunConfig::default()).await.is_err());
    assert_eq!(model.calls(), 1);

    // Fallback: the primary fails, the second model answers.
    let primary = ScriptedModel::new([transient()]);
    let backup = ScriptedModel::new([Reply::text("from backup")]);
    let agent = create_agent(Arc::new(primary.clone()), [])
        .middleware(ModelFallback::new([
            Arc::new(backup.clone()) as Arc<dyn graphloom_llm::DynChatModel>
        ]))
        .build()
        .unwrap();
    let out = agent.invoke(input("q"), RunConfig::default()).await.unwrap();
    assert_eq!(out.values.messages.last().unwrap().text(), "from backup");
    assert_eq!((primary.calls(), backup.calls()), (1, 1));
}

#[tokio::test]
async fn tool_retry_retries_failed_calls() {
    let attempts = Arc::new(AtomicUsize::new(0));
    let a2 = Arc::clone(&attempts);
    let flaky = FnTool::new("flaky", "Fails twice", move |_a: Args, _rt| {
        let attempts = Arc::clone(&a2);
        async move {
            if attempts.fetch_add(1, Ordering::SeqCst) < 2 {
                Err(ToolError::execution("busy"))
            } else {
                Ok("worked".to_owned())
            }
        }
    });
    let model = ScriptedModel::new([
        Reply::tool_calls("", vec![call("c", "flaky", json!({"x": "1"}))]),
        Reply::text("ok"),
    ]);
    let agent = create_agent(Arc::new(model), [flaky.arc()])
        .middleware(ToolRetry::new().max_retries(2).backoff(Backoff::none()))
        .build()
        .unwrap();
    let out = agent.invoke(input("q"), RunConfig::default()).await.unwrap();
    assert_eq!(out.values.messages.get(2).unwrap().text(), "worked");
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn pii_redacts_input_output_and_tool_results_or_blocks() {
    let leaky = FnTool::new("lookup", "", |_a: Args, _rt| async {
        Ok::<_, ToolError>("owner: bob@corp.io, card 4111 1111 1111 1111".to_owned())
    });
    let model = ScriptedModel::new([
        Reply::tool_calls("", vec![call("c", "lookup", json!({"x": "1"}))]),
        Reply::text("mail alice@example.com from 10.1.2.3"),
    ]);
    let agent = create_agent(Arc::new(model.clone()), [leaky.arc()])
        .middleware(
            Pii::new(PiiKind::Email, Redaction::Redact)
                .on_output(true)
                .on_tool_results(true),
        )
        .middleware(
            Pii::new(PiiKind::CreditCard, Redaction::Mask)
                .on_input(false)
                .on_tool_results(true),
        )
        .middleware(
            Pii::new(PiiKind::Ip, Redaction::Hash)
                .on_input(false)
                .on_output(true),
        )
        .build()
        .unwrap();
    let out = agent
        .invoke(input("I am carol@x.org"), RunConfig::default())
        .await
        .unwrap();
    let t = kinds_texts(&out.values);
    assert_eq!(t[0].1, "I am [REDACTED_EMAIL]");
    assert_eq!(t[2].1, "owner: [REDACTED_EMAIL], card **** **** **** 1111");
    assert!(
        t[3].1.starts_with("mail [REDACTED_EMAIL] from <ip_hash:"),
        "{}",
        t[3].1
    );
    // The model never saw the raw values.
    let sent: String = model
        .requests()
        .iter()
        .map(|r| serde_json::to_string(&r.messages).unwrap())
        .collect();
    assert!(
        !sent.contains("carol@x.org") && !sent.contains("4111 1111"),
        "{sent}"
    );

    let model = ScriptedModel::new([Reply::text("never")]);
    let agent = create_agent(Arc::new(model.clone()), [])
        .middleware(Pii::new(PiiKind::Email, Redaction::Block))
        .build()
        .unwrap();
    let err = agent
        .invoke(input("write to a@b.co"), RunConfig::default())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err.find_source::<graphloom_prebuilt::Error>(),
            Some(graphloom_prebuilt::Error::PiiDetected { count: 1, .. })
        ),
        "{err}"
    );
    assert_eq!(model.calls(), 0);
}

#[tokio::test]
async fn a_selector_model_narrows_the_tools_offered() {
    let runs = Arc::new(AtomicUsize::new(0));
    let tools: Vec<_> = ["weather", "stocks", "news", "maps"]
        .into_iter()
        .map(|n| counted(n, Arc::clone(&runs)).arc())
        .collect();
    let selector = ScriptedModel::new([Reply::json(json!({"tools": ["maps", "weather", "nonexistent"]}))]);
    let model = ScriptedModel::new([Reply::text("ok")]);
    let agent = create_agent(Arc::new(model.clone()), tools)
        .middleware(
            ToolSelector::new(Arc::new(selector.clone()))
                .max_tools(1)
                .always_include(["news"]),
        )
        .build()
        .unwrap();
    agent
        .invoke(input("is it raining in Oslo"), RunConfig::default())
        .await
        .unwrap();
    let offered: Vec<String> = model.requests()[0]
        .options
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(offered, vec!["maps".to_owned(), "news".to_owned()]);
    assert!(selector.requests()[0].options.response_format.is_some());
    let err = create_agent(Arc::new(model), [])
        .middleware(ToolSelector::new(Arc::new(selector)).always_include(["nope"]))
        .build()
        .err()
        .unwrap();
    assert!(err.to_string().contains("nope"));
}

#[tokio::test]
async fn the_todo_list_tool_writes_the_plan_to_state() {
    let model = ScriptedModel::new([
        Reply::tool_calls(
            "",
            vec![call(
                "t1",
                "write_todos",
                json!({"todos": [
                    {"content": "research", "status": "completed"},
                    {"content": "write", "status": "in_progress"}
                ]}),
            )],
        ),
        Reply::text("working on it"),
    ]);
    let agent = create_agent(Arc::new(model.clone()), [])
        .system_prompt("Base.")
        .middleware(TodoList::new())
        .build()
        .unwrap();
    let out = agent.invoke(input("plan"), RunConfig::default()).await.unwrap();
    let todos: Vec<Todo> = out.values.get("todos").unwrap();
    assert_eq!(
        todos[1],
        Todo {
            content: "write".into(),
            status: TodoStatus::InProgress
        }
    );
    assert!(out
        .values
        .messages
        .get(2)
        .unwrap()
        .text()
        .starts_with("Updated todo list to"));
    let system = model.requests()[0].messages[0].text();
    assert!(system.starts_with("Base.\n\n## `write_todos`"), "{system}");
    assert!(model.requests()[0]
        .options
        .tools
        .iter()
        .any(|t| t.name == "write_todos"));
}
