//! The approval gate's promise under SIGKILL: after approval the gated `transfer` takes
//! effect exactly once, even when the worker is killed while it executes and the run is
//! resumed; it gets the same idempotency key every time it runs; the ungated sibling
//! `lookup` never runs before the verdict and runs together with the approved call (so once
//! per execution of the tool node); and the final state answers each tool call exactly once.
//!
//! Each round is a fresh thread: `approval-worker --phase start` (pauses at the gate), then
//! `--phase approve`, killed at a scheduled point of `transfer`'s work (before its effect,
//! after its effect but before it returns, or anywhere), then `--phase approve` again until
//! it prints `DONE` (the harness is `gated/mod.rs`, shared with `hitl_crash.rs`).
//!
//! `GRAPHLOOM_APPROVAL_KILLS` sets the number of rounds, each with one kill (default 5).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod gated;

use graphloom_core::{MessageKind, RunConfig};
use graphloom_llm::{Reply, ScriptedModel};
use graphloom_prebuilt::{create_react_agent, AgentOptions, Tool};
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approved_tool_takes_effect_once_across_sigkills() {
    let rounds = gated::rounds("GRAPHLOOM_APPROVAL_KILLS");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("approval.db");
    // Create the schema once so no kill lands in the middle of it.
    let saver = graphloom_sqlite::SqliteSaver::open(&db).await.unwrap();
    // A reader of the threads' final state (same graph shape, no tools needed).
    let reader = create_react_agent(
        Arc::new(ScriptedModel::new(Vec::<Reply>::new())),
        Vec::<Arc<dyn Tool>>::new(),
        AgentOptions::new().checkpointer(saver),
    )
    .unwrap();

    let mut t = gated::Tally::default();
    for n in 0..rounds {
        let thread = format!("approval-{n}");
        let bin = env!("CARGO_BIN_EXE_approval-worker");
        gated::round(
            bin,
            &db,
            dir.path(),
            &thread,
            n,
            gated::Sibling::SharesTask,
            &mut t,
        )
        .await;

        // The final state answers each call once, and ends with the model's answer.
        let st = reader.get_state(&RunConfig::thread(&thread)).await.unwrap();
        assert!(
            st.next.is_empty() && st.interrupts.is_empty(),
            "{thread}: not finished"
        );
        gated::check_final(
            &thread,
            &st.values.messages.to_vec(),
            &[("call_lookup", "success"), ("call_transfer", "success")],
            &[
                MessageKind::Human,
                MessageKind::Ai,
                MessageKind::Tool,
                MessageKind::Tool,
                MessageKind::Ai,
            ],
        );
    }
    t.conclude("approval gate", rounds);
}
