//! Multi-turn conversation on one thread with SQLite checkpoints: the summary grows each
//! turn, the context is trimmed to the bound, and both survive reopening the database.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{build, direct, plan, planner_requests, turn};
use graphloom_core::store::InMemoryStore;
use graphloom_core::{MessageKind, RunConfig};
use graphloom_llm::{Reply, ScriptedModel};
use std::sync::Arc;
use support_chat::{default_tools, SupportConfig};

#[tokio::test]
async fn three_turns_on_one_sqlite_thread_grow_the_summary_and_trim_the_context() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("support.db");
    let bound = SupportConfig::default().max_context_messages;
    assert_eq!(bound, 4);
    let model = ScriptedModel::new([
        plan(&[("kb_search", "reset password")]),
        Reply::text("Use Settings > Security > Reset password."),
        direct(),
        Reply::text("Links expire after one hour."),
        plan(&[("kb_search", "refund")]),
        Reply::text("Refunds take 5 business days."),
    ]);
    let questions = [
        "How do I reset my password?",
        "How long is the link valid?",
        "And how long do refunds take?",
    ];
    let thread = "customer-42";
    let mut previous_tokens = 0;
    {
        let saver = graphloom_sqlite::SqliteSaver::open(&db).await.unwrap();
        let g = build(
            &model,
            default_tools(),
            SupportConfig::default(),
            Arc::new(saver),
            Arc::new(InMemoryStore::new()),
        );
        for (i, q) in questions.iter().enumerate() {
            let (out, _) = turn(&g, thread, q).await;
            let s = out.unwrap().values;
            let n = i + 1;
            assert_eq!(
                s.summary.lines().count(),
                n,
                "turn {n}: one summary line per turn"
            );
            assert!(s.summary.lines().last().unwrap().contains(q));
            assert_eq!(s.messages.len(), (2 * n).min(bound), "turn {n}");
            assert!(
                s.tokens_used > previous_tokens,
                "tokens accumulate over the thread"
            );
            previous_tokens = s.tokens_used;
            assert_eq!(s.session_id, thread);
        }
    }

    // Turn 3's planner saw the summary of the two earlier turns and a context that had been
    // trimmed to the bound before the new question was added.
    let third = &planner_requests(&model)[2];
    let summary_msg = third
        .messages
        .iter()
        .find(|m| m.text().starts_with("Summary of the earlier conversation"))
        .unwrap()
        .text();
    assert!(summary_msg.contains(questions[0]) && summary_msg.contains(questions[1]));
    let convo: Vec<_> = third
        .messages
        .iter()
        .filter(|m| m.kind != MessageKind::System)
        .collect();
    assert_eq!(convo.len(), bound + 1);

    // Reopen the database: the thread's trimmed context and summary are durable.
    let saver = graphloom_sqlite::SqliteSaver::open(&db).await.unwrap();
    let g = build(
        &model,
        default_tools(),
        SupportConfig::default(),
        Arc::new(saver),
        Arc::new(InMemoryStore::new()),
    );
    let state = g.get_state(&RunConfig::thread(thread)).await.unwrap().values;
    let texts: Vec<String> = state.messages.iter().map(|m| m.text()).collect();
    assert_eq!(
        texts,
        [
            questions[1],
            "Links expire after one hour.",
            questions[2],
            "Refunds take 5 business days."
        ]
    );
    assert!(
        !texts.iter().any(|t| t == questions[0]),
        "turn 1 left the context"
    );
    assert!(
        state.summary.lines().next().unwrap().contains(questions[0]),
        "but not the summary"
    );
    assert_eq!(state.summary.lines().count(), 3);
    assert_eq!(state.phase, "done");
}
