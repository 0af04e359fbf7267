//! The database schema and its versioned migrations.
//!
//! Migrations run automatically the first time a [`PostgresSaver`](crate::PostgresSaver) or
//! [`PostgresStore`](crate::PostgresStore) touches the database (or when
//! [`migrate`] is called). All pending migrations run in **one transaction** that first takes
//! `pg_advisory_xact_lock`, so several processes (server replicas starting together) can
//! migrate one fresh database at the same time: one applies the migrations, the others wait
//! for its commit, then find nothing left to do. Applied versions are recorded in
//! `graphloom_migrations`. A database migrated by a newer build (versions this build does not
//! know) is used as is.
//!
//! Tables live in the connection's current schema (the first of its `search_path`); give the
//! pool's connections another `search_path` to keep graphloom's tables apart.
//!
//! Every identifier column is `COLLATE "C"`, so ordering (checkpoint ids are UUIDv7 strings,
//! newest last) and range scans are byte-wise, whatever the database's default collation.

use crate::error::SqlxResultExt;
use graphloom_core::Result;
use sqlx::PgPool;

/// Key of the advisory lock held while migrating (ASCII "glmigrat").
pub const MIGRATION_LOCK: i64 = 0x676c_6d69_6772_6174;

/// One schema migration.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Version, applied in increasing order.
    pub version: i32,
    /// What it does.
    pub description: &'static str,
    /// Its SQL statements, run in order.
    pub statements: &'static [&'static str],
}

/// Every migration this build knows, oldest first.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        description: "checkpoints, channel blobs and pending writes",
        statements: &[
            r#"CREATE TABLE graphloom_checkpoints (
    thread_id            TEXT COLLATE "C" NOT NULL,
    checkpoint_ns        TEXT COLLATE "C" NOT NULL DEFAULT '',
    checkpoint_id        TEXT COLLATE "C" NOT NULL,
    parent_checkpoint_id TEXT COLLATE "C",
    encoding             TEXT NOT NULL,
    checkpoint           BYTEA NOT NULL,
    metadata             JSONB NOT NULL DEFAULT '{}',
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
)"#,
            r#"CREATE INDEX graphloom_checkpoints_metadata_idx
    ON graphloom_checkpoints USING GIN (metadata jsonb_path_ops)"#,
            r#"CREATE TABLE graphloom_checkpoint_blobs (
    thread_id     TEXT COLLATE "C" NOT NULL,
    checkpoint_ns TEXT COLLATE "C" NOT NULL DEFAULT '',
    channel       TEXT COLLATE "C" NOT NULL,
    version       TEXT COLLATE "C" NOT NULL,
    base_version  TEXT COLLATE "C",
    encoding      TEXT NOT NULL,
    value         BYTEA NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
)"#,
            r#"CREATE TABLE graphloom_checkpoint_writes (
    thread_id     TEXT COLLATE "C" NOT NULL,
    checkpoint_ns TEXT COLLATE "C" NOT NULL DEFAULT '',
    checkpoint_id TEXT COLLATE "C" NOT NULL,
    task_id       TEXT COLLATE "C" NOT NULL,
    idx           BIGINT NOT NULL,
    channel       TEXT NOT NULL,
    task_path     TEXT NOT NULL DEFAULT '',
    encoding      TEXT NOT NULL,
    value         BYTEA NOT NULL,
    seq           BIGSERIAL NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
)"#,
        ],
    },
    Migration {
        version: 2,
        description: "store items with TTL, and their embeddings",
        statements: &[
            r#"CREATE TABLE graphloom_store (
    prefix     TEXT COLLATE "C" NOT NULL,
    key        TEXT COLLATE "C" NOT NULL,
    value      JSONB NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    ttl        INTERVAL,
    expires_at TIMESTAMPTZ,
    PRIMARY KEY (prefix, key)
)"#,
            r#"CREATE INDEX graphloom_store_expires_at_idx
    ON graphloom_store (expires_at) WHERE expires_at IS NOT NULL"#,
            r#"CREATE INDEX graphloom_store_value_idx
    ON graphloom_store USING GIN (value jsonb_path_ops)"#,
            r#"CREATE TABLE graphloom_store_vectors (
    prefix    TEXT COLLATE "C" NOT NULL,
    key       TEXT COLLATE "C" NOT NULL,
    idx       INTEGER NOT NULL,
    field     TEXT NOT NULL,
    embedding REAL[] NOT NULL,
    PRIMARY KEY (prefix, key, idx),
    FOREIGN KEY (prefix, key) REFERENCES graphloom_store (prefix, key) ON DELETE CASCADE
)"#,
        ],
    },
    Migration {
        version: 3,
        description: "lz4 compression of stored values, where the server has it",
        // PostgreSQL compresses values over ~2 KB with pglz by default, and pglz dominated
        // the server's CPU when many runs checkpoint at once (a third of it in the
        // fanout_to_subgraph_100x_postgres benchmark). lz4 (PostgreSQL 14+, when built
        // with it) compresses several times faster. Only new values use it; nothing is
        // rewritten. A server without it keeps its default.
        statements: &[r#"DO $$
BEGIN
    ALTER TABLE graphloom_checkpoints ALTER COLUMN checkpoint SET COMPRESSION lz4;
    ALTER TABLE graphloom_checkpoint_blobs ALTER COLUMN value SET COMPRESSION lz4;
    ALTER TABLE graphloom_checkpoint_writes ALTER COLUMN value SET COMPRESSION lz4;
    ALTER TABLE graphloom_store ALTER COLUMN value SET COMPRESSION lz4;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'graphloom: lz4 compression is not available (%); keeping the default', SQLERRM;
END $$"#],
    },
];

/// Apply every migration the database has not had yet (see the module docs).
///
/// # Errors
/// A typed backend error if the database cannot be reached or a migration fails (nothing is
/// applied then: the transaction rolls back).
pub async fn migrate(pool: &PgPool) -> Result<()> {
    let mut tx = pool.begin().await.during("migrate: begin")?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *tx)
        .await
        .during("migrate: lock")?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS graphloom_migrations (
             version     INTEGER PRIMARY KEY,
             description TEXT NOT NULL,
             applied_at  TIMESTAMPTZ NOT NULL DEFAULT now()
         )",
    )
    .execute(&mut *tx)
    .await
    .during("migrate: bookkeeping table")?;
    let applied: Vec<i32> = sqlx::query_scalar("SELECT version FROM graphloom_migrations")
        .fetch_all(&mut *tx)
        .await
        .during("migrate: read versions")?;
    for m in MIGRATIONS.iter().filter(|m| !applied.contains(&m.version)) {
        tracing::info!(
            version = m.version,
            description = m.description,
            "applying migration"
        );
        for statement in m.statements {
            sqlx::query(statement)
                .execute(&mut *tx)
                .await
                .during(&format!("migration {}", m.version))?;
        }
        sqlx::query("INSERT INTO graphloom_migrations (version, description) VALUES ($1, $2)")
            .bind(m.version)
            .bind(m.description)
            .execute(&mut *tx)
            .await
            .during("migrate: record version")?;
    }
    tx.commit().await.during("migrate: commit")?;
    Ok(())
}

/// Runs [`migrate`] once per handle (and its clones), on first use.
#[derive(Debug, Clone, Default)]
pub(crate) struct Migrated(std::sync::Arc<tokio::sync::OnceCell<()>>);

impl Migrated {
    /// Migrate unless done already; a failure is retried on the next call.
    pub(crate) async fn ensure(&self, pool: &PgPool) -> Result<()> {
        if self.0.initialized() {
            return Ok(());
        }
        self.0.get_or_try_init(|| migrate(pool)).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_increase() {
        assert!(MIGRATIONS.windows(2).all(|w| w[0].version < w[1].version));
        assert_eq!(MIGRATIONS.first().map(|m| m.version), Some(1));
    }
}
