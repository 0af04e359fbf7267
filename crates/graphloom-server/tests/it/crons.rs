//! Crons over HTTP on SQLite: the shapes the SDKs read, bad input refused with nothing
//! stored, and ticks fired by the scheduler (a tick is made due by moving the cron's
//! `next_run_date` into the past through the database, as after downtime).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::hooks;

use common::{human, TestServer};
use graphloom_server::db::{CronDb, CronPatch, SqliteDb};
use graphloom_server::{ServerConfig, WebhookConfig};
use graphloom_server_db::kit::now_micros;
use hooks::Receiver;
use serde_json::{json, Value};
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

const HOUR: i64 = 3_600_000_000;

/// A server on a fresh SQLite file whose scheduler looks every 50 ms and whose webhooks may
/// reach 127.0.0.1 over http; the file's path.
async fn server() -> (TestServer, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graphloom.db");
    let mut cfg = ServerConfig::sqlite(&path);
    cfg.lease = Duration::from_secs(3);
    cfg.crons.poll = Duration::from_millis(50);
    cfg.webhooks = WebhookConfig {
        allow_http: true,
        allowed_hosts: vec!["127.0.0.1".into()],
        poll: Duration::from_millis(50),
        ..WebhookConfig::default()
    };
    (TestServer::start(cfg).await, path, dir)
}

/// Poll `check` until it gives a value (at most 20 s).
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Make the cron's next tick due `ago` microseconds ago.
async fn due(db: &SqliteDb, cron_id: &str, ago: i64) {
    let patch = CronPatch {
        next_run_us: Some(Some(now_micros() - ago)),
        ..CronPatch::default()
    };
    assert!(db.patch_cron("", cron_id, &patch).await.unwrap().is_some());
}

async fn runs_of(s: &TestServer, thread: &str) -> Vec<Value> {
    let (st, runs) = s.get(&format!("/threads/{thread}/runs?limit=100")).await;
    assert_eq!(st, 200, "{runs}");
    runs.as_array().unwrap().clone()
}

async fn count(s: &TestServer) -> i64 {
    let (st, n) = s.post("/runs/crons/count", json!({})).await;
    assert_eq!(st, 200, "{n}");
    n.as_i64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_routes_answer_the_sdk_shapes_and_refuse_bad_input() {
    let (s, _path, _dir) = server().await;
    let (_, info) = s.get("/info").await;
    assert_eq!(info["flags"]["crons"], true);
    let t = s.thread().await;
    let (st, c) = s
        .post(
            &format!("/threads/{t}/runs/crons"),
            json!({"assistant_id": "echo", "schedule": "*/5 * * * *", "input": human("tick"),
                   "metadata": {"team": "ops"}}),
        )
        .await;
    assert_eq!(st, 200, "{c}");
    for key in [
        "cron_id",
        "assistant_id",
        "thread_id",
        "user_id",
        "end_time",
        "schedule",
        "timezone",
        "payload",
        "next_run_date",
        "metadata",
        "on_run_completed",
        "enabled",
        "created_at",
        "updated_at",
    ] {
        assert!(c.get(key).is_some(), "{key} missing from {c}");
    }
    let id = c["cron_id"].as_str().unwrap().to_owned();
    assert_eq!(c["thread_id"], json!(t));
    assert_eq!(
        c["assistant_id"],
        json!(graphloom_server::system_assistant_id("echo"))
    );
    assert_eq!(c["payload"]["input"], human("tick"));
    assert_eq!(c["metadata"], json!({"team": "ops"}));
    assert_eq!(c["enabled"], true);
    let next = c["next_run_date"].as_str().unwrap();
    assert!(
        next.ends_with(":00+00:00") || next.ends_with(":00.000000+00:00"),
        "{next}"
    );

    let (st, stateless) = s
        .post(
            "/runs/crons",
            json!({"assistant_id": "echo", "schedule": "0 9 * * 1", "timezone": "Europe/Paris",
                   "on_run_completed": "keep", "end_time": "2099-01-01T00:00:00+00:00"}),
        )
        .await;
    assert_eq!(st, 200, "{stateless}");
    assert_eq!(stateless["thread_id"], Value::Null);
    assert_eq!(stateless["on_run_completed"], "keep");
    assert_eq!(stateless["timezone"], "Europe/Paris");
    assert!(stateless["end_time"]
        .as_str()
        .unwrap()
        .starts_with("2099-01-01T00:00:00"));
    let sid = stateless["cron_id"].as_str().unwrap().to_owned();

    let (st, found) = s.post("/runs/crons/search", json!({})).await;
    assert_eq!(st, 200);
    let ids: Vec<&str> = found
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cron_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![sid.as_str(), id.as_str()], "newest first");
    let (_, found) = s
        .post(
            "/runs/crons/search",
            json!({"thread_id": t, "select": ["cron_id", "schedule"]}),
        )
        .await;
    assert_eq!(found, json!([{"cron_id": id, "schedule": "*/5 * * * *"}]));
    let (_, found) = s
        .post("/runs/crons/search", json!({"assistant_id": "echo", "limit": 1}))
        .await;
    assert_eq!(
        found.as_array().unwrap().len(),
        1,
        "a graph id stands for its assistant"
    );
    assert_eq!(count(&s).await, 2);
    let (_, n) = s.post("/runs/crons/count", json!({"thread_id": t})).await;
    assert_eq!(n, 1);

    let (st, got) = s.get(&format!("/runs/crons/{id}")).await;
    assert_eq!((st, &got["cron_id"]), (200, &json!(id)));
    let (st, up) = s
        .patch(
            &format!("/runs/crons/{id}"),
            json!({"schedule": "0 0 1 1 *", "enabled": false, "metadata": {"more": 1}, "input": human("new")}),
        )
        .await;
    assert_eq!(st, 200, "{up}");
    assert_eq!(up["schedule"], "0 0 1 1 *");
    assert_eq!(up["enabled"], false);
    assert_eq!(up["metadata"], json!({"team": "ops", "more": 1}));
    assert_eq!(up["payload"]["input"], human("new"));
    assert!(
        up["next_run_date"].as_str().unwrap().contains("-01-01T00:00:00"),
        "{up}"
    );
    let (_, off) = s.post("/runs/crons/search", json!({"enabled": false})).await;
    assert_eq!(off.as_array().unwrap().len(), 1);
    let (st, up) = s
        .patch(&format!("/runs/crons/{sid}"), json!({"end_time": null}))
        .await;
    assert_eq!((st, &up["end_time"]), (200, &Value::Null));

    // Bad input: typed 4xx, nothing stored.
    let before = count(&s).await;
    let bad = |body: Value| body;
    for (path, body, status, detail) in [
        (
            "/runs/crons",
            bad(json!({"assistant_id": "echo", "schedule": "61 * * * *"})),
            422,
            "Invalid cron schedule",
        ),
        (
            "/runs/crons",
            bad(json!({"assistant_id": "echo", "schedule": "hello"})),
            422,
            "Invalid cron schedule",
        ),
        (
            "/runs/crons",
            bad(json!({"assistant_id": "echo", "schedule": "0 0 30 2 *"})),
            422,
            "never fires",
        ),
        (
            "/runs/crons",
            bad(json!({"assistant_id": "echo"})),
            422,
            "schedule",
        ),
        (
            "/runs/crons",
            bad(json!({"assistant_id": "echo", "schedule": "* * * * *", "timezone": "Mars/Base"})),
            422,
            "Invalid timezone",
        ),
        (
            "/runs/crons",
            bad(json!({"assistant_id": "echo", "schedule": "* * * * *", "end_time": "soon"})),
            422,
            "end_time",
        ),
        (
            "/runs/crons",
            bad(json!({"assistant_id": "nope", "schedule": "* * * * *"})),
            404,
            "not found",
        ),
        (
            "/runs/crons",
            bad(json!({"assistant_id": "echo", "schedule": "* * * * *", "input": {"steps": "many"}})),
            422,
            "input",
        ),
        (
            "/runs/crons",
            bad(json!({"assistant_id": "echo", "schedule": "* * * * *", "webhook": "file:///etc/passwd"})),
            422,
            "Invalid webhook hostname",
        ),
        (
            "/runs/crons",
            bad(json!({"assistant_id": "echo", "schedule": "* * * * *", "webhook": "https://10.0.0.1/x"})),
            422,
            "Webhook host blocked: private IP range",
        ),
        (
            "/runs/crons",
            bad(json!({"assistant_id": "echo", "schedule": "* * * * *", "multitask_strategy": "sometimes"})),
            422,
            "multitask_strategy",
        ),
        (
            "/threads/00000000-0000-0000-0000-000000000000/runs/crons",
            bad(json!({"assistant_id": "echo", "schedule": "* * * * *"})),
            404,
            "thread",
        ),
    ] {
        let (st, e) = s.post(path, body.clone()).await;
        assert_eq!(st, status, "{body} -> {e}");
        assert!(e["detail"].as_str().unwrap().contains(detail), "{body} -> {e}");
    }
    let (st, e) = s
        .patch(&format!("/runs/crons/{id}"), json!({"schedule": "bad"}))
        .await;
    assert_eq!(st, 422, "{e}");
    let (st, e) = s
        .patch(&format!("/runs/crons/{id}"), json!({"enabled": "yes"}))
        .await;
    assert_eq!(st, 422, "{e}");
    let (_, kept) = s.get(&format!("/runs/crons/{id}")).await;
    assert_eq!(kept["schedule"], "0 0 1 1 *", "a refused update changes nothing");
    let (st, e) = s.post("/runs/crons/search", json!({"sort_by": "colour"})).await;
    assert_eq!(st, 422, "{e}");
    assert_eq!(count(&s).await, before);

    let (st, _) = s.delete(&format!("/runs/crons/{id}")).await;
    assert_eq!(st, 204);
    let (st, _) = s.delete(&format!("/runs/crons/{id}")).await;
    assert_eq!(st, 404);
    let (st, _) = s.get(&format!("/runs/crons/{id}")).await;
    assert_eq!(st, 404);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_cron_fires_each_tick_once_and_a_missed_schedule_once() {
    let (s, path, _dir) = server().await;
    let db = SqliteDb::open(&path).await.unwrap();
    let t = s.thread().await;
    let (_, c) = s
        .post(
            &format!("/threads/{t}/runs/crons"),
            // Yearly: no natural tick comes during the test, only the ones it makes due.
            json!({"assistant_id": "echo", "schedule": "0 0 1 1 *", "input": human("tick"),
                   "metadata": {"from": "cron"}}),
        )
        .await;
    let id = c["cron_id"].as_str().unwrap().to_owned();
    due(&db, &id, 1000).await;
    let run = eventually("the first tick's run", || async {
        let runs = runs_of(&s, &t).await;
        (runs.len() == 1).then(|| runs[0].clone())
    })
    .await;
    assert_eq!(run["metadata"]["cron_id"], json!(id), "{run}");
    assert_eq!(run["metadata"]["from"], "cron");
    let done = s.wait_run(&t, run["run_id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "success");
    // Missed for three hours (as after downtime): one run, then the next minute.
    due(&db, &id, 3 * HOUR).await;
    let runs = eventually("the missed tick's run", || async {
        let runs = runs_of(&s, &t).await;
        (runs.len() >= 2).then_some(runs)
    })
    .await;
    assert_eq!(runs.len(), 2, "a missed schedule fires once");
    s.wait_run(&t, runs[0]["run_id"].as_str().unwrap()).await;
    let (_, c) = s.get(&format!("/runs/crons/{id}")).await;
    let next = graphloom_server::scheduler::schedule::parse_time_micros(c["next_run_date"].as_str().unwrap())
        .unwrap();
    let yearly = graphloom_server::scheduler::schedule::Schedule::parse("0 0 1 1 *", None).unwrap();
    assert_eq!(
        Some(next),
        yearly.next_after_micros(now_micros()),
        "the next tick after now: {c}"
    );
    let (_, state) = s.get(&format!("/threads/{t}/state")).await;
    let texts: Vec<&str> = state["values"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(texts, vec!["tick", "echo: tick", "tick", "echo: tick"]);
    assert_eq!(runs_of(&s, &t).await.len(), 2);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_crons_keep_or_delete_their_threads_and_disabled_ones_wait() {
    let (s, path, _dir) = server().await;
    let db = SqliteDb::open(&path).await.unwrap();
    let hook = Receiver::start(vec![]).await;
    // A dedicated assistant, so that its threads are easy to count.
    let (_, a) = s
        .post("/assistants", json!({"graph_id": "echo", "name": "cron-echo"}))
        .await;
    let aid = a["assistant_id"].as_str().unwrap().to_owned();
    let mk = |extra: Value| {
        let mut body = json!({"assistant_id": aid, "schedule": "0 0 1 1 *", "input": human("hi"),
                              "webhook": hook.url});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let (_, keep) = s
        .post("/runs/crons", mk(json!({"on_run_completed": "keep"})))
        .await;
    let (_, gone) = s.post("/runs/crons", mk(json!({}))).await;
    let (_, off) = s.post("/runs/crons", mk(json!({"enabled": false}))).await;
    for c in [&keep, &gone, &off] {
        due(&db, c["cron_id"].as_str().unwrap(), 1000).await;
    }
    // Both enabled crons' runs end and report; the disabled one, due in the same passes,
    // fires nothing.
    let got = hook.wait_for(2, Duration::from_secs(20)).await;
    let mut crons: Vec<&str> = got
        .iter()
        .map(|g| g.json["metadata"]["cron_id"].as_str().unwrap())
        .collect();
    crons.sort_unstable();
    let mut want = vec![
        keep["cron_id"].as_str().unwrap(),
        gone["cron_id"].as_str().unwrap(),
    ];
    want.sort_unstable();
    assert_eq!(crons, want);
    assert!(got.iter().all(|g| g.json["status"] == "success"), "{:?}", got);
    let kept_thread = got
        .iter()
        .find(|g| g.json["metadata"]["cron_id"] == keep["cron_id"])
        .map(|g| g.json["thread_id"].as_str().unwrap().to_owned())
        .unwrap();
    let (st, th) = s.get(&format!("/threads/{kept_thread}")).await;
    assert_eq!(st, 200, "on_run_completed keep: the thread stays");
    assert_eq!(th["values"]["messages"][1]["content"], "echo: hi");
    let gone_thread = got
        .iter()
        .find(|g| g.json["metadata"]["cron_id"] == gone["cron_id"])
        .map(|g| g.json["thread_id"].as_str().unwrap().to_owned())
        .unwrap();
    assert_eq!(th["ttl"], Value::Null, "kept for good");
    // The default: deleted. Nobody in this process reads the run, so (as for any stateless
    // run) its thread lingers a minute for readers on other replicas, then expires.
    let lingering = eventually("the thread's expiry", || async {
        let (st, th) = s.get(&format!("/threads/{gone_thread}")).await;
        (st == 404 || !th["ttl"].is_null()).then_some(th)
    })
    .await;
    if !lingering.is_null() && lingering.get("ttl").is_some() {
        assert_eq!(
            lingering["ttl"],
            json!({"strategy": "delete", "ttl": 1}),
            "{lingering}"
        );
    }
    let (_, off_now) = s
        .get(&format!("/runs/crons/{}", off["cron_id"].as_str().unwrap()))
        .await;
    assert_eq!(off_now["enabled"], false);
    let (_, threads) = s
        .post("/threads/search", json!({"metadata": {"assistant_id": aid}}))
        .await;
    assert!(threads.as_array().unwrap().len() <= 2, "{threads}");
    assert_eq!(hook.got().len(), 2);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_time_stops_a_cron_and_a_deleted_thread_takes_its_cron_away() {
    let (s, path, _dir) = server().await;
    let db = SqliteDb::open(&path).await.unwrap();
    // Its first tick (next 1 January) is past its end: it never fires.
    let soon = graphloom_server::models::rfc3339_from_micros(now_micros() + HOUR);
    let (_, yearly) = s
        .post(
            "/runs/crons",
            json!({"assistant_id": "echo", "schedule": "0 0 1 1 *", "end_time": soon}),
        )
        .await;
    assert_eq!(yearly["next_run_date"], Value::Null, "{yearly}");
    let (_, reopened) = s
        .patch(
            &format!("/runs/crons/{}", yearly["cron_id"].as_str().unwrap()),
            json!({"end_time": null}),
        )
        .await;
    assert!(reopened["next_run_date"]
        .as_str()
        .unwrap()
        .contains("-01-01T00:00:00"));

    // A tick due after the end passed: skipped, and no more ticks.
    let t = s.thread().await;
    let past = graphloom_server::models::rfc3339_from_micros(now_micros() + 2 * HOUR);
    let (_, ended) = s
        .post(
            &format!("/threads/{t}/runs/crons"),
            json!({"assistant_id": "echo", "schedule": "0 0 1 1 *", "end_time": past, "input": human("x")}),
        )
        .await;
    let eid = ended["cron_id"].as_str().unwrap().to_owned();
    let end = CronPatch {
        end_time_us: Some(Some(now_micros() - 2 * HOUR)),
        next_run_us: Some(Some(now_micros() - HOUR)),
        ..CronPatch::default()
    };
    db.patch_cron("", &eid, &end).await.unwrap();
    eventually("the ended cron's last tick", || async {
        let (_, c) = s.get(&format!("/runs/crons/{eid}")).await;
        c["next_run_date"].is_null().then_some(())
    })
    .await;
    assert!(runs_of(&s, &t).await.is_empty(), "past its end: no run");

    // The cron of a deleted thread is deleted at its next tick.
    let t2 = s.thread().await;
    let (_, c) = s
        .post(
            &format!("/threads/{t2}/runs/crons"),
            json!({"assistant_id": "echo", "schedule": "0 0 1 1 *"}),
        )
        .await;
    let cid = c["cron_id"].as_str().unwrap().to_owned();
    let (st, _) = s.delete(&format!("/threads/{t2}")).await;
    assert_eq!(st, 200);
    due(&db, &cid, 1000).await;
    eventually("the orphan cron's removal", || async {
        let (st, _) = s.get(&format!("/runs/crons/{cid}")).await;
        (st == 404).then_some(())
    })
    .await;
    let (st, e) = s
        .post(
            &format!("/threads/{t2}/runs/crons"),
            json!({"assistant_id": "echo", "schedule": "* * * * *"}),
        )
        .await;
    assert_eq!(st, 404, "a cron for a deleted thread: {e}");
    s.stop().await;
}
