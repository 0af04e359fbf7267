//! The model `graphloom serve` answers with is an explicit choice, and visible: `scripted`
//! (unset on a bare local server, with a banner on standard error) or the configured
//! provider, in `/info`, in each system assistant's `metadata.model` and in the console;
//! a deployed server with `GRAPHLOOM_MODEL` unset, or a model that cannot be built, refuses
//! to start.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_llm::testing::OpenAiWireServer;
use serde_json::{json, Value};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::watch;

const WAIT: Duration = Duration::from_secs(60);
const GRAPHS: [&str; 5] = [
    "chat_runtime",
    "fraud_investigation",
    "memory_supervisor",
    "permit_filing",
    "support_chat",
];

fn graphloom(dir: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_graphloom"));
    c.current_dir(dir)
        .env_remove("GRAPHLOOM_MODEL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env("RUST_LOG", "warn")
        .kill_on_drop(true);
    c
}

/// A started `graphloom serve`: the child, its URL, and what it writes on standard error
/// (complete once the child has ended).
async fn serve(mut cmd: Command) -> (Child, String, watch::Receiver<(String, bool)>) {
    let mut child = cmd
        .args(["serve", "--db", "g.db", "--addr", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("graphloom serve starts");
    let (sink, err) = watch::channel((String::new(), false));
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    tokio::spawn(async move {
        while let Ok(Some(l)) = stderr.next_line().await {
            sink.send_modify(|(s, _)| {
                s.push_str(&l);
                s.push('\n');
            });
        }
        sink.send_modify(|(_, ended)| *ended = true);
    });
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
    (child, url, err)
}

async fn get(http: &reqwest::Client, url: &str) -> Value {
    let r = http.get(url).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200, "{url}");
    r.json().await.unwrap()
}

/// `/info`'s models and each system assistant's `metadata.model` all say `model`.
async fn assert_shows(http: &reqwest::Client, url: &str, model: &str) {
    let info = get(http, &format!("{url}/info")).await;
    let expected: serde_json::Map<String, Value> =
        GRAPHS.iter().map(|g| ((*g).to_owned(), json!(model))).collect();
    assert_eq!(info["models"], Value::Object(expected), "{info}");
    let found: Value = http
        .post(format!("{url}/assistants/search"))
        .json(&json!({"metadata": {"created_by": "system"}, "limit": 10}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let found = found.as_array().unwrap();
    assert_eq!(found.len(), GRAPHS.len(), "{found:?}");
    for a in found {
        assert_eq!(a["metadata"]["model"], json!(model), "{a}");
    }
    let console = http
        .get(format!("{url}/ui/frag/graphs"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        console.contains(&format!("model: {model}")),
        "the console shows the model"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_serve_says_it_serves_the_scripted_model() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, url, mut err) = serve(graphloom(dir.path())).await;
    let http = reqwest::Client::new();
    assert_shows(&http, &url, "scripted").await;
    let banner = tokio::time::timeout(
        WAIT,
        err.wait_for(|(s, ended)| *ended || s.contains("GRAPHLOOM_MODEL=openai")),
    )
    .await
    .unwrap()
    .unwrap()
    .0
    .clone();
    assert!(
        banner.contains("scripted demo model: every answer is canned")
            && banner.contains("GRAPHLOOM_MODEL=openai:gpt-4o-mini"),
        "{banner}"
    );
    child.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_provider_is_shown_and_answers_the_runs() {
    let wire = OpenAiWireServer::start(OpenAiWireServer::react()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    // First the scripted model on this database; then the provider: the existing system
    // assistants take the new model.
    let mut scripted = graphloom(dir.path());
    scripted.env("GRAPHLOOM_MODEL", "scripted");
    let (mut first, url, _) = serve(scripted).await;
    let http = reqwest::Client::new();
    assert_shows(&http, &url, "scripted").await;
    first.kill().await.unwrap();
    first.wait().await.unwrap();

    let mut cmd = graphloom(dir.path());
    cmd.env("GRAPHLOOM_MODEL", "openai-compatible:wire-model")
        .env("OPENAI_BASE_URL", wire.base_url())
        .env("OPENAI_API_KEY", "test-key");
    let (mut child, url, mut err) = serve(cmd).await;
    assert_shows(&http, &url, "openai-compatible:wire-model").await;
    let before = wire.served();
    let out: Value = http
        .post(format!("{url}/runs/wait"))
        .json(&json!({
            "assistant_id": "chat_runtime",
            "input": {"messages": [{"role": "user", "content": "hello"}]},
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(out.get("messages").is_some(), "{out}");
    assert!(wire.served() > before, "the run called the provider");
    child.kill().await.unwrap();
    child.wait().await.unwrap();
    let said = tokio::time::timeout(WAIT, err.wait_for(|(_, ended)| *ended))
        .await
        .unwrap()
        .unwrap()
        .0
        .clone();
    assert!(!said.contains("scripted demo model"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_an_unbuildable_model_and_a_deployed_server_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = tokio::time::timeout(
        WAIT,
        graphloom(dir.path())
            .env("GRAPHLOOM_MODEL", "anthropic:claude-3-5-haiku-latest")
            .env_remove("ANTHROPIC_API_KEY")
            .args(["serve", "--db", "g.db", "--addr", "127.0.0.1:0"])
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("ANTHROPIC_API_KEY")
            && err.contains("GRAPHLOOM_MODEL=scripted"),
        "{err}"
    );

    // Listening beyond loopback, GRAPHLOOM_MODEL unset: no silent canned answers.
    let out = tokio::time::timeout(
        WAIT,
        graphloom(dir.path())
            .args(["serve", "--db", "g.db", "--addr", "0.0.0.0:0"])
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("GRAPHLOOM_MODEL is unset")
            && err.contains("GRAPHLOOM_MODEL=scripted"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graphloom_embeddings_gives_the_served_store_a_ranking_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = graphloom(dir.path());
    cmd.env("GRAPHLOOM_EMBEDDINGS", "hash");
    let (mut child, url, _) = serve(cmd).await;
    let http = reqwest::Client::new();
    for (key, text) in [
        ("m1", "my dog likes walks"),
        ("m2", "the car needs tyres"),
        ("m3", "a cat sleeps"),
    ] {
        let r = http
            .put(format!("{url}/store/items"))
            .json(&json!({"namespace": ["memory", "alice"], "key": key, "value": {"content": text}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 204);
    }
    let found: Value = http
        .post(format!("{url}/store/items/search"))
        .json(&json!({"namespace_prefix": ["memory"], "query": "where is my dog", "limit": 3}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // Newest first would be m3: the query ranks the dog first.
    assert_eq!(found["items"][0]["key"], "m1", "{found}");
    child.kill().await.unwrap();

    let out = tokio::time::timeout(
        WAIT,
        graphloom(dir.path())
            .env("GRAPHLOOM_EMBEDDINGS", "openai:text-embedding-3-small")
            .args(["serve", "--db", "other.db", "--addr", "127.0.0.1:0"])
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("GRAPHLOOM_EMBEDDINGS") && err.contains("OPENAI_API_KEY"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_on_postgres_without_a_model_refuses_before_opening_the_database() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens on port 1: had the server tried the database first, it would say
    // that it cannot connect instead.
    let out = tokio::time::timeout(
        WAIT,
        graphloom(dir.path())
            .args([
                "serve",
                "--database-url",
                "postgres://graphloom@127.0.0.1:1/graphloom",
                "--addr",
                "127.0.0.1:0",
            ])
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "GRAPHLOOM_MODEL is unset: a server with --database-url does not pick the canned demo model"
        ) && err.contains("GRAPHLOOM_MODEL=scripted"),
        "{err}"
    );
    assert!(!err.contains("127.0.0.1:1"), "the database was not tried: {err}");
}

/// One `runs/wait` of seed 002 on a new thread; the text of its last message.
async fn memory_turn(http: &reqwest::Client, url: &str, text: &str, session: &str) -> String {
    let thread: Value = http
        .post(format!("{url}/threads"))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let input = json!({
        "messages": [{"role": "user", "content": text}],
        "user_id": "alice",
        "session_id": session,
    });
    let v: Value = http
        .post(format!(
            "{url}/threads/{}/runs/wait",
            thread["thread_id"].as_str().unwrap()
        ))
        .json(&json!({"assistant_id": "memory_supervisor", "input": input}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no answer: {v}"))
        .to_owned()
}

/// Seed 002 remembers two facts and is asked about one, on a server with `embeddings`
/// (or without an index): its answer.
async fn served_recall(embeddings: Option<&str>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = graphloom(dir.path());
    if let Some(e) = embeddings {
        cmd.env("GRAPHLOOM_EMBEDDINGS", e);
    }
    let (mut child, url, _) = serve(cmd).await;
    let http = reqwest::Client::new();
    let noted = memory_turn(&http, &url, "Remember that my favourite colour is teal.", "s1").await;
    assert!(noted.starts_with("Noted"), "{noted}");
    let noted = memory_turn(&http, &url, "Remember that I am allergic to peanuts.", "s2").await;
    assert!(noted.starts_with("Noted"), "{noted}");
    let answer = memory_turn(
        &http,
        &url,
        "What do you remember about my favourite colour?",
        "s3",
    )
    .await;
    child.kill().await.unwrap();
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_seed_002_recalls_by_the_question_with_the_servers_embedder() {
    // With the server's index, long-term memory is searched by the question: the allergy
    // shares no word with it and is left out.
    let ranked = served_recall(Some("hash")).await;
    assert_eq!(ranked, "You told me: my favourite colour is teal.");
    // Without an index the search cannot rank: both facts come back.
    let unranked = served_recall(None).await;
    assert!(
        unranked.contains("teal") && unranked.contains("allergic to peanuts"),
        "{unranked}"
    );
}
