//! Versioned schema migrations: the runner every SQL backend shares, and the [`Migrate`]
//! trait each SQL dialect implements (after sqlx's `Migrator` and its per-database
//! `Migrate`).
//!
//! A database has **one** table of applied migrations, whatever parts of graphloom use it
//! (the checkpoint and store tables, the server's tables). Each [`Migration`] has a version
//! unique in its backend and names the part of the schema it belongs to (its
//! *component*), so a build that knows only some components (a backend built without the
//! server's tables) judges only the rows of the components it migrates.
//!
//! [`run`] does, on one connection:
//!
//! 1. [`lock`](Migrate::lock): begin a transaction and take the lock that serialises
//!    migrators (SQLite's write lock, PostgreSQL's advisory lock), so several processes
//!    opening one fresh database at once each find the work done or do it, once;
//! 2. [`ensure_migrations_table`](Migrate::ensure_migrations_table): create the table, or
//!    bring an older release's bookkeeping into it;
//! 3. [`list_applied_migrations`](Migrate::list_applied_migrations), then the dialect's
//!    answer to a migration it does not know (a newer build's): refuse, or use the database
//!    as it is ([`NewerSchema`]);
//! 4. [`apply`](Migrate::apply) every missing migration, in version order;
//! 5. [`unlock`](Migrate::unlock): commit. An error before that leaves nothing applied.

use crate::error::{BackendError, BackendErrorKind, Error, Result};
use std::collections::HashSet;
use std::future::Future;

/// One schema change.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Version, unique among all the migrations of one backend; applied in increasing order.
    pub version: i64,
    /// The part of the schema it belongs to (`storage`, `server`, ...).
    pub component: &'static str,
    /// What it does.
    pub description: &'static str,
    /// Its SQL statements, run in order.
    pub statements: &'static [&'static str],
}

/// A row of the table of applied migrations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedMigration {
    /// Its version.
    pub version: i64,
    /// Its component.
    pub component: String,
}

/// What a dialect does with a database that has a migration of a migrated component that
/// this build does not know (one written by a newer build).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewerSchema {
    /// Fail: the tables may have changed in ways this build would misread.
    Refuse,
    /// Use the database as it is (replicas of a rolling upgrade, where the newest migrates
    /// first and its changes are additive).
    UseAsIs,
}

/// The steps of a migration run on one connection of a SQL dialect; see the
/// [module docs](self) for the order [`run`] calls them in.
pub trait Migrate: Send {
    /// The dialect's answer to a newer schema.
    const NEWER_SCHEMA: NewerSchema;

    /// Begin a transaction and take the lock that serialises migrators.
    fn lock(&mut self) -> impl Future<Output = Result<()>> + Send;

    /// Create the table of applied migrations if missing, or bring the bookkeeping of an
    /// older release into it.
    fn ensure_migrations_table(&mut self) -> impl Future<Output = Result<()>> + Send;

    /// Every applied migration, of every component.
    fn list_applied_migrations(&mut self) -> impl Future<Output = Result<Vec<AppliedMigration>>> + Send;

    /// Run `migration`'s statements and record it as applied.
    fn apply(&mut self, migration: &Migration) -> impl Future<Output = Result<()>> + Send;

    /// Commit the transaction (releasing the lock).
    fn unlock(&mut self) -> impl Future<Output = Result<()>> + Send;
}

/// Apply every migration of `migrations` that the database lacks; the number applied.
///
/// # Errors
/// The dialect's error from any step (nothing is applied then), or, for a dialect that
/// refuses a newer schema, an error saying the database is newer than this build.
pub async fn run<M: Migrate>(conn: &mut M, migrations: &[Migration]) -> Result<usize> {
    conn.lock().await?;
    conn.ensure_migrations_table().await?;
    let applied = conn.list_applied_migrations().await?;
    let components: HashSet<&str> = migrations.iter().map(|m| m.component).collect();
    let known: HashSet<i64> = migrations.iter().map(|m| m.version).collect();
    if let Some(newer) = applied
        .iter()
        .filter(|a| components.contains(a.component.as_str()) && !known.contains(&a.version))
        .max_by_key(|a| a.version)
    {
        match M::NEWER_SCHEMA {
            NewerSchema::Refuse => return Err(too_new(newer)),
            NewerSchema::UseAsIs => tracing::warn!(
                version = newer.version,
                component = %newer.component,
                "the database has a migration this build does not know (a newer build's); using it as it is"
            ),
        }
    }
    let done: HashSet<i64> = applied.iter().map(|a| a.version).collect();
    let mut pending: Vec<&Migration> = migrations.iter().filter(|m| !done.contains(&m.version)).collect();
    pending.sort_by_key(|m| m.version);
    for m in &pending {
        tracing::info!(
            version = m.version,
            component = m.component,
            description = m.description,
            "applying migration"
        );
        conn.apply(m).await?;
    }
    conn.unlock().await?;
    Ok(pending.len())
}

fn too_new(newer: &AppliedMigration) -> Error {
    Error::Backend(BackendError::new(
        BackendErrorKind::Other,
        format!(
            "the database has migration {} of its {} tables, which this build does not know: it was \
             written by a newer version of graphloom; upgrade graphloom",
            newer.version, newer.component
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dialect in memory: the table of applied migrations and a log of the steps.
    struct Fake<const REFUSE: bool> {
        applied: Vec<AppliedMigration>,
        log: Vec<String>,
        fail_at: Option<i64>,
    }

    impl<const REFUSE: bool> Fake<REFUSE> {
        fn new(applied: &[(i64, &str)]) -> Self {
            Self {
                applied: applied
                    .iter()
                    .map(|(v, c)| AppliedMigration {
                        version: *v,
                        component: (*c).to_owned(),
                    })
                    .collect(),
                log: Vec::new(),
                fail_at: None,
            }
        }
    }

    impl<const REFUSE: bool> Migrate for Fake<REFUSE> {
        const NEWER_SCHEMA: NewerSchema = if REFUSE {
            NewerSchema::Refuse
        } else {
            NewerSchema::UseAsIs
        };
        async fn lock(&mut self) -> Result<()> {
            self.log.push("lock".into());
            Ok(())
        }
        async fn ensure_migrations_table(&mut self) -> Result<()> {
            self.log.push("ensure".into());
            Ok(())
        }
        async fn list_applied_migrations(&mut self) -> Result<Vec<AppliedMigration>> {
            Ok(self.applied.clone())
        }
        async fn apply(&mut self, m: &Migration) -> Result<()> {
            if self.fail_at == Some(m.version) {
                return Err(Error::Backend(BackendError::new(BackendErrorKind::Other, "boom")));
            }
            self.log.push(format!("apply {}", m.version));
            self.applied.push(AppliedMigration {
                version: m.version,
                component: m.component.to_owned(),
            });
            Ok(())
        }
        async fn unlock(&mut self) -> Result<()> {
            self.log.push("unlock".into());
            Ok(())
        }
    }

    const fn m(version: i64, component: &'static str) -> Migration {
        Migration {
            version,
            component,
            description: "test",
            statements: &[],
        }
    }

    const STORAGE: &[Migration] = &[m(2, "storage"), m(1, "storage")];
    const SERVER: &[Migration] = &[m(3, "server"), m(4, "server")];

    #[tokio::test]
    async fn missing_migrations_are_applied_in_version_order_under_the_lock() {
        let mut db = Fake::<true>::new(&[]);
        assert_eq!(run(&mut db, STORAGE).await.unwrap(), 2);
        assert_eq!(db.log, ["lock", "ensure", "apply 1", "apply 2", "unlock"]);
        db.log.clear();
        assert_eq!(run(&mut db, STORAGE).await.unwrap(), 0);
        assert_eq!(db.log, ["lock", "ensure", "unlock"]);
        assert_eq!(run(&mut db, SERVER).await.unwrap(), 2);
        assert_eq!(db.applied.len(), 4);
    }

    #[tokio::test]
    async fn only_the_migrated_components_rows_are_judged() {
        // A build without the server's tables opens a database a server build migrated.
        let mut db = Fake::<true>::new(&[(1, "storage"), (2, "storage"), (3, "server"), (9, "server")]);
        assert_eq!(run(&mut db, STORAGE).await.unwrap(), 0);
        // The server build itself finds server migration 9 unknown.
        let err = run(&mut db, SERVER).await.unwrap_err();
        assert!(err.to_string().contains("newer"), "{err}");
        assert!(
            err.to_string().contains("migration 9 of its server tables"),
            "{err}"
        );
        assert!(!db.log.iter().any(|l| l.starts_with("apply")), "{:?}", db.log);
    }

    #[tokio::test]
    async fn a_dialect_may_use_a_newer_schema_as_it_is() {
        let mut db = Fake::<false>::new(&[(1, "storage"), (7, "storage")]);
        assert_eq!(run(&mut db, STORAGE).await.unwrap(), 1);
        assert_eq!(db.log, ["lock", "ensure", "apply 2", "unlock"]);
    }

    #[tokio::test]
    async fn a_failing_migration_stops_the_run_before_the_commit() {
        let mut db = Fake::<true>::new(&[]);
        db.fail_at = Some(2);
        assert!(run(&mut db, STORAGE).await.is_err());
        assert_eq!(db.log, ["lock", "ensure", "apply 1"]);
    }
}
