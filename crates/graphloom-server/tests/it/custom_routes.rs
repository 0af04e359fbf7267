//! A user's axum routes and tower layers on the server (`ServerBuilder::routes`,
//! `::public_routes`, `::layer`): routes behind the server's auth see the caller's
//! identity, public ones need none, and a layer wraps the server's routes and the user's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::get;
use axum::{Extension, Json, Router};
use common::{split, TestServer};
use graphloom_server::auth::Identity;
use serde_json::{json, Value};

/// Says who called, and what the layer saw.
async fn whoami(Extension(me): Extension<Identity>, Extension(seen): Extension<Seen>) -> Json<Value> {
    Json(json!({"identity": me.identity, "layer_saw": seen.0}))
}

#[derive(Clone)]
struct Seen(String);

/// The user's middleware: tags every answer, and tells handlers whom it saw.
async fn tag(mut req: Request, next: Next) -> Response {
    let who = req
        .extensions()
        .get::<Identity>()
        .map_or_else(|| "nobody".to_owned(), |i| i.identity.clone());
    req.extensions_mut().insert(Seen(who.clone()));
    let mut res = next.run(req).await;
    res.headers_mut().insert("x-tagged", who.parse().unwrap());
    res
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_routes_and_layers_share_the_servers_auth() {
    let s = TestServer::sqlite_with(
        |c| {
            c.api_keys.insert("key-ann".into(), "ann".into());
        },
        |b| {
            b.routes(Router::new().route("/me", get(whoami)))
                .public_routes(Router::new().route("/healthz", get(|| async { "fine" })))
                .layer(axum::middleware::from_fn(tag))
        },
    )
    .await;
    // Behind auth: refused without a key, the identity with one, the layer saw it first.
    let (st, b) = s.get("/me").await;
    assert_eq!(st, 401, "{b}");
    let r = s
        .http
        .get(s.u("/me"))
        .header("x-api-key", "key-ann")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-tagged"], "ann");
    let (st, b) = split(r).await;
    assert_eq!((st, b), (200, json!({"identity": "ann", "layer_saw": "ann"})));
    // Public: no key needed, the layer runs without an identity.
    let r = s.http.get(s.u("/healthz")).send().await.unwrap();
    assert_eq!(r.headers()["x-tagged"], "nobody");
    assert_eq!(r.text().await.unwrap(), "fine");
    // The layer wraps the server's own routes too, and they keep working.
    let r = s
        .http
        .post(s.u("/threads"))
        .header("x-api-key", "key-ann")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-tagged"], "ann");
    assert_eq!(r.status().as_u16(), 200);
    let r = s.http.get(s.u("/ok")).send().await.unwrap();
    assert_eq!(r.headers()["x-tagged"], "nobody");
    // Routes nobody registered are still the server's JSON 404.
    let (st, b) = s.get("/nowhere").await;
    assert_eq!((st, b["detail"].as_str()), (404, Some("no such route")));
    s.stop().await;
}
