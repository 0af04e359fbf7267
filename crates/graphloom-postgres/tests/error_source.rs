//! A backend error keeps the driver's error as its source: its kind says what to do, its
//! source chain says what the driver saw.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::store::{namespace, PutOptions};
use graphloom_core::{BackendErrorKind, Error, Store};
use graphloom_postgres::testing::test_database;
use graphloom_postgres::PostgresStore;
use serde_json::json;

#[tokio::test]
async fn a_server_error_reaches_its_sqlstate() {
    let (url, _db) = test_database().await;
    let store = PostgresStore::connect(&url).await.unwrap();
    // JSONB cannot hold U+0000: PostgreSQL refuses the row (SQLSTATE 22P05).
    let err = store
        .put(
            &namespace(["nul"]),
            "k",
            json!({"text": "a\u{0}b"}),
            PutOptions::new(),
        )
        .await
        .unwrap_err();
    let Error::Backend(b) = &err else {
        panic!("not a backend error: {err}");
    };
    assert_eq!(b.kind(), BackendErrorKind::InvalidInput, "{err}");
    let db = err
        .find_source::<sqlx::Error>()
        .and_then(|e| e.as_database_error())
        .expect("the chain reaches the database's error");
    assert_eq!(db.code().as_deref(), Some("22P05"));
}
