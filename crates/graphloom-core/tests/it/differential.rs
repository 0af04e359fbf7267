//! The differential test: the same scenarios written once for LangGraph
//! (`tests/differential/langgraph_scenarios.py`, run in a virtualenv with a pinned LangGraph)
//! and once here with graphloom; the traces must agree.
//!
//! A trace has, for every call of a scenario: the `updates` of each superstep as a multiset
//! (a superstep's updates are those streamed before its `values` event), the error kind,
//! and the thread's state afterwards (values, next nodes, pending interrupt values, the
//! length of the history). Where graphloom differs from LangGraph on purpose, the scenario
//! says so in [`known_difference`], and the porting guide (docs/porting-from-langgraph.md)
//! lists it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::*;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The LangGraph release the scenarios are compared against.
const LANGGRAPH: &str = "langgraph==1.2.22";

type Counts = Arc<Mutex<BTreeMap<String, u64>>>;
type G = CompiledGraph<JsonState>;

/// JSON with sorted keys, compact, as the Python side prints it.
fn canon(v: &Value) -> String {
    fn sort(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let sorted: BTreeMap<&String, Value> = m.iter().map(|(k, v)| (k, sort(v))).collect();
                Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_string(&sort(v)).unwrap()
}

/// An `updates` chunk as the trace records it: interrupts keep their value only (ids are
/// each implementation's own).
fn update_chunk(mut v: Value) -> String {
    if let Some(list) = v.get_mut("__interrupt__").and_then(Value::as_array_mut) {
        for i in list {
            if let Some(o) = i.as_object_mut() {
                o.retain(|k, _| k == "value");
            }
        }
    }
    canon(&v)
}

fn error_kind(e: &Error) -> &'static str {
    match e {
        Error::RecursionLimit { .. } => "recursion_limit",
        Error::State { .. } => "invalid_update",
        Error::Node { .. } => "node",
        Error::NodeTimeout { .. } => "timeout",
        Error::InvalidResume(_) => "invalid_resume",
        Error::Drained => "drained",
        other => panic!("an error kind the scenarios do not expect: {other}"),
    }
}

fn upd(v: Value) -> JsonUpdate {
    v.as_object().cloned().unwrap().into()
}

fn input(v: Value) -> RunInput<JsonState> {
    RunInput::Json(v)
}

/// Run one call and record its trace, as `call()` does in the Python file.
async fn call(g: &G, inp: RunInput<JsonState>, cfg: RunConfig, tid: &str, counts: Option<&Counts>) -> Value {
    let mut steps: Vec<Vec<String>> = Vec::new();
    let mut cur: Vec<String> = Vec::new();
    let mut err = Value::Null;
    let mut s = g.stream(
        inp,
        cfg,
        StreamOptions::modes([StreamMode::Updates, StreamMode::Values]),
    );
    while let Some(ev) = s.next().await {
        match ev {
            RunEvent::Part(p) if p.mode == StreamMode::Updates => {
                cur.push(update_chunk(p.data_json().unwrap()))
            }
            RunEvent::Part(p) if p.mode == StreamMode::Values => {
                cur.sort();
                steps.push(std::mem::take(&mut cur));
            }
            RunEvent::Part(_) => {}
            RunEvent::End(Ok(_)) => {}
            RunEvent::End(Err(e)) => err = json!(error_kind(&e)),
        }
    }
    if !cur.is_empty() {
        cur.sort();
        steps.push(cur);
    }
    let mut out = Map::new();
    out.insert("steps".into(), json!(steps));
    out.insert("error".into(), err);
    let thread = RunConfig::thread(tid);
    match g.get_state(&thread).await {
        Ok(st) => {
            let mut values = st.values.to_json().unwrap();
            if let Some(o) = values.as_object_mut() {
                o.retain(|_, v| !v.is_null());
            }
            let mut next = st.next.clone();
            next.sort();
            let mut interrupts: Vec<String> = st.interrupts.iter().map(|i| canon(&i.value)).collect();
            interrupts.sort();
            out.insert("values".into(), values);
            out.insert("next".into(), json!(next));
            out.insert("interrupts".into(), json!(interrupts));
        }
        Err(e) => {
            out.insert("state_error".into(), json!(error_kind(&e)));
        }
    }
    let history = g
        .get_state_history(&thread, HistoryQuery::default())
        .await
        .unwrap();
    out.insert("history".into(), json!(history.len()));
    if let Some(c) = counts {
        out.insert("counts".into(), json!(*c.lock().unwrap()));
    }
    Value::Object(out)
}

/// A scenario of one call with new input on thread `t`.
async fn one_call(g: &G, v: Value) -> Vec<Value> {
    vec![call(g, input(v), RunConfig::thread("t"), "t", None).await]
}

fn bump(counts: &Counts, node: &str) -> u64 {
    let mut c = counts.lock().unwrap();
    let n = c.entry(node.to_owned()).or_insert(0);
    *n += 1;
    *n
}

/// `log: Annotated[list, operator.add]`, `n: int`, `x: str`.
fn log_shape() -> JsonState {
    JsonState::from_reducer_names([("log", "append"), ("n", "last_value"), ("x", "last_value")]).unwrap()
}

fn log_node(
    name: &'static str,
) -> impl Fn(Arc<JsonState>, Runtime) -> futures::future::Ready<Result<NodeOutput<JsonState>, NodeError>> + Clone
{
    move |_s, _rt| futures::future::ready(Ok(NodeOutput::Update(upd(json!({"log": [name]})))))
}

fn saver() -> InMemorySaver {
    InMemorySaver::new()
}

async fn join() -> Vec<Value> {
    let g = StateGraph::with_shape(log_shape())
        .add_node("a", log_node("a"))
        .add_node("b", log_node("b"))
        .add_node("b2", log_node("b2"))
        .add_node("c", log_node("c"))
        .add_edge(START, "a")
        .add_edge(START, "b")
        .add_edge("b", "b2")
        .add_join(["a", "b2"], "c")
        .add_edge("c", END)
        .checkpointer(saver())
        .compile()
        .unwrap();
    one_call(&g, json!({"log": ["in"]})).await
}

fn int(s: &JsonState, k: &str) -> i64 {
    s.get(k).and_then(|v| v.as_i64()).unwrap_or(0)
}

async fn r#loop() -> Vec<Value> {
    let g = StateGraph::with_shape(log_shape())
        .add_node("inc", |s: Arc<JsonState>, _rt| async move {
            let n = int(&s, "n");
            Ok(NodeOutput::Update(upd(
                json!({"n": n + 1, "log": [format!("inc{n}")]}),
            )))
        })
        .add_edge(START, "inc")
        .add_conditional_edges("inc", |s: &JsonState| if int(s, "n") < 3 { "inc" } else { END })
        .checkpointer(saver())
        .compile()
        .unwrap();
    one_call(&g, json!({"n": 0})).await
}

async fn send() -> Vec<Value> {
    let shape = JsonState::from_reducer_names([
        ("items", "last_value"),
        ("results", "append"),
        ("item", "last_value"),
    ])
    .unwrap();
    let g = StateGraph::with_shape(shape)
        .add_node("plan", |_s: Arc<JsonState>, _rt| async {
            Ok(NodeOutput::Update(upd(json!({"results": []}))))
        })
        .add_node("worker", |s: Arc<JsonState>, _rt| async move {
            Ok(NodeOutput::Update(upd(
                json!({"results": [int(&s, "item") * 10]}),
            )))
        })
        .add_node("done", |s: Arc<JsonState>, _rt| async move {
            let sum: i64 = s
                .get("results")
                .unwrap()
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_i64)
                .sum();
            Ok(NodeOutput::Update(upd(json!({"results": [sum]}))))
        })
        .add_edge(START, "plan")
        .add_conditional_edges("plan", |s: &JsonState| {
            let items = s.get("items").unwrap();
            items
                .as_array()
                .unwrap()
                .iter()
                .map(|i| Route::Send(Send::json("worker", json!({"item": i}))))
                .collect::<Vec<_>>()
        })
        .add_edge("worker", "done")
        .add_edge("done", END)
        .checkpointer(saver())
        .compile()
        .unwrap();
    one_call(&g, json!({"items": [1, 2, 3]})).await
}

async fn conflict() -> Vec<Value> {
    let g = StateGraph::with_shape(log_shape())
        .add_node("a", |_s: Arc<JsonState>, _rt| async {
            Ok(NodeOutput::Update(upd(json!({"x": "from a"}))))
        })
        .add_node("b", |_s: Arc<JsonState>, _rt| async {
            Ok(NodeOutput::Update(upd(json!({"x": "from b"}))))
        })
        .add_edge(START, "a")
        .add_edge(START, "b")
        // A node with no way out is refused at compile time (porting guide: "Graph shape").
        .add_edge("a", END)
        .add_edge("b", END)
        .checkpointer(saver())
        .compile()
        .unwrap();
    one_call(&g, json!({"log": ["in"]})).await
}

async fn command() -> Vec<Value> {
    let g = StateGraph::with_shape(log_shape())
        .add_node("a", |_s: Arc<JsonState>, _rt| async {
            Ok(NodeOutput::Command(
                Command::new().update(upd(json!({"log": ["a"]}))).goto("c"),
            ))
        })
        .add_node("b", log_node("b"))
        .add_node("c", log_node("c"))
        // A node that routes by Command declares where it may go (porting guide: "Graph shape").
        .destinations("a", ["b", "c"])
        .add_edge(START, "a")
        .add_edge("b", END)
        .add_edge("c", END)
        .checkpointer(saver())
        .compile()
        .unwrap();
    one_call(&g, json!({"log": ["in"]})).await
}

fn chain(before: NodeSet, after: NodeSet) -> G {
    StateGraph::with_shape(log_shape())
        .add_node("a", log_node("a"))
        .add_node("b", log_node("b"))
        .add_node("c", log_node("c"))
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", "c")
        .add_edge("c", END)
        .interrupt_before(before)
        .interrupt_after(after)
        .checkpointer(saver())
        .compile()
        .unwrap()
}

async fn static_interrupt() -> Vec<Value> {
    let g = chain(NodeSet::of(["b"]), NodeSet::of(["b"]));
    let t = || RunConfig::thread("t");
    vec![
        call(&g, input(json!({"log": ["in"]})), t(), "t", None).await,
        call(&g, RunInput::Continue, t(), "t", None).await,
        call(&g, RunInput::Continue, t(), "t", None).await,
    ]
}

fn ask_shape() -> JsonState {
    JsonState::from_reducer_names([("log", "append"), ("answer", "last_value")]).unwrap()
}

async fn dynamic_interrupt() -> Vec<Value> {
    let g = StateGraph::with_shape(ask_shape())
        .add_node("ask", |_s: Arc<JsonState>, rt: Runtime| async move {
            let answer = rt.interrupt(json!({"question": "approve?"}))?;
            Ok(NodeOutput::Update(upd(
                json!({"answer": answer, "log": ["asked"]}),
            )))
        })
        .add_node("after", log_node("after"))
        .add_edge(START, "ask")
        .add_edge("ask", "after")
        .add_edge("after", END)
        .checkpointer(saver())
        .compile()
        .unwrap();
    let t = || RunConfig::thread("t");
    vec![
        call(&g, input(json!({"log": ["in"]})), t(), "t", None).await,
        call(&g, RunInput::Command(Command::resume("yes")), t(), "t", None).await,
    ]
}

fn asker(
    name: &'static str,
) -> impl Fn(Arc<JsonState>, Runtime) -> futures::future::Ready<Result<NodeOutput<JsonState>, NodeError>> + Clone
{
    move |_s, rt| {
        futures::future::ready(rt.interrupt(format!("{name}?")).map(|answer| {
            NodeOutput::Update(upd(
                json!({"log": [format!("{name}={}", answer.as_str().unwrap())]}),
            ))
        }))
    }
}

async fn parallel_interrupts() -> Vec<Value> {
    let g = StateGraph::with_shape(ask_shape())
        .add_node("p", asker("p"))
        .add_node("q", asker("q"))
        .add_edge(START, "p")
        .add_edge(START, "q")
        .add_edge("p", END)
        .add_edge("q", END)
        .checkpointer(saver())
        .compile()
        .unwrap();
    let t = || RunConfig::thread("t");
    let first = call(&g, input(json!({"log": ["in"]})), t(), "t", None).await;
    let st = g.get_state(&t()).await.unwrap();
    let ids: BTreeMap<String, String> = st
        .interrupts
        .iter()
        .map(|i| (i.value.as_str().unwrap().to_owned(), i.id.clone()))
        .collect();
    let resume = BTreeMap::from([
        (ids["p?"].clone(), json!("yes")),
        (ids["q?"].clone(), json!("no")),
    ]);
    vec![
        first,
        call(&g, RunInput::Command(Command::resume_map(resume)), t(), "t", None).await,
    ]
}

async fn pending_writes() -> Vec<Value> {
    let counts: Counts = Arc::new(Mutex::new(BTreeMap::from([("a".into(), 0), ("b".into(), 0)])));
    let (ca, cb) = (Arc::clone(&counts), Arc::clone(&counts));
    let g = StateGraph::with_shape(log_shape())
        .add_node("a", move |_s: Arc<JsonState>, _rt| {
            bump(&ca, "a");
            async { Ok(NodeOutput::Update(upd(json!({"log": ["a"]})))) }
        })
        .add_node("b", move |_s: Arc<JsonState>, _rt| {
            let n = bump(&cb, "b");
            async move {
                if n == 1 {
                    return Err(NodeError::new("b fails once"));
                }
                Ok(NodeOutput::Update(upd(json!({"log": ["b"]}))))
            }
        })
        .add_node("c", log_node("c"))
        .add_edge(START, "a")
        .add_edge(START, "b")
        .add_join(["a", "b"], "c")
        .add_edge("c", END)
        .checkpointer(saver())
        .compile()
        .unwrap();
    let t = || RunConfig::thread("t");
    vec![
        call(&g, input(json!({"log": ["in"]})), t(), "t", Some(&counts)).await,
        call(&g, RunInput::Continue, t(), "t", Some(&counts)).await,
    ]
}

fn topic_shape() -> JsonState {
    JsonState::from_reducer_names([
        ("topic", "last_value"),
        ("summary", "last_value"),
        ("log", "append"),
    ])
    .unwrap()
}

fn text(s: &JsonState, k: &str) -> String {
    s.get(k)
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

async fn subgraph() -> Vec<Value> {
    let child = StateGraph::with_shape(topic_shape())
        .add_node("draft", |s: Arc<JsonState>, _rt| async move {
            Ok(NodeOutput::Update(upd(
                json!({"summary": format!("draft of {}", text(&s, "topic"))}),
            )))
        })
        .add_node("polish", |s: Arc<JsonState>, _rt| async move {
            Ok(NodeOutput::Update(upd(
                json!({"summary": format!("{}, polished", text(&s, "summary"))}),
            )))
        })
        .add_edge(START, "draft")
        .add_edge("draft", "polish")
        .add_edge("polish", END)
        .compile()
        .unwrap();
    let g = StateGraph::with_shape(topic_shape())
        .add_node("pre", |s: Arc<JsonState>, _rt| async move {
            Ok(NodeOutput::Update(upd(
                json!({"topic": text(&s, "topic").to_uppercase()}),
            )))
        })
        .add_subgraph_shared("child", child)
        .add_node("post", |s: Arc<JsonState>, _rt| async move {
            Ok(NodeOutput::Update(upd(
                json!({"summary": format!("{}!", text(&s, "summary"))}),
            )))
        })
        .add_edge(START, "pre")
        .add_edge("pre", "child")
        .add_edge("child", "post")
        .add_edge("post", END)
        .checkpointer(saver())
        .compile()
        .unwrap();
    one_call(&g, json!({"topic": "tides"})).await
}

async fn recursion_limit() -> Vec<Value> {
    let g = StateGraph::with_shape(log_shape())
        .add_node("spin", |s: Arc<JsonState>, _rt| async move {
            Ok(NodeOutput::Update(upd(json!({"n": int(&s, "n") + 1}))))
        })
        .add_edge(START, "spin")
        .add_edge("spin", "spin")
        .checkpointer(saver())
        .compile()
        .unwrap();
    vec![
        call(
            &g,
            input(json!({"n": 0})),
            RunConfig::thread("t").recursion_limit(4),
            "t",
            None,
        )
        .await,
    ]
}

async fn update_as_node() -> Vec<Value> {
    let g = chain(NodeSet::of(["b"]), NodeSet::default());
    let t = || RunConfig::thread("t");
    let first = call(&g, input(json!({"log": ["in"]})), t(), "t", None).await;
    g.update_state(
        &t(),
        Some(upd(json!({"log": ["edited"], "x": "by hand"}))),
        Some("a"),
    )
    .await
    .unwrap();
    vec![first, call(&g, RunInput::Continue, t(), "t", None).await]
}

async fn fork() -> Vec<Value> {
    let g = chain(NodeSet::default(), NodeSet::default());
    let t = || RunConfig::thread("t");
    let first = call(&g, input(json!({"log": ["in"]})), t(), "t", None).await;
    let history = g.get_state_history(&t(), HistoryQuery::default()).await.unwrap();
    let before_b = history.iter().find(|s| s.next == ["b"]).unwrap();
    let at = t().checkpoint_id(before_b.config.checkpoint_id.clone().unwrap());
    let forked = g
        .update_state(&at, Some(upd(json!({"log": ["forked"]}))), None)
        .await
        .unwrap();
    let forked = t().checkpoint_id(forked.checkpoint_id.unwrap());
    vec![first, call(&g, RunInput::Continue, forked, "t", None).await]
}

async fn deferred() -> Vec<Value> {
    let g = StateGraph::with_shape(log_shape())
        .add_node("a", log_node("a"))
        .add_node("b1", log_node("b1"))
        .add_node("b2", log_node("b2"))
        .add_node("join", |s: Arc<JsonState>, _rt| async move {
            let n = s.get("log").unwrap().as_array().unwrap().len();
            Ok(NodeOutput::Update(upd(
                json!({"log": [format!("join after {n}")]}),
            )))
        })
        .defer("join")
        .add_edge(START, "a")
        .add_edge(START, "b1")
        .add_edge("b1", "b2")
        .add_edge("a", "join")
        .add_edge("b2", "join")
        .add_edge("join", END)
        .checkpointer(saver())
        .compile()
        .unwrap();
    one_call(&g, json!({"log": ["in"]})).await
}

async fn overwrite() -> Vec<Value> {
    let g = StateGraph::with_shape(log_shape())
        .add_node("p", |_s: Arc<JsonState>, _rt| async {
            Ok(NodeOutput::Update(
                JsonUpdate::new().overwrite("log", json!(["reset"])),
            ))
        })
        .add_node("q", log_node("q"))
        .add_node("after", log_node("after"))
        .add_edge(START, "p")
        .add_edge(START, "q")
        .add_edge(["p", "q"], "after")
        .add_edge("after", END)
        .checkpointer(saver())
        .compile()
        .unwrap();
    one_call(&g, json!({"log": ["in"]})).await
}

/// The events scenario: `astream_events` v2 of the chain, as the Python side records it.
async fn events() -> Vec<Value> {
    let g = chain(NodeSet::default(), NodeSet::default());
    let mut s = g.stream_events(
        input(json!({"log": ["in"]})),
        RunConfig::thread("t"),
        EventFilter::all(),
    );
    let mut out = Vec::new();
    while let Some(e) = s.next().await {
        let e = e.unwrap();
        let mut tags = e.tags.clone();
        tags.sort();
        out.push(json!({
            "event": e.event.as_str(),
            "name": e.name,
            "tags": tags,
            "depth": e.parent_ids.len(),
            "node": e.metadata.get("langgraph_node"),
            "step": e.metadata.get("langgraph_step"),
            "data": canon(&serde_json::to_value(&e.data).unwrap()),
        }));
    }
    out
}

/// The functional scenario: parallel task calls, an interrupt, `Final`, `previous`.
async fn functional() -> Vec<Value> {
    use graphloom_core::func::{Entrypoint, Final, Task};
    let counts: Counts = Arc::new(Mutex::new(BTreeMap::from([("double".into(), 0)])));
    let c = Arc::clone(&counts);
    let double = Task::new("double", move |x: i64, _ctx| {
        bump(&c, "double");
        async move { Ok(x * 2) }
    });
    let ep = Entrypoint::<Vec<i64>, Value>::new("workflow", move |xs, ctx| {
        let double = double.clone();
        async move {
            let previous: Option<i64> = ctx.previous()?;
            let calls: Vec<_> = xs.into_iter().map(|x| ctx.call(&double, x)).collect();
            let total: i64 = futures::future::try_join_all(calls).await?.into_iter().sum();
            let answer = ctx.interrupt(format!("approve {total}?"))?;
            Ok(Final::new(
                json!({"total": total, "answer": answer, "previous": previous}),
                total,
            ))
        }
    })
    .checkpointer(saver())
    .compile()
    .unwrap();
    let t = || RunConfig::thread("t");
    let mut out = Vec::new();
    for input in [Some(vec![1, 2, 3]), None, Some(vec![5]), None] {
        let answer = if out.len() == 1 { "yes" } else { "no" };
        let stream = match input {
            Some(xs) => ep.stream(xs, t(), StreamOptions::modes([StreamMode::Updates])),
            None => ep.stream_input(
                Command::resume(answer),
                t(),
                StreamOptions::modes([StreamMode::Updates]),
            ),
        };
        let mut updates: Vec<String> = stream
            .filter_map(|e| async move {
                match e {
                    RunEvent::Part(p) => Some(update_chunk(p.data_json().unwrap())),
                    RunEvent::End(r) => {
                        r.unwrap();
                        None
                    }
                }
            })
            .collect()
            .await;
        updates.sort();
        let st = ep.get_state(&t()).await.unwrap();
        let mut interrupts: Vec<String> = st.interrupts.iter().map(|i| canon(&i.value)).collect();
        interrupts.sort();
        out.push(json!({
            "updates": updates,
            "interrupts": interrupts,
            "next": st.next,
            "counts": *counts.lock().unwrap(),
        }));
    }
    // The thread's checkpoints as (step, source, next), newest first: forks and filters
    // by step must carry over.
    let history: Vec<Value> = ep
        .get_state_history(&t(), None)
        .await
        .unwrap()
        .iter()
        .map(|s| {
            let m = s.metadata.as_ref().unwrap();
            json!([m.step, m.source, s.next])
        })
        .collect();
    out.push(json!({"history": history}));
    out
}

/// An idle timeout retried by default (the retry heartbeats through work longer than the
/// limit), then a hard run timeout without retries that fails the run. Real time: the
/// limits are wide apart from the work so that a slow machine cannot flip the outcome.
async fn timeouts() -> Vec<Value> {
    use std::time::Duration;
    let counts: Counts = Arc::new(Mutex::new(BTreeMap::from([("slow".into(), 0)])));
    let c = Arc::clone(&counts);
    let g = StateGraph::with_shape(log_shape())
        .add_node("slow", move |_s: Arc<JsonState>, rt: Runtime| {
            let n = bump(&c, "slow");
            async move {
                if n == 1 {
                    std::future::pending::<()>().await;
                }
                for _ in 0..8 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    rt.heartbeat();
                }
                Ok(NodeOutput::Update(upd(json!({"log": ["slow"]}))))
            }
        })
        .node_timeout("slow", TimeoutPolicy::idle(Duration::from_millis(200)))
        .retry(
            "slow",
            RetryPolicy::attempts(2)
                .initial_interval(Duration::from_millis(10))
                .jitter(false),
        )
        .add_node("hang", |_s: Arc<JsonState>, _rt| async {
            std::future::pending::<()>().await;
            Ok(NodeOutput::None)
        })
        .node_timeout("hang", Duration::from_millis(100))
        .add_edge(START, "slow")
        .add_edge("slow", "hang")
        .add_edge("hang", END)
        .checkpointer(saver())
        .compile()
        .unwrap();
    vec![
        call(
            &g,
            input(json!({"log": ["in"]})),
            RunConfig::thread("t"),
            "t",
            Some(&counts),
        )
        .await,
    ]
}

/// `a` fails into its own handler, which routes to `fallback` (so `a`'s edge to `b` is not
/// followed); `d` fails into the graph's default handler, which routes nowhere; `c`, beside
/// them, succeeds.
async fn error_handlers() -> Vec<Value> {
    let counts: Counts = Arc::new(Mutex::new(BTreeMap::from([("a".into(), 0), ("d".into(), 0)])));
    let failing = |name: &'static str| {
        let c = Arc::clone(&counts);
        move |_s: Arc<JsonState>, _rt: Runtime| {
            bump(&c, name);
            futures::future::ready(Err::<NodeOutput<JsonState>, _>(NodeError::fatal(format!(
                "{name} broke"
            ))))
        }
    };
    let g = StateGraph::with_shape(log_shape())
        .node_defaults(
            NodeDefaults::new().error_handler(|_s, f: NodeFailure, _rt| async move {
                Ok(NodeOutput::Update(upd(
                    json!({"log": [format!("default {}: {}", f.node, f.message)]}),
                )))
            }),
        )
        .add_node("a", failing("a"))
        .error_handler("a", |_s, f: NodeFailure, _rt| async move {
            Ok(Command::new()
                .update(upd(
                    json!({"log": [format!("handled {}: {}", f.node, f.message)]}),
                ))
                .goto("fallback"))
        })
        .destinations("a", ["fallback"])
        .add_node("b", log_node("b"))
        .add_node("c", log_node("c"))
        .add_node("d", failing("d"))
        .add_node("fallback", log_node("fallback"))
        .add_edge(START, "a")
        .add_edge(START, "c")
        .add_edge(START, "d")
        .add_edge("a", "b")
        .add_edge("b", END)
        .add_edge("c", END)
        .add_edge("d", END)
        .add_edge("fallback", END)
        .checkpointer(saver())
        .compile()
        .unwrap();
    vec![
        call(
            &g,
            input(json!({"log": ["in"]})),
            RunConfig::thread("t"),
            "t",
            Some(&counts),
        )
        .await,
    ]
}

/// An interrupt with a response schema: a resume that does not match is refused and the
/// interrupt stays pending; a matching one resumes.
async fn interrupt_schemas() -> Vec<Value> {
    let counts: Counts = Arc::new(Mutex::new(BTreeMap::from([("review".into(), 0)])));
    let c = Arc::clone(&counts);
    let g = StateGraph::with_shape(log_shape())
        .add_node("review", move |_s: Arc<JsonState>, rt: Runtime| {
            bump(&c, "review");
            let schema = json!({
                "type": "object",
                "properties": {"approved": {"type": "boolean"}},
                "required": ["approved"],
            });
            async move {
                let d = rt.interrupt_with_schema("ship it?", schema)?;
                let x = if d["approved"] == json!(true) {
                    "approved"
                } else {
                    "rejected"
                };
                Ok(NodeOutput::Update(upd(json!({ "x": x }))))
            }
        })
        .add_edge(START, "review")
        .add_edge("review", END)
        .checkpointer(saver())
        .compile()
        .unwrap();
    let t = || RunConfig::thread("t");
    vec![
        call(&g, input(json!({"log": ["in"]})), t(), "t", Some(&counts)).await,
        call(
            &g,
            RunInput::Command(Command::resume(json!({"approved": "maybe"}))),
            t(),
            "t",
            Some(&counts),
        )
        .await,
        call(
            &g,
            RunInput::Command(Command::resume(json!({"approved": true}))),
            t(),
            "t",
            Some(&counts),
        )
        .await,
    ]
}

/// graphloom's traces, by scenario.
/// `get_graph().to_json()` without the runnables' class paths (`data.id`), edges sorted:
/// what the LangGraph side records.
fn graph_view(drawn: &graphloom_core::draw::GraphView) -> Value {
    let j = drawn.to_json();
    let nodes: Vec<Value> = j["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let mut c = serde_json::Map::new();
            for k in ["id", "type", "metadata"] {
                if let Some(v) = n.get(k) {
                    c.insert(k.into(), v.clone());
                }
            }
            if let Some(name) = n.get("data").and_then(|d| d.get("name")) {
                c.insert("name".into(), name.clone());
            }
            Value::Object(c)
        })
        .collect();
    let mut edges = j["edges"].as_array().unwrap().clone();
    edges.sort_by_key(canon);
    json!({"nodes": nodes, "edges": edges})
}

async fn get_graph() -> Vec<Value> {
    let child = StateGraph::with_shape(log_shape())
        .add_node("plan", log_node("plan"))
        .add_node("act", log_node("act"))
        .add_edge(START, "plan")
        .add_conditional_edges_to("plan", |_s: &JsonState| "act", ["act", END])
        .add_edge("act", END)
        .compile()
        .unwrap();
    let g = StateGraph::with_shape(log_shape())
        .add_node("a", log_node("a"))
        .add_subgraph_shared("team", child)
        .add_node("b", log_node("b"))
        .add_edge(START, "a")
        .add_conditional_edges_map("a", |_s: &JsonState| "go", [("go", "team"), ("stop", END)])
        .add_edge("team", "b")
        .add_edge("b", END)
        .interrupt_before(NodeSet::of(["b"]))
        .checkpointer(saver())
        .compile()
        .unwrap();
    vec![graph_view(&g.get_graph(false)), graph_view(&g.get_graph(true))]
}

/// A node asks the run to drain: the run stops after that step; continuing runs the rest,
/// each node once. A run drained before it starts keeps its input.
async fn drain() -> Vec<Value> {
    let counts: Counts = Arc::new(Mutex::new(BTreeMap::from([
        ("a".into(), 0),
        ("b".into(), 0),
        ("c".into(), 0),
    ])));
    let control = RunControl::new();
    let node = |name: &'static str| {
        let (counts, control) = (Arc::clone(&counts), control.clone());
        move |s: Arc<JsonState>, _rt| {
            bump(&counts, name);
            if name == "a" && s.get("log") == Some(json!(["in"])) {
                control.drain();
            }
            async move { Ok(NodeOutput::Update(upd(json!({"log": [name]})))) }
        }
    };
    let g = StateGraph::with_shape(log_shape())
        .add_node("a", node("a"))
        .add_node("b", node("b"))
        .add_node("c", node("c"))
        .add_sequence(["a", "b", "c"])
        .add_edge(START, "a")
        .add_edge("c", END)
        .checkpointer(saver())
        .compile()
        .unwrap();
    let before = RunControl::new();
    before.drain();
    let (t, u) = (RunConfig::thread("t"), RunConfig::thread("u"));
    vec![
        call(
            &g,
            input(json!({"log": ["in"]})),
            t.clone().control(control.clone()),
            "t",
            Some(&counts),
        )
        .await,
        call(&g, RunInput::Continue, t, "t", Some(&counts)).await,
        call(
            &g,
            input(json!({"log": ["early"]})),
            u.clone().control(before),
            "u",
            Some(&counts),
        )
        .await,
        call(&g, RunInput::Continue, u, "u", Some(&counts)).await,
    ]
}

async fn graphloom_traces() -> BTreeMap<&'static str, Vec<Value>> {
    BTreeMap::from([
        ("join", join().await),
        ("loop", r#loop().await),
        ("send", send().await),
        ("conflict", conflict().await),
        ("command", command().await),
        ("static_interrupt", static_interrupt().await),
        ("dynamic_interrupt", dynamic_interrupt().await),
        ("parallel_interrupts", parallel_interrupts().await),
        ("pending_writes", pending_writes().await),
        ("subgraph", subgraph().await),
        ("recursion_limit", recursion_limit().await),
        ("update_as_node", update_as_node().await),
        ("fork", fork().await),
        ("deferred", deferred().await),
        ("overwrite", overwrite().await),
        ("events", events().await),
        ("functional", functional().await),
        ("timeouts", timeouts().await),
        ("error_handlers", error_handlers().await),
        ("interrupt_schemas", interrupt_schemas().await),
        ("get_graph", get_graph().await),
        ("drain", drain().await),
    ])
}

/// Where graphloom differs from LangGraph on purpose: the scenario, and a function that
/// rewrites LangGraph's trace into what graphloom does, with the reason. Each is a row of
/// the porting guide.
fn known_difference(scenario: &str, langgraph: &mut [Value]) {
    match scenario {
        // After a step whose writes conflict, LangGraph's `get_state` raises the conflict
        // again (it re-applies the stored writes); graphloom's returns the values the step
        // started from, so the thread can still be read, edited and forked.
        "conflict" => {
            let c = langgraph[0].as_object_mut().unwrap();
            assert_eq!(c.remove("state_error"), Some(json!("invalid_update")));
            c.insert("values".into(), json!({"log": ["in"]}));
            c.insert("next".into(), json!([]));
            c.insert("interrupts".into(), json!([]));
        }
        // LangGraph's `values` mode also streams the state with `__interrupt__` after each
        // interrupted task; graphloom streams interrupts in `updates` only (the server adds
        // them to `values` for clients that asked for values alone). So LangGraph's trace
        // splits one superstep's interrupts across several groups.
        "parallel_interrupts" => {
            let steps = langgraph[0]["steps"].as_array_mut().unwrap();
            let merged: Vec<Value> = steps
                .drain(1..)
                .flat_map(|g| g.as_array().unwrap().clone())
                .collect();
            steps.push(json!(merged));
        }
        // After a failed step LangGraph's `get_state` folds the writes of the tasks that
        // finished into `values`; graphloom shows the values the step started from (the
        // finished writes are kept and replayed on resume, as LangGraph does).
        "pending_writes" => {
            assert_eq!(langgraph[0]["values"], json!({"log": ["in", "a"]}));
            langgraph[0]["values"] = json!({"log": ["in"]});
        }
        // A subgraph added with its parent's keys streams, as its update, the keys it
        // changed; LangGraph streams (and writes) the child's whole output, which is why it
        // appends a shared list key's items twice.
        "subgraph" => {
            let step = &mut langgraph[0]["steps"][2][0];
            let child: Value = serde_json::from_str(step.as_str().unwrap()).unwrap();
            let summary = child["child"]["summary"].clone();
            *step = json!(canon(&json!({"child": {"summary": summary}})));
        }
        // A JSON state's channel that was never written is `null` in graphloom's JSON of
        // the state (a typed state has its `Default`); LangGraph leaves the key out. The
        // events carry whole states as node inputs and the graph's output.
        "events" => {
            for e in langgraph.iter_mut() {
                let mut data: Value = serde_json::from_str(e["data"].as_str().unwrap()).unwrap();
                let whole = if e["name"] == "LangGraph" {
                    "output"
                } else {
                    "input"
                };
                if let Some(state) = data.get_mut(whole).and_then(Value::as_object_mut) {
                    for unset in ["n", "x"] {
                        state.entry(unset).or_insert(Value::Null);
                    }
                }
                e["data"] = json!(canon(&data));
            }
        }
        // LangGraph validates a resume when the node runs again (the node ran, and raised);
        // graphloom refuses it before: the node does not run for an answer that does not
        // match, so the refused resume streams nothing (LangGraph first streams the values it
        // resumes from). The rest of the trace is the same.
        "interrupt_schemas" => {
            assert_eq!(langgraph[1]["steps"], json!([[]]));
            langgraph[1]["steps"] = json!([]);
            let runs = langgraph[1]["counts"]["review"].as_u64().unwrap();
            langgraph[1]["counts"]["review"] = json!(runs - 1);
            let runs = langgraph[2]["counts"]["review"].as_u64().unwrap();
            langgraph[2]["counts"]["review"] = json!(runs - 1);
        }
        // A run drained before its first step: LangGraph stops before its `__start__`
        // task (the input is saved but not applied: `next` is `__start__`); graphloom
        // applies the input first (no node code runs in that step), so the thread shows
        // it and `next` is the first node. Continuing then runs the same nodes once.
        "drain" => {
            let early = &mut langgraph[2];
            assert_eq!(
                (&early["next"], &early["history"]),
                (&json!(["__start__"]), &json!(1))
            );
            early["steps"] = json!([[]]);
            early["values"] = json!({"log": ["early"]});
            early["next"] = json!(["a"]);
            early["history"] = json!(2);
            let steps = langgraph[3]["steps"].as_array_mut().unwrap();
            assert_eq!(steps.remove(1), json!([]));
        }
        _ => {}
    }
}

fn langgraph_traces() -> BTreeMap<String, Vec<Value>> {
    let python = graphloom_test_kit::python::venv("langgraph-venv", &[LANGGRAPH]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/differential/langgraph_scenarios.py");
    let out = std::process::Command::new(python)
        .arg(&script)
        .output()
        .expect("run the LangGraph scenarios");
    assert!(
        out.status.success(),
        "{} failed:\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the LangGraph scenarios print one JSON object")
}

#[tokio::test]
async fn graphloom_and_langgraph_agree_on_every_scenario() {
    let mut langgraph = langgraph_traces();
    let ours = graphloom_traces().await;
    let mut diffs = Vec::new();
    for (name, trace) in &ours {
        let mut theirs = langgraph
            .remove(*name)
            .unwrap_or_else(|| panic!("LangGraph has no scenario `{name}`"));
        known_difference(name, &mut theirs);
        if &theirs != trace {
            diffs.push(format!(
                "scenario `{name}`:\n  langgraph: {}\n  graphloom: {}",
                serde_json::to_string(&theirs).unwrap(),
                serde_json::to_string(trace).unwrap()
            ));
        }
    }
    assert!(
        langgraph.is_empty(),
        "scenarios only LangGraph runs: {:?}",
        langgraph.keys()
    );
    assert!(
        diffs.is_empty(),
        "{} of {} scenarios differ:\n{}",
        diffs.len(),
        ours.len(),
        diffs.join("\n")
    );
}
