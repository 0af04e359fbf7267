//! The core checkpointer and store conformance kits against SQLite files.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::store::{HashEmbedder, IndexConfig};
use graphloom_sqlite::{SqliteSaver, SqliteStore, Synchronous};
use graphloom_test_kit::checkpointer_conformance;
use graphloom_test_kit::store::{store_conformance, store_vector_conformance};
use std::sync::Arc;

#[tokio::test]
async fn saver_passes_the_checkpointer_kit() {
    let dir = tempfile::tempdir().unwrap();
    let saver = SqliteSaver::open(dir.path().join("kit.db")).await.unwrap();
    checkpointer_conformance(&saver).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saver_passes_the_kit_run_three_times_at_once_with_synchronous_normal() {
    let dir = tempfile::tempdir().unwrap();
    let saver = SqliteSaver::builder(dir.path().join("kit.db"))
        .synchronous(Synchronous::Normal)
        .read_connections(2)
        .open()
        .await
        .unwrap();
    futures::join!(
        checkpointer_conformance(&saver),
        checkpointer_conformance(&saver),
        checkpointer_conformance(&saver)
    );
}

#[tokio::test]
async fn saver_passes_the_kit_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kit.db");
    checkpointer_conformance(&SqliteSaver::open(&path).await.unwrap()).await;
    // The same file, already migrated and holding data, through a new saver.
    let again = SqliteSaver::open(&path).await.unwrap();
    checkpointer_conformance(&again).await;
    assert!(again.storage_stats().await.unwrap().checkpoints > 0);
}

#[tokio::test]
async fn store_passes_the_store_kit() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("store.db")).await.unwrap();
    store_conformance(&store).await;
    // A second run on the same store, as a shared database would see.
    store_conformance(&store).await;
}

#[tokio::test]
async fn store_passes_the_store_and_vector_kits_with_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::builder(dir.path().join("vec.db"))
        .index(IndexConfig::new(256, Arc::new(HashEmbedder::new(256))))
        .open()
        .await
        .unwrap();
    store_conformance(&store).await;
    store_vector_conformance(&store).await;
    let fields = SqliteStore::open(dir.path().join("fields.db"))
        .await
        .unwrap()
        .with_index(IndexConfig::new(128, Arc::new(HashEmbedder::new(128))).fields(["text"]));
    store_vector_conformance(&fields).await;
}

#[tokio::test]
async fn store_through_dyn_store_and_saver_share_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let saver = SqliteSaver::open(&path).await.unwrap();
    let store: Arc<dyn graphloom_core::store::DynStore> = Arc::new(
        SqliteStore::builder(&path)
            .index(IndexConfig::new(128, Arc::new(HashEmbedder::new(128))))
            .open()
            .await
            .unwrap(),
    );
    futures::join!(checkpointer_conformance(&saver), store_vector_conformance(&store));
    store_conformance(&store).await;
}
