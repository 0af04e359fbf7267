//! The seed's node pipeline and routing table, skill selection and injection, the
//! two-phase LLM call and the checkpoint approvals of `approval_node`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use graphloom_core::{Command, MessageKind, RunConfig, RunInput, RunStatus, END};
use graphloom_llm::ScriptedModel;
use permit_filing::*;
use serde_json::json;

#[test]
fn routing_table_matches_the_seed() {
    let st = |f: &dyn Fn(&mut PermitState)| {
        let mut s = PermitState::default();
        f(&mut s);
        s
    };
    let pm = |status: &str| PendingMutation {
        status: status.into(),
        ..PendingMutation::default()
    };
    let one_call = vec![call("c", "entity_resolve", json!({}))];

    // resume_guard
    assert_eq!(
        route_after_resume_guard(&st(&|s| s.status = status::AWAITING_HITL.into())),
        OUTPUT_FORMAT
    );
    assert_eq!(
        route_after_resume_guard(&st(&|s| {
            s.pending_mutation = Some(pm("approved"));
            s.pending_tool_calls = one_call.clone();
        })),
        TOOL_NODE
    );
    assert_eq!(route_after_resume_guard(&st(&|_| {})), INITIAL_LLM_CALL);
    // initial_llm_call
    assert_eq!(
        route_after_initial(&st(&|s| s.error = Some("x".into()))),
        OUTPUT_FORMAT
    );
    assert_eq!(
        route_after_initial(&st(&|s| s.pending_tool_calls = one_call.clone())),
        TOOL_NODE
    );
    assert_eq!(route_after_initial(&st(&|_| {})), SKILL_SELECT_NODE);
    // tool_node
    assert_eq!(
        route_after_tool(&st(&|s| s.status = status::AWAITING_HITL.into())),
        OUTPUT_FORMAT
    );
    assert_eq!(
        route_after_tool(&st(&|s| {
            s.iteration = 5;
            s.max_iterations = 5;
            s.llm_phase = "synthesis".into();
        })),
        OUTPUT_FORMAT
    );
    assert_eq!(
        route_after_tool(&st(&|s| s.iteration = DEFAULT_MAX_ITERATIONS)),
        OUTPUT_FORMAT
    );
    assert_eq!(
        route_after_tool(&st(&|s| s.llm_phase = "synthesis".into())),
        SYNTHESIS_LLM_CALL
    );
    assert_eq!(
        route_after_tool(&st(&|s| s.llm_phase = "initial".into())),
        INITIAL_LLM_CALL
    );
    // skill_select_node, approval_node
    assert_eq!(
        route_after_skill_select(&st(&|s| s.selected_skill_ids = vec!["a".into()])),
        SKILL_INJECT_NODE
    );
    assert_eq!(route_after_skill_select(&st(&|_| {})), APPROVAL_NODE);
    assert_eq!(
        route_after_approval(&st(&|s| s.status = status::AWAITING_HITL.into())),
        OUTPUT_FORMAT
    );
    assert_eq!(
        route_after_approval(&st(&|s| s.status = status::RUNNING.into())),
        SYNTHESIS_LLM_CALL
    );
    // synthesis_llm_call
    assert_eq!(
        route_after_synthesis(&st(&|s| s.error = Some("x".into()))),
        OUTPUT_FORMAT
    );
    assert_eq!(
        route_after_synthesis(&st(&|s| s.pending_tool_calls = one_call.clone())),
        TOOL_NODE
    );
    assert_eq!(route_after_synthesis(&st(&|_| {})), OUTPUT_FORMAT);
    // output_format
    assert_eq!(
        route_after_output(&st(&|s| s.status = status::COMPLETED.into())),
        END
    );
    assert_eq!(
        route_after_output(&st(&|s| {
            s.status = status::RESUMING.into();
            s.pending_mutation = Some(pm("pending"));
        })),
        SYSTEM_PROMPT_NODE
    );
    assert_eq!(
        route_after_output(&st(&|s| {
            s.status = status::RESUMING.into();
            s.hitl_approval_id = Some("a1".into());
        })),
        APPROVAL_NODE
    );
}

#[tokio::test]
async fn the_offline_happy_path_walks_the_whole_pipeline() {
    let s = setup(scripted_model());
    let cfg = RunConfig::thread("happy");
    let paused = s
        .graph
        .invoke_input(RunInput::Json(sample_input()), cfg.clone())
        .await
        .unwrap();
    assert_eq!(paused.status, RunStatus::Interrupted);
    let done = s.graph.resume(Command::resume("approved"), cfg).await.unwrap();
    let v = &done.values;
    let expected = [
        "system_prompt_node",
        "memory_node",
        "resume_guard",
        "initial_llm_call",
        "tool_node",
        "initial_llm_call",
        "tool_node",
        "output_format",
        "system_prompt_node",
        "memory_node",
        "resume_guard",
        "tool_node",
        "initial_llm_call",
        "skill_select_node",
        "skill_inject_node",
        "approval_node",
        "synthesis_llm_call",
        "tool_node",
        "synthesis_llm_call",
        "output_format",
    ];
    assert_eq!(trail(v), expected);
    assert_eq!(v.status, status::COMPLETED);
    assert_eq!(s.model.calls(), 5);
    assert_eq!(
        v.tokens_used,
        900 + 40 + 1_100 + 60 + 1_300 + 30 + 2_400 + 70 + 2_700 + 120
    );
    assert_eq!(
        (v.max_tokens, v.max_cost_usd),
        (150_000, 10.0),
        "Rule 37 agent budget defaults"
    );
    assert_eq!(v.recent_entity_context, vec!["well-42-329-12345".to_owned()]);
    assert_eq!(v.llm_phase, "synthesis");
    assert!(v.messages.last().unwrap().text().starts_with("Spacing Summary:"));
    assert_eq!(entities(&s.store).await.len(), 1);
    // 3 tool rounds + 2 output_format passes.
    assert_eq!(v.iteration, 5);
}

#[tokio::test]
async fn selected_skills_are_injected_in_tiers_and_reach_the_synthesis_call() {
    let s = setup(ScriptedModel::new([
        tool_reply("c1", "entity_resolve", json!({"query": "42-329-12345"})),
        text_reply("Need context. SKILL_SELECT:rule37_spacing then SKILL_SELECT:good_cause and SKILL_SELECT:rule37_spacing"),
        text_reply("Spacing Summary: exception required."),
    ]));
    let out = s
        .graph
        .invoke_input(RunInput::Json(sample_input()), RunConfig::thread("skills"))
        .await
        .unwrap();
    let v = &out.values;
    assert_eq!(v.status, status::COMPLETED);
    assert_eq!(
        v.selected_skill_ids,
        ["rule37_spacing", "good_cause"],
        "deduplicated, in order"
    );
    assert_eq!(v.injected_skill_ids, ["rule37_spacing", "good_cause"]);
    assert_eq!(
        v.active_skills.get("rule37_spacing"),
        Some(&3),
        "with artifacts: tier 3"
    );
    assert_eq!(v.active_skills.get("good_cause"), Some(&2));
    assert!(v.skill_injection_done);
    assert_eq!(v.injected_entity_ids, ["well-42-329-12345"]);

    let reqs = s.model.requests();
    assert_eq!(reqs.len(), 3);
    let tools = |i: usize| {
        reqs[i]
            .options
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect::<Vec<_>>()
    };
    assert!(
        !tools(1).contains(&"spacing_assessment".to_owned()),
        "not visible before injection"
    );
    assert!(
        tools(2).contains(&"spacing_assessment".to_owned()),
        "exposed by the injected skill"
    );
    assert!(
        tools(2).contains(&"entity_resolve".to_owned()) && tools(2).contains(&"context_assemble".to_owned())
    );
    let synthesis = &reqs[2].messages;
    let skill_msg = synthesis
        .iter()
        .find(|m| {
            m.kind == MessageKind::System
                && m.text()
                    .starts_with("=== Skill Activated: Spacing Calculation ===")
        })
        .expect("the injected skill reaches the synthesis call");
    let text = skill_msg.text();
    for section in [
        "## Description",
        "## Steps",
        "## Requirements",
        "## Output Format",
        "## Reference Artifacts",
    ] {
        assert!(text.contains(section), "{section} missing");
    }
    assert!(text.contains("## Entity Context\nWell: Mitchell Ranch 1H (API: 42-329-12345)"));
    assert!(synthesis.iter().any(|m| m
        .text()
        .starts_with("=== Skill Activated: Good Cause Justification ===")));
    assert_eq!(
        reqs[2].options.metadata.get("llm_phase"),
        Some(&json!("synthesis"))
    );

    // The ledger keeps a skill from being injected twice in the conversation.
    let again = select_skills(
        "SKILL_SELECT:rule37_spacing SKILL_SELECT:good_cause",
        &v.injected_skill_ids,
    );
    assert!(again.is_empty());
}

#[tokio::test]
async fn without_skills_the_synthesis_call_is_skipped() {
    let s = setup(ScriptedModel::new([text_reply("Nothing to file.")]));
    let out = s
        .graph
        .invoke_input(RunInput::Json(sample_input()), RunConfig::thread("no-skill"))
        .await
        .unwrap();
    assert_eq!(s.model.calls(), 1);
    let t = trail(&out.values);
    assert_eq!(
        &t[3..],
        [
            "initial_llm_call",
            "skill_select_node",
            "approval_node",
            "synthesis_llm_call",
            "output_format"
        ]
    );
    assert_eq!(out.values.messages.last().unwrap().text(), "Nothing to file.");
    // The first request: stable prefix (persona + user identity), then the domain facts.
    let req = &s.model.requests()[0].messages;
    assert!(req[0].text().contains("Railroad Commission"));
    assert!(req[0]
        .text()
        .contains("=== User ===\nName: Dana Ortiz\nRole: regulatory analyst"));
    assert!(req[0].text().contains("SKILL_SELECT:{skill_id}"));
    assert!(req[1].text().contains("Statewide Rule 37"));
}

#[tokio::test]
async fn a_general_agent_loads_no_domain_skill() {
    let s = setup(ScriptedModel::new([
        create_operator_reply(),
        text_reply("I can only help with general questions."),
    ]));
    let mut input = sample_input();
    input["agent_type"] = json!("general");
    let out = s
        .graph
        .invoke_input(RunInput::Json(input), RunConfig::thread("general"))
        .await
        .unwrap();
    // create_entity is not offered to a general agent: no approval, no mutation, an error result.
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(out.values.status, status::COMPLETED);
    assert!(tool_messages_for(&out.values, "call_create_1")[0]
        .text()
        .contains("unknown tool"));
    assert!(entities(&s.store).await.is_empty());
    let req = &s.model.requests()[0];
    let tools: Vec<&str> = req.options.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        tools,
        ["entity_resolve", "context_assemble"],
        "core capabilities only"
    );
    assert!(!req
        .messages
        .iter()
        .any(|m| m.text().contains("Railroad Commission")));
}

#[tokio::test]
async fn a_skill_rule_after_a_filing_tool_pauses_at_approval_node() {
    let s = setup(ScriptedModel::new([
        tool_reply(
            "f1",
            "rule37_filing_assembly",
            json!({"well_api": "42-329-12345"}),
        ),
        text_reply("Form W-1 package assembled."),
    ]));
    let cfg = RunConfig::thread("pre-filing");
    let paused = s
        .graph
        .invoke_input(RunInput::Json(sample_input()), cfg.clone())
        .await
        .unwrap();
    assert_eq!(paused.status, RunStatus::Interrupted);
    assert_eq!(paused.interrupts[0].value["checkpoint_type"], "pre_filing");
    assert!(paused.interrupts[0].value["tool_call"].is_null());
    assert_eq!(
        trail(&paused.values).last().map(String::as_str),
        Some("approval_node")
    );
    assert_eq!(
        s.model.calls(),
        2,
        "synthesis does not run while awaiting approval"
    );
    let id = paused.values.hitl_approval_id.clone().unwrap();
    assert_eq!(approval(&s.store, &id).await["checkpoint_type"], "pre_filing");

    let done = s.graph.resume(Command::resume("approved"), cfg).await.unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(done.values.status, status::COMPLETED);
    assert!(!done.values.hitl_required);
    assert_eq!(approval(&s.store, &id).await["status"], "approved");
    assert_eq!(
        s.model.calls(),
        2,
        "the verdict is read by approval_node; no new model call"
    );
    let t = trail(&done.values);
    assert_eq!(
        &t[t.len() - 4..],
        [
            "output_format",
            "approval_node",
            "synthesis_llm_call",
            "output_format"
        ]
    );
}

#[tokio::test]
async fn request_metadata_can_ask_for_a_checkpoint() {
    let s = setup(ScriptedModel::new([text_reply("Draft ready.")]));
    let mut input = sample_input();
    input["metadata"]["hitl_checkpoint_type"] = json!("supervisor_review");
    let cfg = RunConfig::thread("meta");
    let paused = s
        .graph
        .invoke_input(RunInput::Json(input), cfg.clone())
        .await
        .unwrap();
    assert_eq!(paused.status, RunStatus::Interrupted);
    assert_eq!(paused.interrupts[0].value["checkpoint_type"], "supervisor_review");
    let still = s
        .graph
        .resume(Command::resume("pending"), cfg.clone())
        .await
        .unwrap();
    assert_eq!(still.status, RunStatus::Interrupted);
    let still = s
        .graph
        .resume(Command::resume("no idea"), cfg.clone())
        .await
        .unwrap();
    assert_eq!(still.status, RunStatus::Interrupted);
    let done = s.graph.resume(Command::resume("approved"), cfg).await.unwrap();
    assert_eq!(done.values.status, status::COMPLETED);
    assert_eq!(s.model.calls(), 1);
    assert!(done
        .values
        .messages
        .iter()
        .any(|m| m.text().contains("supervisor_review was approved")));
}

#[tokio::test]
async fn memory_node_injects_working_and_episodic_memory_after_the_prompt() {
    use graphloom_core::store::{DynStore, PutOptions};
    let s = setup(ScriptedModel::new([text_reply("Noted.")]));
    let wm = ["working_memory".to_owned(), "conv-mitchell-ranch".to_owned()];
    let put = |ns: Vec<String>, key: &'static str, value: serde_json::Value| {
        let store = s.store.clone();
        async move {
            DynStore::put(&*store, &ns, key, value, PutOptions::default())
                .await
                .unwrap()
        }
    };
    put(
        wm.to_vec(),
        "scratchpad",
        json!({"text": "Operator wants the W-1 filed this week."}),
    )
    .await;
    put(
        wm.to_vec(),
        "entities",
        json!({"items": ["Well: 42-329-12345 (Mitchell Ranch 1H)"]}),
    )
    .await;
    put(
        vec!["episodic".into(), "tenant-permian".into()],
        "s1",
        json!({"summary": "Previously filed Rule 37 exception for Mitchell Ranch 2H"}),
    )
    .await;
    let out = s
        .graph
        .invoke_input(RunInput::Json(sample_input()), RunConfig::thread("memory"))
        .await
        .unwrap();
    assert_eq!(
        out.values.memory_context["scratchpad"]["text"],
        "Operator wants the W-1 filed this week."
    );
    let req = &s.model.requests()[0].messages;
    let mem = req
        .iter()
        .position(|m| m.text().starts_with("=== Memory Context ==="))
        .expect("memory context");
    assert!(mem >= 1, "after the stable system prefix");
    let text = req[mem].text();
    assert!(text.contains("[Working Memory -- Scratchpad]\nOperator wants the W-1 filed this week."));
    assert!(text.contains("- Well: 42-329-12345 (Mitchell Ranch 1H)"));
    assert!(text.contains("Previously filed Rule 37 exception for Mitchell Ranch 2H"));
    assert_eq!(req.last().unwrap().kind, MessageKind::Human);
}
