//! `fanout_to_subgraph_{10x,100x}[_checkpoint]`: map-reduce over a compiled subgraph.
//!
//! Parent: `subjects` (last value), `jokes` (append). `START` sends one packet per subject to
//! `generate_joke`, a compiled subgraph `edit -> generate -> bump`, where `bump` loops until
//! the first joke ends with `" a"` ten times (12 supersteps per subject). Each subject is a
//! list of 1000 random lowercase letters that `edit` formats into a string.
//!
//! Letters are `char`s: Python's one-letter strings are shared interned objects, so a list
//! of them is a list of pointers, and `{:?}` of a `Vec<char>` gives exactly Python's
//! `str(list)` (`['a', 'b', ...]`).

use crate::common::{attach_saver, case_name, durable_case, graph_case, with_saver, CaseDef, Harness, Saver};
use graphloom_core::{
    CompiledGraph, Durability, NodeError, NodeOutput, Route, Send, Seq, State, StateGraph, END, START,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The parent graph's state.
#[derive(State, Clone, Default, Debug)]
pub struct OverallState {
    /// One subject per joke: a list of letters.
    pub subjects: Vec<Vec<char>>,
    /// The jokes, one per subject.
    #[reducer(append)]
    pub jokes: Seq<String>,
}

/// The packet each subject is sent with.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JokeInput {
    /// The subject's letters.
    pub subject: Vec<char>,
}

/// The subgraph's state. LangGraph's `subject` holds the list first and the edited string
/// after `edit`; here the list and the string are two fields.
#[derive(State, Clone, Default, Debug)]
pub struct JokeState {
    /// The subject as it arrived.
    pub subject_letters: Vec<char>,
    /// The subject after `edit`.
    pub subject: String,
    /// The joke (one item), bumped in place.
    pub jokes: Vec<String>,
}

fn first_joke(s: &JokeState) -> Result<&String, NodeError> {
    s.jokes.first().ok_or_else(|| NodeError::fatal("no joke to bump"))
}

/// The compiled subgraph.
pub fn subgraph() -> anyhow::Result<CompiledGraph<JokeState>> {
    let done_suffix: Arc<str> = Arc::from(" a".repeat(10));
    Ok(StateGraph::<JokeState>::new()
        .add_node("edit", |s: Arc<JokeState>, _rt| async move {
            let subject = format!("{:?} - hohoho", s.subject_letters);
            Ok(NodeOutput::Update(JokeStateUpdate::new().subject(subject)))
        })
        .add_node("generate", |s: Arc<JokeState>, _rt| async move {
            let joke = format!("Joke about {}", s.subject);
            Ok(NodeOutput::Update(JokeStateUpdate::new().jokes(vec![joke])))
        })
        .add_node("bump", |s: Arc<JokeState>, _rt| async move {
            let joke = format!("{} a", first_joke(&s)?);
            Ok(NodeOutput::Update(JokeStateUpdate::new().jokes(vec![joke])))
        })
        .add_edge(START, "edit")
        .add_edge("edit", "generate")
        .add_edge("generate", "bump")
        .add_conditional_edges("bump", move |s: &JokeState| {
            let done = s.jokes.first().is_none_or(|j| j.ends_with(&*done_suffix));
            Route::from(if done { END } else { "bump" })
        })
        .set_finish_point("generate")
        .compile()?)
}

/// The compiled parent graph.
pub fn graph(checkpoint: bool) -> anyhow::Result<CompiledGraph<OverallState>> {
    Ok(with_saver(builder()?, checkpoint).compile()?)
}

/// The parent graph, not yet compiled.
pub fn builder() -> anyhow::Result<StateGraph<OverallState>> {
    Ok(StateGraph::<OverallState>::new()
        .add_packet_subgraph(
            "generate_joke",
            subgraph()?,
            |p: JokeInput| JokeStateUpdate::new().subject_letters(p.subject),
            |c: &JokeState| OverallStateUpdate::new().jokes(c.jokes.clone()),
        )
        .add_conditional_edges(START, |s: &OverallState| {
            s.subjects
                .iter()
                .map(|subject| {
                    Send::new(
                        "generate_joke",
                        JokeInput {
                            subject: subject.clone(),
                        },
                    )
                })
                .collect::<Vec<_>>()
        })
        .add_edge("generate_joke", END))
}

/// `n` subjects of 1000 random lowercase letters each.
#[must_use]
pub fn input(n: usize) -> OverallStateUpdate {
    let subjects = (0..n)
        .map(|_| crate::common::random_lowercase(1000).chars().collect())
        .collect();
    OverallStateUpdate::new().subjects(subjects)
}

/// The cases of this family.
pub fn cases() -> Vec<CaseDef> {
    let mut out = Vec::new();
    for n in [10usize, 100] {
        for checkpoint in [false, true] {
            let name = case_name(&format!("fanout_to_subgraph_{n}x"), checkpoint);
            out.push(CaseDef::new(name, move |h: Harness| {
                Ok(graph_case(graph(checkpoint)?, input(n), h))
            }));
        }
    }
    for saver in [Saver::Sqlite, Saver::Postgres] {
        out.push(CaseDef::new(
            format!("fanout_to_subgraph_100x{}", saver.suffix()),
            move |h: Harness| {
                let (b, keep) = attach_saver(builder()?, saver)?;
                Ok(durable_case(b.compile()?, input(100), h, Durability::Sync, keep))
            },
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::common::fresh_config;
    use futures::StreamExt as _;
    use graphloom_core::{Error, RunEvent, RunInput, StreamMode, StreamOptions};

    #[tokio::test]
    async fn every_subject_gets_a_joke_bumped_ten_times() {
        for checkpoint in [false, true] {
            let g = graph(checkpoint).unwrap();
            let out = g.invoke(input(10), fresh_config()).await.unwrap();
            assert_eq!(out.values.jokes.len(), 10);
            for j in &out.values.jokes {
                assert!(j.starts_with("Joke about ['"), "{}", &j[..20]);
                assert_eq!(j.len(), "Joke about ".len() + 1000 * 5 + " - hohoho".len() + 20);
                assert!(j.ends_with(&format!(" - hohoho{}", " a".repeat(10))));
            }
        }
    }

    #[tokio::test]
    async fn parent_takes_one_superstep_and_each_subgraph_twelve() {
        let g = graph(false).unwrap();
        let opts = StreamOptions::modes([StreamMode::Updates, StreamMode::Values]).with_subgraphs();
        let mut stream = g.stream(RunInput::Update(input(10)), fresh_config(), opts);
        let (mut root_steps, mut root_tasks, mut nested_tasks) = (0, 0, 0);
        while let Some(ev) = stream.next().await {
            match ev {
                RunEvent::Part(p) => match (p.ns.is_empty(), p.mode) {
                    (true, StreamMode::Values) => root_steps += 1,
                    (true, _) => root_tasks += 1,
                    (false, StreamMode::Updates) => nested_tasks += 1,
                    (false, _) => {}
                },
                RunEvent::End(out) => {
                    out.unwrap();
                }
            }
        }
        // The input step, then one superstep of 10 subgraph tasks of 12 tasks each.
        assert_eq!((root_steps, root_tasks, nested_tasks), (2, 10, 120));
        let sub = subgraph().unwrap();
        let single = JokeStateUpdate::new().subject_letters(vec!['x']);
        sub.invoke(single.clone(), fresh_config().recursion_limit(12))
            .await
            .unwrap();
        let err = sub
            .invoke(single, fresh_config().recursion_limit(11))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::RecursionLimit { .. }), "{err}");
    }
}
