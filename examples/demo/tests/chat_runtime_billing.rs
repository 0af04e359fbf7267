//! Seed 003 hosted by `graphloom serve`: every model call of a run leaves one charge
//! receipt in the server's database (billing idempotent on the invocation id), billed to
//! the caller the run's context names or, with auth on, to the authenticated identity; the
//! usage facts are on the run's `custom` stream; and a server killed with SIGKILL mid-run,
//! restarted on the same database, completes the run with exactly one receipt per model
//! call: none lost, none doubled. On PostgreSQL the test also holds the checkpoint tables
//! so that the kill lands exactly between a call's receipt and its checkpoint.
//!
//! The model is a local server speaking OpenAI's streaming Chat Completions format
//! (`GRAPHLOOM_MODEL=openai-compatible:...`) whose answers the test can hold, so the kill
//! lands inside a model call. Its call `k` (the number of tool results in the request) is
//! a `knowledge_search` call for `k < 3`, then the answer; it counts `100 (k + 1)` prompt
//! and `10 (k + 1)` completion tokens, so each receipt names its call.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use chat_runtime::StoreLedger;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

/// Model calls of a run: three searches, then the answer.
const CALLS: usize = 4;

/// The total tokens of call `k`.
fn tokens_of(k: usize) -> u64 {
    110 * (k as u64 + 1)
}

/// What the provider does at a call.
enum Gate {
    /// Never answer call `k`: tell the test it arrived, then hang.
    HoldAt(usize, oneshot::Sender<()>),
    /// Answer call `k`, telling the test as the answer goes out.
    TellAfter(usize, oneshot::Sender<()>),
    /// Tell the test call `k` arrived; answer it once the test says so.
    HoldUntil(usize, oneshot::Sender<()>, oneshot::Receiver<()>),
}

#[derive(Default)]
struct Provider {
    gate: Mutex<Option<Gate>>,
    /// The call index of every request, in arrival order.
    seen: Mutex<Vec<usize>>,
}

impl Provider {
    fn hold_at(&self, k: usize) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        *self.gate.lock().unwrap() = Some(Gate::HoldAt(k, tx));
        rx
    }
    fn tell_after(&self, k: usize) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        *self.gate.lock().unwrap() = Some(Gate::TellAfter(k, tx));
        rx
    }
    /// The call arrived, and what releases its answer.
    fn hold_until(&self, k: usize) -> (oneshot::Receiver<()>, oneshot::Sender<()>) {
        let (arrived_tx, arrived) = oneshot::channel();
        let (release, release_rx) = oneshot::channel();
        *self.gate.lock().unwrap() = Some(Gate::HoldUntil(k, arrived_tx, release_rx));
        (arrived, release)
    }
    fn times_called(&self, k: usize) -> usize {
        self.seen.lock().unwrap().iter().filter(|&&c| c == k).count()
    }
}

fn chunk(id: &str, delta: Value, finish: Option<&str>) -> Value {
    json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": "billing-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

async fn completions(State(p): State<Arc<Provider>>, Json(body): Json<Value>) -> Response {
    let k = body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
    p.seen.lock().unwrap().push(k);
    let gate = {
        let mut g = p.gate.lock().unwrap();
        match &*g {
            Some(Gate::HoldAt(at, _) | Gate::TellAfter(at, _) | Gate::HoldUntil(at, _, _)) if *at == k => {
                g.take()
            }
            _ => None,
        }
    };
    let mut tell = None;
    match gate {
        Some(Gate::HoldAt(_, arrived)) => {
            let _ = arrived.send(());
            std::future::pending::<()>().await;
        }
        Some(Gate::TellAfter(_, sent)) => tell = Some(sent),
        Some(Gate::HoldUntil(_, arrived, release)) => {
            let _ = arrived.send(());
            let _ = release.await;
        }
        None => {}
    }
    // Each answer its own message id (the agent merges messages by id).
    let id = format!("chatcmpl-{k}-{}", p.seen.lock().unwrap().len());
    let chunk = |delta: Value, finish: Option<&str>| chunk(&id, delta, finish);
    let mut frames = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    if k + 1 < CALLS {
        frames.push(chunk(
            json!({"tool_calls": [{"index": 0, "id": format!("call_{k}_{}", p.seen.lock().unwrap().len()),
                "type": "function", "function": {"name": "knowledge_search", "arguments": ""}}]}),
            None,
        ));
        frames.push(chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": format!("{{\"query\":\"password reset {k}\"}}")}}]}),
            None,
        ));
        frames.push(chunk(json!({}), Some("tool_calls")));
    } else {
        frames.push(chunk(
            json!({"content": format!("All done after {k} searches.")}),
            None,
        ));
        frames.push(chunk(json!({}), Some("stop")));
    }
    let (input, output) = (100 * (k as u64 + 1), 10 * (k as u64 + 1));
    frames.push(json!({"id": id, "object": "chat.completion.chunk", "created": 0,
        "model": "billing-model", "choices": [],
        "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output}}));
    let mut sse: String = frames.iter().map(|f| format!("data: {f}\n\n")).collect();
    sse.push_str("data: [DONE]\n\n");
    if let Some(sent) = tell {
        let _ = sent.send(());
    }
    ([(header::CONTENT_TYPE, "text/event-stream")], sse).into_response()
}

/// The provider on a free port; its `OPENAI_BASE_URL`.
async fn provider() -> (Arc<Provider>, String) {
    let p = Arc::new(Provider::default());
    let app = Router::new()
        .route("/v1/chat/completions", axum::routing::post(completions))
        .with_state(Arc::clone(&p));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (p, base)
}

/// `graphloom serve` in `dir` with the provider as its model and `args` (the database
/// among them); the child and its base URL.
async fn serve(dir: &Path, provider: &str, args: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_graphloom"))
        .current_dir(dir)
        .env("GRAPHLOOM_MODEL", "openai-compatible:billing-model")
        .env("OPENAI_BASE_URL", provider)
        .env("OPENAI_API_KEY", "test-key")
        .args(["serve", "--addr", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("graphloom serve starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.strip_prefix("graphloom listening on ") {
                return rest.split_whitespace().next().unwrap().to_owned();
            }
        }
        panic!("graphloom serve ended before listening");
    })
    .await
    .expect("graphloom serve listens in time");
    (child, url)
}

/// SIGKILL, and wait for the process to be gone.
async fn kill_9(mut child: Child) {
    child.start_kill().unwrap();
    tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the killed server exits")
        .unwrap();
}

async fn call(
    http: &reqwest::Client,
    url: &str,
    key: Option<&str>,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, String) {
    let mut rb = http.request(
        reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
        format!("{url}{path}"),
    );
    if let Some(k) = key {
        rb = rb.header("x-api-key", k);
    }
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    let r = tokio::time::timeout(Duration::from_secs(120), async {
        let r = rb.send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.text().await.unwrap())
    })
    .await
    .expect("the server answers in time");
    r
}

async fn call_json(
    http: &reqwest::Client,
    url: &str,
    key: Option<&str>,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Value {
    let (status, text) = call(http, url, key, method, path, body).await;
    assert!((200..300).contains(&status), "{method} {path}: {status} {text}");
    serde_json::from_str(text.trim()).unwrap_or(Value::Null)
}

fn question() -> Value {
    json!({"messages": [{"role": "user", "content": "How do I reset my password?"}]})
}

/// The `data` of every SSE event named `event` in `body`.
fn sse_events(body: &str, event: &str) -> Vec<Value> {
    body.replace("\r\n", "\n")
        .split("\n\n")
        .filter(|block| block.lines().any(|l| l.trim_end() == format!("event: {event}")))
        .filter_map(|block| {
            let data: String = block
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .collect();
            serde_json::from_str(&data).ok()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosted_run_leaves_one_receipt_per_model_call_billed_to_the_authenticated_caller() {
    let dir = tempfile::tempdir().unwrap();
    let (provider, base) = provider().await;
    let (_server, url) = serve(
        dir.path(),
        &base,
        &[
            "--db",
            "g.db",
            "--api-key",
            "key-ann=ann",
            "--api-key",
            "key-bob=bob",
        ],
    )
    .await;
    let http = reqwest::Client::new();
    let ann = Some("key-ann");

    let thread = call_json(&http, &url, ann, "POST", "/threads", Some(json!({}))).await;
    let thread = thread["thread_id"].as_str().unwrap().to_owned();
    // Ann names bob's account: the identity pays, not what the client says.
    let (status, body) = call(
        &http,
        &url,
        ann,
        "POST",
        &format!("/threads/{thread}/runs/stream"),
        Some(json!({
            "assistant_id": "chat_runtime",
            "input": question(),
            "stream_mode": ["custom", "values"],
            "config": {"configurable": {"billing_account_id": "bob", "request_id": "req-ann-1", "virtual_key_id": "vk-ann"}},
        })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let run_id = sse_events(&body, "metadata")[0]["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let last_values = sse_events(&body, "values").pop().unwrap();
    assert_eq!(
        last_values["messages"].as_array().unwrap().last().unwrap()["content"],
        "All done after 3 searches.",
        "{last_values}"
    );
    // The usage facts are on the run's `custom` stream, one per model call.
    let streamed: BTreeMap<String, Value> = sse_events(&body, "custom")
        .into_iter()
        .filter(|e| e["type"] == "usage_report")
        .map(|e| {
            (
                e["fact"]["invocation_id"].as_str().unwrap().to_owned(),
                e["fact"].clone(),
            )
        })
        .collect();
    assert_eq!(streamed.len(), CALLS, "{body}");
    assert_eq!(provider.seen.lock().unwrap().len(), CALLS);

    // The receipts are in the server's database, under the identity's account.
    let store = graphloom_sqlite::SqliteStore::open(dir.path().join("g.db"))
        .await
        .unwrap();
    let ledger = StoreLedger::new(Arc::new(store));
    let receipts = ledger.receipts("ann").await.unwrap();
    assert_eq!(receipts.len(), CALLS, "{receipts:#?}");
    assert!(
        ledger.receipts("bob").await.unwrap().is_empty(),
        "ann's run billed bob"
    );
    let mut totals = Vec::new();
    for r in &receipts {
        let fact = &streamed[&r.fact.invocation_id];
        assert_eq!(
            json!(r.fact.usage),
            fact["usage"],
            "the receipt is what the stream reported"
        );
        assert_eq!(r.virtual_key_id, "vk-ann");
        assert_eq!(r.correlation.request_id, "req-ann-1");
        assert_eq!(r.correlation.graph_run_id, run_id);
        assert_eq!(r.correlation.graph_name, "chat_runtime");
        assert_eq!(r.fact.provider, "openai-compatible");
        assert_eq!(r.fact.model, "billing-model");
        assert_eq!(r.fact.usage.input_tokens, 10 * r.fact.usage.output_tokens);
        totals.push(r.fact.usage.total_tokens);
    }
    totals.sort_unstable();
    assert_eq!(totals, (0..CALLS).map(tokens_of).collect::<Vec<_>>());
    // The receipts are the operator's: no client sees (or could rewrite) them via /store.
    let found = call_json(
        &http,
        &url,
        ann,
        "POST",
        "/store/items/search",
        Some(json!({"namespace_prefix": ["billing"], "limit": 100})),
    )
    .await;
    assert_eq!(found["items"], json!([]), "{found}");

    // Bob's run is his; ann's receipts stay as they were.
    call_json(
        &http,
        &url,
        Some("key-bob"),
        "POST",
        "/runs/wait",
        Some(json!({"assistant_id": "chat_runtime", "input": question()})),
    )
    .await;
    let bobs = ledger.receipts("bob").await.unwrap();
    assert_eq!(bobs.len(), CALLS);
    assert!(bobs.iter().all(|r| r.virtual_key_id == "default"));
    assert_eq!(ledger.receipts("ann").await.unwrap(), receipts);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_mid_call_and_retaken_has_exactly_one_receipt_per_model_call() {
    killed_mid_call_and_retaken(&["--db", "g.db"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_run_killed_mid_call_and_retaken_has_exactly_one_receipt_per_model_call() {
    let (url, _db) = graphloom_postgres::testing::test_database().await;
    // Replicas share PostgreSQL's queue: a dead server's run waits out its lease, 2 s here.
    killed_mid_call_and_retaken(&["--database-url", &url, "--lease-secs", "2"]).await;
}

/// The background run of the crash tests; its thread and id.
async fn start_run(http: &reqwest::Client, url: &str) -> (String, String) {
    let thread = call_json(http, url, None, "POST", "/threads", Some(json!({}))).await;
    let thread = thread["thread_id"].as_str().unwrap().to_owned();
    let run = call_json(
        http,
        url,
        None,
        "POST",
        &format!("/threads/{thread}/runs"),
        Some(json!({
            "assistant_id": "chat_runtime",
            "input": question(),
            "config": {"configurable": {"billing_account_id": "acct-crash", "request_id": "req-crash"}},
        })),
    )
    .await;
    (thread, run["run_id"].as_str().unwrap().to_owned())
}

/// Kill the server inside call 1, restart it on the same database (`db`), kill it again as
/// call 2's answer goes out, restart it: the run completes with one receipt per call.
async fn killed_mid_call_and_retaken(db: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let (provider, base) = provider().await;
    let http = reqwest::Client::new();

    // Call 1 never answers: the server dies inside it.
    let arrived = provider.hold_at(1);
    let (server, url) = serve(dir.path(), &base, db).await;
    let (thread, run_id) = start_run(&http, &url).await;
    tokio::time::timeout(Duration::from_secs(60), arrived)
        .await
        .expect("the run reaches its second model call")
        .unwrap();
    kill_9(server).await;

    // Restarted, the server retakes the run and makes call 1 again; it dies again as call
    // 2's answer goes out: before, while or after that call's receipt and checkpoint are
    // written, whichever the kill hits.
    let sent = provider.tell_after(2);
    let (server, _) = serve(dir.path(), &base, db).await;
    tokio::time::timeout(Duration::from_secs(60), sent)
        .await
        .expect("the retaken run reaches its third model call")
        .unwrap();
    kill_9(server).await;

    // Restarted again, the run completes.
    let (_server, url) = serve(dir.path(), &base, db).await;
    let receipts = completes_with_one_receipt_per_call(&http, &url, &thread, &run_id).await;
    assert_eq!(receipts.len(), CALLS);
    assert!(
        provider.times_called(1) >= 2,
        "call 1 was made again after the kill"
    );
}

/// The receipts of account `acct-crash` on `url`, by invocation id, through the store API.
async fn crash_receipts(http: &reqwest::Client, url: &str) -> BTreeMap<String, Value> {
    let found = call_json(
        http,
        url,
        None,
        "POST",
        "/store/items/search",
        Some(json!({"namespace_prefix": ["billing", "acct-crash", "receipts"], "limit": 100})),
    )
    .await;
    found["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["key"].as_str().unwrap().to_owned(), i["value"].clone()))
        .collect()
}

/// Wait for the run to end; check it succeeded with each call in the thread once and
/// exactly one receipt per model call. Its receipts.
async fn completes_with_one_receipt_per_call(
    http: &reqwest::Client,
    url: &str,
    thread: &str,
    run_id: &str,
) -> BTreeMap<String, Value> {
    let out = call_json(
        http,
        url,
        None,
        "GET",
        &format!("/threads/{thread}/runs/{run_id}/join"),
        None,
    )
    .await;
    assert_eq!(
        out["messages"].as_array().unwrap().last().unwrap()["content"],
        "All done after 3 searches.",
        "{out}"
    );
    let run = call_json(
        http,
        url,
        None,
        "GET",
        &format!("/threads/{thread}/runs/{run_id}"),
        None,
    )
    .await;
    assert_eq!(run["status"], "success", "{run}");
    assert_eq!(
        count_tool_messages(&out),
        CALLS - 1,
        "the thread holds each search once: {out}"
    );

    let receipts = crash_receipts(http, url).await;
    let mut totals: Vec<u64> = receipts
        .values()
        .map(|r| r["usage"]["total_tokens"].as_u64().unwrap())
        .collect();
    totals.sort_unstable();
    assert_eq!(
        totals,
        (0..CALLS).map(tokens_of).collect::<Vec<_>>(),
        "exactly one receipt per model call: {receipts:#?}"
    );
    for (key, r) in &receipts {
        assert_eq!(r["invocation_id"], json!(key));
        assert_eq!(r["graph_run_id"], json!(run_id));
        assert_eq!(r["request_id"], "req-crash");
        assert_eq!(r["error"], Value::Null, "{r}");
    }
    receipts
}

/// The window that could double a charge, hit on purpose: call 2's receipt is written
/// while the test holds the checkpoint tables, so its checkpoint is not; the server is
/// killed then. Retaken, the run makes call 2 again under the same invocation id, and the
/// receipt is replaced, not added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_kill_between_a_receipt_and_its_checkpoint_charges_the_call_once() {
    use sqlx::{Connection, PgConnection};
    let (db_url, _db) = graphloom_postgres::testing::test_database().await;
    let db = ["--database-url", db_url.as_str(), "--lease-secs", "2"];
    let dir = tempfile::tempdir().unwrap();
    let (provider, base) = provider().await;
    let http = reqwest::Client::new();

    let (arrived, release) = provider.hold_until(2);
    let (server, url) = serve(dir.path(), &base, &db).await;
    let (thread, run_id) = start_run(&http, &url).await;
    tokio::time::timeout(Duration::from_secs(60), arrived)
        .await
        .expect("the run reaches its third model call")
        .unwrap();
    // No checkpoint can be written from now on; reads go on.
    let mut pg = PgConnection::connect(&db_url).await.unwrap();
    let mut tx = pg.begin().await.unwrap();
    sqlx::query(
        "LOCK TABLE graphloom_checkpoints, graphloom_checkpoint_blobs, graphloom_checkpoint_writes IN SHARE MODE",
    )
    .execute(&mut *tx)
    .await
    .unwrap();
    release.send(()).unwrap();
    // Call 2's receipt is written: the node awaits it before it returns its update.
    let receipts = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let r = crash_receipts(&http, &url).await;
            if r.len() == 3 {
                return r;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("call 2's receipt is written");
    let state = call_json(
        &http,
        &url,
        None,
        "GET",
        &format!("/threads/{thread}/state"),
        None,
    )
    .await;
    assert_eq!(
        state["values"]["messages"].as_array().unwrap().len(),
        5,
        "the checkpoint ends with call 1's search, not call 2's answer: {state}"
    );
    kill_9(server).await;
    // A statement the dead server sent is still waiting for the lock, and PostgreSQL would
    // finish it once the lock is gone: end the dead server's sessions first.
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.rollback().await.unwrap();
    drop(pg);

    let (_server, url) = serve(dir.path(), &base, &db).await;
    let after = completes_with_one_receipt_per_call(&http, &url, &thread, &run_id).await;
    assert_eq!(
        provider.times_called(2),
        2,
        "call 2 was made again after the kill"
    );
    let kept: BTreeSet<&String> = receipts.keys().collect();
    assert!(
        kept.iter().all(|k| after.contains_key(*k)),
        "every receipt written before the kill is one of the run's: {receipts:#?} {after:#?}"
    );
}

fn count_tool_messages(values: &Value) -> usize {
    values["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["type"] == "tool").count())
}
