//! Versioned schema migrations, run automatically when a database is opened, on
//! graphloom-core's migration runner ([`graphloom_core::migrate`]) with SQLite's steps.
//!
//! Every applied migration of the file is a row of `graphloom_migrations`: the checkpoint
//! and store tables' ([`MIGRATIONS`], component `storage`) and the server's
//! ([`SERVER_MIGRATIONS`], component `server`, feature `server`), versions unique across
//! both. A run is one `BEGIN IMMEDIATE` transaction that reads the applied versions after
//! taking the write lock, so several processes opening the same fresh file at once each
//! apply a migration at most once and all succeed. A file of an earlier release (a
//! `graphloom_migrations` of its own shape, and the server's own `server_schema_version`)
//! is brought into this one table on first open. A file with a migration this build does not
//! know (a newer build's) is refused.

use crate::error::SqlResultExt;
pub use graphloom_core::migrate::Migration;
use graphloom_core::migrate::{self as runner, AppliedMigration, Migrate, NewerSchema};
use graphloom_core::Result;
use rusqlite::{params, Connection};

/// The component of the checkpoint and store tables' migrations.
pub const STORAGE: &str = "storage";
/// The component of the server's tables' migrations.
pub const SERVER: &str = "server";
/// The component of the typed checkpoint tables' migrations ([`crate::typed`]).
pub const TYPED: &str = "typed";

/// The migrations of the checkpoint and store tables (component `storage`), oldest first.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        component: STORAGE,
        description: "checkpoints",
        statements: &[r"
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
"],
    },
    Migration {
        version: 2,
        component: STORAGE,
        description: "store",
        statements: &[r"
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
"],
    },
];

/// The migrations of the server's tables (component `server`: assistants, threads, the run
/// queue, stored run events), oldest first. Applied when the server's tables are opened
/// (feature `server`); recorded like the others, so a build without the feature leaves them
/// be.
pub const SERVER_MIGRATIONS: &[Migration] = &[
    Migration {
        version: 3,
        component: SERVER,
        description: "server: assistants, threads and the run queue",
        statements: &[
            "CREATE TABLE server_assistants (
            assistant_id TEXT NOT NULL PRIMARY KEY,
            owner        TEXT NOT NULL,
            graph_id     TEXT NOT NULL,
            config       TEXT NOT NULL,
            context      TEXT NOT NULL,
            metadata     TEXT NOT NULL,
            version      INTEGER NOT NULL,
            name         TEXT NOT NULL,
            description  TEXT,
            created_at   INTEGER NOT NULL,
            updated_at   INTEGER NOT NULL
        )",
            "CREATE INDEX server_assistants_owner_idx ON server_assistants (owner, created_at)",
            "CREATE TABLE server_assistant_versions (
            assistant_id TEXT NOT NULL,
            version      INTEGER NOT NULL,
            owner        TEXT NOT NULL,
            graph_id     TEXT NOT NULL,
            config       TEXT NOT NULL,
            context      TEXT NOT NULL,
            metadata     TEXT NOT NULL,
            name         TEXT NOT NULL,
            description  TEXT,
            created_at   INTEGER NOT NULL,
            PRIMARY KEY (assistant_id, version)
        )",
            "CREATE TABLE server_threads (
            thread_id        TEXT NOT NULL PRIMARY KEY,
            owner            TEXT NOT NULL,
            created_at       INTEGER NOT NULL,
            updated_at       INTEGER NOT NULL,
            state_updated_at INTEGER NOT NULL,
            metadata         TEXT NOT NULL,
            config           TEXT NOT NULL,
            status           TEXT NOT NULL,
            state_values     TEXT NOT NULL,
            interrupts       TEXT NOT NULL,
            error            TEXT,
            ttl              TEXT,
            ttl_us           INTEGER,
            expires_at       INTEGER
        )",
            "CREATE INDEX server_threads_owner_idx ON server_threads (owner, created_at)",
            "CREATE INDEX server_threads_expires_idx ON server_threads (expires_at)
            WHERE expires_at IS NOT NULL",
            "CREATE TABLE server_runs (
            run_id             TEXT NOT NULL PRIMARY KEY,
            thread_id          TEXT NOT NULL,
            owner              TEXT NOT NULL,
            assistant_id       TEXT NOT NULL,
            created_at         INTEGER NOT NULL,
            updated_at         INTEGER NOT NULL,
            status             TEXT NOT NULL,
            metadata           TEXT NOT NULL,
            kwargs             TEXT NOT NULL,
            multitask_strategy TEXT NOT NULL,
            due_at             INTEGER NOT NULL,
            worker             TEXT,
            lease_expires_at   INTEGER,
            attempt            INTEGER NOT NULL DEFAULT 0,
            cancel_action      TEXT
        )",
            "CREATE INDEX server_runs_queue_idx ON server_runs (status, created_at, run_id)",
            "CREATE INDEX server_runs_thread_idx ON server_runs (thread_id, status)",
        ],
    },
    Migration {
        version: 4,
        component: SERVER,
        description: "server: stored events of resumable runs",
        statements: &["CREATE TABLE server_run_events (
            run_id TEXT NOT NULL,
            seq    INTEGER NOT NULL,
            event  TEXT NOT NULL,
            data   TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)
        )"],
    },
    Migration {
        version: 5,
        component: SERVER,
        description: "server: crons, and when keep_latest retention last pruned a thread",
        statements: &[
            "CREATE TABLE server_crons (
            cron_id          TEXT NOT NULL PRIMARY KEY,
            owner            TEXT NOT NULL,
            assistant_id     TEXT NOT NULL,
            thread_id        TEXT,
            schedule         TEXT NOT NULL,
            timezone         TEXT,
            payload          TEXT NOT NULL,
            metadata         TEXT NOT NULL,
            on_run_completed TEXT,
            enabled          INTEGER NOT NULL,
            end_time         INTEGER,
            next_run_date    INTEGER,
            created_at       INTEGER NOT NULL,
            updated_at       INTEGER NOT NULL
        )",
            "CREATE INDEX server_crons_owner_idx ON server_crons (owner, created_at)",
            "CREATE INDEX server_crons_due_idx ON server_crons (next_run_date)
            WHERE enabled = 1 AND next_run_date IS NOT NULL",
            "ALTER TABLE server_threads ADD COLUMN retained_at INTEGER",
            "CREATE INDEX server_threads_updated_idx ON server_threads (updated_at) WHERE ttl IS NULL",
        ],
    },
    Migration {
        version: 6,
        component: SERVER,
        description: "server: the webhook delivery queue",
        statements: &[
            "CREATE TABLE server_webhooks (
            run_id           TEXT NOT NULL PRIMARY KEY,
            thread_id        TEXT NOT NULL,
            url              TEXT NOT NULL,
            body             TEXT NOT NULL,
            status           TEXT NOT NULL,
            attempts         INTEGER NOT NULL DEFAULT 0,
            due_at           INTEGER NOT NULL,
            worker           TEXT,
            lease_expires_at INTEGER,
            last_error       TEXT,
            created_at       INTEGER NOT NULL,
            updated_at       INTEGER NOT NULL
        )",
            "CREATE INDEX server_webhooks_due_idx ON server_webhooks (due_at) WHERE status = 'pending'",
            "CREATE INDEX server_webhooks_ended_idx ON server_webhooks (updated_at) WHERE status <> 'pending'",
        ],
    },
    Migration {
        version: 7,
        component: SERVER,
        description: "server: a resumable run's stored events a batch per row",
        statements: &[
            "CREATE TABLE server_run_event_batches (
            run_id    TEXT NOT NULL,
            first_seq INTEGER NOT NULL,
            last_seq  INTEGER NOT NULL,
            events    TEXT NOT NULL,
            PRIMARY KEY (run_id, first_seq)
        )",
            // Each stored event becomes a batch of one; an event whose text is not JSON
            // could not be read before either.
            "INSERT INTO server_run_event_batches (run_id, first_seq, last_seq, events)
            SELECT run_id, seq, seq, json_array(json_array(seq, event, json(data)))
            FROM server_run_events WHERE json_valid(data)",
            "DROP TABLE server_run_events",
        ],
    },
    Migration {
        version: 8,
        component: SERVER,
        description: "server: each run's place among its thread's runs, kept when runs are deleted",
        statements: &[
            "ALTER TABLE server_runs ADD COLUMN ordinal INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE server_threads ADD COLUMN next_ordinal INTEGER NOT NULL DEFAULT 0",
            // The runs there are, numbered in the order the thread lists them.
            "UPDATE server_runs SET ordinal = n.ordinal FROM (SELECT run_id,
            ROW_NUMBER() OVER (PARTITION BY thread_id ORDER BY created_at, run_id) - 1 AS ordinal
            FROM server_runs) AS n WHERE server_runs.run_id = n.run_id",
            "UPDATE server_threads SET next_ordinal = (SELECT COUNT(*) FROM server_runs r
            WHERE r.thread_id = server_threads.thread_id)",
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
        ],
    },
    Migration {
        version: 11,
        component: SERVER,
        description: "server: why a run was cancelled",
        statements: &["ALTER TABLE server_runs ADD COLUMN cancel_reason TEXT"],
    },
];

/// The migrations of the typed checkpoint tables (component `typed`): checkpoints whose
/// values another runtime serialized (LangGraph's savers in the Python package), kept apart
/// from the graph checkpoints of `checkpoints`. Applied when a [`crate::typed::TypedSaver`]
/// opens the file.
pub const TYPED_MIGRATIONS: &[Migration] = &[Migration {
    version: 10,
    component: TYPED,
    description: "typed checkpoints",
    statements: &[
        "CREATE TABLE typed_checkpoints (
            thread_id            TEXT NOT NULL,
            checkpoint_ns        TEXT NOT NULL,
            checkpoint_id        TEXT NOT NULL,
            parent_checkpoint_id TEXT,
            type                 TEXT NOT NULL,
            checkpoint           BLOB NOT NULL,
            channel_versions     TEXT NOT NULL,
            metadata             TEXT NOT NULL,
            run_id               TEXT,
            PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
        )",
        "CREATE INDEX typed_checkpoints_run ON typed_checkpoints (run_id) WHERE run_id IS NOT NULL",
        "CREATE TABLE typed_blobs (
            thread_id     TEXT NOT NULL,
            checkpoint_ns TEXT NOT NULL,
            channel       TEXT NOT NULL,
            version       TEXT NOT NULL,
            type          TEXT NOT NULL,
            value         BLOB NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
        )",
        "CREATE TABLE typed_writes (
            thread_id     TEXT NOT NULL,
            checkpoint_ns TEXT NOT NULL,
            checkpoint_id TEXT NOT NULL,
            task_id       TEXT NOT NULL,
            idx           INTEGER NOT NULL,
            channel       TEXT NOT NULL,
            task_path     TEXT NOT NULL,
            type          TEXT NOT NULL,
            value         BLOB NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
        )",
    ],
}];

/// The newest version of the checkpoint and store tables this build creates and understands.
pub const SCHEMA_VERSION: i64 = 2;

/// The server's tables' versions before they shared `graphloom_migrations` (its own
/// `server_schema_version`), and what each is now.
const LEGACY_SERVER_VERSIONS: &[(i64, i64)] = &[(1, 3), (2, 4)];

/// Apply every migration of `migrations` the file lacks, on `conn` (blocking: call it on a
/// thread that may wait for other processes' locks).
pub(crate) fn run(conn: Connection, migrations: &[Migration]) -> Result<()> {
    let mut m = SqliteMigrator { conn };
    // Every step is a blocking call on the connection: the runner's futures are ready at
    // once, so driving them here costs nothing.
    futures::executor::block_on(runner::run(&mut m, migrations)).map(|_| ())
}

/// SQLite's steps of a migration run: one `BEGIN IMMEDIATE` transaction on a connection of
/// its own. An error drops the connection, which rolls the transaction back.
struct SqliteMigrator {
    conn: Connection,
}

impl SqliteMigrator {
    fn columns(&self, table: &str) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT name FROM pragma_table_info(?1)")
            .sql()?;
        let names = stmt
            .query_map([table], |r| r.get(0))
            .sql()?
            .collect::<rusqlite::Result<Vec<String>>>()
            .sql()?;
        Ok(names)
    }
}

impl Migrate for SqliteMigrator {
    const NEWER_SCHEMA: NewerSchema = NewerSchema::Refuse;

    async fn lock(&mut self) -> Result<()> {
        self.conn.execute_batch("BEGIN IMMEDIATE").sql()
    }

    async fn ensure_migrations_table(&mut self) -> Result<()> {
        self.conn
            .execute_batch(
                "CREATE TABLE IF NOT EXISTS graphloom_migrations (
                    version     INTEGER PRIMARY KEY,
                    component   TEXT NOT NULL DEFAULT 'storage',
                    description TEXT NOT NULL,
                    applied_at  TEXT NOT NULL
                )",
            )
            .sql()?;
        // An earlier release's table: `name` for the description, no component (its rows
        // are the storage tables').
        let columns = self.columns("graphloom_migrations")?;
        if columns.iter().any(|c| c == "name") {
            self.conn
                .execute_batch("ALTER TABLE graphloom_migrations RENAME COLUMN name TO description")
                .sql()?;
        }
        if !columns.iter().any(|c| c == "component") {
            self.conn
                .execute_batch(
                    "ALTER TABLE graphloom_migrations ADD COLUMN component TEXT NOT NULL DEFAULT 'storage'",
                )
                .sql()?;
        }
        // An earlier release's server kept its versions in a table of its own.
        if !self.columns("server_schema_version")?.is_empty() {
            let old: Vec<i64> = self
                .conn
                .prepare("SELECT version FROM server_schema_version")
                .sql()?
                .query_map([], |r| r.get(0))
                .sql()?
                .collect::<rusqlite::Result<_>>()
                .sql()?;
            for (was, now) in LEGACY_SERVER_VERSIONS {
                let Some(m) = SERVER_MIGRATIONS.iter().find(|m| m.version == *now) else {
                    continue;
                };
                if old.contains(was) {
                    self.conn
                        .execute(
                            "INSERT OR IGNORE INTO graphloom_migrations (version, component, description, applied_at) \
                             VALUES (?1, ?2, ?3, ?4)",
                            params![m.version, m.component, m.description, graphloom_core::checkpoint::now_rfc3339()],
                        )
                        .sql()?;
                }
            }
            self.conn
                .execute_batch("DROP TABLE server_schema_version")
                .sql()?;
        }
        Ok(())
    }

    async fn list_applied_migrations(&mut self) -> Result<Vec<AppliedMigration>> {
        let mut stmt = self
            .conn
            .prepare("SELECT version, component FROM graphloom_migrations")
            .sql()?;
        let rows = stmt
            .query_map([], |r| {
                Ok(AppliedMigration {
                    version: r.get(0)?,
                    component: r.get(1)?,
                })
            })
            .sql()?
            .collect::<rusqlite::Result<Vec<_>>>()
            .sql()?;
        Ok(rows)
    }

    async fn apply(&mut self, m: &Migration) -> Result<()> {
        for statement in m.statements {
            self.conn.execute_batch(statement).map_err(|e| {
                crate::error::other(format!("migration {} ({}) failed: {e}", m.version, m.description))
            })?;
        }
        self.conn
            .execute(
                "INSERT INTO graphloom_migrations (version, component, description, applied_at) \
                 VALUES (?1, ?2, ?3, ?4)",
                params![
                    m.version,
                    m.component,
                    m.description,
                    graphloom_core::checkpoint::now_rfc3339()
                ],
            )
            .sql()?;
        Ok(())
    }

    async fn unlock(&mut self) -> Result<()> {
        self.conn.execute_batch("COMMIT").sql()
    }
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
        for (_, now) in LEGACY_SERVER_VERSIONS {
            assert!(SERVER_MIGRATIONS.iter().any(|m| m.version == *now));
        }
    }
}
