//! The database schema and its versioned migrations, on graphloom-core's migration runner
//! ([`graphloom_core::migrate`]) with PostgreSQL's steps.
//!
//! Migrations run automatically the first time a [`PostgresSaver`](crate::PostgresSaver) or
//! [`PostgresStore`](crate::PostgresStore) touches the database (or when [`migrate`] is
//! called), and when the server's tables are opened (feature `server`). Each run is **one
//! transaction** that first takes `pg_advisory_xact_lock`, so several processes (server
//! replicas starting together) can migrate one fresh database at the same time: one applies
//! the migrations, the others wait for its commit, then find nothing left to do.
//!
//! Every applied migration of the database is a row of `graphloom_migrations`: the
//! checkpoint and store tables' ([`MIGRATIONS`], component `storage`) and the server's
//! ([`SERVER_MIGRATIONS`], component `server`), versions unique across both. A database of
//! an earlier release (`graphloom_migrations` without its `component` column, and the
//! server's own `server_schema_version`) is brought into this one table on first open; its
//! `server_schema_version` is kept, and the server migrations it knew are still recorded
//! there, so replicas of the earlier release restarting during a rolling upgrade find their
//! tables migrated. A database migrated by a newer build (versions this build does not know) is used as is:
//! replicas of a rolling upgrade keep working while the newest migrates first.
//!
//! An application can keep its own tables' migrations in the same table with [`run`]: give
//! them a component of their own and versions from 1 000 000 up (graphloom's stay below),
//! as the fraud-investigation example does for the tables its checkpoint hook writes.
//!
//! Tables live in the connection's current schema (the first of its `search_path`); give the
//! pool's connections another `search_path` to keep graphloom's tables apart.
//!
//! Every identifier column is `COLLATE "C"`, so ordering (checkpoint ids are UUIDv7 strings,
//! newest last) and range scans are byte-wise, whatever the database's default collation.

use crate::error::SqlxResultExt;
pub use graphloom_core::migrate::Migration;
use graphloom_core::migrate::{self as runner, AppliedMigration, Migrate, NewerSchema};
use graphloom_core::Result;
use sqlx::{PgPool, Postgres, Transaction};

/// Key of the advisory lock held while migrating (ASCII "glmigrat").
pub const MIGRATION_LOCK: i64 = 0x676c_6d69_6772_6174;

/// The component of the checkpoint and store tables' migrations.
pub const STORAGE: &str = "storage";
/// The component of the server's tables' migrations.
pub const SERVER: &str = "server";
/// The component of the typed checkpoint tables' migrations ([`crate::typed`]).
pub const TYPED: &str = "typed";

/// The migrations of the typed checkpoint tables (component `typed`): checkpoints whose
/// values another runtime serialized (LangGraph's savers in the Python package), apart from
/// graphloom's own. Applied when a [`crate::typed::TypedSaver`] connects.
pub const TYPED_MIGRATIONS: &[Migration] = &[Migration {
    version: 10,
    component: TYPED,
    description: "typed checkpoints",
    statements: &[
        r#"CREATE TABLE typed_checkpoints (
    thread_id            TEXT COLLATE "C" NOT NULL,
    checkpoint_ns        TEXT COLLATE "C" NOT NULL,
    checkpoint_id        TEXT COLLATE "C" NOT NULL,
    parent_checkpoint_id TEXT COLLATE "C",
    type                 TEXT NOT NULL,
    checkpoint           BYTEA NOT NULL,
    channels             TEXT[] NOT NULL,
    versions             TEXT[] NOT NULL,
    metadata             TEXT NOT NULL,
    run_id               TEXT,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
)"#,
        "CREATE INDEX typed_checkpoints_run ON typed_checkpoints (run_id) WHERE run_id IS NOT NULL",
        r#"CREATE TABLE typed_blobs (
    thread_id     TEXT COLLATE "C" NOT NULL,
    checkpoint_ns TEXT COLLATE "C" NOT NULL,
    channel       TEXT COLLATE "C" NOT NULL,
    version       TEXT COLLATE "C" NOT NULL,
    type          TEXT NOT NULL,
    value         BYTEA NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
)"#,
        r#"CREATE TABLE typed_writes (
    thread_id     TEXT COLLATE "C" NOT NULL,
    checkpoint_ns TEXT COLLATE "C" NOT NULL,
    checkpoint_id TEXT COLLATE "C" NOT NULL,
    task_id       TEXT COLLATE "C" NOT NULL,
    idx           INTEGER NOT NULL,
    channel       TEXT NOT NULL,
    task_path     TEXT COLLATE "C" NOT NULL,
    type          TEXT NOT NULL,
    value         BYTEA NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
)"#,
    ],
}];

/// The migrations of the checkpoint and store tables (component `storage`), oldest first.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        component: STORAGE,
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
        component: STORAGE,
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
        component: STORAGE,
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

/// The migrations of the server's tables (component `server`: assistants, threads, the run
/// queue, stored run events), oldest first. Applied when the server's tables are opened
/// (feature `server`); recorded like the others, so a build without the feature leaves them be.
pub const SERVER_MIGRATIONS: &[Migration] = &[
    Migration {
        version: 4,
        component: SERVER,
        description: "server: assistants, threads and the run queue",
        statements: &[
        r#"CREATE TABLE server_assistants (
            assistant_id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
            owner        TEXT COLLATE "C" NOT NULL,
            graph_id     TEXT COLLATE "C" NOT NULL,
            config       JSONB NOT NULL,
            context      JSONB NOT NULL,
            metadata     JSONB NOT NULL,
            version      BIGINT NOT NULL,
            name         TEXT COLLATE "C" NOT NULL,
            description  TEXT,
            created_at   BIGINT NOT NULL,
            updated_at   BIGINT NOT NULL
        )"#,
        "CREATE INDEX server_assistants_owner_idx ON server_assistants (owner, created_at)",
        "CREATE INDEX server_assistants_metadata_idx ON server_assistants USING GIN (metadata jsonb_path_ops)",
        r#"CREATE TABLE server_assistant_versions (
            assistant_id TEXT COLLATE "C" NOT NULL,
            version      BIGINT NOT NULL,
            owner        TEXT COLLATE "C" NOT NULL,
            graph_id     TEXT COLLATE "C" NOT NULL,
            config       JSONB NOT NULL,
            context      JSONB NOT NULL,
            metadata     JSONB NOT NULL,
            name         TEXT COLLATE "C" NOT NULL,
            description  TEXT,
            created_at   BIGINT NOT NULL,
            PRIMARY KEY (assistant_id, version)
        )"#,
        r#"CREATE TABLE server_threads (
            thread_id        TEXT COLLATE "C" NOT NULL PRIMARY KEY,
            owner            TEXT COLLATE "C" NOT NULL,
            created_at       BIGINT NOT NULL,
            updated_at       BIGINT NOT NULL,
            state_updated_at BIGINT NOT NULL,
            metadata         JSONB NOT NULL,
            config           JSONB NOT NULL,
            status           TEXT COLLATE "C" NOT NULL,
            state_values     JSONB NOT NULL,
            interrupts       JSONB NOT NULL,
            error            JSONB,
            ttl              JSONB,
            ttl_us           BIGINT,
            expires_at       BIGINT
        )"#,
        "CREATE INDEX server_threads_owner_idx ON server_threads (owner, created_at)",
        "CREATE INDEX server_threads_metadata_idx ON server_threads USING GIN (metadata jsonb_path_ops)",
        "CREATE INDEX server_threads_expires_idx ON server_threads (expires_at) WHERE expires_at IS NOT NULL",
        r#"CREATE TABLE server_runs (
            run_id             TEXT COLLATE "C" NOT NULL PRIMARY KEY,
            thread_id          TEXT COLLATE "C" NOT NULL,
            owner              TEXT COLLATE "C" NOT NULL,
            assistant_id       TEXT COLLATE "C" NOT NULL,
            created_at         BIGINT NOT NULL,
            updated_at         BIGINT NOT NULL,
            status             TEXT COLLATE "C" NOT NULL,
            metadata           JSONB NOT NULL,
            kwargs             JSONB NOT NULL,
            multitask_strategy TEXT NOT NULL,
            due_at             BIGINT NOT NULL,
            worker             TEXT COLLATE "C",
            lease_expires_at   BIGINT,
            attempt            BIGINT NOT NULL DEFAULT 0,
            cancel_action      TEXT
        )"#,
        "CREATE INDEX server_runs_queue_idx ON server_runs (status, created_at, run_id)",
        "CREATE INDEX server_runs_thread_idx ON server_runs (thread_id, status)"
        ],
    },
    Migration {
        version: 5,
        component: SERVER,
        description: "server: stored events of resumable runs",
        statements: &["CREATE TABLE server_run_events (
            run_id TEXT NOT NULL,
            seq    BIGINT NOT NULL,
            event  TEXT NOT NULL,
            data   TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)
        )"],
    },
    Migration {
        version: 6,
        component: SERVER,
        description: "server: crons, and when keep_latest retention last pruned a thread",
        statements: &[
            r#"CREATE TABLE server_crons (
            cron_id          TEXT COLLATE "C" NOT NULL PRIMARY KEY,
            owner            TEXT COLLATE "C" NOT NULL,
            assistant_id     TEXT COLLATE "C" NOT NULL,
            thread_id        TEXT COLLATE "C",
            schedule         TEXT NOT NULL,
            timezone         TEXT,
            payload          JSONB NOT NULL,
            metadata         JSONB NOT NULL,
            on_run_completed TEXT,
            enabled          BOOLEAN NOT NULL,
            end_time         BIGINT,
            next_run_date    BIGINT,
            created_at       BIGINT NOT NULL,
            updated_at       BIGINT NOT NULL
        )"#,
            "CREATE INDEX server_crons_owner_idx ON server_crons (owner, created_at)",
            "CREATE INDEX server_crons_metadata_idx ON server_crons USING GIN (metadata jsonb_path_ops)",
            "CREATE INDEX server_crons_due_idx ON server_crons (next_run_date) \
             WHERE enabled AND next_run_date IS NOT NULL",
            "ALTER TABLE server_threads ADD COLUMN retained_at BIGINT",
            "CREATE INDEX server_threads_updated_idx ON server_threads (updated_at) WHERE ttl IS NULL",
        ],
    },
    Migration {
        version: 7,
        component: SERVER,
        description: "server: the webhook delivery queue",
        statements: &[
            r#"CREATE TABLE server_webhooks (
            run_id           TEXT COLLATE "C" NOT NULL PRIMARY KEY,
            thread_id        TEXT COLLATE "C" NOT NULL,
            url              TEXT NOT NULL,
            body             JSONB NOT NULL,
            status           TEXT NOT NULL,
            attempts         BIGINT NOT NULL DEFAULT 0,
            due_at           BIGINT NOT NULL,
            worker           TEXT,
            lease_expires_at BIGINT,
            last_error       TEXT,
            created_at       BIGINT NOT NULL,
            updated_at       BIGINT NOT NULL
        )"#,
            "CREATE INDEX server_webhooks_due_idx ON server_webhooks (due_at) WHERE status = 'pending'",
            "CREATE INDEX server_webhooks_ended_idx ON server_webhooks (updated_at) WHERE status <> 'pending'",
        ],
    },
    Migration {
        version: 8,
        component: SERVER,
        description: "server: each run's place among its thread's runs, kept when runs are deleted",
        statements: &[
            "ALTER TABLE server_runs ADD COLUMN ordinal BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE server_threads ADD COLUMN next_ordinal BIGINT NOT NULL DEFAULT 0",
            // The runs there are, numbered in the order the thread lists them.
            "UPDATE server_runs r SET ordinal = n.ordinal FROM (SELECT run_id, \
             ROW_NUMBER() OVER (PARTITION BY thread_id ORDER BY created_at, run_id) - 1 AS ordinal \
             FROM server_runs) n WHERE r.run_id = n.run_id",
            "UPDATE server_threads t SET next_ordinal = (SELECT COUNT(*) FROM server_runs r \
             WHERE r.thread_id = t.thread_id)",
        ],
    },
    Migration {
        version: 9,
        component: SERVER,
        description: "server: a thread's runs indexed in the order they list",
        statements: &[
            // A thread's newest runs (what its followers and `GET .../runs` read) walk this
            // index instead of sorting all the thread's runs.
            "CREATE INDEX server_runs_thread_order_idx ON server_runs (thread_id, created_at, run_id)",
            // The listing, planned without sorts: the planner takes a thread its statistics
            // do not know (one that grew since they were taken, or before any) for a run or
            // two, and would read all its runs to sort them for the newest few. PL/pgSQL
            // keeps the plan for the session's next calls. A NULL status: any; a NULL
            // limit: all.
            "CREATE FUNCTION server_thread_runs(p_thread TEXT, p_owner TEXT, p_status TEXT, \
             p_limit BIGINT, p_offset BIGINT) RETURNS SETOF server_runs LANGUAGE plpgsql STABLE \
             SET enable_sort = off AS $$ BEGIN RETURN QUERY SELECT * FROM server_runs \
             WHERE thread_id = p_thread AND owner = p_owner \
             AND (p_status IS NULL OR status = p_status) \
             ORDER BY created_at DESC, run_id DESC LIMIT p_limit OFFSET p_offset; END $$",
        ],
    },
    Migration {
        version: 11,
        component: SERVER,
        description: "server: why a run was cancelled",
        statements: &["ALTER TABLE server_runs ADD COLUMN cancel_reason TEXT"],
    },
];

/// The server's tables' versions before they shared `graphloom_migrations` (its own
/// `server_schema_version`), and what each is now.
const LEGACY_SERVER_VERSIONS: &[(i32, i64)] = &[(1, 4), (2, 5)];

/// Apply every migration of the checkpoint and store tables the database has not had yet
/// (see the module docs).
///
/// # Errors
/// A typed backend error if the database cannot be reached or a migration fails (nothing is
/// applied then: the transaction rolls back).
pub async fn migrate(pool: &PgPool) -> Result<()> {
    run(pool, MIGRATIONS).await
}

/// Apply every migration of `migrations` the database has not had yet, in one transaction
/// under the advisory lock.
///
/// # Errors
/// As [`migrate`].
pub async fn run(pool: &PgPool, migrations: &[Migration]) -> Result<()> {
    let mut conn = PgMigrator {
        pool,
        tx: None,
        legacy: false,
    };
    runner::run(&mut conn, migrations).await.map(|_| ())
}

/// PostgreSQL's steps of a migration run: one transaction holding the advisory lock.
struct PgMigrator<'p> {
    pool: &'p PgPool,
    tx: Option<Transaction<'static, Postgres>>,
    /// The database has an earlier release's `server_schema_version`.
    legacy: bool,
}

impl PgMigrator<'_> {
    fn tx(&mut self) -> Result<&mut Transaction<'static, Postgres>> {
        self.tx.as_mut().ok_or_else(|| {
            crate::error::backend(
                graphloom_core::BackendErrorKind::Other,
                "migrate: no transaction (lock was not taken)",
            )
        })
    }
}

impl Migrate for PgMigrator<'_> {
    const NEWER_SCHEMA: NewerSchema = NewerSchema::UseAsIs;

    async fn lock(&mut self) -> Result<()> {
        let mut tx = self.pool.begin().await.during("migrate: begin")?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(MIGRATION_LOCK)
            .execute(&mut *tx)
            .await
            .during("migrate: lock")?;
        self.tx = Some(tx);
        Ok(())
    }

    async fn ensure_migrations_table(&mut self) -> Result<()> {
        let tx = self.tx()?;
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS graphloom_migrations (
                 version     INTEGER PRIMARY KEY,
                 component   TEXT NOT NULL DEFAULT 'storage',
                 description TEXT NOT NULL,
                 applied_at  TIMESTAMPTZ NOT NULL DEFAULT now()
             )",
        )
        .execute(&mut **tx)
        .await
        .during("migrate: bookkeeping table")?;
        // An earlier release's table has no component: its rows are the storage tables'.
        let has_component: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
                 AND table_name = 'graphloom_migrations' AND column_name = 'component')",
        )
        .fetch_one(&mut **tx)
        .await
        .during("migrate: bookkeeping table")?;
        if !has_component {
            sqlx::query(
                "ALTER TABLE graphloom_migrations ADD COLUMN component TEXT NOT NULL DEFAULT 'storage'",
            )
            .execute(&mut **tx)
            .await
            .during("migrate: bookkeeping table")?;
        }
        // An earlier release's server kept its versions in a table of its own.
        let legacy: bool = sqlx::query_scalar("SELECT to_regclass('server_schema_version') IS NOT NULL")
            .fetch_one(&mut **tx)
            .await
            .during("migrate: earlier server versions")?;
        if legacy {
            let versions: Vec<i32> = sqlx::query_scalar("SELECT version FROM server_schema_version")
                .fetch_all(&mut **tx)
                .await
                .during("migrate: earlier server versions")?;
            for (old, new) in LEGACY_SERVER_VERSIONS {
                let Some(m) = SERVER_MIGRATIONS.iter().find(|m| m.version == *new) else {
                    continue;
                };
                if versions.contains(old) {
                    sqlx::query(
                        "INSERT INTO graphloom_migrations (version, component, description) VALUES ($1, $2, $3)
                         ON CONFLICT (version) DO NOTHING",
                    )
                    .bind(i32::try_from(m.version).unwrap_or(i32::MAX))
                    .bind(m.component)
                    .bind(m.description)
                    .execute(&mut **tx)
                    .await
                    .during("migrate: earlier server versions")?;
                }
            }
            // Kept for the earlier release's replicas (see the module docs).
            self.legacy = true;
        }
        Ok(())
    }

    async fn list_applied_migrations(&mut self) -> Result<Vec<AppliedMigration>> {
        let rows: Vec<(i32, String)> = sqlx::query_as("SELECT version, component FROM graphloom_migrations")
            .fetch_all(&mut **self.tx()?)
            .await
            .during("migrate: read versions")?;
        Ok(rows
            .into_iter()
            .map(|(version, component)| AppliedMigration {
                version: i64::from(version),
                component,
            })
            .collect())
    }

    async fn apply(&mut self, m: &Migration) -> Result<()> {
        let legacy = self.legacy;
        let tx = self.tx()?;
        for statement in m.statements {
            sqlx::query(statement)
                .execute(&mut **tx)
                .await
                .during(&format!("migration {}", m.version))?;
        }
        sqlx::query("INSERT INTO graphloom_migrations (version, component, description) VALUES ($1, $2, $3)")
            .bind(i32::try_from(m.version).unwrap_or(i32::MAX))
            .bind(m.component)
            .bind(m.description)
            .execute(&mut **tx)
            .await
            .during("migrate: record version")?;
        let legacy_version = LEGACY_SERVER_VERSIONS
            .iter()
            .find(|(_, new)| *new == m.version)
            .map(|(old, _)| *old);
        if let (true, Some(old)) = (legacy, legacy_version) {
            sqlx::query(
                "INSERT INTO server_schema_version (version) VALUES ($1) ON CONFLICT (version) DO NOTHING",
            )
            .bind(old)
            .execute(&mut **tx)
            .await
            .during("migrate: earlier server versions")?;
        }
        Ok(())
    }

    async fn unlock(&mut self) -> Result<()> {
        if let Some(tx) = self.tx.take() {
            tx.commit().await.during("migrate: commit")?;
        }
        Ok(())
    }
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

    #[test]
    fn versions_are_unique_across_components() {
        // Each component's versions increase; no two migrations share one (a component
        // added later takes the next free version, and the one before it may go on past it).
        for list in [MIGRATIONS, SERVER_MIGRATIONS, TYPED_MIGRATIONS] {
            assert!(
                list.windows(2).all(|w| w[0].version < w[1].version),
                "versions increase"
            );
        }
        let mut versions: Vec<_> = MIGRATIONS
            .iter()
            .chain(SERVER_MIGRATIONS)
            .chain(TYPED_MIGRATIONS)
            .map(|m| m.version)
            .collect();
        let n = versions.len();
        versions.sort_unstable();
        versions.dedup();
        assert_eq!(versions.len(), n, "versions are unique");
        assert!(MIGRATIONS.iter().all(|m| m.component == STORAGE));
        assert!(SERVER_MIGRATIONS.iter().all(|m| m.component == SERVER));
        assert!(TYPED_MIGRATIONS.iter().all(|m| m.component == TYPED));
        for (_, new) in LEGACY_SERVER_VERSIONS {
            assert!(SERVER_MIGRATIONS.iter().any(|m| m.version == *new));
        }
    }
}
