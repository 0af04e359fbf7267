//! `sequential_{10,1000}`: a chain `START -> node_0 -> ... -> node_{n-1} -> END` of no-op
//! nodes over a messages state, no checkpointer. Also `sequential_1000_compilation` (build
//! and compile the graph) and `first_event_latency_sequential_1000` (time from calling
//! `stream` to its first `values` event).

use crate::common::{fresh_config, graph_case, CaseDef, Harness, RunFn};
use anyhow::{bail, Context as _};
use futures::StreamExt as _;
use graphloom_core::{
    CompiledGraph, Message, NodeError, RunEvent, RunInput, Seq, State, StateGraph, StreamMode, StreamOptions,
    END, START,
};
use std::time::Instant;

/// LangGraph's `MessagesState`.
#[derive(State, Clone, Default, Debug)]
pub struct MessagesState {
    /// The conversation.
    #[reducer(add_messages)]
    pub messages: Seq<Message>,
}

/// The chain of `n` no-op nodes, not compiled.
pub fn builder(n: usize) -> StateGraph<MessagesState> {
    let mut g = StateGraph::<MessagesState>::new();
    for i in 0..n {
        g = g.add_node(format!("node_{i}"), |_s, _rt| async { Ok::<(), NodeError>(()) });
    }
    g = g.add_edge(START, "node_0");
    for i in 1..n {
        g = g.add_edge(format!("node_{}", i - 1), format!("node_{i}"));
    }
    g.add_edge(format!("node_{}", n.saturating_sub(1)), END)
}

/// The compiled chain.
pub fn graph(n: usize) -> anyhow::Result<CompiledGraph<MessagesState>> {
    Ok(builder(n).compile()?)
}

/// The input: no messages.
#[must_use]
pub fn input() -> MessagesStateUpdate {
    MessagesStateUpdate::new().messages(Vec::new())
}

fn compilation_case() -> RunFn {
    Box::new(|| {
        Box::pin(async {
            let start = Instant::now();
            let g = graph(1000)?;
            let took = start.elapsed();
            drop(g);
            Ok(took)
        })
    })
}

fn first_event_case(g: CompiledGraph<MessagesState>) -> RunFn {
    Box::new(move || {
        let g = g.clone();
        Box::pin(async move {
            let opts = StreamOptions::modes([StreamMode::Values]);
            let config = fresh_config();
            let start = Instant::now();
            let mut stream = g.stream(RunInput::Update(input()), config, opts);
            let first = stream.next().await.context("the stream yielded nothing")?;
            let took = start.elapsed();
            if let RunEvent::End(out) = first {
                out?;
                bail!("the first event was the end of the run");
            }
            // Let the run finish (untimed) so it does not overlap the next iteration.
            while let Some(ev) = stream.next().await {
                if let RunEvent::End(out) = ev {
                    out?;
                }
            }
            Ok(took)
        })
    })
}

/// The cases of this family.
pub fn cases() -> Vec<CaseDef> {
    let mut out = Vec::new();
    for n in [10usize, 1000] {
        out.push(CaseDef::new(format!("sequential_{n}"), move |h: Harness| {
            Ok(graph_case(graph(n)?, input(), h))
        }));
    }
    out.push(CaseDef::new("sequential_1000_compilation", |_h| {
        Ok(compilation_case())
    }));
    out.push(CaseDef::new("first_event_latency_sequential_1000", |_h| {
        Ok(first_event_case(graph(1000)?))
    }));
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::common::fresh_config;
    use graphloom_core::Error;

    #[tokio::test]
    async fn takes_n_supersteps() {
        let g = graph(10).unwrap();
        let out = g
            .invoke(input(), fresh_config().recursion_limit(10))
            .await
            .unwrap();
        assert!(out.values.messages.is_empty());
        let err = g
            .invoke(input(), fresh_config().recursion_limit(9))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::RecursionLimit { .. }), "{err}");
    }
}
