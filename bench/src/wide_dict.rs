//! `wide_dict_{25x300,15x600,9x1200}[_checkpoint]`: the `wide_state` graph over a dynamic
//! JSON state ([`JsonState`]), as LangGraph's `TypedDict` variant. Every node is the same
//! generic `read_write(read, writes)`: list fields get the whole list read, dict fields its
//! last element, other fields a fresh random `n`-character string.

use crate::common::{case_name, graph_case, random_lowercase, with_saver, CaseDef, Harness};
use crate::wide_state::{truthy, wide_message, SIZES};
use graphloom_core::{
    CompiledGraph, JsonReducer, JsonState, JsonUpdate, NodeError, NodeOutput, Route, Seq, StateGraph, END,
    START,
};
use serde_json::{Map, Value};
use std::sync::Arc;

const LIST_FIELDS: [&str; 6] = [
    "messages",
    "trigger_events",
    "categorizations",
    "responses",
    "memory_docs",
    "relevant_rules",
];
/// The list fields whose reducer appends (the others are last-value channels).
const APPEND_FIELDS: [&str; 4] = ["messages", "trigger_events", "categorizations", "responses"];
const DICT_FIELDS: [&str; 6] = [
    "user_info",
    "crm_info",
    "slack_participants",
    "notified_assignees",
    "autoresponse",
    "issue",
];

/// A LangGraph lambda reducer: keeping either side copies a pointer, as in Python.
fn custom(f: fn(&Doc, Doc) -> Doc) -> JsonReducer {
    JsonReducer::CustomShared(Arc::new(move |x, y| Ok(f(x, y))))
}

type Doc = Arc<Value>;

/// The 15 channels with LangGraph's reducers.
#[must_use]
pub fn shape() -> JsonState {
    JsonState::builder()
        .field("messages", JsonReducer::Append)
        .field("trigger_events", JsonReducer::Append)
        .field(
            "primary_issue_medium",
            custom(|x, y| if truthy(&y) { y } else { Arc::clone(x) }),
        )
        .field("autoresponse", custom(|_, y| y))
        .field("issue", custom(|x, y| if truthy(&y) { y } else { Arc::clone(x) }))
        .field("relevant_rules", JsonReducer::LastValue)
        .field("memory_docs", JsonReducer::LastValue)
        .field("categorizations", JsonReducer::Append)
        .field("responses", JsonReducer::Append)
        .field(
            "user_info",
            custom(|x, y| if y.is_null() { Arc::clone(x) } else { y }),
        )
        .field(
            "crm_info",
            custom(|x, y| if y.is_null() { Arc::clone(x) } else { y }),
        )
        .field(
            "email_thread_id",
            custom(|x, y| if y.is_null() { Arc::clone(x) } else { y }),
        )
        .field("slack_participants", JsonReducer::Merge)
        .field("bot_id", JsonReducer::LastValue)
        .field("notified_assignees", JsonReducer::Merge)
        .build()
}

/// What a node read: a list channel's shared items, or one shared value.
enum Read<'a> {
    List(&'a Seq<Doc>),
    One(Doc),
}

/// LangGraph's `read_write` node body. What a node reads is shared (`Arc`) and written on
/// without a copy, as Python passes references: list items to list channels, the last
/// item to dict channels; only a `merge` channel copies the dict it extends.
fn read_write(s: &JsonState, read: &str, write: &[&str], n: usize) -> Result<JsonUpdate, NodeError> {
    let val = match (s.items(read), s.value_shared(read)) {
        (Some(items), _) => Read::List(items),
        (None, Some(v)) => match &**v {
            Value::String(text) => Read::One(Arc::new(Value::Object(Map::from_iter([(
                text.clone(),
                Value::String(text.clone()),
            )])))),
            _ => Read::One(Arc::clone(v)),
        },
        (None, None) => return Err(NodeError::fatal(format!("no channel `{read}`"))),
    };
    let single: Doc = match &val {
        Read::List(items) => items
            .last()
            .cloned()
            .ok_or_else(|| NodeError::fatal(format!("`{read}` is empty")))?,
        Read::One(v) => Arc::clone(v),
    };
    let mut out = JsonUpdate::new();
    for &k in write {
        out = if LIST_FIELDS.contains(&k) {
            match (&val, APPEND_FIELDS.contains(&k)) {
                (Read::List(items), true) => out.extend(k, items.iter().cloned()),
                (Read::List(items), false) => out.set_items(k, items.iter().cloned()),
                (Read::One(v), _) => out.set_items(k, [Arc::clone(v)]),
            }
        } else if DICT_FIELDS.contains(&k) {
            out.set_shared(k, Arc::clone(&single))
        } else {
            out.set(k, random_lowercase(n))
        };
    }
    Ok(out)
}

fn add_rw(
    g: StateGraph<JsonState>,
    name: &str,
    read: &'static str,
    write: &'static [&'static str],
    n: usize,
) -> StateGraph<JsonState> {
    g.add_node(name, move |s: Arc<JsonState>, _rt| async move {
        Ok(NodeOutput::Update(read_write(&s, read, write, n)?))
    })
}

/// The compiled graph.
pub fn graph(n: usize, checkpoint: bool) -> anyhow::Result<CompiledGraph<JsonState>> {
    let mut g = StateGraph::with_shape(shape());
    g = add_rw(
        g,
        "one",
        "messages",
        &["trigger_events", "primary_issue_medium"],
        n,
    );
    g = add_rw(g, "two", "trigger_events", &["autoresponse", "issue"], n);
    g = add_rw(g, "three", "autoresponse", &["relevant_rules"], n);
    g = add_rw(
        g,
        "four",
        "trigger_events",
        &["categorizations", "responses", "memory_docs"],
        n,
    );
    g = add_rw(
        g,
        "five",
        "categorizations",
        &[
            "user_info",
            "crm_info",
            "email_thread_id",
            "slack_participants",
            "bot_id",
            "notified_assignees",
        ],
        n,
    );
    g = add_rw(g, "six", "responses", &["messages"], n);
    let g = g
        .add_edge(START, "one")
        .add_edge("one", "two")
        .add_edge("two", "three")
        .add_edge("two", "four")
        .add_join(["three", "four"], "five")
        .add_edge("five", "six")
        .add_conditional_edges("six", move |s: &JsonState| {
            let len = s.items("messages").map_or(0, Seq::len);
            Route::from(if len > n { END } else { "one" })
        });
    Ok(with_saver(g, checkpoint).compile()?)
}

/// The input: `{"messages": [message]}`.
#[must_use]
pub fn input(i_count: usize, j_count: usize) -> JsonUpdate {
    JsonUpdate::new().set("messages", Value::Array(vec![wide_message(i_count, j_count)]))
}

/// The cases of this family.
pub fn cases() -> Vec<CaseDef> {
    let mut out = Vec::new();
    for (size, (i, j), n) in SIZES {
        for checkpoint in [false, true] {
            let name = case_name(&format!("wide_dict_{size}"), checkpoint);
            out.push(CaseDef::new(name, move |h: Harness| {
                Ok(graph_case(graph(n, checkpoint)?, input(i, j), h))
            }));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::common::fresh_config;
    use graphloom_core::{Error, State as _};

    fn len_of(s: &JsonState, field: &str) -> usize {
        s.get(field).and_then(|v| v.as_array().map(Vec::len)).unwrap()
    }

    #[test]
    fn lists_are_shared_not_copied() {
        let mut s = shape();
        let mut changes = Vec::new();
        s.merge(
            vec![graphloom_core::TaskUpdate {
                node: "in",
                update: input(3, 3),
            }],
            &mut changes,
        )
        .unwrap();
        let u = read_write(
            &s,
            "messages",
            &["trigger_events", "memory_docs", "issue", "bot_id"],
            5,
        )
        .unwrap();
        s.merge(
            vec![graphloom_core::TaskUpdate {
                node: "one",
                update: u,
            }],
            &mut changes,
        )
        .unwrap();
        let (m, t) = (s.items("messages").unwrap(), s.items("trigger_events").unwrap());
        assert!(Arc::ptr_eq(m.get(0).unwrap(), t.get(0).unwrap()));
        assert_eq!(len_of(&s, "memory_docs"), 1);
        assert!(s.value("issue").unwrap().is_object());
        assert_eq!(s.value("bot_id").and_then(Value::as_str).map(str::len), Some(5));
    }

    #[tokio::test]
    async fn same_shape_as_the_typed_state() {
        for (n, i, j, loops_steps, msgs) in [
            (300, 5, 5, 30, 595),
            (600, 3, 5, 35, 1873),
            (1200, 3, 3, 35, 1873),
        ] {
            let g = graph(n, n == 600).unwrap();
            let out = g
                .invoke(input(i, j), fresh_config().recursion_limit(loops_steps))
                .await
                .unwrap();
            assert_eq!(len_of(&out.values, "messages"), msgs);
            if msgs == 1873 {
                assert_eq!(len_of(&out.values, "trigger_events"), 872);
                assert_eq!(len_of(&out.values, "responses"), 1278);
                assert_eq!(len_of(&out.values, "memory_docs"), 872);
            }
            assert_eq!(len_of(&out.values, "relevant_rules"), 1);
            let medium = out.values.get("primary_issue_medium").unwrap();
            assert_eq!(medium.as_str().map(str::len), Some(n));
            assert!(out.values.get("issue").unwrap().is_object());
            let slack = out.values.get("slack_participants").unwrap();
            assert_eq!(slack.as_object().map(Map::len), Some(i));
            let err = g
                .invoke(input(i, j), fresh_config().recursion_limit(loops_steps - 1))
                .await
                .unwrap_err();
            assert!(matches!(err, Error::RecursionLimit { .. }), "{err}");
        }
    }
}
