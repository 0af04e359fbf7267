//! `create_agent`: the loop, hook order, jumps, context, tools returning commands, and the
//! graph it compiles to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::{Message, MessageKind, RunConfig, RunStatus, Runtime, StreamMode, ToolCall};
use graphloom_llm::{Reply, ScriptedModel};
use graphloom_prebuilt::middleware::{FnMiddleware, Hook, HookResult, Jump};
use graphloom_prebuilt::{
    create_agent, AgentGraphState, AgentGraphUpdate, ContextExt, FnTool, StateField, ToolCommand, ToolError,
    ToolOutput,
};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Query {
    /// What to look up.
    q: String,
}

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        args,
    }
}

fn lookup() -> FnTool {
    FnTool::new("lookup", "Look something up", |a: Query, _rt| async move {
        Ok::<_, ToolError>(format!("found {}", a.q))
    })
}

fn input(text: &str) -> AgentGraphUpdate {
    AgentGraphUpdate::new().messages(vec![Message::human(text)])
}

fn texts(s: &AgentGraphState) -> Vec<(MessageKind, String)> {
    s.messages.iter().map(|m| (m.kind, m.text())).collect()
}

#[tokio::test]
async fn the_model_calls_tools_until_it_answers() {
    let model = ScriptedModel::new([
        Reply::tool_calls(
            "",
            vec![
                call("c1", "lookup", json!({"q": "a"})),
                call("c2", "lookup", json!({"q": "b"})),
            ],
        ),
        Reply::text("a and b found"),
    ]);
    let agent = create_agent(Arc::new(model.clone()), [lookup().arc()])
        .system_prompt("Be brief.")
        .build()
        .unwrap();
    let out = agent
        .invoke(input("find a and b"), RunConfig::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(
        texts(&out.values),
        vec![
            (MessageKind::Human, "find a and b".into()),
            (MessageKind::Ai, String::new()),
            (MessageKind::Tool, "found a".into()),
            (MessageKind::Tool, "found b".into()),
            (MessageKind::Ai, "a and b found".into()),
        ]
    );
    let reqs = model.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].messages[0].kind, MessageKind::System);
    assert_eq!(reqs[0].messages[0].text(), "Be brief.");
    assert_eq!(reqs[0].options.tools.len(), 1);
    // The system prompt is sent, never stored.
    assert!(out.values.messages.iter().all(|m| m.kind != MessageKind::System));
    let drawing = agent.draw_mermaid();
    assert!(
        drawing.contains("model") && drawing.contains("tools"),
        "{drawing}"
    );
}

/// A middleware that records each hook it runs into `log`.
fn recorder(name: &'static str, log: Arc<Mutex<Vec<String>>>) -> FnMiddleware {
    let (l1, l2, l3, l4, l5, l6) = (
        Arc::clone(&log),
        Arc::clone(&log),
        Arc::clone(&log),
        Arc::clone(&log),
        Arc::clone(&log),
        Arc::clone(&log),
    );
    FnMiddleware::new(name)
        .before_agent(move |_s, _rt| {
            l1.lock().unwrap().push(format!("{name}.before_agent"));
            HookResult::none()
        })
        .before_model(move |_s, _rt| {
            l2.lock().unwrap().push(format!("{name}.before_model"));
            HookResult::none()
        })
        .after_model(move |_s, _rt| {
            l3.lock().unwrap().push(format!("{name}.after_model"));
            HookResult::none()
        })
        .after_agent(move |_s, _rt| {
            l4.lock().unwrap().push(format!("{name}.after_agent"));
            HookResult::none()
        })
        .wrap_model_call(move |req, next| {
            let log = Arc::clone(&l5);
            Box::pin(async move {
                log.lock().unwrap().push(format!("{name}.wrap_model:in"));
                let r = next.call(req).await;
                log.lock().unwrap().push(format!("{name}.wrap_model:out"));
                r
            })
        })
        .wrap_tool_call(move |req, next| {
            let log = Arc::clone(&l6);
            Box::pin(async move {
                log.lock().unwrap().push(format!("{name}.wrap_tool:in"));
                let r = next.call(req).await;
                log.lock().unwrap().push(format!("{name}.wrap_tool:out"));
                r
            })
        })
}

#[tokio::test]
async fn hooks_run_in_the_documented_order() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new([
        Reply::tool_calls("", vec![call("c1", "lookup", json!({"q": "x"}))]),
        Reply::text("done"),
    ]);
    let agent = create_agent(Arc::new(model), [lookup().arc()])
        .middleware(recorder("a", Arc::clone(&log)))
        .middleware(recorder("b", Arc::clone(&log)))
        .build()
        .unwrap();
    let out = agent.invoke(input("go"), RunConfig::default()).await.unwrap();
    assert_eq!(out.status, RunStatus::Done);
    let log = log.lock().unwrap().clone();
    let turn = |v: &mut Vec<&str>| {
        v.extend([
            "a.before_model",
            "b.before_model",
            "a.wrap_model:in",
            "b.wrap_model:in",
            "b.wrap_model:out",
            "a.wrap_model:out",
            "b.after_model",
            "a.after_model",
        ]);
    };
    let mut want = vec!["a.before_agent", "b.before_agent"];
    turn(&mut want);
    want.extend([
        "a.wrap_tool:in",
        "b.wrap_tool:in",
        "b.wrap_tool:out",
        "a.wrap_tool:out",
    ]);
    turn(&mut want);
    want.extend(["b.after_agent", "a.after_agent"]);
    assert_eq!(log, want);
}

#[tokio::test]
async fn hooks_jump_to_end_model_and_tools() {
    // before_model ends the run at once on the first turn: the model is never called.
    let model = ScriptedModel::new(Vec::<Reply>::new());
    let ender = FnMiddleware::new("Ender")
        .before_model(|_s, _rt| {
            HookResult::jump(Jump::End)
                .with_update(AgentGraphUpdate::new().messages(vec![Message::ai("stopped")]))
        })
        .can_jump_to(Hook::BeforeModel, [Jump::End]);
    let log = Arc::new(Mutex::new(Vec::new()));
    let agent = create_agent(Arc::new(model.clone()), [lookup().arc()])
        .middleware(ender)
        .middleware(recorder("after", Arc::clone(&log)))
        .build()
        .unwrap();
    let out = agent.invoke(input("hi"), RunConfig::default()).await.unwrap();
    assert_eq!(model.calls(), 0);
    assert_eq!(
        out.values.messages.last().map(Message::text).as_deref(),
        Some("stopped")
    );
    // A jump to the end still runs the after_agent hooks.
    assert!(log.lock().unwrap().contains(&"after.after_agent".to_owned()));
    // before_model of the second middleware was skipped.
    assert!(!log.lock().unwrap().contains(&"after.before_model".to_owned()));

    // after_model sends the first answer back to the model once.
    let model = ScriptedModel::new([Reply::text("first"), Reply::text("second")]);
    let again = FnMiddleware::new("Again").after_model(|s: &AgentGraphState, _rt: &Runtime| {
        if s.messages.iter().filter(|m| m.kind == MessageKind::Ai).count() == 1 {
            HookResult::jump(Jump::Model)
        } else {
            HookResult::none()
        }
    });
    let agent = create_agent(Arc::new(model.clone()), [])
        .middleware(again)
        .build()
        .unwrap();
    let out = agent.invoke(input("hi"), RunConfig::default()).await.unwrap();
    assert_eq!(model.calls(), 2);
    assert_eq!(
        out.values.messages.last().map(Message::text).as_deref(),
        Some("second")
    );

    // before_agent jumps straight to the tools with a prepared call.
    let model = ScriptedModel::new([Reply::text("used the lookup")]);
    let prep = FnMiddleware::new("Prep").before_agent(|_s, _rt| {
        HookResult::jump(Jump::Tools).with_update(AgentGraphUpdate::new().messages(vec![
            Message::ai_with_tool_calls("", vec![call("p1", "lookup", json!({"q": "prepared"}))]),
        ]))
    });
    let agent = create_agent(Arc::new(model.clone()), [lookup().arc()])
        .middleware(prep)
        .build()
        .unwrap();
    let out = agent.invoke(input("hi"), RunConfig::default()).await.unwrap();
    assert_eq!(model.calls(), 1);
    let t = texts(&out.values);
    assert_eq!(t[2], (MessageKind::Tool, "found prepared".into()));
    assert_eq!(t[3], (MessageKind::Ai, "used the lookup".into()));
}

#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct Caller {
    user: String,
}

#[tokio::test]
async fn context_reaches_tools_middleware_and_prompt_but_not_the_model() {
    let whoami = FnTool::new(
        "whoami",
        "Who is asking",
        |_a: serde_json::Map<String, Value>, rt| async move {
            let who = rt.typed_context::<Caller>().map(|c| c.user).unwrap_or_default();
            Ok::<_, ToolError>(format!("you are {who}"))
        },
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = Arc::clone(&seen);
    let mw = FnMiddleware::new("Seen").before_model(move |_s, rt: &Runtime| {
        seen2
            .lock()
            .unwrap()
            .push(rt.typed_context::<Caller>().map(|c| c.user));
        HookResult::none()
    });
    let model = ScriptedModel::new([
        Reply::tool_calls("", vec![call("c1", "whoami", json!({}))]),
        Reply::text("ok"),
    ]);
    let agent = create_agent(Arc::new(model.clone()), [whoami.arc()])
        .system_prompt_fn(|_s, rt| {
            rt.typed_context::<Caller>()
                .map(|c| format!("Address the user as {}.", c.user))
        })
        .middleware(mw)
        .build()
        .unwrap();
    // In process, the context is the value itself.
    let out = agent
        .invoke(
            input("who am I"),
            RunConfig::default().context(Caller {
                user: "quillon".into(),
            }),
        )
        .await
        .unwrap();
    assert_eq!(out.values.messages.get(2).unwrap().text(), "you are quillon");
    assert_eq!(
        seen.lock().unwrap().as_slice(),
        &[Some("quillon".to_owned()), Some("quillon".to_owned())]
    );
    let reqs = model.requests();
    assert_eq!(reqs[0].messages[0].text(), "Address the user as quillon.");
    // Nothing of the context but what the prompt chose to say reaches the model.
    let sent = serde_json::to_string(&reqs[1].messages).unwrap();
    assert_eq!(sent.matches("quillon").count(), 2, "{sent}");
    // Over the server, the context arrives as JSON: it decodes into the same type.
    let model = ScriptedModel::new([
        Reply::tool_calls("", vec![call("c1", "whoami", json!({}))]),
        Reply::text("ok"),
    ]);
    let agent = create_agent(
        Arc::new(model),
        [FnTool::new(
            "whoami",
            "",
            |_a: serde_json::Map<String, Value>, rt| async move {
                Ok::<_, ToolError>(rt.typed_context::<Caller>().map(|c| c.user).unwrap_or_default())
            },
        )
        .arc()],
    )
    .build()
    .unwrap();
    let out = agent
        .invoke(input("x"), RunConfig::default().context(json!({"user": "grace"})))
        .await
        .unwrap();
    assert_eq!(out.values.messages.get(2).unwrap().text(), "grace");
}

#[tokio::test]
async fn a_tool_returning_a_command_updates_declared_state_and_routes() {
    let remember = FnTool::new("remember", "Remember a fact", |a: Query, rt| async move {
        Ok::<_, ToolError>(ToolOutput::command(
            ToolCommand::new()
                .update(
                    "messages",
                    json!([Message::tool("noted", rt.tool_call_id.clone())]),
                )
                .update("facts", json!([a.q])),
        ))
    });
    let model = ScriptedModel::new([
        Reply::tool_calls(
            "",
            vec![
                call("c1", "remember", json!({"q": "sky is blue"})),
                call("c2", "lookup", json!({"q": "x"})),
            ],
        ),
        Reply::text("noted it"),
    ]);
    let agent = create_agent(Arc::new(model), [remember.arc(), lookup().arc()])
        .state_field(StateField::new::<Vec<String>>(
            "facts",
            graphloom_core::JsonReducer::Append,
        ))
        .checkpointer(InMemorySaver::new())
        .build()
        .unwrap();
    let out = agent
        .invoke(input("remember"), RunConfig::thread("t-cmd"))
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(
        out.values.get::<Vec<String>>("facts"),
        Some(vec!["sky is blue".to_owned()])
    );
    let t = texts(&out.values);
    assert_eq!(t[2], (MessageKind::Tool, "noted".into()));
    assert_eq!(t[3], (MessageKind::Tool, "found x".into()));
    assert_eq!(t[4], (MessageKind::Ai, "noted it".into()));
    // The state's JSON form has every field, the declared one too.
    let snap = agent.get_state(&RunConfig::thread("t-cmd")).await.unwrap();
    let json = graphloom_core::State::to_json(&snap.values).unwrap();
    assert_eq!(json["facts"], json!(["sky is blue"]));
}

#[tokio::test]
async fn an_agent_streams_and_names_its_nodes_and_messages() {
    let model = ScriptedModel::new([Reply::text("hello there")]);
    let agent = create_agent(Arc::new(model), []).name("greeter").build().unwrap();
    assert_eq!(agent.name(), "greeter");
    let mut stream = agent.stream(
        graphloom_core::RunInput::Update(input("hi")),
        RunConfig::default(),
        graphloom_core::StreamOptions::modes([StreamMode::Updates, StreamMode::Messages]),
    );
    let mut nodes = Vec::new();
    let mut tokens = String::new();
    use futures::StreamExt;
    while let Some(ev) = stream.next().await {
        if let graphloom_core::RunEvent::Part(p) = ev {
            let v = p.data_json().unwrap();
            match p.mode {
                StreamMode::Updates => nodes.extend(v.as_object().unwrap().keys().cloned()),
                StreamMode::Messages => tokens.push_str(v[0]["content"].as_str().unwrap_or_default()),
                _ => {}
            }
        }
    }
    assert_eq!(nodes, vec!["model"]);
    assert_eq!(tokens, "hello there");
}

#[tokio::test]
async fn an_agent_is_a_subgraph_and_a_supervisors_worker_and_pauses_its_parent() {
    use graphloom_prebuilt::middleware::hitl::{HumanInTheLoop, InterruptOn};
    use graphloom_prebuilt::supervisor::{
        create_supervisor, Handoff, SupervisorAgent, SupervisorOptions, SupervisorRouter,
    };
    use graphloom_prebuilt::AgentState;

    // As a subgraph of a plain graph sharing `messages`.
    let model = ScriptedModel::new([
        Reply::tool_calls("", vec![call("c1", "lookup", json!({"q": "moon"}))]),
        Reply::text("the moon is far"),
    ]);
    let child = create_agent(Arc::new(model), [lookup().arc()])
        .name("researcher")
        .build()
        .unwrap();
    let parent = graphloom_core::StateGraph::<AgentState>::new()
        .add_subgraph_shared("research", child)
        .add_edge(graphloom_core::START, "research")
        .add_edge("research", graphloom_core::END)
        .compile()
        .unwrap();
    let out = parent
        .invoke(
            graphloom_prebuilt::AgentStateUpdate::new().messages(vec![Message::human("how far is the moon")]),
            RunConfig::default(),
        )
        .await
        .unwrap();
    let last = out.values.messages.last().unwrap();
    assert_eq!(
        (last.text(), last.name.as_deref()),
        ("the moon is far".to_owned(), Some("researcher"))
    );
    assert_eq!(out.values.messages.len(), 4);

    // As a supervisor's worker, with a human review inside it that pauses the supervisor.
    let model = ScriptedModel::new([
        Reply::tool_calls("", vec![call("c1", "lookup", json!({"q": "sun"}))]),
        Reply::text("the sun is hot"),
    ]);
    let worker = create_agent(Arc::new(model), [lookup().arc()])
        .name("astro")
        .middleware(HumanInTheLoop::new().interrupt_on("lookup", InterruptOn::all()))
        .build()
        .unwrap();
    let router = SupervisorRouter::function(|s: &AgentState| match s.messages.last() {
        Some(m) if m.kind == MessageKind::Ai => Handoff::Finish,
        _ => Handoff::to("astro"),
    });
    let team = create_supervisor(
        router,
        vec![SupervisorAgent::subgraph(
            "astro",
            "Answers astronomy questions",
            worker,
        )],
        SupervisorOptions::new().checkpointer(Arc::new(InMemorySaver::new())),
    )
    .unwrap();
    let cfg = RunConfig::thread("team");
    let paused = team
        .invoke(
            graphloom_prebuilt::AgentStateUpdate::new().messages(vec![Message::human("is the sun hot")]),
            cfg.clone(),
        )
        .await
        .unwrap();
    assert_eq!(paused.status, RunStatus::Interrupted);
    assert_eq!(
        paused.interrupts[0].value["action_requests"][0]["args"],
        json!({"q": "sun"})
    );
    let done = team
        .resume(
            graphloom_core::Command::resume(json!({"decisions": [{"type": "approve"}]})),
            cfg,
        )
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Done);
    let last = done.values.messages.last().unwrap();
    assert_eq!(last.text(), "the sun is hot");
    assert!(done.values.messages.iter().any(|m| m.text() == "found sun"));
}
