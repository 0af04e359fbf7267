//! Every endpoint over a real socket, against a server on a SQLite file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{human, parse_sse, TestServer};
use serde_json::{json, Value};
use std::time::Duration;

/// The Prometheus text of `/metrics`.
async fn metrics_text(s: &TestServer) -> String {
    s.http
        .get(s.u("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test]
async fn health_info_openapi_and_metrics() {
    let s = TestServer::sqlite(|_| {}).await;
    assert_eq!(s.get("/ok").await, (200, json!({"ok": true})));
    let (st, info) = s.get("/info").await;
    assert_eq!(st, 200);
    assert_eq!(info["graphs"], json!(["approval", "chatty", "echo", "slow"]));
    let (st, doc) = s.get("/openapi.json").await;
    assert_eq!(st, 200);
    assert!(doc["paths"]["/threads/{thread_id}/runs/stream"]["post"].is_object());
    let t = s.thread().await;
    let (st, _) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "echo", "input": human("hi")}),
        )
        .await;
    assert_eq!(st, 200);
    let text = metrics_text(&s).await;
    assert!(
        text.contains("graphloom_runs_finished_total{status=\"success\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("graphloom_node_duration_seconds_count{graph=\"echo\",node=\"reply\"} 1"),
        "{text}"
    );
    assert!(text.contains("graphloom_queue_depth 0"), "{text}");
    s.stop().await;
}

/// `priced`: one AI message with token usage from a model named in `response_metadata`.
fn priced(
    deps: &graphloom_server::GraphDeps,
) -> graphloom_core::Result<graphloom_core::CompiledGraph<common::Chat>> {
    use graphloom_core::{Message, StateGraph, END, START};
    use std::sync::Arc;
    StateGraph::<common::Chat>::new()
        .add_node("model", |_s: Arc<common::Chat>, _rt| async move {
            let mut m = Message::ai("priced answer");
            m.extra.insert(
                "usage_metadata".into(),
                json!({"input_tokens": 1_000_000, "output_tokens": 500_000, "total_tokens": 1_500_000}),
            );
            m.extra.insert(
                "response_metadata".into(),
                json!({"model_name": "gpt-4o-mini-2024-07-18"}),
            );
            let mut local = Message::ai("local answer");
            local.extra.insert(
                "usage_metadata".into(),
                json!({"input_tokens": 7, "output_tokens": 3, "total_tokens": 10}),
            );
            local.extra.insert(
                "response_metadata".into(),
                json!({"model_name": "my-local-llama"}),
            );
            Ok(common::ChatUpdate::new().messages(vec![m, local]))
        })
        .add_edge(START, "model")
        .add_edge("model", END)
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .store_dyn(Arc::clone(&deps.store))
        .compile()
}

#[tokio::test]
async fn metrics_price_model_tokens_by_model_name() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = graphloom_server::ServerConfig::sqlite(dir.path().join("graphloom.db"));
    let s = TestServer::start_with(cfg, |b| b.graph("priced", graphloom_server::factory(priced))).await;
    let t = s.thread().await;
    let (st, out) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "priced", "input": human("hi")}),
        )
        .await;
    assert_eq!(st, 200, "{out}");
    let text = metrics_text(&s).await;
    // gpt-4o-mini: 0.15 USD per 1M input, 0.60 per 1M output; the local model is free.
    let cost: f64 = text
        .lines()
        .find(|l| l.starts_with("graphloom_model_cost_usd_total "))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no cost counter in {text}"));
    assert!((cost - 0.45).abs() < 1e-9, "cost {cost}\n{text}");
    assert!(
        text.contains("graphloom_model_tokens_total{kind=\"input\"} 1000007"),
        "{text}"
    );
    s.stop().await;
}

#[tokio::test]
async fn assistants_crud_search_versions_and_schemas() {
    let s = TestServer::sqlite(|_| {}).await;
    // System assistants exist with the reference server's ids.
    let sys = graphloom_server::system_assistant_id("echo");
    let (st, a) = s.get(&format!("/assistants/{sys}")).await;
    assert_eq!(st, 200, "{a}");
    assert_eq!(a["graph_id"], "echo");
    assert_eq!(a["metadata"]["created_by"], "system");
    // A graph name resolves to its system assistant.
    assert_eq!(s.get("/assistants/echo").await.1["assistant_id"], sys);

    let (st, a) = s
        .post("/assistants", json!({"graph_id": "echo", "name": "mine", "metadata": {"team": "fraud"}, "config": {"recursion_limit": 7}}))
        .await;
    assert_eq!(st, 200, "{a}");
    let id = a["assistant_id"].as_str().unwrap().to_owned();
    assert_eq!(a["version"], 1);
    // Creating the same id again: 409, or the existing one with do_nothing.
    let (st, _) = s
        .post("/assistants", json!({"graph_id": "echo", "assistant_id": id}))
        .await;
    assert_eq!(st, 409);
    let (st, same) = s
        .post(
            "/assistants",
            json!({"graph_id": "echo", "assistant_id": id, "if_exists": "do_nothing"}),
        )
        .await;
    assert_eq!((st, same["name"].as_str()), (200, Some("mine")));
    // Unknown graph: 404 naming the registered ones.
    let (st, e) = s.post("/assistants", json!({"graph_id": "nope"})).await;
    assert_eq!(st, 404);
    assert!(e["detail"].as_str().unwrap().contains("echo"), "{e}");

    let (st, p) = s
        .patch(
            &format!("/assistants/{id}"),
            json!({"name": "renamed", "metadata": {"v": 2}}),
        )
        .await;
    assert_eq!(st, 200, "{p}");
    assert_eq!(
        (p["version"].as_i64(), p["name"].as_str()),
        (Some(2), Some("renamed"))
    );
    assert_eq!(p["metadata"], json!({"team": "fraud", "v": 2}));
    let (_, versions) = s.post(&format!("/assistants/{id}/versions"), json!({})).await;
    assert_eq!(versions.as_array().unwrap().len(), 2);
    let (st, back) = s
        .post(&format!("/assistants/{id}/latest"), json!({"version": 1}))
        .await;
    assert_eq!((st, back["name"].as_str()), (200, Some("mine")));

    let r = s
        .http
        .post(s.u("/assistants/search"))
        .json(&json!({"metadata": {"team": "fraud"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-pagination-total"], "1");
    let found: Value = r.json().await.unwrap();
    assert_eq!(found[0]["assistant_id"], id.as_str());
    assert_eq!(
        s.post("/assistants/count", json!({"graph_id": "echo"})).await.1,
        json!(2)
    );

    let (st, schemas) = s.get(&format!("/assistants/{id}/schemas")).await;
    assert_eq!(st, 200);
    assert!(
        schemas["state_schema"]["properties"]["messages"].is_object(),
        "{schemas}"
    );
    let (st, g) = s.get(&format!("/assistants/{id}/graph")).await;
    assert_eq!(st, 200);
    let ids: Vec<&str> = g["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["id"].as_str())
        .collect();
    assert!(ids.contains(&"reply") && ids.contains(&"__start__"), "{g}");
    assert_eq!(
        s.get(&format!("/assistants/{id}/subgraphs")).await,
        (200, json!({}))
    );

    assert_eq!(s.delete(&format!("/assistants/{id}")).await.0, 200);
    assert_eq!(s.get(&format!("/assistants/{id}")).await.0, 404);
    s.stop().await;
}

#[tokio::test]
async fn threads_crud_search_copy_prune() {
    let s = TestServer::sqlite(|_| {}).await;
    let (st, t) = s
        .post(
            "/threads",
            json!({"thread_id": "t-1", "metadata": {"user": "ann"}}),
        )
        .await;
    assert_eq!((st, t["status"].as_str()), (200, Some("idle")));
    assert_eq!(s.post("/threads", json!({"thread_id": "t-1"})).await.0, 409);
    let (st, same) = s
        .post("/threads", json!({"thread_id": "t-1", "if_exists": "do_nothing"}))
        .await;
    assert_eq!((st, same["metadata"]["user"].as_str()), (200, Some("ann")));
    let (st, p) = s
        .patch("/threads/t-1", json!({"metadata": {"tier": "gold"}}))
        .await;
    assert_eq!(st, 200);
    assert_eq!(p["metadata"], json!({"user": "ann", "tier": "gold"}));
    s.post(
        "/threads/t-1/runs/wait",
        json!({"assistant_id": "echo", "input": human("hello")}),
    )
    .await;
    let (_, found) = s
        .post(
            "/threads/search",
            json!({"metadata": {"user": "ann"}, "status": "idle"}),
        )
        .await;
    assert_eq!(found.as_array().unwrap().len(), 1);
    assert_eq!(found[0]["values"]["steps"], 1);
    assert_eq!(
        s.post("/threads/search", json!({"status": "busy"})).await.1,
        json!([])
    );
    assert_eq!(s.post("/threads/count", json!({})).await.1, json!(1));
    assert_eq!(
        s.post("/threads/search", json!({"status": "sleepy"})).await.0,
        422
    );

    let (st, copy) = s.post("/threads/t-1/copy", json!({})).await;
    assert_eq!(st, 200);
    let cid = copy["thread_id"].as_str().unwrap();
    let (_, cstate) = s.get(&format!("/threads/{cid}/state")).await;
    assert_eq!(
        cstate["values"]["messages"][1]["content"], "echo: hello",
        "{cstate}"
    );

    let (st, pr) = s
        .post("/threads/prune", json!({"thread_ids": ["t-1", cid]}))
        .await;
    assert_eq!((st, pr["pruned_count"].as_i64()), (200, Some(2)));
    assert_eq!(s.get("/threads/t-1").await.0, 404);
    assert_eq!(s.delete("/threads/t-1").await.0, 404);
    s.stop().await;
}

#[tokio::test]
async fn wait_stream_state_and_history() {
    let s = TestServer::sqlite(|_| {}).await;
    let t = s.thread().await;
    let r = s
        .http
        .post(s.u(&format!("/threads/{t}/runs/wait")))
        .json(&json!({"assistant_id": "echo", "input": human("one")}))
        .send()
        .await
        .unwrap();
    assert!(r.headers()["location"].to_str().unwrap().ends_with("/join"));
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["messages"][1]["content"], "echo: one", "{v}");
    assert_eq!(v["messages"][1]["type"], "ai");

    let r = s
        .http
        .post(s.u(&format!("/threads/{t}/runs/stream")))
        .json(&json!({"assistant_id": "echo", "input": human("two"), "stream_mode": ["values", "updates"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let loc = r.headers()["content-location"].to_str().unwrap().to_owned();
    assert!(loc.starts_with(&format!("/threads/{t}/runs/")), "{loc}");
    let body = r.text().await.unwrap();
    let events = parse_sse(&body);
    assert_eq!(events[0].0, "metadata", "{body}");
    assert!(events[0].1["run_id"].is_string());
    let names: Vec<&str> = events.iter().map(|e| e.0.as_str()).collect();
    assert!(
        names.contains(&"updates") && names.contains(&"values"),
        "{names:?}"
    );
    let upd = events.iter().find(|e| e.0 == "updates").unwrap();
    assert_eq!(upd.1["reply"]["messages"][0]["content"], "echo: two");
    let last_values = events.iter().rev().find(|e| e.0 == "values").unwrap();
    assert_eq!(last_values.1["messages"].as_array().unwrap().len(), 4);

    let (_, st) = s.get(&format!("/threads/{t}/state")).await;
    assert_eq!(st["values"]["steps"], 2);
    assert_eq!(st["next"], json!([]));
    let cp = st["checkpoint"]["checkpoint_id"].as_str().unwrap().to_owned();
    let (_, hist) = s
        .post(&format!("/threads/{t}/history"), json!({"limit": 100}))
        .await;
    let hist = hist.as_array().unwrap();
    assert!(hist.len() >= 4, "{}", hist.len());
    assert_eq!(hist[0]["checkpoint"]["checkpoint_id"], cp.as_str());
    let (_, h2) = s.get(&format!("/threads/{t}/history?limit=2")).await;
    assert_eq!(h2.as_array().unwrap().len(), 2);
    // An older checkpoint by id.
    let older = hist[2]["checkpoint"]["checkpoint_id"].as_str().unwrap();
    let (st_code, at) = s.get(&format!("/threads/{t}/state/{older}")).await;
    assert_eq!(st_code, 200);
    assert!(at["values"]["steps"].as_i64().unwrap() < 2);
    assert_eq!(s.get(&format!("/threads/{t}/state/nonexistent")).await.0, 404);

    // update_state as a node, then the thread row reflects it.
    let (code, upd) = s
        .post(
            &format!("/threads/{t}/state"),
            json!({"values": {"steps": 10}, "as_node": "reply"}),
        )
        .await;
    assert_eq!(code, 200, "{upd}");
    assert!(upd["checkpoint"]["checkpoint_id"].is_string());
    assert_eq!(
        s.get(&format!("/threads/{t}/state")).await.1["values"]["steps"],
        12
    );
    assert_eq!(s.get(&format!("/threads/{t}")).await.1["values"]["steps"], 12);
    let (code, _) = s
        .post(
            &format!("/threads/{t}/state"),
            json!({"values": {"steps": 1}, "as_node": "ghost"}),
        )
        .await;
    assert_eq!(code, 422);

    // Runs of the thread.
    let (_, runs) = s.get(&format!("/threads/{t}/runs")).await;
    assert_eq!(runs.as_array().unwrap().len(), 2);
    assert!(runs.as_array().unwrap().iter().all(|r| r["status"] == "success"));
    assert!(runs[0]["kwargs"].get("owner").is_none());
    s.stop().await;
}

#[tokio::test]
async fn interrupt_then_resume_with_a_command() {
    let s = TestServer::sqlite(|_| {}).await;
    let t = s.thread().await;
    let (_, v) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "approval", "input": human("pay 40")}),
        )
        .await;
    let ints = v["__interrupt__"].as_array().unwrap();
    assert_eq!(ints[0]["value"]["question"], "approve?", "{v}");
    let (_, th) = s.get(&format!("/threads/{t}")).await;
    assert_eq!(th["status"], "interrupted");
    assert_eq!(th["interrupts"].as_object().unwrap().len(), 1);
    let (_, st) = s.get(&format!("/threads/{t}/state")).await;
    assert_eq!(st["next"], json!(["ask"]));
    assert_eq!(st["tasks"][0]["interrupts"][0]["value"]["question"], "approve?");

    // A resume streamed in values mode: the final state has the decision.
    let body = s
        .http
        .post(s.u(&format!("/threads/{t}/runs/stream")))
        .json(&json!({"assistant_id": "approval", "command": {"resume": "yes"}, "stream_mode": "values"}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events = parse_sse(&body);
    let last = events.iter().rev().find(|e| e.0 == "values").unwrap();
    assert_eq!(last.1["decision"], "yes", "{body}");
    assert_eq!(last.1["messages"][1]["content"], "decided: yes");
    let (_, th) = s.get(&format!("/threads/{t}")).await;
    assert_eq!(
        (th["status"].as_str(), th["interrupts"].clone()),
        (Some("idle"), json!({}))
    );

    // Interrupts surface as updates when asked for.
    let t2 = s.thread().await;
    let body = s
        .http
        .post(s.u(&format!("/threads/{t2}/runs/stream")))
        .json(&json!({"assistant_id": "approval", "input": human("x"), "stream_mode": ["updates"]}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events = parse_sse(&body);
    assert!(
        events
            .iter()
            .any(|e| e.0 == "updates" && e.1["__interrupt__"][0]["id"].is_string()),
        "{body}"
    );
    s.stop().await;
}

#[tokio::test]
async fn multitask_reject_enqueue_and_interrupt() {
    let s = TestServer::sqlite(|_| {}).await;
    let t = s.thread().await;
    let (st, first) = s
        .post(
            &format!("/threads/{t}/runs"),
            json!({"assistant_id": "slow", "input": {"sleep_ms": 800}}),
        )
        .await;
    assert_eq!(st, 200, "{first}");
    assert_eq!(first["status"], "pending");
    let first_id = first["run_id"].as_str().unwrap().to_owned();
    // reject: 409 while the thread has an active run.
    let (st, e) = s
        .post(
            &format!("/threads/{t}/runs"),
            json!({"assistant_id": "slow", "input": {"sleep_ms": 1}, "multitask_strategy": "reject"}),
        )
        .await;
    assert_eq!(st, 409, "{e}");
    // enqueue: runs after the first.
    let (_, second) = s
        .post(
            &format!("/threads/{t}/runs"),
            json!({"assistant_id": "slow", "input": {"sleep_ms": 1}, "multitask_strategy": "enqueue"}),
        )
        .await;
    let second_id = second["run_id"].as_str().unwrap().to_owned();
    let r1 = s.wait_run(&t, &first_id).await;
    let r2 = s.wait_run(&t, &second_id).await;
    assert_eq!(
        (r1["status"].as_str(), r2["status"].as_str()),
        (Some("success"), Some("success"))
    );
    assert!(r2["updated_at"].as_str() >= r1["updated_at"].as_str());
    assert_eq!(
        s.get(&format!("/threads/{t}/state")).await.1["values"]["steps"],
        2
    );

    // interrupt: the running run is stopped (interrupted) and the new one runs.
    let (_, long) = s
        .post(
            &format!("/threads/{t}/runs"),
            json!({"assistant_id": "slow", "input": {"sleep_ms": 30000}}),
        )
        .await;
    let long_id = long["run_id"].as_str().unwrap().to_owned();
    for _ in 0..200 {
        if s.get(&format!("/threads/{t}/runs/{long_id}")).await.1["status"] == "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (_, new) = s
        .post(
            &format!("/threads/{t}/runs"),
            json!({"assistant_id": "slow", "input": {"sleep_ms": 1}, "multitask_strategy": "interrupt"}),
        )
        .await;
    let r_long = s.wait_run(&t, &long_id).await;
    let r_new = s.wait_run(&t, new["run_id"].as_str().unwrap()).await;
    assert_eq!(r_long["status"], "interrupted");
    assert_eq!(r_new["status"], "success");
    // The stopped run says which strategy of which run stopped it; the other did not stop.
    assert_eq!(
        r_long["cancel_reason"],
        format!(
            "multitask strategy interrupt: run {}",
            new["run_id"].as_str().unwrap()
        )
    );
    assert_eq!(r_new["cancel_reason"], Value::Null);
    s.stop().await;
}

#[tokio::test]
async fn subgraphs_list_namespaces_with_schemas() {
    let s = TestServer::sqlite(|_| {}).await;
    let (st, subs) = s.get("/assistants/chatty/subgraphs").await;
    assert_eq!(st, 200);
    let inner = &subs["inner"];
    assert!(
        inner["state_schema"]["properties"]["decision"].is_object(),
        "{subs}"
    );
    assert_eq!(inner["input_schema"], inner["state_schema"]);
    assert_eq!(subs.as_object().map(|m| m.len()), Some(1), "{subs}");
    assert_eq!(
        s.get("/assistants/chatty/subgraphs/inner?recurse=true").await.1,
        subs
    );
    assert_eq!(s.get("/assistants/chatty/subgraphs/nope").await, (200, json!({})));
    assert_eq!(
        s.get("/assistants/echo/subgraphs?recurse=maybe").await,
        (200, json!({}))
    );
    assert_eq!(s.get("/assistants/no-such/subgraphs").await.0, 404);
    s.stop().await;
}

#[tokio::test]
async fn cancel_a_running_and_a_pending_run() {
    let s = TestServer::sqlite(|c| c.workers = 1).await;
    let t = s.thread().await;
    let t2 = s.thread().await;
    let (_, running) = s
        .post(
            &format!("/threads/{t}/runs"),
            json!({"assistant_id": "slow", "input": {"sleep_ms": 30000}}),
        )
        .await;
    let rid = running["run_id"].as_str().unwrap().to_owned();
    for _ in 0..200 {
        if s.get(&format!("/threads/{t}/runs/{rid}")).await.1["status"] == "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // One worker is busy: this one stays pending.
    let (_, pending) = s
        .post(
            &format!("/threads/{t2}/runs"),
            json!({"assistant_id": "slow", "input": {"sleep_ms": 1}}),
        )
        .await;
    let pid = pending["run_id"].as_str().unwrap().to_owned();
    let r = s
        .http
        .post(s.u(&format!("/threads/{t2}/runs/{pid}/cancel")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let cancelled = s.get(&format!("/threads/{t2}/runs/{pid}")).await.1;
    assert_eq!(cancelled["status"], "interrupted");
    // Auth is off: nobody to name.
    assert_eq!(cancelled["cancel_reason"], "requested");
    let r = s
        .http
        .post(s.u(&format!("/threads/{t}/runs/{rid}/cancel?wait=1")))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let run = s.wait_run(&t, &rid).await;
    assert_eq!(run["status"], "interrupted");
    assert_eq!(run["cancel_reason"], "requested");
    assert_eq!(s.get(&format!("/threads/{t}")).await.1["status"], "idle");
    // A finished run can be deleted; an unknown one is 404.
    assert_eq!(s.delete(&format!("/threads/{t}/runs/{rid}")).await.0, 204);
    assert_eq!(s.get(&format!("/threads/{t}/runs/{rid}")).await.0, 404);
    s.stop().await;
}

#[tokio::test]
async fn stateless_runs_use_a_temporary_thread() {
    let s = TestServer::sqlite(|_| {}).await;
    let (st, v) = s
        .post(
            "/runs/wait",
            json!({"assistant_id": "echo", "input": human("solo")}),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(v["messages"][1]["content"], "echo: solo");
    // on_completion=delete (the default): no thread is left.
    assert_eq!(s.post("/threads/count", json!({})).await.1, json!(0));
    let (_, v) = s
        .post(
            "/runs/wait",
            json!({"assistant_id": "echo", "input": human("kept"), "on_completion": "keep"}),
        )
        .await;
    assert_eq!(v["steps"], 1);
    assert_eq!(s.post("/threads/count", json!({})).await.1, json!(1));
    let body = s
        .http
        .post(s.u("/runs/stream"))
        .json(&json!({"assistant_id": "echo", "input": human("s"), "stream_mode": ["updates"]}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(parse_sse(&body).iter().any(|e| e.0 == "updates"), "{body}");
    s.stop().await;
}

#[tokio::test]
async fn store_items_search_and_namespaces() {
    let s = TestServer::sqlite(|_| {}).await;
    for (ns, key, v) in [
        (json!(["users", "ann"]), "pref", json!({"color": "blue"})),
        (json!(["users", "bob"]), "pref", json!({"color": "red"})),
    ] {
        let r = s
            .http
            .put(s.u("/store/items"))
            .json(&json!({"namespace": ns, "key": key, "value": v}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 204);
    }
    let (st, item) = s.get("/store/items?namespace=users.ann&key=pref").await;
    assert_eq!((st, item["value"]["color"].as_str()), (200, Some("blue")));
    let (_, found) = s
        .post(
            "/store/items/search",
            json!({"namespace_prefix": ["users"], "filter": {"color": "red"}}),
        )
        .await;
    assert_eq!(found["items"].as_array().unwrap().len(), 1);
    assert_eq!(found["items"][0]["namespace"], json!(["users", "bob"]));
    let (_, ns) = s
        .post("/store/namespaces", json!({"prefix": ["users"], "max_depth": 2}))
        .await;
    assert_eq!(ns["namespaces"].as_array().unwrap().len(), 2);
    let r = s
        .http
        .delete(s.u("/store/items"))
        .json(&json!({"namespace": ["users", "ann"], "key": "pref"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    assert_eq!(s.get("/store/items?namespace=users.ann&key=pref").await.0, 404);
    let (st, _) = s
        .post("/store/items/search", json!({"namespace_prefix": "users"}))
        .await;
    assert_eq!(st, 422);
    s.stop().await;
}

#[tokio::test]
async fn resumable_stream_reconnects_with_last_event_id() {
    let s = TestServer::sqlite(|_| {}).await;
    let t = s.thread().await;
    let (_, run) = s
        .post(
            &format!("/threads/{t}/runs"),
            json!({"assistant_id": "echo", "input": human("r"), "stream_mode": ["values", "updates"], "stream_resumable": true}),
        )
        .await;
    let rid = run["run_id"].as_str().unwrap().to_owned();
    s.wait_run(&t, &rid).await;
    let full = s
        .http
        .get(s.u(&format!("/threads/{t}/runs/{rid}/stream")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let all = parse_sse(&full);
    assert!(all.len() >= 3, "{full}");
    assert!(
        all.iter().all(|e| e.2.is_some()),
        "resumable streams carry ids: {full}"
    );
    let after = all[1].2.clone().unwrap();
    let rest = s
        .http
        .get(s.u(&format!("/threads/{t}/runs/{rid}/stream")))
        .header("last-event-id", &after)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let rest = parse_sse(&rest);
    assert_eq!(rest.len(), all.len() - 2);
    assert_eq!(rest[0].2, all[2].2);
    // join returns the final values.
    let (st, v) = s.get(&format!("/threads/{t}/runs/{rid}/join")).await;
    assert_eq!((st, v["steps"].as_i64()), (200, Some(1)));
    s.stop().await;

    // After a restart on the same file the log comes from the database, the same events
    // with the same ids, and Last-Event-ID still works.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("restart.db");
    let first = TestServer::start(graphloom_server::ServerConfig::sqlite(&path)).await;
    let t = first.thread().await;
    let (_, run) = first
        .post(
            &format!("/threads/{t}/runs"),
            json!({"assistant_id": "chatty", "input": human("r"), "stream_mode": ["custom", "values"], "stream_resumable": true}),
        )
        .await;
    let rid = run["run_id"].as_str().unwrap().to_owned();
    first.wait_run(&t, &rid).await;
    let stream = |s: &TestServer, last: Option<String>| {
        let mut req = s.http.get(s.u(&format!("/threads/{t}/runs/{rid}/stream")));
        if let Some(id) = last {
            req = req.header("last-event-id", id);
        }
        async move { parse_sse(&req.send().await.unwrap().text().await.unwrap()) }
    };
    let before = stream(&first, None).await;
    assert!(before.iter().any(|e| e.0 == "custom"), "{before:?}");
    first.stop().await;
    let second = TestServer::start(graphloom_server::ServerConfig::sqlite(&path)).await;
    assert_eq!(stream(&second, None).await, before);
    assert_eq!(stream(&second, before[1].2.clone()).await, before[2..].to_vec());
    second.stop().await;
}
