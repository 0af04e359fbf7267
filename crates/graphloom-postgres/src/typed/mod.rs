//! [`TypedSaver`]: checkpoints whose contents another runtime serialized (LangGraph's savers
//! in the Python package), in tables of their own beside graphloom's checkpoints.
//!
//! The same shapes as SQLite's typed tables ([`graphloom_core::checkpoint::typed`]): the
//! checkpoint without its channel values, one blob per channel version written once, and
//! the pending writes. Each write is one transaction; each read one `REPEATABLE READ`
//! snapshot, so a checkpoint, its values and its writes are read together.
//!
//! | file | what |
//! |---|---|
//! | `write.rs` | `put`, `put_writes` |
//! | `read.rs` | `get_tuple`, `list` |
//! | `thread.rs` | `delete_thread`, `delete_for_runs`, `copy_thread`, `prune` |

mod read;
mod thread;
mod write;

use crate::error::SqlxResultExt;
use crate::migrate::{run, TYPED_MIGRATIONS};
pub use graphloom_core::checkpoint::typed::{
    TypedPut, TypedQuery, TypedTuple, TypedValue, TypedWrite, TypedWrites,
};
use graphloom_core::Result;
use sqlx::postgres::{PgPool, PgPoolOptions};

/// Checkpoints serialized by their writer, in PostgreSQL, over a connection pool. Cheap to
/// clone; clones share the pool.
#[derive(Debug, Clone)]
pub struct TypedSaver {
    pool: PgPool,
}

impl TypedSaver {
    /// Connect to `url` (sqlx's default pool options) and create the typed tables if needed.
    ///
    /// # Errors
    /// A `Connection` error if the server cannot be reached; a backend error if the tables
    /// cannot be created.
    pub async fn connect(url: &str) -> Result<Self> {
        let pool = PgPoolOptions::new().connect(url).await.during("connect")?;
        Self::from_pool(pool).await
    }

    /// The typed tables on an existing pool, created if needed.
    ///
    /// # Errors
    /// A backend error if the tables cannot be created.
    pub async fn from_pool(pool: PgPool) -> Result<Self> {
        run(&pool, TYPED_MIGRATIONS).await?;
        Ok(Self { pool })
    }

    /// The pool.
    #[must_use]
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}
