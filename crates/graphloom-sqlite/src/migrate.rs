//! Versioned schema migrations, run automatically when a database is opened.
//!
//! The `graphloom_migrations` table records each applied version. Every migration runs in
//! its own `BEGIN IMMEDIATE` transaction that re-reads the current version first, so several
//! processes opening the same fresh file at once each apply a migration at most once and all
//! succeed.

use crate::db::{db_err, other};
use graphloom_core::Result;
use sqlx::sqlite::SqliteConnection;
use sqlx::Connection;

/// One schema change.
struct Migration {
    version: i64,
    name: &'static str,
    sql: &'static str,
}

const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "checkpoints",
        sql: r"
CREATE TABLE checkpoints (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    enc TEXT NOT NULL,
    checkpoint BLOB NOT NULL,
    metadata TEXT NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
);
CREATE INDEX checkpoints_by_id ON checkpoints (checkpoint_id);
CREATE TABLE checkpoint_blobs (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL,
    channel TEXT NOT NULL,
    version TEXT NOT NULL,
    enc TEXT NOT NULL,
    value BLOB NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
);
CREATE TABLE checkpoint_writes (
    seq INTEGER PRIMARY KEY,
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    channel TEXT NOT NULL,
    task_path TEXT NOT NULL,
    enc TEXT NOT NULL,
    value BLOB NOT NULL,
    UNIQUE (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
);
",
    },
    Migration {
        version: 2,
        name: "store",
        sql: r"
CREATE TABLE store_items (
    prefix TEXT NOT NULL,
    key TEXT NOT NULL,
    enc TEXT NOT NULL,
    value BLOB NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    ttl_ms INTEGER,
    expires_at INTEGER,
    PRIMARY KEY (prefix, key)
);
CREATE INDEX store_items_expiry ON store_items (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX store_items_updated ON store_items (updated_at);
CREATE TABLE store_vectors (
    prefix TEXT NOT NULL,
    key TEXT NOT NULL,
    field TEXT NOT NULL,
    embedding BLOB NOT NULL,
    PRIMARY KEY (prefix, key, field)
);
",
    },
];

/// The schema version this build creates and understands.
pub const SCHEMA_VERSION: i64 = 2;

const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS graphloom_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL
)";

/// The applied schema version (0 for a fresh file).
async fn current_version(conn: &mut SqliteConnection) -> Result<i64> {
    let exists: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'graphloom_migrations'",
    )
    .fetch_one(&mut *conn)
    .await
    .map_err(db_err)?;
    if exists == 0 {
        return Ok(0);
    }
    sqlx::query_scalar("SELECT COALESCE(MAX(version), 0) FROM graphloom_migrations")
        .fetch_one(&mut *conn)
        .await
        .map_err(db_err)
}

fn too_new(found: i64) -> graphloom_core::Error {
    other(format!(
        "the database has schema version {found}, newer than the {SCHEMA_VERSION} this build of graphloom-sqlite knows; upgrade graphloom-sqlite"
    ))
}

/// Apply every migration the file lacks.
pub(crate) async fn run(conn: &mut SqliteConnection) -> Result<()> {
    let found = current_version(conn).await?;
    if found > SCHEMA_VERSION {
        return Err(too_new(found));
    }
    if found == SCHEMA_VERSION {
        return Ok(());
    }
    for m in MIGRATIONS {
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
        sqlx::query(CREATE_TABLE)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        // Re-read inside the write lock: another process may have migrated meanwhile.
        let at: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(version), 0) FROM graphloom_migrations")
            .fetch_one(&mut *tx)
            .await
            .map_err(db_err)?;
        if at > SCHEMA_VERSION {
            return Err(too_new(at));
        }
        if at >= m.version {
            tx.commit().await.map_err(db_err)?;
            continue;
        }
        if at != m.version - 1 {
            return Err(other(format!(
                "schema version {at} cannot be migrated to {} directly",
                m.version
            )));
        }
        sqlx::query(m.sql)
            .execute(&mut *tx)
            .await
            .map_err(|e| other(format!("migration {} ({}) failed: {e}", m.version, m.name)))?;
        sqlx::query("INSERT INTO graphloom_migrations (version, name, applied_at) VALUES (?, ?, ?)")
            .bind(m.version)
            .bind(m.name)
            .bind(graphloom_core::checkpoint::now_rfc3339())
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        tx.commit().await.map_err(db_err)?;
        tracing::debug!(version = m.version, name = m.name, "applied sqlite migration");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_in_order() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i64 + 1);
        }
        assert_eq!(MIGRATIONS.last().map(|m| m.version), Some(SCHEMA_VERSION));
    }
}
