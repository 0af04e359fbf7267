//! A refund desk in a few dozen lines: classify a request, fan out checks in parallel,
//! pause for a human when the amount is large, resume, and stream every step.
//!
//! Run: `cargo run -p graphloom-core --example quickstart`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::*;
use std::sync::Arc;

#[derive(State, Clone, Default, Debug)]
struct Refund {
    /// The customer's request.
    request: String,
    /// Amount asked for, in cents.
    amount: i64,
    /// What each check found.
    #[reducer(append)]
    findings: Seq<String>,
    /// The decision.
    decision: Option<String>,
}

fn graph() -> Result<CompiledGraph<Refund>> {
    StateGraph::<Refund>::new()
        .add_node("fraud_check", |s: Arc<Refund>, _rt| async move {
            let risky = s.request.contains("urgent");
            Ok(RefundUpdate::new()
                .findings(vec![format!("fraud: {}", if risky { "review" } else { "clear" })]))
        })
        .add_node("policy_check", |s: Arc<Refund>, _rt| async move {
            Ok(RefundUpdate::new().findings(vec![format!("policy: {} cents within limit", s.amount)]))
        })
        .add_node("approve", |s: Arc<Refund>, rt: Runtime| async move {
            let verdict = if s.amount > 10_000 {
                // Pauses the run; the caller resumes with a value.
                rt.interrupt(serde_json::json!({"ask": "approve large refund?", "amount": s.amount}))?
            } else {
                serde_json::json!("auto-approved")
            };
            Ok(RefundUpdate::new().decision(Some(verdict.as_str().unwrap_or("?").to_owned())))
        })
        .add_edge(START, "fraud_check")
        .add_edge(START, "policy_check")
        .add_join(["fraud_check", "policy_check"], "approve")
        .add_edge("approve", END)
        .checkpointer(InMemorySaver::new())
        .compile()
}

#[tokio::main]
async fn main() -> Result<()> {
    let g = graph()?;
    println!("{}", g.draw_mermaid());
    let cfg = RunConfig::thread("refund-42");
    let input = RefundUpdate::new()
        .request("urgent: broken kettle".into())
        .amount(25_000);
    let mut events = g.stream(
        RunInput::Update(input),
        cfg.clone(),
        StreamOptions::modes([StreamMode::Updates]),
    );
    while let Some(ev) = events.next().await {
        match ev {
            RunEvent::Part(p) => println!("update  {}", p.data_json().unwrap_or_default()),
            RunEvent::End(out) => {
                let out = out?;
                println!("paused  status={:?} interrupts={:?}", out.status, out.interrupts);
            }
        }
    }
    let done = g.resume(Command::resume("approved by Dana"), cfg.clone()).await?;
    println!(
        "done    decision={:?} findings={:?}",
        done.values.decision,
        done.values.findings.to_vec()
    );
    for snap in g.get_state_history(&cfg, HistoryQuery::default()).await? {
        let meta = snap.metadata.as_ref().map(|m| m.step).unwrap_or_default();
        println!("history step {meta:>2} next={:?}", snap.next);
    }
    Ok(())
}
