//! Seed 000 hosted by `graphloom serve` keeps the seed's run limit and its terminal
//! statuses: a run past `LANGGRAPH_INVESTIGATION_TIMEOUT_SECONDS` ends `timeout` and the
//! investigation reads `TIMED_OUT` with the reason; a run that fails (the planner's model
//! answers nonsense with the fallback off) reads `FAILED`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_llm::testing::{OpenAiWireServer, WireAnswer};
use serde_json::{json, Value};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const WAIT: Duration = Duration::from_secs(60);

/// A provider that takes each connection and never answers.
struct SilentProvider {
    base_url: String,
    task: tokio::task::JoinHandle<()>,
}

impl SilentProvider {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((conn, _)) = listener.accept().await {
                held.push(conn);
            }
        });
        Self { base_url, task }
    }
}

impl Drop for SilentProvider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `graphloom serve` on a fresh SQLite file with the seed graphs, its planner model an
/// OpenAI-compatible provider at `base_url`, and `env` set; the child and its URL.
async fn serve(dir: &std::path::Path, base_url: &str, env: &[(&str, &str)]) -> (Child, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_graphloom"));
    cmd.current_dir(dir)
        .env("GRAPHLOOM_MODEL", "openai-compatible:planner")
        .env("OPENAI_BASE_URL", base_url)
        .env("OPENAI_API_KEY", "test-key")
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied())
        .args(["serve", "--db", "g.db", "--addr", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("graphloom serve starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(WAIT, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.strip_prefix("graphloom listening on ") {
                return rest.split_whitespace().next().unwrap().to_owned();
            }
        }
        panic!("graphloom serve ended before listening");
    })
    .await
    .expect("graphloom serve listens in time");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

/// Run seed 000's sample investigation on a new thread to its end; the thread, the run's
/// row and the thread's state.
async fn investigate(http: &reqwest::Client, url: &str) -> (String, Value, Value) {
    let thread: Value = http
        .post(format!("{url}/threads"))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let t = thread["thread_id"].as_str().unwrap().to_owned();
    let r = tokio::time::timeout(
        WAIT,
        http.post(format!("{url}/threads/{t}/runs/wait"))
            .json(&json!({
                "assistant_id": "fraud_investigation",
                "input": fraud_investigation::sample_input(),
            }))
            .send(),
    )
    .await
    .expect("the run ends within the bound")
    .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let runs: Value = http
        .get(format!("{url}/threads/{t}/runs"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let run = runs[0].clone();
    let state: Value = http
        .get(format!("{url}/threads/{t}/state"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    (t, run, state)
}

/// The value of the first `/metrics` sample whose line starts with `start`.
async fn sample(http: &reqwest::Client, url: &str, start: &str) -> Option<f64> {
    let text = http
        .get(format!("{url}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find(|l| l.starts_with(start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosted_investigation_past_its_limit_is_timed_out() {
    let provider = SilentProvider::start().await;
    let dir = tempfile::tempdir().unwrap();
    // The planner waits for a model that never answers (its own 10 s limit is longer
    // than the investigation's 1 s).
    let (mut child, url) = serve(
        dir.path(),
        &provider.base_url,
        &[("LANGGRAPH_INVESTIGATION_TIMEOUT_SECONDS", "1")],
    )
    .await;
    let http = reqwest::Client::new();
    let (t, run, state) = investigate(&http, &url).await;
    assert_eq!(run["status"], "timeout", "{run}");
    let values = &state["values"];
    assert_eq!(values["status"], "TIMED_OUT", "{state}");
    assert_eq!(values["error"], "investigation timed out after 1s", "{state}");
    assert!(values["completed_at"].is_string(), "{state}");
    // The thread's copy of the state says so too.
    let thread: Value = http
        .get(format!("{url}/threads/{t}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (thread["status"].as_str(), thread["values"]["status"].as_str()),
        (Some("error"), Some("TIMED_OUT")),
        "{thread}"
    );
    assert_eq!(
        sample(
            &http,
            &url,
            "ops_agent_investigation_completed_total{status=\"TIMED_OUT\""
        )
        .await,
        Some(1.0)
    );
    child.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosted_investigation_that_fails_is_failed_with_the_reason() {
    let provider = OpenAiWireServer::start(Arc::new(|_: &Value| WireAnswer::text("no plan today")))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (mut child, url) = serve(
        dir.path(),
        provider.base_url(),
        &[("LANGGRAPH_ENABLE_PLANNER_FALLBACK", "false")],
    )
    .await;
    let http = reqwest::Client::new();
    let (_, run, state) = investigate(&http, &url).await;
    assert_eq!(run["status"], "error", "{run}");
    let values = &state["values"];
    assert_eq!(values["status"], "FAILED", "{state}");
    let error = values["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("node `planner` failed: planner failed and the fallback is off"),
        "{state}"
    );
    assert!(provider.served() >= 1, "the planner asked the model");
    assert_eq!(
        sample(
            &http,
            &url,
            "ops_agent_investigation_completed_total{status=\"FAILED\""
        )
        .await,
        Some(1.0)
    );
    child.kill().await.unwrap();
}
