//! `graphloom threads`: what happened on a thread, checkpoint by checkpoint.

use crate::{open_deps, DbArgs, Graphs};
use anyhow::Context as _;
use clap::Subcommand;
use graphloom_core::checkpoint::{CheckpointConfig, ListQuery};
use graphloom_server::hosted::HostedGraph;
use graphloom_server::GraphDeps;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Thread subcommands.
#[derive(Subcommand)]
pub enum ThreadCmd {
    /// Threads in the database, newest activity first.
    List {
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// The latest state of a thread: values, next nodes, pending interrupts.
    Show {
        /// Thread id.
        thread: String,
    },
    /// The thread's checkpoints, newest first.
    History {
        /// Thread id.
        thread: String,
        /// At most this many checkpoints.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// What changed between consecutive checkpoints, oldest first.
    Diff {
        /// Thread id.
        thread: String,
    },
}

/// The graph a thread was run with (saved in its checkpoints' metadata by `graphloom run`
/// and by the server).
async fn graph_of(graphs: &Graphs, deps: &GraphDeps, thread: &str) -> anyhow::Result<Arc<dyn HostedGraph>> {
    crate::require_thread(thread)?;
    let tuple = deps
        .checkpointer
        .get_tuple(&CheckpointConfig::thread(thread))
        .await?
        .ok_or_else(|| anyhow::anyhow!("thread `{thread}` has no checkpoints in this database"))?;
    let meta = serde_json::to_value(&tuple.metadata)?;
    let id = meta
        .get("graph_id")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow::anyhow!("thread `{thread}` does not say which graph ran it"))?;
    let entry = graphs.find(id)?;
    Ok((entry.factory)(deps)?)
}

fn changes(old: &Value, new: &Value) -> Vec<String> {
    let empty = Map::new();
    let a = old.as_object().unwrap_or(&empty);
    let b = new.as_object().unwrap_or(&empty);
    let mut out = Vec::new();
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for k in keys {
        match (a.get(k), b.get(k)) {
            (Some(x), Some(y)) if x == y => {}
            (Some(Value::Array(x)), Some(Value::Array(y))) if y.len() > x.len() && y.starts_with(x) => {
                for item in &y[x.len()..] {
                    out.push(format!("  {k} += {}", clip(item)));
                }
            }
            (None, Some(y)) => out.push(format!("  {k} = {}", clip(y))),
            (Some(_), None) => out.push(format!("  {k} removed")),
            (Some(x), Some(y)) => out.push(format!("  {k}: {} -> {}", clip(x), clip(y))),
            (None, None) => {}
        }
    }
    out
}

fn clip(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 160 {
        format!("{}…", s.chars().take(160).collect::<String>())
    } else {
        s
    }
}

fn line(s: &Value) -> String {
    let meta = s.get("metadata").cloned().unwrap_or(Value::Null);
    format!(
        "{}  step {:>3}  {:<7} next {}  {}",
        s.pointer("/checkpoint/checkpoint_id")
            .and_then(Value::as_str)
            .unwrap_or("?"),
        meta.get("step").map_or_else(|| "?".into(), Value::to_string),
        meta.get("source").and_then(Value::as_str).unwrap_or(""),
        s.get("next").map_or_else(String::new, Value::to_string),
        s.get("created_at").and_then(Value::as_str).unwrap_or(""),
    )
}

/// The graph id a state's checkpoint metadata names.
fn graph_id_of(s: &Value) -> &str {
    s.get("metadata")
        .and_then(|m| m.get("graph_id"))
        .and_then(Value::as_str)
        .unwrap_or("<graph>")
}

/// The tasks of a state that failed, with their errors.
fn failed_tasks(s: &Value) -> Vec<(String, String)> {
    s.get("tasks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| {
            let error = t.get("error").filter(|e| !e.is_null())?;
            let name = t.get("name").and_then(Value::as_str).unwrap_or("?");
            let error = error.as_str().map_or_else(|| error.to_string(), str::to_owned);
            Some((name.to_owned(), error))
        })
        .collect()
}

/// A thread that stopped part-way: nodes left to run and no interrupt waiting for an answer.
fn stopped(s: &Value) -> bool {
    let next = s
        .get("next")
        .and_then(Value::as_array)
        .is_some_and(|n| !n.is_empty());
    let paused = s
        .get("interrupts")
        .and_then(Value::as_array)
        .is_some_and(|i| !i.is_empty());
    next && !paused
}

/// Whether `thread` stopped part-way (a failed, cancelled or drained run): `graphloom run`
/// continues such a thread rather than giving it new input.
pub(crate) async fn stopped_part_way(g: &Arc<dyn HostedGraph>, thread: &str) -> anyhow::Result<bool> {
    Ok(g.get_state(thread, None).await?.is_some_and(|s| stopped(&s)))
}

/// Run a thread subcommand.
pub async fn run(cmd: ThreadCmd, db: &DbArgs, graphs: &Graphs) -> anyhow::Result<()> {
    let deps = open_deps(db).await?;
    match cmd {
        ThreadCmd::List { limit } => {
            let all = deps
                .checkpointer
                .list(&ListQuery {
                    checkpoint_ns: Some(String::new()),
                    ..ListQuery::default()
                })
                .await
                .context("listing checkpoints")?;
            let mut latest: BTreeMap<String, (String, Value)> = BTreeMap::new();
            for t in all {
                let meta = serde_json::to_value(&t.metadata)?;
                let e = latest
                    .entry(t.config.thread_id.clone())
                    .or_insert((String::new(), Value::Null));
                if t.checkpoint.id > e.0 {
                    *e = (t.checkpoint.id.clone(), meta);
                }
            }
            let mut rows: Vec<_> = latest.into_iter().collect();
            rows.sort_by(|a, b| b.1 .0.cmp(&a.1 .0));
            if rows.is_empty() {
                println!("no threads in this database");
            }
            for (thread, (cp, meta)) in rows.into_iter().take(limit) {
                println!(
                    "{thread:<38} {:<22} step {:>3}  last checkpoint {cp}",
                    meta.get("graph_id").and_then(Value::as_str).unwrap_or("?"),
                    meta.get("step").map_or_else(|| "?".into(), Value::to_string),
                );
            }
        }
        ThreadCmd::Show { thread } => {
            let g = graph_of(graphs, &deps, &thread).await?;
            let s = g
                .get_state(&thread, None)
                .await?
                .ok_or_else(|| anyhow::anyhow!("thread `{thread}` has no state"))?;
            println!("{}", line(&s));
            let graph_id = graph_id_of(&s);
            for (name, error) in failed_tasks(&s) {
                println!("failed in {name}: {error}");
            }
            if stopped(&s) {
                println!("continue it: graphloom run {graph_id} --thread {thread} --continue");
            }
            if let Some(ints) = s
                .get("interrupts")
                .and_then(Value::as_array)
                .filter(|i| !i.is_empty())
            {
                println!("paused at {} interrupt(s):", ints.len());
                for i in ints {
                    println!(
                        "  {} {}",
                        i.get("id").and_then(Value::as_str).unwrap_or(""),
                        clip(&i["value"])
                    );
                }
            }
            println!(
                "{}",
                serde_json::to_string_pretty(s.get("values").unwrap_or(&Value::Null))?
            );
        }
        ThreadCmd::History { thread, limit } => {
            let g = graph_of(graphs, &deps, &thread).await?;
            for s in g.history(&thread, Map::new(), None, Some(limit)).await? {
                println!("{}", line(&s));
            }
        }
        ThreadCmd::Diff { thread } => {
            let g = graph_of(graphs, &deps, &thread).await?;
            let mut hist = g.history(&thread, Map::new(), None, Some(1000)).await?;
            hist.reverse();
            let mut prev = Value::Object(Map::new());
            for s in &hist {
                println!("{}", line(s));
                let values = s.get("values").cloned().unwrap_or(Value::Null);
                for c in changes(&prev, &values) {
                    println!("{c}");
                }
                prev = values;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::changes;
    use serde_json::json;

    #[test]
    fn diff_shows_appends_replacements_and_removals() {
        let c = changes(
            &json!({"a": [1], "b": 1, "gone": true}),
            &json!({"a": [1, 2], "b": 2, "new": "x"}),
        );
        assert_eq!(
            c,
            vec!["  a += 2", "  b: 1 -> 2", "  gone removed", "  new = \"x\""]
        );
    }
}
