//! How a run saves: per durability mode, with writes never later than their checkpoint.

use crate::checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, DynCheckpointer, TaskWrites, Version,
};
use crate::error::{Error, Result};
use crate::types::Durability;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// A checkpoint put not yet made.
pub(crate) type Held = (
    CheckpointConfig,
    Checkpoint,
    CheckpointMetadata,
    BTreeMap<String, Version>,
);

pub(crate) enum SaveOp {
    Writes(CheckpointConfig, Vec<(String, Value)>, String),
    Checkpoint(
        Box<(
            CheckpointConfig,
            Checkpoint,
            CheckpointMetadata,
            BTreeMap<String, Version>,
        )>,
    ),
}

/// Where a run's checkpoints and writes go.
pub(crate) enum Saver {
    /// No checkpointer or no thread: nothing is saved.
    None,
    /// Each save awaited before the loop goes on; a held input checkpoint (see
    /// [`Saver::hold`]) goes with the next save.
    Sync(Arc<dyn DynCheckpointer>, Option<Box<Held>>),
    /// Saves queued to one background writer, applied in order.
    Async(mpsc::UnboundedSender<SaveOp>, JoinHandle<Result<()>>),
    /// Only the last checkpoint (and the writes against it) saved, at the end.
    Exit(Arc<dyn DynCheckpointer>, Vec<(String, Vec<(String, Value)>)>),
}

impl Saver {
    pub fn new(saver: Option<Arc<dyn DynCheckpointer>>, mode: Durability) -> Self {
        let Some(saver) = saver else { return Saver::None };
        match mode {
            Durability::Sync => Saver::Sync(saver, None),
            Durability::Exit => Saver::Exit(saver, Vec::new()),
            Durability::Async => {
                let (tx, mut rx) = mpsc::unbounded_channel::<SaveOp>();
                let s = Arc::clone(&saver);
                let handle = tokio::spawn(async move {
                    // Keep the first error, but drain the queue so the loop never blocks.
                    let mut first: Result<()> = Ok(());
                    while let Some(op) = rx.recv().await {
                        let r = match op {
                            SaveOp::Writes(cfg, w, task) => s.put_writes(&cfg, w, &task, "").await,
                            SaveOp::Checkpoint(b) => {
                                let (cfg, cp, meta, nv) = *b;
                                s.put(&cfg, cp, meta, nv).await.map(|_| ())
                            }
                        };
                        if first.is_ok() {
                            first = r;
                        }
                    }
                    first
                });
                Saver::Async(tx, handle)
            }
        }
    }

    pub fn is_none(&self) -> bool {
        matches!(self, Saver::None)
    }

    /// Whether this is `sync` mode.
    pub fn is_sync(&self) -> bool {
        matches!(self, Saver::Sync(..))
    }

    /// Whether this is `exit` mode.
    pub fn is_exit(&self) -> bool {
        matches!(self, Saver::Exit(..))
    }

    /// Whether per-step checkpoints are written (not in `exit` mode).
    pub fn per_step(&self) -> bool {
        matches!(self, Saver::Sync(..) | Saver::Async(..))
    }

    pub async fn put_writes(
        &mut self,
        cfg: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
    ) -> Result<()> {
        match self {
            Saver::None => Ok(()),
            Saver::Sync(s, held) => {
                flush(s, held).await?;
                s.put_writes(cfg, writes, task_id, "").await
            }
            Saver::Async(tx, _) => tx
                .send(SaveOp::Writes(cfg.clone(), writes, task_id.to_owned()))
                .map_err(|_| {
                    Error::Backend(crate::error::BackendError::new(
                        crate::error::BackendErrorKind::Other,
                        "background writer stopped",
                    ))
                }),
            Saver::Exit(_, buf) => {
                buf.retain(|(t, _)| t != task_id);
                buf.push((task_id.to_owned(), writes));
                Ok(())
            }
        }
    }

    /// Save a run's input checkpoint. In `sync` mode it is held and put together with the
    /// next save (in the same commit where the backend groups them): the step after an
    /// input runs only the `__start__` pseudo-task, no node code, so nothing runs between
    /// the two and a crash before both are saved loses no work (the run's input is its
    /// caller's). Every other save, and the end of the run, puts a held checkpoint first.
    pub async fn hold(
        &mut self,
        cfg: &CheckpointConfig,
        cp: Checkpoint,
        meta: CheckpointMetadata,
        nv: BTreeMap<String, Version>,
    ) -> Result<()> {
        match self {
            Saver::Sync(s, held) => {
                flush(s, held).await?;
                *held = Some(Box::new((cfg.clone(), cp, meta, nv)));
                Ok(())
            }
            me => me.put(cfg, cp, meta, nv).await,
        }
    }

    /// Forget buffered writes (their step completed; `exit` mode only buffers).
    pub fn step_done(&mut self) {
        if let Saver::Exit(_, buf) = self {
            buf.clear();
        }
    }

    pub async fn put(
        &mut self,
        cfg: &CheckpointConfig,
        cp: Checkpoint,
        meta: CheckpointMetadata,
        nv: BTreeMap<String, Version>,
    ) -> Result<()> {
        match self {
            Saver::None => Ok(()),
            Saver::Sync(s, held) => match held.take() {
                // The held input checkpoint and this one, at once (queued in that order).
                Some(first) => {
                    let (cfg0, cp0, meta0, nv0) = *first;
                    tokio::try_join!(s.put(&cfg0, cp0, meta0, nv0), s.put(cfg, cp, meta, nv)).map(|_| ())
                }
                None => s.put(cfg, cp, meta, nv).await.map(|_| ()),
            },
            Saver::Exit(s, _) => s.put(cfg, cp, meta, nv).await.map(|_| ()),
            Saver::Async(tx, _) => tx
                .send(SaveOp::Checkpoint(Box::new((cfg.clone(), cp, meta, nv))))
                .map_err(|_| {
                    Error::Backend(crate::error::BackendError::new(
                        crate::error::BackendErrorKind::Other,
                        "background writer stopped",
                    ))
                }),
        }
    }

    /// [`Self::put`], after the writes of the task that finished the step: in `sync` mode as
    /// one backend operation (one transaction where the backend can).
    pub async fn put_after(
        &mut self,
        writes: Option<TaskWrites>,
        cfg: &CheckpointConfig,
        cp: Checkpoint,
        meta: CheckpointMetadata,
        nv: BTreeMap<String, Version>,
    ) -> Result<()> {
        match (self, writes) {
            (Saver::Sync(s, held), Some(w)) => {
                // The writes may belong to the held checkpoint: it goes first.
                flush(s, held).await?;
                s.put_writes_then_checkpoint(w, cfg, cp, meta, nv)
                    .await
                    .map(|_| ())
            }
            (me, Some(w)) => {
                me.put_writes(&w.config, w.writes, &w.task_id).await?;
                me.put(cfg, cp, meta, nv).await
            }
            (me, None) => me.put(cfg, cp, meta, nv).await,
        }
    }

    /// Flush what is pending: `exit` mode's buffered writes (after its final checkpoint was
    /// put by the caller), `async` mode's queue.
    pub async fn finish(self, cfg: &CheckpointConfig) -> Result<()> {
        match self {
            Saver::None => Ok(()),
            Saver::Sync(s, mut held) => flush(&s, &mut held).await,
            Saver::Exit(s, buf) => {
                for (task, writes) in buf {
                    s.put_writes(cfg, writes, &task, "").await?;
                }
                Ok(())
            }
            Saver::Async(tx, handle) => {
                drop(tx);
                handle.await.map_err(|e| {
                    Error::Backend(crate::error::BackendError::new(
                        crate::error::BackendErrorKind::Other,
                        format!("background writer: {e}"),
                    ))
                })?
            }
        }
    }
}

/// Put the held checkpoint, if any.
async fn flush(s: &Arc<dyn DynCheckpointer>, held: &mut Option<Box<Held>>) -> Result<()> {
    match held.take() {
        Some(first) => {
            let (cfg, cp, meta, nv) = *first;
            s.put(&cfg, cp, meta, nv).await.map(|_| ())
        }
        None => Ok(()),
    }
}
