//! The `before_tool_call` approval gate and the fail-closed resume guard (seed 004, "HITL
//! Pause-and-Resume"): approved -> the frozen call runs exactly once; rejected -> the model
//! is told and nothing is mutated; pending, garbage or unreadable verdicts pause again.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::store::{DynStore, Item, ListNamespaces, PutOptions, SearchItem, SearchQuery};
use graphloom_core::{
    Command, HistoryQuery, InMemoryStore, MessageKind, RunConfig, RunInput, RunStatus, Store,
};
use graphloom_llm::ScriptedModel;
use permit_filing::{sample_input, status, PermitState};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn gate_script() -> ScriptedModel {
    ScriptedModel::new([create_operator_reply(), text_reply("Operator registered.")])
}

/// Runs to the gate and checks the paused state: nothing executed, round stripped.
async fn pause(s: &Setup, thread: &str) -> String {
    let cfg = RunConfig::thread(thread);
    let out = s
        .graph
        .invoke_input(RunInput::Json(sample_input()), cfg)
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    let ask = &out.interrupts[0].value;
    assert_eq!(ask["type"], "approval_request");
    assert_eq!(ask["tool_call"]["id"], "call_create_1");
    assert_eq!(ask["tool_call"]["name"], "create_entity");
    assert_eq!(ask["tool_call"]["args"]["name"], "Permian Basin Energy LLC");
    let v = &out.values;
    assert_eq!(v.status, status::AWAITING_HITL);
    let pm = v.pending_mutation.clone().expect("frozen call");
    assert_eq!(
        (pm.status.as_str(), pm.tool_call_id.as_str()),
        ("pending", "call_create_1")
    );
    assert_eq!(pm.capability_key, "create_entity");
    assert_eq!(
        ai_calls(v, "call_create_1"),
        0,
        "the gated round is stripped: no dangling tool call"
    );
    assert!(tool_messages_for(v, "call_create_1").is_empty());
    assert!(
        entities(&s.store).await.is_empty(),
        "nothing mutated before approval"
    );
    assert_eq!(
        approval(&s.store, &pm.hitl_approval_id).await["status"],
        "pending"
    );
    assert_eq!(trail(v).last().map(String::as_str), Some("tool_node"));
    pm.hitl_approval_id
}

#[tokio::test]
async fn approved_call_runs_exactly_once_even_when_resumed_twice() {
    let s = setup(gate_script());
    let cfg = RunConfig::thread("approve");
    let approval_id = pause(&s, "approve").await;

    let verdict = json!({"decision": "approved", "reviewer_id": "rev-7", "comment": "operator verified"});
    let done = s
        .graph
        .resume(Command::resume(verdict), cfg.clone())
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Done);
    let v = &done.values;
    assert_eq!(v.status, status::COMPLETED);
    assert!(v.pending_mutation.is_none());
    assert_eq!(v.hitl_reviewer_id.as_deref(), Some("rev-7"));
    let results = tool_messages_for(v, "call_create_1");
    assert_eq!(results.len(), 1, "one result for the frozen call");
    assert!(results[0].text().contains("\"created\""), "{}", results[0].text());
    assert_eq!(
        ai_calls(v, "call_create_1"),
        1,
        "the call is reconstructed once for the replay"
    );
    let ents = entities(&s.store).await;
    assert_eq!(ents.len(), 1);
    assert_eq!(ents[0]["name"], "Permian Basin Energy LLC");
    assert_eq!(
        ents[0]["created_by_call"], "call_create_1",
        "replayed under the original id"
    );
    let rec = approval(&s.store, &approval_id).await;
    assert_eq!(
        (rec["status"].as_str(), rec["reviewer_id"].as_str()),
        (Some("approved"), Some("rev-7"))
    );
    let t = trail(v);
    let resume_at = t.iter().rposition(|n| n == "resume_guard").unwrap();
    assert_eq!(t[resume_at + 1], "tool_node", "approved -> tool_node (replay)");
    assert_eq!(s.model.calls(), 2, "the replay needs no new model output");

    // A second resume finds nothing to resume and mutates nothing.
    let again = s.graph.resume(Command::resume("approved"), cfg.clone()).await;
    assert!(again.is_err(), "{:?}", again.map(|o| o.status));
    assert_eq!(entities(&s.store).await.len(), 1);

    // Re-running the replay step itself (a fork from the checkpoint before tool_node, as
    // after a crash between the tool and the checkpoint) does not create it again.
    let history = s
        .graph
        .get_state_history(&cfg, HistoryQuery::default())
        .await
        .unwrap();
    let before_replay = history
        .iter()
        .find(|h| {
            h.next == vec!["tool_node".to_owned()]
                && h.values
                    .pending_mutation
                    .as_ref()
                    .is_some_and(|p| p.status == "approved")
        })
        .expect("a checkpoint before the replay");
    s.model.push(text_reply("Already registered."));
    let fork_cfg =
        RunConfig::thread("approve").checkpoint_id(before_replay.config.checkpoint_id.clone().unwrap());
    let forked = s.graph.invoke_input(RunInput::Continue, fork_cfg).await.unwrap();
    let replayed = tool_messages_for(&forked.values, "call_create_1");
    assert!(replayed.last().unwrap().text().contains("\"exists\""));
    assert_eq!(
        entities(&s.store).await.len(),
        1,
        "exactly one entity after two replays"
    );
}

#[tokio::test]
async fn rejected_call_is_not_run_and_the_model_is_told() {
    let s = setup(ScriptedModel::new([
        create_operator_reply(),
        text_reply("Understood: the operator was not registered."),
    ]));
    let cfg = RunConfig::thread("reject");
    let approval_id = pause(&s, "reject").await;
    let verdict = json!({"decision": "rejected", "comment": "wrong operator number"});
    let done = s.graph.resume(Command::resume(verdict), cfg).await.unwrap();
    assert_eq!(done.status, RunStatus::Done);
    let v = &done.values;
    assert_eq!(v.status, status::COMPLETED);
    assert!(v.pending_mutation.is_none());
    assert!(entities(&s.store).await.is_empty(), "no mutation");
    assert!(tool_messages_for(v, "call_create_1").is_empty());
    assert_eq!(approval(&s.store, &approval_id).await["status"], "rejected");
    let t = trail(v);
    let at = t.iter().rposition(|n| n == "resume_guard").unwrap();
    assert_eq!(t[at + 1], "initial_llm_call", "rejected -> initial_llm_call");
    // The model's second request carries the rejection note with the reviewer comment.
    let req = &s.model.requests()[1];
    let note = req
        .messages
        .iter()
        .find(|m| m.kind == MessageKind::System && m.text().contains("rejected"))
        .expect("a rejection note");
    assert!(note.text().contains("wrong operator number"));
    assert!(note.text().contains("create_entity"));
}

#[tokio::test]
async fn pending_or_garbage_verdicts_pause_again_until_a_real_one() {
    let s = setup(gate_script());
    let cfg = RunConfig::thread("garbage");
    let approval_id = pause(&s, "garbage").await;
    let mut last_id = String::new();
    for value in [
        json!("pending"),
        json!("yes please"),
        json!({"foo": "bar"}),
        json!(42),
        Value::Null,
        json!({"decision": "maybe"}),
    ] {
        let out = s
            .graph
            .resume(Command::resume(value.clone()), cfg.clone())
            .await
            .unwrap();
        assert_eq!(out.status, RunStatus::Interrupted, "{value} must pause again");
        assert_eq!(out.values.status, status::AWAITING_HITL);
        assert_ne!(out.interrupts[0].id, last_id, "a fresh pause each time");
        last_id = out.interrupts[0].id.clone();
        assert!(
            entities(&s.store).await.is_empty(),
            "{value} must not run the call"
        );
        assert_eq!(approval(&s.store, &approval_id).await["status"], "pending");
        let t = trail(&out.values);
        assert_eq!(&t[t.len() - 2..], ["memory_node", "resume_guard"]);
        let snap = s.graph.get_state(&cfg).await.unwrap();
        assert_eq!(
            snap.next,
            vec!["output_format".to_owned()],
            "pending -> output_format (paused there)"
        );
    }
    assert_eq!(s.model.calls(), 1, "no model call while paused");
    let done = s.graph.resume(Command::resume("approve"), cfg).await.unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(entities(&s.store).await.len(), 1);
}

/// A store whose approval records cannot be read while `down` is set.
struct FlakyApprovals {
    inner: InMemoryStore,
    down: AtomicBool,
}

impl FlakyApprovals {
    fn check(&self, namespace: &[String]) -> graphloom_core::Result<()> {
        if self.down.load(Ordering::SeqCst) && namespace.first().map(String::as_str) == Some("approvals") {
            return Err(graphloom_core::Error::NotFound(
                "approval service unavailable".into(),
            ));
        }
        Ok(())
    }
}

impl Store for FlakyApprovals {
    async fn get(&self, namespace: &[String], key: &str) -> graphloom_core::Result<Option<Item>> {
        self.check(namespace)?;
        Store::get(&self.inner, namespace, key).await
    }
    async fn put(
        &self,
        namespace: &[String],
        key: &str,
        value: Value,
        opts: PutOptions,
    ) -> graphloom_core::Result<()> {
        self.check(namespace)?;
        Store::put(&self.inner, namespace, key, value, opts).await
    }
    async fn delete(&self, namespace: &[String], key: &str) -> graphloom_core::Result<()> {
        Store::delete(&self.inner, namespace, key).await
    }
    async fn search(&self, prefix: &[String], query: SearchQuery) -> graphloom_core::Result<Vec<SearchItem>> {
        Store::search(&self.inner, prefix, query).await
    }
    async fn list_namespaces(&self, opts: ListNamespaces) -> graphloom_core::Result<Vec<Vec<String>>> {
        Store::list_namespaces(&self.inner, opts).await
    }
    async fn sweep_expired(&self) -> graphloom_core::Result<usize> {
        Store::sweep_expired(&self.inner).await
    }
}

#[tokio::test]
async fn an_unreadable_verdict_denies_and_pauses_again() {
    let flaky = Arc::new(FlakyApprovals {
        inner: InMemoryStore::new(),
        down: AtomicBool::new(false),
    });
    let store: Arc<dyn DynStore> = flaky.clone();
    let saver: Arc<dyn DynCheckpointer> = Arc::new(graphloom_core::checkpoint::InMemorySaver::new());
    let s = setup_with(gate_script(), saver, store);
    let cfg = RunConfig::thread("flaky");
    pause(&s, "flaky").await;

    flaky.down.store(true, Ordering::SeqCst);
    let out = s
        .graph
        .resume(Command::resume("approved"), cfg.clone())
        .await
        .unwrap();
    assert_eq!(
        out.status,
        RunStatus::Interrupted,
        "a gate that cannot read its verdict denies"
    );
    assert_eq!(out.values.status, status::AWAITING_HITL);
    assert!(entities(&s.store).await.is_empty());

    flaky.down.store(false, Ordering::SeqCst);
    let done = s.graph.resume(Command::resume("approved"), cfg).await.unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(entities(&s.store).await.len(), 1);
}

#[tokio::test]
async fn a_cold_resume_after_a_restart_replays_the_same_frozen_call() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("permit.db");
    let open = || async {
        let saver: Arc<dyn DynCheckpointer> =
            Arc::new(graphloom_sqlite::SqliteSaver::open(&db).await.unwrap());
        let store: Arc<dyn DynStore> = Arc::new(graphloom_sqlite::SqliteStore::open(&db).await.unwrap());
        (saver, store)
    };
    let (saver, store) = open().await;
    let first = setup_with(gate_script(), saver, store);
    pause(&first, "cold").await;
    drop(first);

    // A new process: new saver, store and graph over the same file.
    let (saver, store) = open().await;
    let second = setup_with(
        ScriptedModel::new([text_reply("Operator registered.")]),
        saver,
        store,
    );
    let done = second
        .graph
        .resume(Command::resume("approved"), RunConfig::thread("cold"))
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(done.values.status, status::COMPLETED);
    let ents = entities(&second.store).await;
    assert_eq!(ents.len(), 1);
    assert_eq!(ents[0]["created_by_call"], "call_create_1");
    assert_eq!(second.model.calls(), 1);
}

#[tokio::test]
async fn memory_node_rehydrates_a_pending_mutation_from_working_memory() {
    // Turn 1 pauses on thread a; the reviewer approves in the approval service; a new turn
    // of the same conversation on another thread (its state knows nothing of the call)
    // finds the frozen call in working memory and replays it.
    let s = setup(ScriptedModel::new([
        create_operator_reply(),
        text_reply("Registered."),
    ]));
    let approval_id = pause(&s, "turn-a").await;
    let mut rec = approval(&s.store, &approval_id).await;
    rec["status"] = json!("approved");
    DynStore::put(
        &*s.store,
        &["approvals".to_owned()],
        &approval_id,
        rec,
        PutOptions::default(),
    )
    .await
    .unwrap();
    let mut input = sample_input();
    input["messages"] = json!([{"type": "human", "content": "Approved, go ahead."}]);
    let out = s
        .graph
        .invoke_input(RunInput::Json(input), RunConfig::thread("turn-b"))
        .await
        .unwrap();
    let v: &PermitState = &out.values;
    assert_eq!(v.status, status::COMPLETED);
    assert_eq!(tool_messages_for(v, "call_create_1").len(), 1);
    assert_eq!(entities(&s.store).await.len(), 1);
    let t = trail(v);
    assert_eq!(
        &t[..4],
        ["system_prompt_node", "memory_node", "resume_guard", "tool_node"]
    );
    // The replay cleared working memory: a third turn does not replay it again.
    let wm = ["working_memory".to_owned(), "conv-mitchell-ranch".to_owned()];
    assert!(DynStore::get(&*s.store, &wm, "pending_mutation")
        .await
        .unwrap()
        .is_none());
}

/// The approval request also speaks LangChain's HITL shape (what the console's form and
/// other HITL clients read), and a HITL decision answers it like a verdict.
#[tokio::test]
async fn the_request_speaks_langchain_hitl_and_a_decision_answers_it() {
    let s = setup(ScriptedModel::new([
        create_operator_reply(),
        text_reply("Understood: the operator was not registered."),
    ]));
    let cfg = RunConfig::thread("hitl");
    let approval_id = pause(&s, "hitl").await;
    let state = s.graph.get_state(&cfg).await.unwrap();
    let ask = &state.interrupts[0].value;
    assert_eq!(ask["action_requests"][0]["name"], "create_entity");
    assert_eq!(
        ask["action_requests"][0]["args"]["name"],
        "Permian Basin Energy LLC"
    );
    assert_eq!(ask["review_configs"][0]["action_name"], "create_entity");
    assert_eq!(
        ask["review_configs"][0]["allowed_decisions"],
        json!(["approve", "reject"])
    );
    let decision = json!({"decisions": [{"type": "reject", "message": "wrong operator number"}]});
    let done = s.graph.resume(Command::resume(decision), cfg).await.unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert!(entities(&s.store).await.is_empty(), "no mutation");
    let record = approval(&s.store, &approval_id).await;
    assert_eq!(
        (&record["status"], &record["comment"]),
        (&json!("rejected"), &json!("wrong operator number"))
    );
}
