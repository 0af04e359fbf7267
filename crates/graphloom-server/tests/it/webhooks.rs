//! Webhooks against local receivers that fail, hang and succeed: a run's end is POSTed
//! signed, retried until a 2xx and never after it, for every kind of end; refused URLs
//! are 422s; a delivery queued before a restart is sent after it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::hooks;

use common::{human, TestServer};
use graphloom_server::db::{SqliteDb, WebhookDb};
use graphloom_server::{ServerConfig, WebhookConfig};
use hooks::{Answer, Receiver};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

const SECRET: &str = "s3cret";
const WAIT: Duration = Duration::from_secs(20);

fn config(path: &Path, backoff: Duration) -> ServerConfig {
    let mut cfg = ServerConfig::sqlite(path);
    cfg.lease = Duration::from_secs(3);
    cfg.webhooks = WebhookConfig {
        secret: Some(SECRET.into()),
        allow_http: true,
        allowed_hosts: vec!["127.0.0.1".into()],
        timeout: Duration::from_millis(300),
        backoff,
        poll: Duration::from_millis(20),
        ..WebhookConfig::default()
    };
    cfg
}

/// Poll the delivery's state until `status` (at most 20 s).
async fn delivery(db: &dyn WebhookDb, run_id: &str, status: &str) -> graphloom_server::db::WebhookStatus {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(st) = db.webhook_status(run_id).await.unwrap() {
            if st.status == status {
                return st;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "delivery of {run_id} never became {status}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_is_signed_retried_through_failure_and_hang_and_sent_once_after_a_2xx() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graphloom.db");
    let s = TestServer::start(config(&path, Duration::from_millis(50))).await;
    let db = SqliteDb::open(&path).await.unwrap();
    signed_retried_sent_once(&s, &db).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_webhook_is_signed_retried_and_sent_once_after_a_2xx() {
    let (url, _guard) = graphloom_postgres::testing::test_database().await;
    let mut cfg = ServerConfig::postgres(&url);
    cfg.webhooks = config(Path::new("unused.db"), Duration::from_millis(50)).webhooks;
    let s = TestServer::start(cfg).await;
    let db = graphloom_server::db::PgDb::connect(&url).await.unwrap();
    signed_retried_sent_once(&s, &db).await;
    s.stop().await;
}

/// A run's end POSTed to a receiver that fails, hangs, then succeeds: three signed
/// attempts, delivered, and not sent again.
async fn signed_retried_sent_once(s: &TestServer, db: &dyn WebhookDb) {
    let hook = Receiver::start(vec![Answer::Status(500), Answer::Hang, Answer::Status(200)]).await;
    let t = s.thread().await;
    let (st, out) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "echo", "input": human("hi"), "webhook": hook.url}),
        )
        .await;
    assert_eq!(st, 200, "{out}");
    let got = hook.wait_for(3, WAIT).await;
    let answered: Vec<Option<u16>> = got.iter().map(|g| g.answered).collect();
    assert_eq!(answered, vec![Some(500), None, Some(200)]);
    let run_id = got[0].json["run_id"].as_str().unwrap().to_owned();
    for g in &got {
        assert_eq!(g.json["run_id"], json!(run_id));
        assert_eq!(g.json["thread_id"], json!(t));
        assert_eq!(g.json["status"], "success");
        assert_eq!(g.json["values"]["messages"][1]["content"], "echo: hi");
        assert!(g.json["kwargs"].get("owner").is_none(), "no internal fields");
        for key in [
            "run_started_at",
            "run_ended_at",
            "webhook_sent_at",
            "assistant_id",
            "metadata",
        ] {
            assert!(g.json.get(key).is_some(), "{key} missing: {}", g.json);
        }
        let sig = g.headers["x-graphloom-signature"].to_str().unwrap();
        assert_eq!(
            sig,
            graphloom_server::webhook::signature(SECRET, &g.body),
            "signed body"
        );
        assert_eq!(g.headers["x-graphloom-webhook-id"].to_str().unwrap(), run_id);
    }
    let st = delivery(db, &run_id, "delivered").await;
    assert_eq!(st.attempts, 3);
    // A second run's delivery goes through the same dispatcher after the first's: the
    // first is not sent again.
    let (_, out) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "echo", "input": human("again"), "webhook": hook.url}),
        )
        .await;
    assert!(out.get("__error__").is_none(), "{out}");
    let got = hook.wait_for(4, WAIT).await;
    assert_eq!(got.len(), 4);
    assert_ne!(got[3].json["run_id"], json!(run_id));
    let second = got[3].json["run_id"].as_str().unwrap().to_owned();
    assert_eq!(delivery(db, &second, "delivered").await.attempts, 1);
    assert_eq!(
        hook.got()
            .iter()
            .filter(|g| g.json["run_id"] == json!(run_id))
            .count(),
        3
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_end_is_reported_and_a_receiver_that_never_succeeds_is_given_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graphloom.db");
    let mut cfg = config(&path, Duration::from_millis(20));
    cfg.webhooks.max_attempts = 3;
    let s = TestServer::start(cfg).await;
    let db = SqliteDb::open(&path).await.unwrap();
    let hook = Receiver::start(vec![]).await;
    // Interrupted: the approval graph pauses.
    let t = s.thread().await;
    let (_, run) = s
        .post(
            &format!("/threads/{t}/runs"),
            json!({"assistant_id": "approval", "input": {}, "webhook": hook.url}),
        )
        .await;
    let got = hook.wait_for(1, WAIT).await;
    assert_eq!(got[0].json["run_id"], run["run_id"]);
    assert_eq!(got[0].json["status"], "interrupted");
    // A stateless run: its thread is gone by the time the delivery goes.
    let (_, out) = s
        .post(
            "/runs/wait",
            json!({"assistant_id": "echo", "input": human("x"), "webhook": hook.url}),
        )
        .await;
    assert_eq!(out["messages"][1]["content"], "echo: x");
    let got = hook.wait_for(2, WAIT).await;
    assert_eq!(got[1].json["status"], "success");
    assert_eq!(got[1].json["values"]["messages"][1]["content"], "echo: x");
    // A receiver that always fails: three attempts, then given up.
    let bad = Receiver::start(vec![Answer::Status(503); 10]).await;
    let t2 = s.thread().await;
    let (_, run) = s
        .post(
            &format!("/threads/{t2}/runs/wait"),
            json!({"assistant_id": "echo", "input": human("y"), "webhook": bad.url}),
        )
        .await;
    assert!(run.get("__error__").is_none(), "{run}");
    let got = bad.wait_for(3, WAIT).await;
    let run_id = got[0].json["run_id"].as_str().unwrap().to_owned();
    let st = delivery(&db, &run_id, "failed").await;
    assert_eq!(st.attempts, 3);
    assert!(st.last_error.unwrap().contains("503"));
    assert_eq!(bad.got().len(), 3, "given up after max_attempts");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_urls_are_guarded_by_default() {
    let s = TestServer::sqlite(|_| {}).await;
    let t = s.thread().await;
    for (url, detail) in [
        (
            "http://127.0.0.1:9/hook",
            "Webhook host blocked: loopback IP range",
        ),
        (
            "https://127.0.0.1/hook",
            "Webhook host blocked: loopback IP range",
        ),
        ("https://[::1]/hook", "Webhook host blocked: loopback IP range"),
        ("https://10.1.2.3/hook", "Webhook host blocked: private IP range"),
        (
            "https://192.168.1.1/hook",
            "Webhook host blocked: private IP range",
        ),
        (
            "https://169.254.169.254/latest/meta-data",
            "Webhook host blocked: link-local IP range",
        ),
        (
            "https://localhost/hook",
            "Webhook host blocked: localhost address",
        ),
        ("http://example.com/hook", "Webhook URL must use https"),
        ("file:///etc/passwd", "Invalid webhook hostname ''"),
        ("gopher://example.com/x", "Invalid webhook scheme 'gopher'"),
        ("not a url", "Invalid webhook hostname"),
    ] {
        let (st, e) = s
            .post(
                &format!("/threads/{t}/runs"),
                json!({"assistant_id": "echo", "input": human("x"), "webhook": url}),
            )
            .await;
        assert_eq!(st, 422, "{url}: {e}");
        assert!(e["detail"].as_str().unwrap().starts_with(detail), "{url}: {e}");
    }
    let (_, runs) = s.get(&format!("/threads/{t}/runs")).await;
    assert_eq!(runs, json!([]), "no run stored for a refused webhook");
    let (st, _) = s
        .post(
            "/runs",
            json!({"assistant_id": "echo", "input": human("x"), "webhook": "https://example.com/hook"}),
        )
        .await;
    assert_eq!(st, 200, "a public https URL is accepted");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_queued_before_a_restart_is_sent_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graphloom.db");
    // The first attempt fails; the retry is due two seconds later, after the restart.
    let hook = Receiver::start(vec![Answer::Status(503)]).await;
    let first = TestServer::start(config(&path, Duration::from_secs(2))).await;
    let t = first.thread().await;
    let (_, out) = first
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "echo", "input": human("hi"), "webhook": hook.url}),
        )
        .await;
    assert!(out.get("__error__").is_none(), "{out}");
    let got = hook.wait_for(1, WAIT).await;
    let run_id = got[0].json["run_id"].as_str().unwrap().to_owned();
    first.stop().await;
    assert_eq!(hook.got().len(), 1, "only the failed attempt before the restart");
    let second = TestServer::start(config(&path, Duration::from_secs(2))).await;
    let got = hook.wait_for(2, WAIT).await;
    assert_eq!(got[1].json["run_id"], json!(run_id));
    assert_eq!(got[1].answered, Some(200));
    let db = SqliteDb::open(&path).await.unwrap();
    assert_eq!(delivery(&db, &run_id, "delivered").await.attempts, 2);
    second.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_headers_arrive_and_a_host_off_the_domain_allowlist_is_a_422() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&dir.path().join("graphloom.db"), Duration::from_millis(50));
    cfg.webhooks.allowed_domains = vec!["127.0.0.1".into()];
    cfg.webhooks.max_url_length = Some(200);
    cfg.webhooks.headers = vec![
        ("Authorization".into(), "Bearer hook-token".into()),
        ("x-team".into(), "agents".into()),
    ];
    let s = TestServer::start(cfg).await;
    let hook = Receiver::start(vec![]).await;
    let t = s.thread().await;
    let (st, e) = s
        .post(
            &format!("/threads/{t}/runs"),
            json!({"assistant_id": "echo", "input": human("x"), "webhook": "https://example.com/hook"}),
        )
        .await;
    assert_eq!(st, 422, "{e}");
    assert_eq!(
        e["detail"],
        "Webhook host 'example.com' is not in the server's allowed domains"
    );
    let long = format!("{}/{}", hook.url, "a".repeat(200));
    let (st, e) = s
        .post(
            &format!("/threads/{t}/runs"),
            json!({"assistant_id": "echo", "input": human("x"), "webhook": long}),
        )
        .await;
    assert_eq!(st, 422, "{e}");
    assert!(
        e["detail"].as_str().unwrap().starts_with("Webhook URL too long"),
        "{e}"
    );
    let (st, out) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "echo", "input": human("hi"), "webhook": hook.url}),
        )
        .await;
    assert_eq!(st, 200, "{out}");
    let got = hook.wait_for(1, WAIT).await;
    let h = &got[0].headers;
    assert_eq!(h["authorization"], "Bearer hook-token");
    assert_eq!(h["x-team"], "agents");
    assert_eq!(
        h["content-type"], "application/json",
        "the delivery's own headers stay"
    );
    assert!(h.contains_key("x-graphloom-signature"));
    s.stop().await;
}
