//! The five seed graphs as `graphloom serve` hosts them (the command's own registry: each
//! graph compiled once, with one offline model shared by all its runs), over HTTP: every
//! graph answers run after run the same way, and input is checked at the edge the way the
//! run decodes it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_server::{Server, ServerConfig};
use serde_json::{json, Value};

/// How many runs of each graph in a row.
const RUNS: usize = 3;

struct Served {
    url: String,
    http: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    _dir: tempfile::TempDir,
}

impl Served {
    /// A server on a fresh SQLite file with every graph of the registry.
    async fn start() -> Self {
        Self::start_with(|_| {}, None).await
    }

    /// The same, with `tune` applied to its config, its client sending `api_key`.
    async fn start_with(tune: impl FnOnce(&mut ServerConfig), api_key: Option<&str>) -> Self {
        if std::env::var("GRAPHLOOM_MODEL").is_ok() {
            // The offline models are what this test checks.
            std::env::remove_var("GRAPHLOOM_MODEL");
        }
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = ServerConfig::sqlite(dir.path().join("served.db"));
        tune(&mut cfg);
        let mut builder = Server::builder(cfg);
        for e in graphloom_demo::all().all() {
            builder = builder.graph(e.id, std::sync::Arc::clone(&e.factory));
        }
        let server = builder.build().await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            server
                .serve(listener, async move {
                    let _ = rx.await;
                })
                .await
        });
        Self {
            url,
            http: match api_key {
                Some(key) => {
                    let mut headers = reqwest::header::HeaderMap::new();
                    headers.insert("x-api-key", key.parse().unwrap());
                    reqwest::Client::builder()
                        .default_headers(headers)
                        .build()
                        .unwrap()
                }
                None => reqwest::Client::new(),
            },
            stop: Some(tx),
            task,
            _dir: dir,
        }
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = tokio::time::timeout(
            std::time::Duration::from_secs(60),
            self.http.post(format!("{}{path}", self.url)).json(&body).send(),
        )
        .await
        .expect("the server answers within a minute")
        .unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        // A slow `runs/wait` may be preceded by keep-alive spaces.
        (status, serde_json::from_str(text.trim()).unwrap_or(Value::Null))
    }

    async fn thread(&self) -> String {
        let (s, t) = self.post("/threads", json!({})).await;
        assert_eq!(s, 200, "{t}");
        t["thread_id"].as_str().unwrap().to_owned()
    }

    /// `runs/wait` on `thread` with `body` (`input` or `command`) for `graph`.
    async fn wait(&self, thread: &str, graph: &str, mut body: Value) -> Value {
        body["assistant_id"] = json!(graph);
        let (s, v) = self.post(&format!("/threads/{thread}/runs/wait"), body).await;
        assert_eq!(s, 200, "{graph}: {v}");
        assert!(v.get("__error__").is_none(), "{graph} failed: {v}");
        v
    }

    async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let _ = self.task.await;
    }
}

/// Seed 002's input asking what it remembers, as `user_id` in `session_id`.
fn recall_question(user_id: &str, session_id: &str) -> Value {
    json!({
        "messages": [{"role": "user", "content": "What do you remember about my favourite colour?"}],
        "user_id": user_id,
        "session_id": session_id,
    })
}

fn last_text(values: &Value) -> String {
    let m = values["messages"]
        .as_array()
        .and_then(|a| a.last())
        .cloned()
        .unwrap_or_default();
    match &m["content"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn count_type(values: &Value, ty: &str) -> usize {
    values["messages"]
        .as_array()
        .map_or(0, |a| a.iter().filter(|m| m["type"] == ty).count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fraud_investigation_completes_every_run_with_the_models_plan() {
    let s = Served::start().await;
    for i in 0..RUNS {
        let t = s.thread().await;
        let v = s
            .wait(
                &t,
                "fraud_investigation",
                json!({"input": fraud_investigation::sample_input()}),
            )
            .await;
        assert_eq!(
            (v["status"].as_str(), v["severity"].as_str()),
            (Some("COMPLETED"), Some("CRITICAL")),
            "run {i}: {v}"
        );
        assert_eq!(v["completed_steps"].as_array().unwrap().len(), 6, "run {i}");
        let decisions = v["planner_decisions"].as_array().unwrap();
        assert!(
            decisions
                .iter()
                .all(|d| !d["reason"].as_str().unwrap().starts_with("fallback")),
            "run {i}: the model planned every step, no fallback: {decisions:?}"
        );
    }
    // The graph's own metrics (seed 000's `ops_agent_*`) are on the server's `/metrics`,
    // after the server's, in one exposition that ends once. (nextest runs each test in a
    // process of its own, so the process-wide registry counts this test's runs only.)
    let text = s
        .http
        .get(format!("{}/metrics", s.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let sample = |line_start: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(line_start))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no sample {line_start:?} in /metrics:\n{text}"))
    };
    assert_eq!(
        sample("ops_agent_investigation_completed_total{status=\"COMPLETED\",severity=\"CRITICAL\"}"),
        RUNS as f64
    );
    assert_eq!(sample("ops_agent_investigation_steps_count"), RUNS as f64);
    let tool_calls: f64 = text
        .lines()
        .filter(|l| l.starts_with("ops_agent_tool_execution_latency_seconds_count{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(
        tool_calls >= (6 * RUNS) as f64,
        "{tool_calls} tool calls:\n{text}"
    );
    assert!(sample("graphloom_runs_finished_total{") >= RUNS as f64, "{text}");
    assert_eq!(text.matches("# EOF").count(), 1, "{text}");
    assert!(text.ends_with("# EOF\n"), "{text}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn support_chat_answers_turn_after_turn() {
    let s = Served::start().await;
    let t = s.thread().await;
    for turn in 1..=RUNS {
        let v = s
            .wait(&t, "support_chat", json!({"input": support_chat::sample_input()}))
            .await;
        assert_eq!(v["phase"], "done", "turn {turn}: {v}");
        assert!(last_text(&v).contains("Reset password"), "turn {turn}: {v}");
        assert_eq!(
            v["summary"].as_str().unwrap().lines().count(),
            turn,
            "turn {turn}"
        );
    }
    // An order question on another thread: the other tool, an answer from its result.
    let t = s.thread().await;
    let v = s
        .wait(
            &t,
            "support_chat",
            json!({"input": {"user_id": "u-1", "messages": [{"role": "user", "content": "Where is my order 4711?"}]}}),
        )
        .await;
    assert!(last_text(&v).starts_with("Order 4711 has shipped"), "{v}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_supervisor_stores_and_recalls_run_after_run() {
    let s = Served::start().await;
    for i in 0..RUNS {
        let t = s.thread().await;
        let v = s
            .wait(
                &t,
                "memory_supervisor",
                json!({"input": memory_supervisor::sample_input()}),
            )
            .await;
        assert!(last_text(&v).starts_with("Noted"), "run {i}: {v}");
        let t = s.thread().await;
        let v = s
            .wait(
                &t,
                "memory_supervisor",
                json!({"input": recall_question("alice", "session-1")}),
            )
            .await;
        assert_eq!(v["handoffs"], json!(["recall_agent", "FINISH"]), "run {i}: {v}");
        assert_eq!(
            last_text(&v),
            "You told me: my favourite colour is teal.",
            "run {i}: {v}"
        );
        assert_eq!(count_type(&v, "tool"), 2, "two lookups in parallel");
    }
    s.stop().await;
}

/// Hosted with auth on, seed 002's user is the authenticated identity: the `user_id` a
/// client puts in its input names nobody (ADR-007: infrastructure ids come from the
/// runtime, never from the caller's payload).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_supervisor_remembers_for_the_authenticated_user_not_the_input() {
    let s = Served::start_with(
        |c| {
            c.api_keys.insert("key-of-bob".into(), "bob".into());
        },
        Some("key-of-bob"),
    )
    .await;
    let t = s.thread().await;
    // Bob says he is alice.
    let v = s
        .wait(
            &t,
            "memory_supervisor",
            json!({"input": memory_supervisor::sample_input()}),
        )
        .await;
    assert!(last_text(&v).starts_with("Noted"), "{v}");
    // The fact is bob's: stored under his namespace, and no one else's.
    let (st, found) = s
        .post(
            "/store/items/search",
            json!({"namespace_prefix": ["memory", "bob"], "limit": 10}),
        )
        .await;
    assert_eq!(st, 200, "{found}");
    assert!(
        found["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["value"].to_string().contains("teal")),
        "{found}"
    );
    let (_, alices) = s
        .post(
            "/store/items/search",
            json!({"namespace_prefix": ["memory", "alice"], "limit": 10}),
        )
        .await;
    assert_eq!(alices["items"], json!([]), "{alices}");
    // Whatever user the input names, bob's memory answers him.
    let t = s.thread().await;
    let v = s
        .wait(
            &t,
            "memory_supervisor",
            json!({"input": recall_question("carol", "session-9")}),
        )
        .await;
    assert_eq!(last_text(&v), "You told me: my favourite colour is teal.", "{v}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_runtime_searches_then_answers_every_run() {
    let s = Served::start().await;
    for i in 0..RUNS {
        let t = s.thread().await;
        let v = s
            .wait(&t, "chat_runtime", json!({"input": chat_runtime::sample_input()}))
            .await;
        assert_eq!(last_text(&v), chat_runtime::offline::RESET_ANSWER, "run {i}: {v}");
        assert_eq!(count_type(&v, "tool"), 1, "run {i}");
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permit_filing_pauses_for_approval_and_finishes_every_run() {
    let s = Served::start().await;
    for i in 0..RUNS {
        let t = s.thread().await;
        let paused = s
            .wait(
                &t,
                "permit_filing",
                json!({"input": permit_filing::sample_input()}),
            )
            .await;
        assert_eq!(
            paused["__interrupt__"][0]["value"]["tool_call"]["name"], "create_entity",
            "run {i}: {paused}"
        );
        let done = s
            .wait(&t, "permit_filing", json!({"command": {"resume": "approved"}}))
            .await;
        assert_eq!(done["status"], "completed", "run {i}: {done}");
        assert!(
            last_text(&done).starts_with("Spacing Summary:"),
            "run {i}: {done}"
        );
        assert_eq!(done["tokens_used"], 8_720, "run {i}");
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_is_checked_at_the_edge_as_the_run_decodes_it() {
    let s = Served::start().await;
    let t = s.thread().await;
    // A key the state does not have: refused before a run is created, naming the key.
    let (code, body) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "chat_runtime", "input": {"session_id": "s-1",
                "messages": [{"role": "user", "content": "hi"}]}}),
        )
        .await;
    assert_eq!(code, 422, "{body}");
    assert!(body.to_string().contains("session_id"), "{body}");
    // A role the decoder does not know: refused, naming the role.
    let (code, body) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "chat_runtime", "input": {"messages": [{"role": "wizard", "content": "hi"}]}}),
        )
        .await;
    assert_eq!(code, 422, "{body}");
    assert!(body.to_string().contains("wizard"), "{body}");
    // OpenAI's form, content parts included, runs and is stored in the type form.
    let v = s
        .wait(
            &t,
            "chat_runtime",
            json!({"input": {"messages": [{"role": "user", "content": [
                {"type": "text", "text": "How do I reset my password?"},
                {"type": "image_url", "image_url": {"url": "https://x.example/screenshot.png"}}
            ]}]}}),
        )
        .await;
    assert_eq!(v["messages"][0]["type"], "human", "{v}");
    assert!(v["messages"][0].get("role").is_none());
    assert_eq!(last_text(&v), chat_runtime::offline::RESET_ANSWER);
    s.stop().await;
}
