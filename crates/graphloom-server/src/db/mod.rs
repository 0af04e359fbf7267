//! The server's own tables (assistants, threads, runs = the durable queue, run events), on
//! SQLite or PostgreSQL: the same database as the checkpoints.
//!
//! Every row carries an `owner` (the authenticated principal; `""` with auth off). Every
//! read and write of a resource is scoped to one owner: another owner's row is "not found".
//!
//! The storage trait [`Db`] and its types live in `graphloom-server-db`, below the
//! backends; each backend crate implements it with its own tables, behind its `server`
//! feature: [`SqliteDb`] (feature `sqlite`) and [`PgDb`] (feature `postgres`). [`open`]
//! opens what a [`Database`] names: the server's tables, the checkpointer and the store.

#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
pub(crate) mod file_lock;

#[cfg(feature = "postgres")]
pub use graphloom_postgres::server::PgDb;
pub use graphloom_server_db::{
    AssistantPatch, AssistantQuery, Db, DbError, DbResult, Lease, NewRun, SortOrder, ThreadOutcome,
    ThreadQuery,
};
pub use graphloom_server_db::{
    CronDb, CronPatch, CronQuery, CronTick, DefaultTtl, DueCron, ExpiredThread, Fired, NewCron, NewWebhook,
    RetentionDb, TtlStrategy, WebhookDb, WebhookDelivery, WebhookStatus,
};
#[cfg(feature = "sqlite")]
pub use graphloom_sqlite::server::SqliteDb;

pub use crate::config::Database;
use crate::start_error::StartError;
use file_lock::FileLock;
use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::store::{DynStore, IndexConfig, TtlConfig};
use std::sync::Arc;

/// An open database: the server's tables, the checkpointer and the store on it, and (on
/// SQLite) the file's lock, held while the server runs.
pub(crate) struct Opened {
    pub(crate) db: Arc<dyn Db>,
    pub(crate) checkpointer: Arc<dyn DynCheckpointer>,
    pub(crate) store: Arc<dyn DynStore>,
    pub(crate) file_lock: Option<FileLock>,
}

/// Open `database` (running migrations): the server's tables, its checkpointer and store.
///
/// # Errors
/// The database cannot be opened or migrated, another server holds the SQLite file, or
/// this build lacks the backend.
pub(crate) async fn open(
    database: &Database,
    store_ttl: TtlConfig,
    index: Option<IndexConfig>,
) -> Result<Opened, StartError> {
    match database {
        Database::Sqlite(path) => open_sqlite(path, store_ttl, index).await,
        Database::Postgres(url) => open_postgres(url, store_ttl, index).await,
    }
}

#[cfg(feature = "sqlite")]
async fn open_sqlite(
    path: &std::path::Path,
    store_ttl: TtlConfig,
    index: Option<IndexConfig>,
) -> Result<Opened, StartError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| StartError::CreateDir {
            path: dir.to_owned(),
            source,
        })?;
    }
    // This process alone executes the file's runs from here on.
    let file_lock = FileLock::acquire(path).map_err(StartError::Locked)?;
    // One writer for the checkpoints, the store and the server's tables: their commits for
    // concurrent runs are grouped into shared transactions.
    let shared = graphloom_sqlite::SqliteDatabase::open(graphloom_sqlite::SqliteOptions::new(path))
        .await
        .map_err(StartError::storage("SQLite database"))?;
    let saver = shared.saver();
    let store = shared
        .store()
        .await
        .map_err(StartError::storage("store"))?
        .with_ttl(store_ttl);
    let store = match index {
        Some(i) => store.with_index(i),
        None => store,
    };
    let db = SqliteDb::new(shared)
        .await
        .map_err(StartError::database("opening the server's tables"))?;
    // With the lock held, runs still marked running were left by a process that died: the
    // workers take them over at once, not a lease later.
    let orphans = db
        .expire_leases()
        .await
        .map_err(StartError::database("taking over orphaned runs"))?;
    if orphans > 0 {
        tracing::info!(
            runs = orphans,
            "taking over runs left running by a stopped server"
        );
    }
    Ok(Opened {
        db: Arc::new(db),
        checkpointer: Arc::new(saver),
        store: Arc::new(store),
        file_lock: Some(file_lock),
    })
}

#[cfg(not(feature = "sqlite"))]
#[allow(clippy::unused_async)]
async fn open_sqlite(
    _path: &std::path::Path,
    _store_ttl: TtlConfig,
    _index: Option<IndexConfig>,
) -> Result<Opened, StartError> {
    Err(StartError::Unsupported("SQLite", "sqlite"))
}

#[cfg(feature = "postgres")]
async fn open_postgres(
    url: &str,
    store_ttl: TtlConfig,
    index: Option<IndexConfig>,
) -> Result<Opened, StartError> {
    let saver = graphloom_postgres::PostgresSaver::connect(url)
        .await
        .map_err(StartError::storage("PostgreSQL checkpointer"))?;
    let store = graphloom_postgres::PostgresStore::connect(url)
        .await
        .map_err(StartError::storage("PostgreSQL store"))?
        .with_ttl(store_ttl);
    let store = match index {
        Some(i) => store.with_index(i),
        None => store,
    };
    let db = PgDb::connect(url)
        .await
        .map_err(StartError::database("opening the server's tables"))?;
    Ok(Opened {
        db: Arc::new(db),
        checkpointer: Arc::new(saver),
        store: Arc::new(store),
        file_lock: None,
    })
}

#[cfg(not(feature = "postgres"))]
#[allow(clippy::unused_async)]
async fn open_postgres(
    _url: &str,
    _store_ttl: TtlConfig,
    _index: Option<IndexConfig>,
) -> Result<Opened, StartError> {
    Err(StartError::Unsupported("PostgreSQL", "postgres"))
}
