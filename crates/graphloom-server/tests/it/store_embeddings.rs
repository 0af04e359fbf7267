//! The server's store with an embedder: a store search's `query` ranks the items by
//! similarity (what the seeds' memory searches get when hosted), through an
//! OpenAI-compatible `/embeddings` endpoint served here; without an index the same search
//! lists the newest first, whatever the query.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use axum::routing::post;
use axum::{Json, Router};
use common::TestServer;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const WORDS: [&str; 3] = ["dog", "car", "cat"];

/// A local `/v1/embeddings`: each text's vector counts the words of [`WORDS`] in it.
async fn embeddings_server(calls: Arc<AtomicUsize>) -> String {
    let app = Router::new().route(
        "/v1/embeddings",
        post(move |Json(body): Json<Value>| {
            let calls = Arc::clone(&calls);
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                let data: Vec<Value> = body["input"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        let t = t.as_str().unwrap().to_lowercase();
                        let v: Vec<f32> = WORDS.iter().map(|w| t.matches(w).count() as f32 + 0.01).collect();
                        json!({"object": "embedding", "index": i, "embedding": v})
                    })
                    .collect();
                Json(json!({"object": "list", "data": data, "model": body["model"]}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// Three memories, the dog one first (so oldest), then a search for `dog`.
async fn keys_found_for_dog(s: &TestServer) -> Vec<String> {
    for (key, text) in [
        ("m1", "the dog likes long walks"),
        ("m2", "the car needs new tyres"),
        ("m3", "the cat sleeps all day"),
    ] {
        let (status, _) = s
            .http
            .put(s.u("/store/items"))
            .json(&json!({"namespace": ["memory", "alice"], "key": key, "value": {"content": text}}))
            .send()
            .await
            .map(|r| (r.status().as_u16(), ()))
            .unwrap();
        assert_eq!(status, 204);
    }
    let (status, found) = s
        .post(
            "/store/items/search",
            json!({"namespace_prefix": ["memory", "alice"], "query": "where is my dog", "limit": 3}),
        )
        .await;
    assert_eq!(status, 200, "{found}");
    found["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["key"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_store_search_ranks_by_the_query_through_the_embeddings_endpoint() {
    let calls = Arc::new(AtomicUsize::new(0));
    let base = embeddings_server(Arc::clone(&calls)).await;
    let env = move |k: &str| match k {
        "OPENAI_BASE_URL" => Some(base.clone()),
        "GRAPHLOOM_EMBEDDINGS_DIMS" => Some("3".to_owned()),
        _ => None,
    };
    let index = graphloom_llm::index_from_spec_with("openai-compatible:words", env).unwrap();
    let s = TestServer::sqlite(|c| c.store_index = Some(index)).await;
    let keys = keys_found_for_dog(&s).await;
    assert_eq!(keys.first().map(String::as_str), Some("m1"), "{keys:?}");
    assert!(
        calls.load(Ordering::SeqCst) >= 4,
        "the items and the query were embedded"
    );
    s.stop().await;

    // The same search without an index: newest first, the query ignored.
    let s = TestServer::sqlite(|_| {}).await;
    let keys = keys_found_for_dog(&s).await;
    assert_eq!(keys.first().map(String::as_str), Some("m3"), "{keys:?}");
    s.stop().await;
}
