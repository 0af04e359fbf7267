//! A backend error keeps the driver's error as its source: its kind says what to do, its
//! source chain says what the driver saw.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::{BackendErrorKind, Error};
use graphloom_sqlite::rusqlite::{self, ErrorCode};
use graphloom_sqlite::{rusqlite_error, SqliteDatabase, SqliteOptions, SqliteSaver};

#[tokio::test]
async fn a_file_that_is_not_a_database_reaches_the_driver_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("not-a-database.db");
    std::fs::write(&path, vec![0x5a_u8; 8192]).unwrap();
    let err = SqliteSaver::open(&path).await.map(|_| ()).unwrap_err();
    let Error::Backend(b) = &err else {
        panic!("not a backend error: {err}");
    };
    assert_eq!(b.kind(), BackendErrorKind::Corrupt, "{err}");
    let driver = b
        .find_source::<rusqlite::Error>()
        .expect("the chain reaches rusqlite's error");
    assert_eq!(driver.sqlite_error_code(), Some(ErrorCode::NotADatabase));
}

#[tokio::test]
async fn a_constraint_violation_on_the_writer_reaches_rusqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = SqliteDatabase::open(SqliteOptions::new(dir.path().join("app.db")))
        .await
        .unwrap();
    let insert = |c: &rusqlite::Connection| {
        c.execute_batch("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY); INSERT INTO t VALUES ('a');")
            .map_err(rusqlite_error)
    };
    db.write(insert).await.unwrap();
    let err = db.write(insert).await.unwrap_err();
    let Error::Backend(b) = &err else {
        panic!("not a backend error: {err}");
    };
    assert_eq!(b.kind(), BackendErrorKind::Conflict, "{err}");
    let driver = err
        .find_source::<rusqlite::Error>()
        .expect("the chain reaches rusqlite's error");
    assert_eq!(driver.sqlite_error_code(), Some(ErrorCode::ConstraintViolation));
}
