//! `wide_state_{25x300,15x600,9x1200}[_checkpoint]`: a 15-field typed state with
//! LangGraph's reducers, six nodes (`three` and `four` in parallel, joined into `five`) and
//! a loop `six -> one` until `len(messages) > n`. Also `wide_state_15x600_compilation`.
//!
//! Lists grow about 3x per loop because every list field receives the whole list it read.
//! Their items are the one input message, shared (`Arc`) as Python shares the dict.

use crate::common::{case_name, graph_case, random_lowercase, with_saver, CaseDef, Harness, RunFn};
use graphloom_core::{CompiledGraph, NodeError, NodeOutput, Route, Seq, State, StateGraph, END, START};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// A document in the lists: a JSON object, shared.
pub type Doc = Arc<Value>;

/// The suite's sizes: name, `(I, J)` of the input message, `n`.
pub const SIZES: [(&str, (usize, usize), usize); 3] = [
    ("25x300", (5, 5), 300),
    ("15x600", (3, 5), 600),
    ("9x1200", (3, 3), 1200),
];

/// The single input message: `I` keys of `J` keys of a 25-item list each.
#[must_use]
pub fn wide_message(i_count: usize, j_count: usize) -> Value {
    let leaf: Vec<Value> = (0..5)
        .flat_map(|_| {
            [
                json!("hi?".repeat(10)),
                json!(true),
                json!(1),
                json!(6_327_816_386_138_i64),
                Value::Null,
            ]
        })
        .collect();
    let outer: Map<String, Value> = (0..i_count)
        .map(|i| {
            let inner: Map<String, Value> = (0..j_count)
                .map(|j| (j.to_string().repeat(10), Value::Array(leaf.clone())))
                .collect();
            (i.to_string().repeat(10), Value::Object(inner))
        })
        .collect();
    Value::Object(outer)
}

/// Python truthiness of a JSON value.
#[must_use]
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// `lambda x, y: y or x`.
fn y_or_x(x: &mut String, y: String) {
    if !y.is_empty() {
        *x = y;
    }
}

/// `lambda _, y: y`.
fn always_y(x: &mut Option<Doc>, y: Option<Doc>) {
    *x = y;
}

/// `lambda x, y: y if y else x`.
fn y_if_truthy(x: &mut Option<Doc>, y: Option<Doc>) {
    if y.as_deref().is_some_and(truthy) {
        *x = y;
    }
}

/// `lambda x, y: y if y is not None else x`.
fn y_if_some<T>(x: &mut Option<T>, y: Option<T>) {
    if y.is_some() {
        *x = y;
    }
}

/// The wide state.
#[derive(State, Clone, Debug)]
pub struct WideState {
    /// Appended.
    #[reducer(append)]
    pub messages: Seq<Doc>,
    /// The external events that are converted by the graph.
    #[reducer(append)]
    pub trigger_events: Seq<Doc>,
    /// `y or x`, default `"email"`.
    #[reducer(with = y_or_x)]
    pub primary_issue_medium: String,
    /// Always overwritten.
    #[reducer(with = always_y)]
    pub autoresponse: Option<Doc>,
    /// `y if y else x`.
    #[reducer(with = y_if_truthy)]
    pub issue: Option<Doc>,
    /// Last value.
    pub relevant_rules: Option<Seq<Doc>>,
    /// Last value.
    pub memory_docs: Option<Seq<Doc>>,
    /// Appended.
    #[reducer(append)]
    pub categorizations: Seq<Doc>,
    /// Appended.
    #[reducer(append)]
    pub responses: Seq<Doc>,
    /// `y if y is not None else x`.
    #[reducer(with = y_if_some)]
    pub user_info: Option<Doc>,
    /// `y if y is not None else x`.
    #[reducer(with = y_if_some)]
    pub crm_info: Option<Doc>,
    /// `y if y is not None else x`.
    #[reducer(with = y_if_some)]
    pub email_thread_id: Option<String>,
    /// Merged (`operator.or_`): a dict whose values are shared with the document.
    #[reducer(merge)]
    pub slack_participants: BTreeMap<String, Doc>,
    /// Last value.
    pub bot_id: Option<String>,
    /// Merged (`operator.or_`): a dict whose values are shared with the document.
    #[reducer(merge)]
    pub notified_assignees: BTreeMap<String, Doc>,
}

impl Default for WideState {
    fn default() -> Self {
        Self {
            messages: Seq::new(),
            trigger_events: Seq::new(),
            primary_issue_medium: "email".to_owned(),
            autoresponse: None,
            issue: None,
            relevant_rules: None,
            memory_docs: None,
            categorizations: Seq::new(),
            responses: Seq::new(),
            user_info: None,
            crm_info: None,
            email_thread_id: None,
            slack_participants: BTreeMap::new(),
            bot_id: None,
            notified_assignees: BTreeMap::new(),
        }
    }
}

/// `val[-1]` of a read list.
fn last(list: &Seq<Doc>, field: &str) -> Result<Doc, NodeError> {
    list.last()
        .cloned()
        .ok_or_else(|| NodeError::fatal(format!("`{field}` is empty")))
}

/// A document as a dict write (`operator.or_` merges its keys). Python's dict holds
/// references to the document's values; here each top-level value is shared (`Arc`) by
/// every dict built from it.
fn as_dict(doc: &Doc) -> BTreeMap<String, Doc> {
    doc.as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), Arc::new(v.clone()))).collect())
        .unwrap_or_default()
}

type Out = Result<NodeOutput<WideState>, NodeError>;

/// The graph, not compiled.
pub fn builder(n: usize) -> StateGraph<WideState> {
    StateGraph::<WideState>::new()
        .add_node("one", move |s: Arc<WideState>, _rt| async move {
            let u = WideStateUpdate::new()
                .trigger_events(s.messages.to_vec())
                .primary_issue_medium(random_lowercase(n));
            Out::Ok(NodeOutput::Update(u))
        })
        .add_node("two", |s: Arc<WideState>, _rt| async move {
            let doc = last(&s.trigger_events, "trigger_events")?;
            let u = WideStateUpdate::new()
                .autoresponse(Some(Arc::clone(&doc)))
                .issue(Some(doc));
            Out::Ok(NodeOutput::Update(u))
        })
        .add_node("three", |s: Arc<WideState>, _rt| async move {
            let rules: Seq<Doc> = s.autoresponse.iter().cloned().collect();
            Out::Ok(NodeOutput::Update(
                WideStateUpdate::new().relevant_rules(Some(rules)),
            ))
        })
        .add_node("four", |s: Arc<WideState>, _rt| async move {
            let events = &s.trigger_events;
            let u = WideStateUpdate::new()
                .categorizations(events.to_vec())
                .responses(events.to_vec())
                .memory_docs(Some(events.clone()));
            Out::Ok(NodeOutput::Update(u))
        })
        .add_node("five", move |s: Arc<WideState>, _rt| async move {
            let doc = last(&s.categorizations, "categorizations")?;
            let dict = as_dict(&doc);
            let u = WideStateUpdate::new()
                .user_info(Some(Arc::clone(&doc)))
                .crm_info(Some(Arc::clone(&doc)))
                .email_thread_id(Some(random_lowercase(n)))
                .slack_participants(dict.clone())
                .bot_id(Some(random_lowercase(n)))
                .notified_assignees(dict);
            Out::Ok(NodeOutput::Update(u))
        })
        .add_node("six", |s: Arc<WideState>, _rt| async move {
            Out::Ok(NodeOutput::Update(
                WideStateUpdate::new().messages(s.responses.to_vec()),
            ))
        })
        .add_edge(START, "one")
        .add_edge("one", "two")
        .add_edge("two", "three")
        .add_edge("two", "four")
        .add_join(["three", "four"], "five")
        .add_edge("five", "six")
        .add_conditional_edges("six", move |s: &WideState| {
            Route::from(if s.messages.len() > n { END } else { "one" })
        })
}

/// The compiled graph.
pub fn graph(n: usize, checkpoint: bool) -> anyhow::Result<CompiledGraph<WideState>> {
    Ok(with_saver(builder(n), checkpoint).compile()?)
}

/// The input: one message of `I x J` leaf lists.
#[must_use]
pub fn input(i_count: usize, j_count: usize) -> WideStateUpdate {
    WideStateUpdate::new().messages(vec![Arc::new(wide_message(i_count, j_count))])
}

fn compilation_case() -> RunFn {
    Box::new(|| {
        Box::pin(async {
            let start = Instant::now();
            let g = graph(600, false)?;
            let took = start.elapsed();
            drop(g);
            Ok(took)
        })
    })
}

/// The cases of this family.
pub fn cases() -> Vec<CaseDef> {
    let mut out = Vec::new();
    for (size, (i, j), n) in SIZES {
        for checkpoint in [false, true] {
            let name = case_name(&format!("wide_state_{size}"), checkpoint);
            out.push(CaseDef::new(name, move |h: Harness| {
                Ok(graph_case(graph(n, checkpoint)?, input(i, j), h))
            }));
        }
    }
    out.push(CaseDef::new("wide_state_15x600_compilation", |_h| {
        Ok(compilation_case())
    }));
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::common::fresh_config;
    use futures::StreamExt as _;
    use graphloom_core::{Error, RunEvent, RunInput, StreamMode, StreamOptions};

    /// Tasks (from the updates stream) and the final state.
    async fn run(n: usize, i: usize, j: usize, checkpoint: bool) -> (usize, WideState) {
        let g = graph(n, checkpoint).unwrap();
        let opts = StreamOptions::modes([StreamMode::Updates]);
        let mut stream = g.stream(RunInput::Update(input(i, j)), fresh_config(), opts);
        let mut tasks = 0;
        while let Some(ev) = stream.next().await {
            match ev {
                RunEvent::Part(_) => tasks += 1,
                RunEvent::End(out) => return (tasks, out.unwrap().values),
            }
        }
        panic!("no end event");
    }

    async fn supersteps_fit(n: usize, limit: usize) -> bool {
        let g = graph(n, false).unwrap();
        match g.invoke(input(3, 3), fresh_config().recursion_limit(limit)).await {
            Ok(_) => true,
            Err(Error::RecursionLimit { .. }) => false,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn input_message_has_the_described_shape() {
        let m = wide_message(5, 5);
        let outer = m.as_object().unwrap();
        assert_eq!(outer.len(), 5);
        let inner = outer["0000000000"].as_object().unwrap();
        assert_eq!(inner.len(), 5);
        assert_eq!(inner["4444444444"].as_array().unwrap().len(), 25);
    }

    #[tokio::test]
    async fn n300_runs_6_loops_36_tasks_30_supersteps() {
        for checkpoint in [false, true] {
            let (tasks, s) = run(300, 5, 5, checkpoint).await;
            assert_eq!(tasks, 36);
            assert_eq!(s.messages.len(), 595);
        }
        assert!(supersteps_fit(300, 30).await);
        assert!(!supersteps_fit(300, 29).await);
    }

    #[tokio::test]
    async fn n600_and_n1200_run_7_loops_42_tasks_35_supersteps() {
        for (n, i, j) in [(600, 3, 5), (1200, 3, 3)] {
            let (tasks, s) = run(n, i, j, n == 600).await;
            assert_eq!(tasks, 42);
            assert_eq!(s.messages.len(), 1873);
            assert_eq!(s.trigger_events.len(), 872);
            assert_eq!(s.responses.len(), 1278);
            assert_eq!(s.primary_issue_medium.len(), n);
            assert_eq!(s.bot_id.as_ref().map(String::len), Some(n));
            assert_eq!(s.slack_participants.len(), i);
            assert_eq!(s.relevant_rules.as_ref().map(Seq::len), Some(1));
            assert_eq!(s.memory_docs.as_ref().map(Seq::len), Some(872));
            assert!(s.issue.is_some() && s.user_info.is_some());
            assert!(supersteps_fit(n, 35).await);
            assert!(!supersteps_fit(n, 34).await);
        }
    }

    #[test]
    fn custom_reducers_follow_the_python_lambdas() {
        let mut s = String::from("email");
        y_or_x(&mut s, String::new());
        assert_eq!(s, "email");
        y_or_x(&mut s, "x".into());
        assert_eq!(s, "x");
        let doc: Doc = Arc::new(json!({"a": 1}));
        let mut o = Some(Arc::clone(&doc));
        y_if_truthy(&mut o, Some(Arc::new(json!({}))));
        assert_eq!(o.as_deref(), Some(&*doc));
        y_if_some(&mut o, None);
        assert!(o.is_some());
        always_y(&mut o, None);
        assert!(o.is_none());
    }
}
