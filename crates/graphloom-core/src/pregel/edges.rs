//! Following a node's edges after it ran, and rebuilding task errors.

use super::state::LoopState;
use crate::error::{Error, Result};
use crate::graph::spec::GraphInner;
use crate::state::State;
use crate::types::{Route, Send, END, START};
use std::collections::BTreeSet;

/// Follow the edges out of `node` after it ran (static edges, joins, conditional edges
/// evaluated on the merged state, and `goto` routes). For the start task, `goto` replaces
/// the edges out of START.
pub(crate) fn fire_edges<S: State>(
    g: &GraphInner<S>,
    ls: &mut LoopState<S>,
    node: &str,
    is_start: bool,
    goto: Vec<Route>,
    candidates: &mut BTreeSet<String>,
    sends: &mut Vec<Send>,
) -> Result<()> {
    let source = if is_start { START } else { node };
    let mut routes: Vec<Route> = Vec::new();
    if !is_start || goto.is_empty() {
        for target in g.edges_out.get(source).into_iter().flatten() {
            routes.push(Route::To(target.clone()));
        }
        for b in g.branches.get(source).into_iter().flatten() {
            for r in (b.router)(&ls.state).0 {
                routes.push(match (&b.path_map, r) {
                    (Some(map), Route::To(key)) => match map.get(&key) {
                        Some(n) => Route::from(n.clone()),
                        None => {
                            return Err(Error::UnknownNode(format!(
                                "{key} (not in the path map of `{source}`)"
                            )))
                        }
                    },
                    (_, r) => r,
                });
            }
        }
    }
    routes.extend(goto);
    if !is_start {
        for &j in g.joins_by_source.get(source).into_iter().flatten() {
            let join = &g.joins[j];
            ls.barriers
                .entry(join.channel.clone())
                .or_default()
                .insert(source.to_owned());
            ls.bump(&join.channel);
            ls.mark_dirty(&join.channel, crate::state::FieldChange::Replaced);
            candidates.insert(join.target.clone());
        }
    }
    for r in routes {
        match r {
            Route::End => {}
            Route::To(n) if n == END => {}
            Route::To(n) => {
                let ch = g
                    .branch_channel(&n)
                    .ok_or_else(|| Error::UnknownNode(n.clone()))?
                    .to_owned();
                ls.bump(&ch);
                candidates.insert(n);
            }
            Route::Send(s) => {
                if !g.nodes.contains_key(&s.node) {
                    return Err(Error::UnknownNode(s.node));
                }
                sends.push(s);
            }
        }
    }
    Ok(())
}

/// Errors are not `Clone`; rebuild the ones a task can produce.
pub(super) fn clone_err(e: &Error) -> Error {
    match e {
        Error::Node {
            node,
            message,
            kind,
            source,
        } => Error::Node {
            node: node.clone(),
            message: message.clone(),
            kind: *kind,
            source: source.clone(),
        },
        Error::NodeTimeout { node, after_ms, kind } => Error::NodeTimeout {
            node: node.clone(),
            after_ms: *after_ms,
            kind: *kind,
        },
        Error::UnknownNode(n) => Error::UnknownNode(n.clone()),
        Error::RecursionLimit { limit } => Error::RecursionLimit { limit: *limit },
        Error::RunTimeout { after_ms } => Error::RunTimeout { after_ms: *after_ms },
        Error::BudgetExceeded {
            node,
            budget,
            message,
        } => Error::BudgetExceeded {
            node: node.clone(),
            budget: budget.clone(),
            message: message.clone(),
        },
        Error::InvalidResume(m) => Error::InvalidResume(m.clone()),
        other => Error::node_failed(String::new(), other.to_string()),
    }
}
