//! Checkpoint hooks: application writes committed in the same transaction as a checkpoint.
//!
//! A [`CheckpointHook`] set on a [`PostgresSaver`] with
//! [`with_hook`](PostgresSaver::with_hook) sees every checkpoint the saver is about to
//! store. Its [`wants`](CheckpointHook::wants) is asked first, with the checkpoint's
//! metadata and the channel values it changed (no database work, so every checkpoint a hook
//! does not want costs a map lookup or two). For a checkpoint some hook wants, the saver
//! opens a transaction, writes the checkpoint (and the pending writes that came with it)
//! in it, runs each such hook's [`apply`](CheckpointHook::apply) on the same connection,
//! and commits. So the application's rows and the checkpoint are **one commit**:
//!
//! - both are saved, or neither is: if a hook fails, the transaction rolls back and the
//!   put fails with an [`Error::Backend`] that names the hook, the checkpoint and the
//!   hook's error (kept as the error's source); the run that wrote the checkpoint fails
//!   with it, and the thread's latest checkpoint is the one before;
//! - a crash can never leave a checkpoint without the hook's rows, or rows of a checkpoint
//!   that was not saved.
//!
//! A hook that needs more than what changed (the whole state at this checkpoint, say)
//! reads it inside the transaction with [`HookCheckpoint::values`]. Hooks that create
//! tables do it in [`setup`](CheckpointHook::setup), which runs once per saver before the
//! hook is first applied (and when [`PostgresSaver::migrate`] is called); a failed setup
//! fails that put the same way and is retried on the next one.
//!
//! Hooks run only for checkpoints written with `put` and `put_writes_then_checkpoint` (the
//! executor's saves and `update_state`), not for `copy_thread`, `delete_thread`, pruning
//! or pending writes alone. A retaken or resumed run may reach the same logical point
//! twice, so a hook should upsert rather than insert.
//!
//! ```no_run
//! use graphloom_postgres::saver::{CheckpointHook, HookCheckpoint, HookError, HookFuture};
//! use graphloom_postgres::PostgresSaver;
//! use sqlx::PgConnection;
//!
//! /// One row per finished thread, with its final state as JSONB.
//! struct Finished;
//!
//! impl CheckpointHook for Finished {
//!     fn name(&self) -> &str {
//!         "finished"
//!     }
//!     fn setup<'a>(&'a self, pool: &'a sqlx::PgPool) -> HookFuture<'a, Result<(), HookError>> {
//!         Box::pin(async move {
//!             sqlx::query("CREATE TABLE IF NOT EXISTS finished (thread_id TEXT PRIMARY KEY, state JSONB NOT NULL)")
//!                 .execute(pool)
//!                 .await?;
//!             Ok(())
//!         })
//!     }
//!     fn wants(&self, cp: &HookCheckpoint<'_>) -> bool {
//!         cp.checkpoint_ns().is_empty() && cp.new_json("done") == Some(&serde_json::Value::Bool(true))
//!     }
//!     fn apply<'a>(
//!         &'a self,
//!         conn: &'a mut PgConnection,
//!         cp: &'a HookCheckpoint<'a>,
//!     ) -> HookFuture<'a, Result<(), HookError>> {
//!         Box::pin(async move {
//!             let state = serde_json::Value::Object(cp.values(&mut *conn).await?.into_iter().collect());
//!             sqlx::query(
//!                 "INSERT INTO finished VALUES ($1, $2)
//!                  ON CONFLICT (thread_id) DO UPDATE SET state = EXCLUDED.state",
//!             )
//!             .bind(cp.thread_id())
//!             .bind(sqlx::types::Json(state))
//!             .execute(&mut *conn)
//!             .await?;
//!             Ok(())
//!         })
//!     }
//! }
//!
//! # async fn open(url: &str) -> graphloom_core::Result<()> {
//! let saver = PostgresSaver::connect(url).await?.with_hook(Finished);
//! saver.migrate().await?; // the saver's tables and the hook's, now
//! # Ok(()) }
//! ```

use super::PostgresSaver;
use crate::error::classify;
use graphloom_core::checkpoint::{ChannelValue, Checkpoint, CheckpointConfig, CheckpointMetadata};
use graphloom_core::{BackendError, BackendErrorKind, Error, ErrorSource, Result};
use serde_json::Value;
use sqlx::{PgConnection, PgPool};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// The error a hook returns: any error (a `sqlx::Error` converts with `?`). The saver
/// keeps it as the source of the put's error.
pub type HookError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The future a hook returns.
pub type HookFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Application work committed with the checkpoints it wants; see the
/// [module docs](self).
pub trait CheckpointHook: Send + Sync + 'static {
    /// The hook's name: shown in errors; a saver holds one hook per name.
    fn name(&self) -> &str;

    /// Create what the hook writes to (tables, indexes), once per saver, on its own
    /// connection, before the hook is first applied or when
    /// [`PostgresSaver::migrate`] runs. The default does nothing.
    fn setup<'a>(&'a self, pool: &'a PgPool) -> HookFuture<'a, std::result::Result<(), HookError>> {
        let _ = pool;
        Box::pin(async { Ok(()) })
    }

    /// Whether this checkpoint needs the hook. Called for every checkpoint the saver is
    /// about to store, before anything is sent to the database: keep it cheap (look at
    /// [`HookCheckpoint::metadata`] and [`HookCheckpoint::new_json`]).
    fn wants(&self, checkpoint: &HookCheckpoint<'_>) -> bool;

    /// Write the hook's rows on `conn`, inside the transaction that has just written the
    /// checkpoint (not yet committed). An error rolls the transaction back: neither the
    /// checkpoint nor anything the hook wrote is saved, and the put fails.
    fn apply<'a>(
        &'a self,
        conn: &'a mut PgConnection,
        checkpoint: &'a HookCheckpoint<'a>,
    ) -> HookFuture<'a, std::result::Result<(), HookError>>;
}

/// A checkpoint being stored, as a [`CheckpointHook`] sees it.
#[derive(Debug, Clone, Copy)]
pub struct HookCheckpoint<'a> {
    saver: &'a PostgresSaver,
    parent: &'a CheckpointConfig,
    checkpoint: &'a Checkpoint,
    metadata: &'a CheckpointMetadata,
}

impl<'a> HookCheckpoint<'a> {
    pub(super) fn new(
        saver: &'a PostgresSaver,
        parent: &'a CheckpointConfig,
        checkpoint: &'a Checkpoint,
        metadata: &'a CheckpointMetadata,
    ) -> Self {
        Self {
            saver,
            parent,
            checkpoint,
            metadata,
        }
    }

    /// The thread.
    #[must_use]
    pub fn thread_id(&self) -> &'a str {
        &self.parent.thread_id
    }

    /// The namespace: empty for the root graph, `node:task` segments for subgraphs.
    #[must_use]
    pub fn checkpoint_ns(&self) -> &'a str {
        &self.parent.checkpoint_ns
    }

    /// The id of the checkpoint being stored.
    #[must_use]
    pub fn checkpoint_id(&self) -> &'a str {
        &self.checkpoint.id
    }

    /// The checkpoint it follows, if any.
    #[must_use]
    pub fn parent_checkpoint_id(&self) -> Option<&'a str> {
        self.parent.checkpoint_id.as_deref()
    }

    /// Its metadata (source, step, run id, the run's own metadata).
    #[must_use]
    pub fn metadata(&self) -> &'a CheckpointMetadata {
        self.metadata
    }

    /// The checkpoint as `put` received it: `channel_values` holds only the channels that
    /// changed, a list that grew as just its new items ([`ChannelValue::Append`]).
    #[must_use]
    pub fn checkpoint(&self) -> &'a Checkpoint {
        self.checkpoint
    }

    /// The new value of `channel`, if this checkpoint changed it (as stored: a list that
    /// grew holds only its new items).
    #[must_use]
    pub fn new_value(&self, channel: &str) -> Option<&'a ChannelValue> {
        self.checkpoint.channel_values.get(channel)
    }

    /// The new value of `channel` when this checkpoint wrote it whole (a field of last-value
    /// semantics, say); `None` if the channel did not change or only grew.
    #[must_use]
    pub fn new_json(&self, channel: &str) -> Option<&'a Value> {
        match self.new_value(channel)? {
            ChannelValue::Full(v) => Some(v),
            ChannelValue::Append { .. } | ChannelValue::Items(_) => None,
        }
    }

    /// Every channel of this checkpoint with its whole value (append chains resolved), read
    /// on `conn` inside the put's transaction, so it includes what this checkpoint writes.
    /// Costs the queries of a `get_tuple`; call it only from [`CheckpointHook::apply`].
    ///
    /// # Errors
    /// A typed backend error if the read fails,
    /// [`Error::CorruptCheckpoint`] if a stored value does not decode.
    pub async fn values(&self, conn: &mut PgConnection) -> Result<BTreeMap<String, Value>> {
        let config = CheckpointConfig {
            checkpoint_id: Some(self.checkpoint.id.clone()),
            ..self.parent.clone()
        };
        let Some(tuple) = self.saver.read_tuple_on(conn, &config).await? else {
            return Err(Error::Backend(BackendError::new(
                BackendErrorKind::NotFound,
                format!(
                    "postgres put: checkpoint {} of thread `{}` is not in its own transaction",
                    self.checkpoint.id, self.parent.thread_id
                ),
            )));
        };
        Ok(tuple
            .checkpoint
            .channel_values
            .into_iter()
            .map(|(channel, value)| {
                let value = match value.into_owned() {
                    ChannelValue::Full(v) => v,
                    // Reads resolve every channel to a full value; keep the shape anyway.
                    ChannelValue::Append { items, .. } => Value::Array(items),
                    ChannelValue::Items(items) => graphloom_core::checkpoint::items_to_json(&items),
                };
                (channel, value)
            })
            .collect())
    }
}

/// A hook on a saver, with its one-time setup.
#[derive(Clone)]
pub(super) struct Hooked {
    pub(super) hook: Arc<dyn CheckpointHook>,
    ready: Arc<tokio::sync::OnceCell<()>>,
}

impl std::fmt::Debug for Hooked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointHook")
            .field("name", &self.hook.name())
            .field("ready", &self.ready.initialized())
            .finish()
    }
}

impl Hooked {
    pub(super) fn new(hook: Arc<dyn CheckpointHook>) -> Self {
        Self {
            hook,
            ready: Arc::default(),
        }
    }

    /// Run the hook's setup unless done already; a failure is retried on the next call.
    pub(super) async fn ensure_ready(&self, pool: &PgPool) -> Result<()> {
        if self.ready.initialized() {
            return Ok(());
        }
        self.ready
            .get_or_try_init(|| async {
                self.hook
                    .setup(pool)
                    .await
                    .map_err(|e| failed(self.hook.name(), format!("could not set up: {e}"), e))
            })
            .await
            .map(|_| ())
    }
}

/// The put's error for a failure of hook `name`.
fn failed(name: &str, what: String, e: HookError) -> Error {
    let kind = if let Some(sql) = e.downcast_ref::<sqlx::Error>() {
        classify(sql)
    } else if let Some(Error::Backend(b)) = e.downcast_ref::<Error>() {
        b.kind()
    } else {
        BackendErrorKind::Other
    };
    Error::Backend(BackendError::caused_by(
        kind,
        format!("postgres put: checkpoint hook `{name}` {what}"),
        ErrorSource::from_boxed(e),
    ))
}

impl PostgresSaver {
    /// The hooks that want this checkpoint.
    pub(super) fn wanted_hooks(
        &self,
        parent: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
    ) -> Vec<Hooked> {
        if self.hooks.is_empty() {
            return Vec::new();
        }
        let view = HookCheckpoint::new(self, parent, checkpoint, metadata);
        self.hooks
            .iter()
            .filter(|h| h.hook.wants(&view))
            .cloned()
            .collect()
    }

    /// Set up `hooks` (each once per saver).
    pub(super) async fn ready(&self, hooks: &[Hooked]) -> Result<()> {
        for h in hooks {
            h.ensure_ready(&self.pool).await?;
        }
        Ok(())
    }

    /// Apply `hooks` on the put's transaction, after the checkpoint was written.
    pub(super) async fn apply_hooks(
        &self,
        conn: &mut PgConnection,
        hooks: &[Hooked],
        parent: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
    ) -> Result<()> {
        let view = HookCheckpoint::new(self, parent, checkpoint, metadata);
        for h in hooks {
            h.hook.apply(&mut *conn, &view).await.map_err(|e| {
                failed(
                    h.hook.name(),
                    format!(
                        "failed, so checkpoint {} of thread `{}` was not saved: {e}",
                        checkpoint.id, parent.thread_id
                    ),
                    e,
                )
            })?;
        }
        Ok(())
    }
}
