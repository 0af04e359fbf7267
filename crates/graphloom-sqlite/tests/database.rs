//! One `SqliteDatabase` shared by a saver, a store and the application's own tables.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::{BackendErrorKind, Error};
use graphloom_sqlite::{rusqlite_error, SqliteDatabase, SqliteOptions};
use graphloom_test_kit::checkpointer_conformance;
use graphloom_test_kit::store::store_conformance;

async fn open(dir: &tempfile::TempDir) -> SqliteDatabase {
    let db = SqliteDatabase::open(SqliteOptions::new(dir.path().join("shared.db")))
        .await
        .unwrap();
    db.write(|c| {
        c.execute_batch("CREATE TABLE IF NOT EXISTS app_rows (name TEXT PRIMARY KEY)")
            .map_err(rusqlite_error)
    })
    .await
    .unwrap();
    db
}

async fn app_rows(db: &SqliteDatabase) -> Vec<String> {
    db.read(|conn| -> graphloom_core::Result<Vec<String>> {
        let mut stmt = conn
            .prepare("SELECT name FROM app_rows ORDER BY name")
            .map_err(rusqlite_error)?;
        let names = stmt.query_map([], |r| r.get(0)).map_err(rusqlite_error)?;
        names.collect::<Result<_, _>>().map_err(rusqlite_error)
    })
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saver_store_and_application_writes_share_one_writer() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir).await;
    let (saver, store) = (db.saver(), db.store().await.unwrap());
    let before = db.commit_stats();
    // The kits and a stream of application rows, all at once, on one file.
    let rows = async {
        for i in 0..200 {
            let name = format!("row-{i:03}");
            db.write(move |c| {
                c.execute("INSERT INTO app_rows (name) VALUES (?1)", [name])
                    .map_err(rusqlite_error)
            })
            .await
            .unwrap();
        }
    };
    futures::join!(checkpointer_conformance(&saver), store_conformance(&store), rows);
    assert_eq!(app_rows(&db).await.len(), 200);
    let after = db.commit_stats();
    // Every operation of the three went through the one writer: its counters saw them all,
    // and the saver's and the store's counters are the same writer's.
    let ops = after.operations - before.operations;
    assert!(ops > 200, "{ops} operations");
    assert_eq!(saver.commit_stats(), after);
    assert_eq!(store.commit_stats(), after);
    assert!(after.commits <= after.operations);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_application_write_rolls_back_its_own_changes_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir).await;
    let mut tasks = Vec::new();
    for i in 0..40 {
        let db = db.clone();
        tasks.push(tokio::spawn(async move {
            db.write(move |c| {
                c.execute(
                    "INSERT INTO app_rows (name) VALUES (?1)",
                    [format!("kept-{i:02}")],
                )
                .map_err(rusqlite_error)?;
                if i % 2 == 1 {
                    // Written, then failed: this operation's row must not survive.
                    c.execute(
                        "INSERT INTO app_rows (name) VALUES (?1)",
                        [format!("lost-{i:02}")],
                    )
                    .map_err(rusqlite_error)?;
                    return Err(Error::NotFound(format!("operation {i} refused")));
                }
                Ok(())
            })
            .await
        }));
    }
    for (i, t) in tasks.into_iter().enumerate() {
        let out = t.await.unwrap();
        if i % 2 == 1 {
            assert!(
                matches!(&out, Err(Error::NotFound(m)) if m.contains(&i.to_string())),
                "{out:?}"
            );
        } else {
            out.unwrap();
        }
    }
    let rows = app_rows(&db).await;
    let expected: Vec<String> = (0..40).step_by(2).map(|i| format!("kept-{i:02}")).collect();
    assert_eq!(rows, expected);
}

#[tokio::test]
async fn an_application_error_type_and_sqlite_errors_reach_the_caller() {
    #[derive(Debug)]
    enum AppError {
        Duplicate,
        Db(Error),
    }
    impl From<Error> for AppError {
        fn from(e: Error) -> Self {
            AppError::Db(e)
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir).await;
    let insert = |name: &'static str| {
        let db = db.clone();
        async move {
            db.write(move |c| {
                let n = c
                    .execute(
                        "INSERT INTO app_rows (name) VALUES (?1) ON CONFLICT DO NOTHING",
                        [name],
                    )
                    .map_err(|e| AppError::Db(rusqlite_error(e)))?;
                if n == 0 {
                    return Err(AppError::Duplicate);
                }
                Ok(())
            })
            .await
        }
    };
    insert("a").await.unwrap();
    assert!(matches!(insert("a").await, Err(AppError::Duplicate)));
    // A statement SQLite refuses: a classified backend error in the caller's type.
    let bad = db
        .write(|c| {
            c.execute("INSERT INTO no_such_table VALUES (1)", [])
                .map_err(|e| AppError::Db(rusqlite_error(e)))
        })
        .await;
    match bad {
        Err(AppError::Db(Error::Backend(e))) => {
            assert!(
                e.message.contains("no_such_table") && e.kind != BackendErrorKind::Connection,
                "{e:?}"
            )
        }
        other => panic!("expected a backend error, got {other:?}"),
    }
    assert_eq!(app_rows(&db).await, vec!["a".to_owned()]);
}
