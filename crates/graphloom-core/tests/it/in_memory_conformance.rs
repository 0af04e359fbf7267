//! The in-memory checkpointer and store pass the conformance kits every backend runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::store::{DynStore, HashEmbedder, InMemoryStore, IndexConfig};
use graphloom_test_kit::checkpointer_conformance;
use graphloom_test_kit::store::{store_conformance, store_vector_conformance};
use std::sync::Arc;

#[tokio::test]
async fn passes_conformance_kit() {
    checkpointer_conformance(&InMemorySaver::new()).await;
}

fn vector_store(dims: usize) -> InMemoryStore {
    InMemoryStore::with_index(IndexConfig::new(dims, Arc::new(HashEmbedder::new(dims))))
}

#[tokio::test]
async fn conformance() {
    store_conformance(&InMemoryStore::new()).await;
}

#[tokio::test(start_paused = true)]
async fn conformance_with_paused_clock() {
    let store = InMemoryStore::new();
    store_conformance(&store).await;
    // A second run on the same store, as backends sharing a database would.
    store_conformance(&store).await;
}

#[tokio::test]
async fn conformance_through_dyn_store() {
    let store: Arc<dyn DynStore> = Arc::new(InMemoryStore::new());
    store_conformance(&store).await;
    let store: Arc<dyn DynStore> = Arc::new(vector_store(128));
    store_vector_conformance(&store).await;
}

#[tokio::test(start_paused = true)]
async fn conformance_with_vector_index() {
    let store = vector_store(256);
    store_conformance(&store).await;
    store_vector_conformance(&store).await;
    let fields =
        InMemoryStore::with_index(IndexConfig::new(256, Arc::new(HashEmbedder::new(256))).fields(["text"]));
    store_vector_conformance(&fields).await;
}
