//! The database behind a `Core`: SQLite's or PostgreSQL's typed checkpoint tables, one
//! async interface over both.

use graphloom_core::checkpoint::typed::{TypedPut, TypedQuery, TypedTuple, TypedWrites};
use graphloom_core::Result;

/// SQLite's or PostgreSQL's typed tables.
pub(crate) enum Backend {
    Sqlite(graphloom_sqlite::typed::TypedSaver),
    Postgres(graphloom_postgres::typed::TypedSaver),
}

impl Backend {
    pub(crate) async fn put(&self, put: TypedPut) -> Result<()> {
        match self {
            Self::Sqlite(s) => s.put(put).await,
            Self::Postgres(s) => s.put(put).await,
        }
    }

    pub(crate) async fn put_writes(&self, writes: TypedWrites) -> Result<()> {
        match self {
            Self::Sqlite(s) => s.put_writes(writes).await,
            Self::Postgres(s) => s.put_writes(writes).await,
        }
    }

    /// SQLite reads on the calling thread (a read by key costs less than a hand-off).
    pub(crate) async fn get_tuple(
        &self,
        thread_id: &str,
        ns: &str,
        id: Option<&str>,
    ) -> Result<Option<TypedTuple>> {
        match self {
            Self::Sqlite(s) => s.get_tuple(thread_id, ns, id),
            Self::Postgres(s) => s.get_tuple(thread_id, ns, id).await,
        }
    }

    pub(crate) async fn list(&self, query: &TypedQuery) -> Result<Vec<TypedTuple>> {
        match self {
            Self::Sqlite(s) => s.list(query),
            Self::Postgres(s) => s.list(query).await,
        }
    }

    pub(crate) async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        match self {
            Self::Sqlite(s) => s.delete_thread(thread_id).await,
            Self::Postgres(s) => s.delete_thread(thread_id).await,
        }
    }

    pub(crate) async fn delete_for_runs(&self, run_ids: Vec<String>) -> Result<()> {
        match self {
            Self::Sqlite(s) => s.delete_for_runs(run_ids).await,
            Self::Postgres(s) => s.delete_for_runs(run_ids).await,
        }
    }

    pub(crate) async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        match self {
            Self::Sqlite(s) => s.copy_thread(source, target).await,
            Self::Postgres(s) => s.copy_thread(source, target).await,
        }
    }

    pub(crate) async fn prune(&self, thread_ids: Vec<String>, keep_latest: bool) -> Result<()> {
        match self {
            Self::Sqlite(s) => s.prune(thread_ids, keep_latest).await,
            Self::Postgres(s) => s.prune(thread_ids, keep_latest).await,
        }
    }

    pub(crate) async fn thread_storage(
        &self,
        thread_id: &str,
    ) -> Result<graphloom_core::checkpoint::ThreadStorage> {
        match self {
            Self::Sqlite(s) => s.thread_storage(thread_id),
            Self::Postgres(s) => s.thread_storage(thread_id).await,
        }
    }

    /// Let go of the database: PostgreSQL's pool closes its connections (a later call
    /// fails); SQLite's writer stops once the last handle is dropped, every write already
    /// committed.
    pub(crate) async fn close(&self) {
        if let Self::Postgres(s) = self {
            crate::pg::close(s.pool()).await;
        }
    }
}
