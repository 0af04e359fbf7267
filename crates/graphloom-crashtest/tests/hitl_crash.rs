//! The human-in-the-loop middleware's promise under SIGKILL: after the review, the
//! approved `transfer` takes effect exactly once, even when the worker is killed while it
//! executes and the run is resumed; it gets the same idempotency key every time it runs;
//! the rejected `purge` never runs; the unreviewed sibling `lookup` never runs before the
//! review, and in a task of its own (a `Send` per call) is not run again once it finished;
//! and the final state answers each tool call exactly once (the rejection with an error
//! tool message).
//!
//! Each round is a fresh thread: `hitl-worker --phase start` (pauses at the review), then
//! `--phase approve`, killed at a scheduled point of `transfer`'s work (before its effect,
//! after its effect but before it returns, or anywhere), then `--phase approve` again until
//! it prints `DONE` (the harness is `gated/mod.rs`, shared with `approval_crash.rs`).
//!
//! `GRAPHLOOM_HITL_KILLS` sets the number of rounds, each with one kill (default 5).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod gated;

use graphloom_core::{MessageKind, RunConfig};
use graphloom_llm::{Reply, ScriptedModel};
use graphloom_prebuilt::{create_agent, Tool};
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviewed_tool_takes_effect_once_and_rejected_never_across_sigkills() {
    let rounds = gated::rounds("GRAPHLOOM_HITL_KILLS");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hitl.db");
    // Create the schema once so no kill lands in the middle of it.
    let saver = graphloom_sqlite::SqliteSaver::open(&db).await.unwrap();
    // A reader of the threads' final state (same graph shape, no tools needed).
    let reader = create_agent(
        Arc::new(ScriptedModel::new(Vec::<Reply>::new())),
        Vec::<Arc<dyn Tool>>::new(),
    )
    .state_field(graphloom_prebuilt::StateField::new::<serde_json::Value>(
        "hitl_edited_tool_calls",
        graphloom_core::JsonReducer::LastValue,
    ))
    .checkpointer(saver)
    .build()
    .unwrap();

    let mut t = gated::Tally::default();
    for n in 0..rounds {
        let thread = format!("hitl-{n}");
        let bin = env!("CARGO_BIN_EXE_hitl-worker");
        let ledger = gated::round(bin, &db, dir.path(), &thread, n, gated::Sibling::OwnTask, &mut t).await;
        let purges = gated::with_suffix(&ledger, ".purges");
        assert!(
            gated::lines(&purges).is_empty(),
            "{thread}: the rejected purge ran"
        );

        // The final state answers each call once (the rejected one with an error), and
        // ends with the model's answer.
        let st = reader.get_state(&RunConfig::thread(&thread)).await.unwrap();
        assert!(
            st.next.is_empty() && st.interrupts.is_empty(),
            "{thread}: not finished"
        );
        gated::check_final(
            &thread,
            &st.values.messages.to_vec(),
            &[
                ("call_lookup", "success"),
                ("call_purge", "error"),
                ("call_transfer", "success"),
            ],
            &[
                MessageKind::Human,
                MessageKind::Ai,
                MessageKind::Tool,
                MessageKind::Tool,
                MessageKind::Tool,
                MessageKind::Ai,
            ],
        );
    }
    t.conclude("human in the loop", rounds);
}
