//! How a run saves: per durability mode, with writes never later than their checkpoint.

use crate::checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, DynCheckpointer, TaskWrites, Version,
};
use crate::error::{Error, Result};
use crate::types::Durability;
use futures::future::BoxFuture;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// A checkpoint put not yet made, with the writes of the task that finished its step.
pub(crate) struct Held {
    writes: Option<TaskWrites>,
    cfg: CheckpointConfig,
    cp: Checkpoint,
    meta: CheckpointMetadata,
    nv: BTreeMap<String, Version>,
}

impl Held {
    async fn put(self, s: &Arc<dyn DynCheckpointer>) -> Result<()> {
        match self.writes {
            Some(w) => s
                .put_writes_then_checkpoint(w, &self.cfg, self.cp, self.meta, self.nv)
                .await
                .map(|_| ()),
            None => s.put(&self.cfg, self.cp, self.meta, self.nv).await.map(|_| ()),
        }
    }
}

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
    /// Each save awaited before the loop goes on; held checkpoints (see [`Saver::hold`])
    /// and issued saves (see [`Saver::issue`]) go with the next save, in order.
    Sync(Arc<dyn DynCheckpointer>, Queue),
    /// Saves queued to one background writer, applied in order.
    Async(mpsc::UnboundedSender<SaveOp>, JoinHandle<Result<()>>),
    /// Only the last checkpoint (and the writes against it) saved, at the end.
    Exit(Arc<dyn DynCheckpointer>, Vec<(String, Vec<(String, Value)>)>),
}

impl Saver {
    pub fn new(saver: Option<Arc<dyn DynCheckpointer>>, mode: Durability) -> Self {
        let Some(saver) = saver else { return Saver::None };
        match mode {
            Durability::Sync => Saver::Sync(saver, Queue::default()),
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
            Saver::Sync(s, q) => {
                tokio::try_join!(flush(s, q), s.put_writes(cfg, writes, task_id, "")).map(|_| ())
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

    /// Save a checkpoint later, with the next save or at the end of the run (`sync` mode;
    /// other modes save at once). Held checkpoints are put at the same moment as the next
    /// save, queued before it (one commit where the backend groups them), or at the end of
    /// the run alongside its [`CompletionHook`](crate::CompletionHook); every other save,
    /// and the end of the run however it ends, puts them first. Two checkpoints qualify,
    /// neither with node code between it and that next save: a run's input (the step after
    /// it runs only the `__start__` pseudo-task; the input is the caller's), and the last
    /// checkpoint of a run that completes (its end is reported only once it is saved).
    pub async fn hold(
        &mut self,
        writes: Option<TaskWrites>,
        cfg: &CheckpointConfig,
        cp: Checkpoint,
        meta: CheckpointMetadata,
        nv: BTreeMap<String, Version>,
    ) -> Result<()> {
        match self {
            Saver::Sync(_, q) => {
                q.held.push(Held {
                    writes,
                    cfg: cfg.clone(),
                    cp,
                    meta,
                    nv,
                });
                Ok(())
            }
            me => me.put_after(writes, cfg, cp, meta, nv).await,
        }
    }

    /// Save a checkpoint without waiting for it (`sync` mode on a backend that saves in
    /// order): it and the held checkpoints are issued now, each queued at the backend, and
    /// awaited with the next save or at the end of the run, which the backend makes durable
    /// after them. For the `__start__` step's checkpoint: the first node starts while its
    /// run's input is being saved, and the thread shows that input as soon as it is (a
    /// crash before it is leaves the thread as it was; the run applies its input again).
    /// Elsewhere: saved at once, as [`Self::put_after`].
    pub async fn issue(
        &mut self,
        writes: Option<TaskWrites>,
        cfg: &CheckpointConfig,
        cp: Checkpoint,
        meta: CheckpointMetadata,
        nv: BTreeMap<String, Version>,
    ) -> Result<()> {
        if !matches!(self, Saver::Sync(s, _) if s.saves_in_order()) {
            return self.put_after(writes, cfg, cp, meta, nv).await;
        }
        self.hold(writes, cfg, cp, meta, nv).await?;
        match self {
            Saver::Sync(s, q) => {
                let (s, mut later) = (Arc::clone(s), std::mem::take(q));
                let mut issued: BoxFuture<'static, Result<()>> =
                    Box::pin(async move { flush(&s, &mut later).await });
                // The first poll queues the saves at the backend.
                match futures::poll!(&mut issued) {
                    std::task::Poll::Ready(r) => r,
                    std::task::Poll::Pending => {
                        *q.issued() = Some(issued);
                        Ok(())
                    }
                }
            }
            _ => Ok(()),
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
            Saver::Sync(s, q) if q.is_empty() => s.put(cfg, cp, meta, nv).await.map(|_| ()),
            // The held checkpoints and this one, at once (queued in that order).
            Saver::Sync(s, q) => tokio::try_join!(flush(s, q), s.put(cfg, cp, meta, nv)).map(|_| ()),
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
            (Saver::Sync(s, q), Some(w)) => {
                // The writes may belong to a held checkpoint: it is queued first.
                let put = s.put_writes_then_checkpoint(w, cfg, cp, meta, nv);
                tokio::try_join!(flush(s, q), put).map(|_| ())
            }
            (me, Some(w)) => {
                me.put_writes(&w.config, w.writes, &w.task_id).await?;
                me.put(cfg, cp, meta, nv).await
            }
            (me, None) => me.put(cfg, cp, meta, nv).await,
        }
    }

    /// Flush what is pending: `exit` mode's buffered writes (after its final checkpoint was
    /// put by the caller), `async` mode's queue; then run `then` (a completed run's hook).
    /// In `sync` mode `then` runs while the held checkpoints are put, its first poll after
    /// theirs, so writes it queues at once follow theirs in the backend's queue.
    pub async fn finish(
        self,
        cfg: &CheckpointConfig,
        then: Option<futures::future::BoxFuture<'static, ()>>,
    ) -> Result<()> {
        match self {
            Saver::Sync(s, mut q) => match then {
                Some(then) => tokio::join!(flush(&s, &mut q), then).0,
                None => flush(&s, &mut q).await,
            },
            me => {
                me.finish_queued(cfg).await?;
                if let Some(then) = then {
                    then.await;
                }
                Ok(())
            }
        }
    }

    async fn finish_queued(self, cfg: &CheckpointConfig) -> Result<()> {
        match self {
            Saver::None => Ok(()),
            Saver::Sync(s, mut q) => flush(&s, &mut q).await,
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

/// Saves of `sync` mode not yet awaited.
#[derive(Default)]
pub(crate) struct Queue {
    /// Held: not yet issued.
    held: Vec<Held>,
    /// Issued (queued at a backend that saves in order), not yet awaited. (In a mutex only
    /// to be `Sync`: it is reached through `&mut`.)
    issued: std::sync::Mutex<Option<BoxFuture<'static, Result<()>>>>,
}

impl Queue {
    fn issued(&mut self) -> &mut Option<BoxFuture<'static, Result<()>>> {
        self.issued
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn is_empty(&self) -> bool {
        self.held.is_empty()
            && self
                .issued
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .is_none()
    }
}

/// Await the issued saves and put the held checkpoints, at once (queued in order).
async fn flush(s: &Arc<dyn DynCheckpointer>, q: &mut Queue) -> Result<()> {
    let issued = q.issued().take();
    let held = std::mem::take(&mut q.held);
    let puts = async move {
        match held.len() {
            0 => Ok(()),
            1 => match held.into_iter().next() {
                Some(h) => h.put(s).await,
                None => Ok(()),
            },
            _ => futures::future::try_join_all(held.into_iter().map(|h| h.put(s)))
                .await
                .map(|_| ()),
        }
    };
    match issued {
        Some(issued) => tokio::try_join!(issued, puts).map(|_| ()),
        None => puts.await,
    }
}
