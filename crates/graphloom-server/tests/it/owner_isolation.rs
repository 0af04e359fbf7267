//! With API keys, one owner learns nothing of another's resources: ids taken by another
//! owner are "not found" on create as on every other route, what a graph writes to the
//! store during an owner's run is that owner's, and the system routes need a key unless
//! configured public.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{human, split, TestServer};
use graphloom_core::store::{PutOptions, SearchQuery};
use graphloom_core::*;
use graphloom_server::{factory, GraphDeps, ServerConfig};
use serde_json::{json, Value};
use std::sync::Arc;

const ANN: &str = "key-ann";
const BOB: &str = "key-bob";

/// A server with two owners (and the `remember` graph).
async fn two_owners(tune: impl FnOnce(&mut ServerConfig)) -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ServerConfig::sqlite(dir.path().join("graphloom.db"));
    cfg.api_keys.insert(ANN.into(), "ann".into());
    cfg.api_keys.insert(BOB.into(), "bob".into());
    tune(&mut cfg);
    let s = TestServer::start_with(cfg, |b| b.graph("remember", factory(remember))).await;
    (s, dir)
}

async fn call(
    s: &TestServer,
    key: Option<&str>,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut rb = s
        .http
        .request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), s.u(path));
    if let Some(k) = key {
        rb = rb.header("x-api-key", k);
    }
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    split(rb.send().await.unwrap()).await
}

/// `remember`: answers with the note the store holds for `notes/<conversation>` (the
/// conversation is the first word of the message), then keeps the message as the new note.
fn remember(deps: &GraphDeps) -> graphloom_core::Result<CompiledGraph<common::Chat>> {
    StateGraph::<common::Chat>::new()
        .add_node("note", |s: Arc<common::Chat>, rt: Runtime| async move {
            let store = rt.store().ok_or_else(|| NodeError::fatal("no store"))?;
            let text = s.messages.iter().last().map(Message::text).unwrap_or_default();
            let conversation = text.split_whitespace().next().unwrap_or("none").to_owned();
            let ns = vec!["notes".to_owned(), conversation];
            let fail = |e: graphloom_core::Error| NodeError::fatal(e.to_string());
            let prior = store.get(&ns, "last").await.map_err(fail)?;
            let others = store
                .search(&["notes".to_owned()], SearchQuery::new().limit(100))
                .await
                .map_err(fail)?
                .len();
            store
                .put(&ns, "last", json!({"text": text}), PutOptions::default())
                .await
                .map_err(fail)?;
            let seen = prior.map(|i| i.value["text"].as_str().unwrap_or_default().to_owned());
            Ok(common::ChatUpdate::new()
                .messages(vec![Message::ai(format!(
                    "previously: {}; notes seen: {others}",
                    seen.unwrap_or_default()
                ))])
                .steps(1))
        })
        .add_edge(START, "note")
        .add_edge("note", END)
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .store_dyn(Arc::clone(&deps.store))
        .compile()
}

async fn remember_as(s: &TestServer, key: Option<&str>, text: &str) -> String {
    let (st, out) = call(
        s,
        key,
        "POST",
        "/runs/wait",
        Some(json!({"assistant_id": "remember", "input": human(text)})),
    )
    .await;
    assert_eq!(st, 200, "{out}");
    out["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn what_a_graph_writes_to_the_store_belongs_to_the_runs_owner() {
    let (s, _dir) = two_owners(|_| {}).await;
    assert_eq!(
        remember_as(&s, Some(ANN), "c1 ann likes tea").await,
        "previously: ; notes seen: 0"
    );
    // Bob's run on the same conversation reads nothing of Ann's.
    assert_eq!(
        remember_as(&s, Some(BOB), "c1 bob likes coffee").await,
        "previously: ; notes seen: 0"
    );
    assert_eq!(
        remember_as(&s, Some(ANN), "c1 ann again").await,
        "previously: c1 ann likes tea; notes seen: 1"
    );
    // Through /store each owner sees the graph's items under the names the graph used.
    let (st, item) = call(
        &s,
        Some(ANN),
        "GET",
        "/store/items?namespace=notes.c1&key=last",
        None,
    )
    .await;
    assert_eq!(st, 200, "{item}");
    assert_eq!(item["namespace"], json!(["notes", "c1"]));
    assert_eq!(item["value"]["text"], "c1 ann again");
    let (_, item) = call(
        &s,
        Some(BOB),
        "GET",
        "/store/items?namespace=notes.c1&key=last",
        None,
    )
    .await;
    assert_eq!(item["value"]["text"], "c1 bob likes coffee");
    let (_, found) = call(&s, Some(BOB), "POST", "/store/items/search", Some(json!({}))).await;
    let texts: Vec<&str> = found["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["value"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, vec!["c1 bob likes coffee"]);
    let (_, ns) = call(&s, Some(ANN), "POST", "/store/namespaces", Some(json!({}))).await;
    assert_eq!(ns["namespaces"], json!([["notes", "c1"]]));
    // An item Bob puts through /store is what Bob's next run reads.
    let (st, _) = call(
        &s,
        Some(BOB),
        "PUT",
        "/store/items",
        Some(json!({"namespace": ["notes", "c2"], "key": "last", "value": {"text": "from the api"}})),
    )
    .await;
    assert_eq!(st, 204);
    assert_eq!(
        remember_as(&s, Some(BOB), "c2 hello").await,
        "previously: from the api; notes seen: 2"
    );
    assert_eq!(
        remember_as(&s, Some(ANN), "c2 hello").await,
        "previously: ; notes seen: 1"
    );
    // Deleting through /store is the owner's own too.
    let (st, _) = call(
        &s,
        Some(ANN),
        "DELETE",
        "/store/items",
        Some(json!({"namespace": ["notes", "c1"], "key": "last"})),
    )
    .await;
    assert_eq!(st, 204);
    assert_eq!(
        remember_as(&s, Some(BOB), "c1 bob").await,
        "previously: c1 bob likes coffee; notes seen: 2"
    );
    s.stop().await;
}

#[tokio::test]
async fn with_auth_off_graphs_write_the_store_as_they_name_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ServerConfig::sqlite(dir.path().join("graphloom.db"));
    let s = TestServer::start_with(cfg, |b| b.graph("remember", factory(remember))).await;
    remember_as(&s, None, "c1 hello").await;
    let (st, item) = call(&s, None, "GET", "/store/items?namespace=notes.c1&key=last", None).await;
    assert_eq!((st, item["value"]["text"].as_str()), (200, Some("c1 hello")));
    let (_, ns) = call(&s, None, "POST", "/store/namespaces", Some(json!({}))).await;
    assert_eq!(ns["namespaces"], json!([["notes", "c1"]]));
    s.stop().await;
}

#[tokio::test]
async fn another_owners_ids_are_not_found_on_create() {
    let (s, _dir) = two_owners(|_| {}).await;
    let (st, _) = call(
        &s,
        Some(ANN),
        "POST",
        "/threads",
        Some(json!({"thread_id": "ann-1"})),
    )
    .await;
    assert_eq!(st, 200);
    // Bob: "not found", whatever the way of asking, as GET /threads/ann-1 answers.
    for body in [
        json!({"thread_id": "ann-1"}),
        json!({"thread_id": "ann-1", "if_exists": "do_nothing"}),
        json!({"thread_id": "ann-1", "if_exists": "raise"}),
    ] {
        let (st, e) = call(&s, Some(BOB), "POST", "/threads", Some(body.clone())).await;
        assert_eq!(st, 404, "{body}: {e}");
        assert!(!e.to_string().contains("exists"), "{e}");
    }
    assert_eq!(call(&s, Some(BOB), "GET", "/threads/ann-1", None).await.0, 404);
    assert_eq!(
        call(&s, Some(BOB), "POST", "/threads/ann-1/copy", None).await.0,
        404
    );
    let (st, e) = call(
        &s,
        Some(BOB),
        "POST",
        "/threads/ann-1/runs/wait",
        Some(json!({"assistant_id": "echo", "if_not_exists": "create", "input": human("x")})),
    )
    .await;
    assert_eq!(st, 404, "{e}");
    let (st, e) = call(
        &s,
        Some(BOB),
        "POST",
        "/threads/ann-1/runs",
        Some(json!({"assistant_id": "echo", "if_not_exists": "create", "input": human("x")})),
    )
    .await;
    assert_eq!(st, 404, "{e}");
    // Ann's thread is untouched by all that.
    let (st, runs) = call(&s, Some(ANN), "GET", "/threads/ann-1/runs", None).await;
    assert_eq!((st, runs), (200, json!([])));
    let (_, t) = call(&s, Some(ANN), "GET", "/threads/ann-1", None).await;
    assert!(t["metadata"].get("graph_id").is_none(), "{t}");
    // Ann herself: her own id exists (409), or is handed back with do_nothing.
    let (st, e) = call(
        &s,
        Some(ANN),
        "POST",
        "/threads",
        Some(json!({"thread_id": "ann-1"})),
    )
    .await;
    assert_eq!(st, 409, "{e}");
    let (st, t) = call(
        &s,
        Some(ANN),
        "POST",
        "/threads",
        Some(json!({"thread_id": "ann-1", "if_exists": "do_nothing"})),
    )
    .await;
    assert_eq!((st, t["thread_id"].as_str()), (200, Some("ann-1")));
    // Assistants likewise.
    let id = "0b5b1f6e-7d5a-4c1e-9a55-8f1a1d5e2c10";
    let body = json!({"graph_id": "echo", "assistant_id": id});
    assert_eq!(
        call(&s, Some(ANN), "POST", "/assistants", Some(body.clone()))
            .await
            .0,
        200
    );
    let mut nothing = body.clone();
    nothing["if_exists"] = json!("do_nothing");
    for b in [&body, &nothing] {
        let (st, e) = call(&s, Some(BOB), "POST", "/assistants", Some(b.clone())).await;
        assert_eq!(st, 404, "{b}: {e}");
    }
    assert_eq!(
        call(&s, Some(ANN), "POST", "/assistants", Some(body)).await.0,
        409
    );
    let (st, a) = call(&s, Some(ANN), "POST", "/assistants", Some(nothing)).await;
    assert_eq!((st, a["assistant_id"].as_str()), (200, Some(id)));
    s.stop().await;
}

#[tokio::test]
async fn system_routes_need_a_key_unless_made_public() {
    let routes = ["/info", "/metrics", "/openapi.json"];
    let (s, _dir) = two_owners(|_| {}).await;
    assert_eq!(call(&s, None, "GET", "/ok", None).await.0, 200);
    for r in routes {
        let (st, e) = call(&s, None, "GET", r, None).await;
        assert_eq!(st, 401, "{r}: {e}");
        assert!(e["detail"].is_string(), "{r}: {e}");
        assert_eq!(call(&s, Some("key-eve"), "GET", r, None).await.0, 401, "{r}");
        assert_eq!(call(&s, Some(ANN), "GET", r, None).await.0, 200, "{r}");
    }
    s.stop().await;

    let (s, _dir) = two_owners(|c| c.public_system_routes = true).await;
    for r in routes.iter().chain(&["/ok"]) {
        assert_eq!(call(&s, None, "GET", r, None).await.0, 200, "{r}");
    }
    // Everything else still needs a key.
    assert_eq!(
        call(&s, None, "POST", "/threads/search", Some(json!({}))).await.0,
        401
    );
    s.stop().await;
}

#[tokio::test]
async fn a_cancel_names_the_identity_that_asked() {
    let (s, _dir) = two_owners(|c| c.workers = 0).await;
    let (st, t) = call(&s, Some(ANN), "POST", "/threads", Some(json!({}))).await;
    assert_eq!(st, 200, "{t}");
    let t = t["thread_id"].as_str().unwrap().to_owned();
    // No workers: the run stays pending until cancelled.
    let (st, run) = call(
        &s,
        Some(ANN),
        "POST",
        &format!("/threads/{t}/runs"),
        Some(json!({"assistant_id": "echo", "input": human("hi")})),
    )
    .await;
    assert_eq!(st, 200, "{run}");
    let id = run["run_id"].as_str().unwrap();
    let cancel = format!("/threads/{t}/runs/{id}/cancel");
    assert_eq!(call(&s, Some(BOB), "POST", &cancel, None).await.0, 404);
    assert_eq!(call(&s, Some(ANN), "POST", &cancel, None).await.0, 202);
    let (_, run) = call(&s, Some(ANN), "GET", &format!("/threads/{t}/runs/{id}"), None).await;
    assert_eq!(run["status"], "interrupted");
    assert_eq!(run["cancel_reason"], "requested by ann");
    s.stop().await;
}
