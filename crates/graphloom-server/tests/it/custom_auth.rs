//! A custom [`Auth`]: authentication from headers, authorisation per resource and action
//! with metadata filters and stamps (LangGraph's `@auth.on`), the identity handed to the
//! graphs, and every route of the API classified. On SQLite and on PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{human, split, Chat, ChatUpdate, TestServer};
use graphloom_core::*;
use graphloom_server::auth::{route_action, Action, Auth, AuthError, AuthRequest, Grant, Identity, Resource};
use graphloom_server::{factory, GraphDeps, ServerConfig};
use serde_json::{json, Value};
use std::sync::Arc;

/// `x-user: <name>` authenticates as owner `acme` with permission `user:<name>`; the
/// team is `x-team`. Threads and runs are filtered by team and stamped with it; only
/// `admin` deletes; the store is closed to `intern`; `viewer` starts no runs.
struct Teams;

impl Auth for Teams {
    async fn authenticate(&self, req: &axum::http::request::Parts) -> Result<Identity, AuthError> {
        let header = |k: &str| {
            req.headers
                .get(k)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let user = header("x-user").ok_or_else(|| AuthError::unauthenticated("x-user is missing"))?;
        let team = header("x-team").unwrap_or_else(|| "none".into());
        Ok(Identity::new("acme")
            .with_permissions([user.clone()])
            .with_display_name(user)
            .with_extra("team", team))
    }

    async fn authorize(&self, req: &AuthRequest<'_>) -> Result<Grant, AuthError> {
        let user = req.identity.permissions.first().cloned().unwrap_or_default();
        if req.action == Action::Delete && user != "admin" {
            return Err(AuthError::forbidden("only admin deletes"));
        }
        if req.resource == Resource::Store && user == "intern" {
            return Err(AuthError::forbidden("no store for interns"));
        }
        if req.resource == Resource::Runs && req.action == Action::Create && user == "viewer" {
            return Err(AuthError::forbidden("viewers start no runs"));
        }
        let team = req.identity.extra["team"].clone();
        Ok(match req.resource {
            Resource::Threads | Resource::Runs => {
                Grant::allow().filter("team", team.clone()).stamp("team", team)
            }
            _ => Grant::allow(),
        })
    }
}

/// `whoami`: writes the identity the run's context carries into `decision`.
fn whoami(deps: &GraphDeps) -> graphloom_core::Result<CompiledGraph<Chat>> {
    StateGraph::<Chat>::new()
        .add_node("look", |_s: Arc<Chat>, rt: Runtime| async move {
            let ctx = rt.context::<Value>().cloned().unwrap_or(Value::Null);
            let seen = json!({
                "id": ctx["langgraph_auth_user_id"],
                "permissions": ctx["langgraph_auth_permissions"],
                "team": ctx["langgraph_auth_user"]["team"],
                "name": ctx["langgraph_auth_user"]["display_name"],
                "mine": ctx["mine"],
            });
            Ok(ChatUpdate::new().decision(seen.to_string()).steps(1))
        })
        .add_edge(START, "look")
        .add_edge("look", END)
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .compile()
}

async fn start(cfg: ServerConfig) -> TestServer {
    TestServer::start_with(cfg, |b| b.graph("whoami", factory(whoami)).auth(Teams)).await
}

async fn call(
    s: &TestServer,
    who: (&str, &str),
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut rb = s
        .http
        .request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), s.u(path))
        .header("x-user", who.0)
        .header("x-team", who.1);
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    split(rb.send().await.unwrap()).await
}

const RED: (&str, &str) = ("ann", "red");
const BLUE: (&str, &str) = ("bob", "blue");
const RED_ADMIN: (&str, &str) = ("admin", "red");

async fn filters_and_stamps(s: &TestServer) {
    // Authentication runs first: no header, 401.
    let (st, b) = split(s.http.get(s.u("/threads/x")).send().await.unwrap()).await;
    assert_eq!((st, b["detail"].as_str()), (401, Some("x-user is missing")));

    // A thread is stamped with the creator's team (over what the client sent).
    let (st, t) = call(
        s,
        RED,
        "POST",
        "/threads",
        Some(json!({"metadata": {"team": "blue", "k": 1}})),
    )
    .await;
    assert_eq!(st, 200, "{t}");
    assert_eq!(t["metadata"]["team"], "red");
    assert_eq!(t["metadata"]["k"], 1);
    let red = t["thread_id"].as_str().unwrap().to_owned();
    let (_, t) = call(s, BLUE, "POST", "/threads", None).await;
    let blue = t["thread_id"].as_str().unwrap().to_owned();
    assert_eq!(t["metadata"]["team"], "blue");

    // The other team's thread is not found on every route, search and count included.
    for (m, p, body) in [
        ("GET", format!("/threads/{red}"), None),
        ("GET", format!("/threads/{red}/state"), None),
        ("GET", format!("/threads/{red}/history"), None),
        ("POST", format!("/threads/{red}/history"), Some(json!({}))),
        (
            "PATCH",
            format!("/threads/{red}"),
            Some(json!({"metadata": {"x": 1}})),
        ),
        (
            "POST",
            format!("/threads/{red}/state"),
            Some(json!({"values": {"decision": "x"}})),
        ),
        ("POST", format!("/threads/{red}/copy"), Some(json!({}))),
        ("GET", format!("/threads/{red}/runs"), None),
        (
            "POST",
            format!("/threads/{red}/runs/wait"),
            Some(json!({"assistant_id": "whoami"})),
        ),
    ] {
        let (st, b) = call(s, BLUE, m, &p, body).await;
        assert_eq!(st, 404, "{m} {p}: {b}");
        assert_eq!(b["detail"], format!("thread {red} not found"), "{m} {p}");
    }
    let (_, found) = call(s, BLUE, "POST", "/threads/search", Some(json!({"limit": 100}))).await;
    let ids: Vec<&str> = found
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["thread_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [blue.as_str()]);
    let (_, n) = call(s, BLUE, "POST", "/threads/count", Some(json!({}))).await;
    assert_eq!(n, 1);
    // Asking for the other team's metadata finds nothing, not the other team's threads.
    let (st, found) = call(
        s,
        BLUE,
        "POST",
        "/threads/search",
        Some(json!({"metadata": {"team": "red"}})),
    )
    .await;
    assert_eq!((st, found), (200, json!([])));
    let (_, n) = call(
        s,
        BLUE,
        "POST",
        "/threads/count",
        Some(json!({"metadata": {"team": "red"}})),
    )
    .await;
    assert_eq!(n, 0);
    let (_, found) = call(
        s,
        RED,
        "POST",
        "/threads/search",
        Some(json!({"metadata": {"k": 1}})),
    )
    .await;
    assert_eq!(found.as_array().unwrap().len(), 1);

    // A run on one's own thread: its metadata stamped, the identity in its context.
    let (st, out) = call(
        s,
        RED,
        "POST",
        &format!("/threads/{red}/runs/wait"),
        Some(
            json!({"assistant_id": "whoami", "input": human("hi"), "context": {"mine": 7},
            "config": {"configurable": {"langgraph_auth_user_id": "forged"}}}),
        ),
    )
    .await;
    assert_eq!(st, 200, "{out}");
    let seen: Value = serde_json::from_str(out["decision"].as_str().unwrap()).unwrap();
    assert_eq!(
        seen,
        json!({"id": "acme", "permissions": ["ann"], "team": "red", "name": "ann", "mine": 7})
    );
    let (_, runs) = call(s, RED, "GET", &format!("/threads/{red}/runs"), None).await;
    let run = &runs[0];
    assert_eq!(run["metadata"]["team"], "red");
    assert_eq!(
        run["kwargs"]["config"]["configurable"]["langgraph_auth_user_id"],
        "acme"
    );
    let run_id = run["run_id"].as_str().unwrap();
    let (st, _) = call(s, BLUE, "GET", &format!("/threads/{red}/runs/{run_id}"), None).await;
    assert_eq!(st, 404);
    // Without a context of its own the graph reads the identity from `configurable`.
    let (_, out) = call(
        s,
        BLUE,
        "POST",
        "/runs/wait",
        Some(json!({"assistant_id": "whoami", "input": human("hi"),
            "config": {"configurable": {"langgraph_auth_user_id": "forged", "mine": 1}}})),
    )
    .await;
    let seen: Value = serde_json::from_str(out["decision"].as_str().unwrap()).unwrap();
    assert_eq!(seen["id"], "acme");
    assert_eq!(seen["team"], "blue");
    assert_eq!(seen["mine"], 1);

    // Refusals are 403 and change nothing.
    let (st, b) = call(s, RED, "DELETE", &format!("/threads/{red}"), None).await;
    assert_eq!((st, b["detail"].as_str()), (403, Some("only admin deletes")));
    let (st, _) = call(s, RED, "GET", &format!("/threads/{red}"), None).await;
    assert_eq!(st, 200);
    let (st, _) = call(
        s,
        ("intern", "red"),
        "POST",
        "/store/items/search",
        Some(json!({})),
    )
    .await;
    assert_eq!(st, 403);
    let (st, b) = call(
        s,
        RED,
        "PUT",
        "/store/items",
        Some(json!({"namespace": ["a"], "key": "k", "value": {"v": 1}})),
    )
    .await;
    assert_eq!(st, 204, "{b}");
    // Prune deletes only the threads the filter shows; the admin of red cannot touch blue.
    let (st, b) = call(
        s,
        RED_ADMIN,
        "POST",
        "/threads/prune",
        Some(json!({"thread_ids": [red, blue]})),
    )
    .await;
    assert_eq!(st, 200, "{b}");
    let (st, _) = call(s, BLUE, "GET", &format!("/threads/{blue}"), None).await;
    assert_eq!(st, 200);
    let (st, _) = call(s, RED_ADMIN, "GET", &format!("/threads/{red}"), None).await;
    assert_eq!(st, 404);
    let (st, _) = call(s, RED_ADMIN, "DELETE", &format!("/threads/{blue}"), None).await;
    assert_eq!(st, 404);
    // A body that is not JSON still reaches its handler for a 422.
    let r = s
        .http
        .post(s.u("/threads/search"))
        .header("x-user", "ann")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 422);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_auth_filters_stamps_and_refuses_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(ServerConfig::sqlite(dir.path().join("graphloom.db"))).await;
    filters_and_stamps(&s).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_auth_filters_stamps_and_refuses_on_postgres() {
    let (url, _db) = graphloom_postgres::testing::test_database().await;
    let s = start(ServerConfig::postgres(url)).await;
    filters_and_stamps(&s).await;
    s.stop().await;
}

/// Every route of the OpenAPI document is authorised as an action on a resource, but the
/// system routes: a route added without a rule would skip `authorize`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_route_is_authorised_as_an_action() {
    let s = TestServer::sqlite(|_| {}).await;
    let (_, doc) = s.get("/openapi.json").await;
    let mut missing = Vec::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys() {
            let m = axum::http::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let system = ["/ok", "/info", "/metrics", "/openapi.json"].contains(&path.as_str());
            if route_action(&m, path).is_some() == system {
                missing.push(format!("{method} {path}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "routes without a rule (or system routes with one): {missing:?}"
    );
    assert_eq!(
        route_action(&axum::http::Method::DELETE, "/runs/crons/{cron_id}"),
        Some((Resource::Crons, Action::Delete))
    );
    s.stop().await;
}

/// The thread-centric protocol under a custom `Auth`: the thread a first `run.start`
/// creates carries the grant's stamp, so its creator finds it and another team does not;
/// over the WebSocket (whose upgrade is a thread read) each command is authorised as over
/// HTTP, and the runs it starts carry the identity's claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_protocol_commands_are_authorised_and_stamped() {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::Message;

    let s = TestServer::sqlite_with(|_| {}, |b| b.graph("whoami", factory(whoami)).auth(Teams)).await;
    let idle = |t: String, who: (&'static str, &'static str)| {
        let s = &s;
        async move {
            for _ in 0..400 {
                let (st, b) = call(s, who, "GET", &format!("/threads/{t}"), None).await;
                assert_eq!(st, 200, "{b}");
                if b["status"] == "idle" {
                    return b;
                }
                tokio::time::sleep(std::time::Duration::from_millis(25)).await;
            }
            panic!("thread {t} never went idle");
        }
    };
    let seen = |t: String, who: (&'static str, &'static str)| {
        let s = &s;
        async move {
            let (st, b) = call(s, who, "GET", &format!("/threads/{t}/state"), None).await;
            assert_eq!(st, 200, "{b}");
            serde_json::from_str::<Value>(b["values"]["decision"].as_str().unwrap()).unwrap()
        }
    };

    // Over HTTP: the client names a new thread; run.start creates it, stamped.
    let t = uuid::Uuid::new_v4().to_string();
    let (st, b) = call(
        &s,
        RED,
        "POST",
        &format!("/threads/{t}/commands"),
        Some(json!({"id": 1, "method": "run.start",
            "params": {"assistant_id": "whoami", "input": human("hi"), "metadata": {"team": "blue"}}})),
    )
    .await;
    assert_eq!(st, 200, "{b}");
    assert!(b["result"]["run_id"].is_string(), "{b}");
    let thread = idle(t.clone(), RED).await;
    assert_eq!(thread["metadata"]["team"], "red", "{thread}");
    let (st, _) = call(&s, BLUE, "GET", &format!("/threads/{t}"), None).await;
    assert_eq!(st, 404);
    let (st, _) = call(
        &s,
        BLUE,
        "POST",
        &format!("/threads/{t}/commands"),
        Some(json!({"id": 2, "method": "state.get", "params": {}})),
    )
    .await;
    assert_eq!(st, 404);
    let (st, runs) = call(&s, RED, "GET", &format!("/threads/{t}/runs"), None).await;
    assert_eq!(st, 200, "{runs}");
    assert_eq!(runs[0]["metadata"]["team"], "red", "{runs}");

    // Over the WebSocket.
    let socket = |t: String, who: (&'static str, &'static str)| {
        let url = format!("{}/threads/{t}/stream/events", s.url.replacen("http", "ws", 1));
        async move {
            let mut req = url.into_client_request().unwrap();
            req.headers_mut().insert("x-user", who.0.parse().unwrap());
            req.headers_mut().insert("x-team", who.1.parse().unwrap());
            tokio_tungstenite::connect_async(req).await.unwrap().0
        }
    };
    async fn answer<S>(ws: &mut S, id: u64) -> Value
    where
        S: futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
    {
        loop {
            let m = tokio::time::timeout(std::time::Duration::from_secs(20), ws.next())
                .await
                .expect("no answer within 20 s")
                .expect("the socket closed")
                .unwrap();
            if let Message::Text(text) = m {
                let v: Value = serde_json::from_str(&text).unwrap();
                if v["id"] == id {
                    return v;
                }
            }
        }
    }
    // A viewer may follow the thread, not start a run on it.
    const RED_VIEWER: (&str, &str) = ("viewer", "red");
    let mut ws = socket(t.clone(), RED_VIEWER).await;
    ws.send(Message::text(
        json!({"id": 1, "method": "subscription.subscribe", "params": {"channels": ["values"]}}).to_string(),
    ))
    .await
    .unwrap();
    let ok = answer(&mut ws, 1).await;
    assert_eq!(ok["type"], "success", "{ok}");
    ws.send(Message::text(
        json!({"id": 2, "method": "run.start", "params": {"assistant_id": "whoami", "input": human("no")}})
            .to_string(),
    ))
    .await
    .unwrap();
    let refused = answer(&mut ws, 2).await;
    assert_eq!(refused["error"], "permission_denied", "{refused}");
    let (_, runs) = call(&s, RED, "GET", &format!("/threads/{t}/runs"), None).await;
    assert_eq!(
        runs.as_array().unwrap().len(),
        1,
        "the refused command started nothing: {runs}"
    );
    drop(ws);

    // Another team cannot open the thread's socket: the upgrade is a read it may not make.
    let url = format!("{}/threads/{t}/stream/events", s.url.replacen("http", "ws", 1));
    let mut req = url.into_client_request().unwrap();
    req.headers_mut().insert("x-user", BLUE.0.parse().unwrap());
    req.headers_mut().insert("x-team", BLUE.1.parse().unwrap());
    match tokio_tungstenite::connect_async(req).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => assert_eq!(r.status(), 404),
        other => panic!("another team's socket opened: {:?}", other.map(|_| ())),
    }

    // A run started over the socket: its thread stamped, the identity's claims in its context.
    let t2 = uuid::Uuid::new_v4().to_string();
    let mut ws = socket(t2.clone(), RED).await;
    ws.send(Message::text(
        json!({"id": 4, "method": "run.start", "params": {"assistant_id": "whoami", "input": human("hi")}})
            .to_string(),
    ))
    .await
    .unwrap();
    let started = answer(&mut ws, 4).await;
    assert_eq!(started["type"], "success", "{started}");
    let thread = idle(t2.clone(), RED).await;
    assert_eq!(thread["metadata"]["team"], "red", "{thread}");
    let who = seen(t2.clone(), RED).await;
    assert_eq!(who["id"], "acme", "{who}");
    assert_eq!(who["team"], "red", "{who}");
    assert_eq!(who["name"], "ann", "{who}");
    assert_eq!(who["permissions"], json!(["ann"]), "{who}");
    drop(ws);
    s.stop().await;
}
