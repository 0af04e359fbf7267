//! The test harness itself: databases are fresh and dropped after use, the private server
//! starts from the installed binaries (whatever `GRAPHLOOM_PG_URL` says, so CI exercises
//! it), and an unreachable server is a clear error rather than a skipped test.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_postgres::testing::{create_database, private_server_url, test_database};
use sqlx::{Connection, PgConnection};

async fn database_exists(admin_url: &str, name: &str) -> bool {
    let mut conn = PgConnection::connect(admin_url).await.unwrap();
    let found: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
        .bind(name)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    found
}

#[tokio::test]
async fn each_test_database_is_fresh_and_dropped_with_its_guard() {
    let (url, db) = test_database().await;
    let (other_url, other) = test_database().await;
    assert_ne!(url, other_url);
    assert!(db.name().starts_with("gl_"));
    let mut conn = PgConnection::connect(&url).await.unwrap();
    let tables: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(tables, 0, "a fresh database has no tables");
    let admin = db.admin_url().to_owned();
    let name = db.name().to_owned();
    assert!(database_exists(&admin, &name).await);
    // Dropping the guard drops the database, even with a connection still open.
    drop(db);
    assert!(!database_exists(&admin, &name).await);
    let _ = conn.close().await;
    drop(other);
}

#[tokio::test]
async fn the_private_server_starts_from_the_installed_binaries() {
    let admin = tokio::task::spawn_blocking(private_server_url)
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(admin.starts_with("postgres://postgres@127.0.0.1:"), "{admin}");
    let (url, _db) = create_database(&admin).await.unwrap();
    let saver = graphloom_postgres::PostgresSaver::connect(&url).await.unwrap();
    saver.migrate().await.unwrap();
    let version: String = sqlx::query_scalar("SHOW server_version")
        .fetch_one(saver.pool())
        .await
        .unwrap();
    println!("private server {admin}: PostgreSQL {version}");
}

#[tokio::test]
async fn an_unreachable_server_is_a_clear_error() {
    let err = create_database("postgres://postgres@127.0.0.1:1/postgres")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("cannot connect"), "{err}");
}
