//! [`Faulty`]: a checkpointer around the server's whose faults a test switches on.

use graphloom_core::checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointTuple, Checkpointer, DynCheckpointer,
    ListQuery, TaskWrites, Version,
};
use graphloom_core::{BackendError, BackendErrorKind};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{oneshot, Semaphore};

/// Reads that fail on demand, and a save held until the test lets it go. Saves go one at a
/// time, in the order they were issued (so saves after a held one wait for it, and the
/// wrapper keeps the inner checkpointer's [`Checkpointer::saves_in_order`]).
pub struct Faulty {
    inner: Arc<dyn DynCheckpointer>,
    order: tokio::sync::Mutex<()>,
    reads_fail: AtomicBool,
    /// Armed by [`Faulty::hold_next_save`]: where the held checkpoint's id goes.
    hold: Mutex<Option<oneshot::Sender<String>>>,
    release: Semaphore,
}

impl Faulty {
    pub fn new(inner: Arc<dyn DynCheckpointer>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            order: tokio::sync::Mutex::new(()),
            reads_fail: AtomicBool::new(false),
            hold: Mutex::new(None),
            release: Semaphore::new(0),
        })
    }

    /// Make every read fail from now on (or not).
    pub fn fail_reads(&self, on: bool) {
        self.reads_fail.store(on, Ordering::SeqCst);
    }

    /// Hold the next checkpoint saved until [`Faulty::release_save`]: the receiver gets its
    /// id when the save begins.
    pub fn hold_next_save(&self) -> oneshot::Receiver<String> {
        let (tx, rx) = oneshot::channel();
        *self.hold.lock().unwrap() = Some(tx);
        rx
    }

    /// Let the held save go on.
    pub fn release_save(&self) {
        self.release.add_permits(1);
    }

    fn check_read(&self) -> graphloom_core::Result<()> {
        if self.reads_fail.load(Ordering::SeqCst) {
            return Err(BackendError::new(BackendErrorKind::Other, "reads are down").into());
        }
        Ok(())
    }

    async fn before_save(&self, id: &str) {
        let armed = self.hold.lock().unwrap().take();
        if let Some(tx) = armed {
            let _ = tx.send(id.to_owned());
            self.release.acquire().await.unwrap().forget();
        }
    }
}

impl Checkpointer for Faulty {
    async fn get_tuple(&self, config: &CheckpointConfig) -> graphloom_core::Result<Option<CheckpointTuple>> {
        self.check_read()?;
        self.inner.get_tuple(config).await
    }
    async fn list(&self, query: &ListQuery) -> graphloom_core::Result<Vec<CheckpointTuple>> {
        self.check_read()?;
        self.inner.list(query).await
    }
    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> graphloom_core::Result<CheckpointConfig> {
        let _turn = self.order.lock().await;
        self.before_save(&checkpoint.id).await;
        self.inner.put(config, checkpoint, metadata, new_versions).await
    }
    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> graphloom_core::Result<()> {
        let _turn = self.order.lock().await;
        self.inner.put_writes(config, writes, task_id, task_path).await
    }
    async fn put_writes_then_checkpoint(
        &self,
        writes: TaskWrites,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> graphloom_core::Result<CheckpointConfig> {
        let _turn = self.order.lock().await;
        self.before_save(&checkpoint.id).await;
        self.inner
            .put_writes_then_checkpoint(writes, config, checkpoint, metadata, new_versions)
            .await
    }
    async fn delete_thread(&self, thread_id: &str) -> graphloom_core::Result<()> {
        self.inner.delete_thread(thread_id).await
    }
    async fn copy_thread(&self, source: &str, target: &str) -> graphloom_core::Result<()> {
        self.inner.copy_thread(source, target).await
    }
    async fn delete_run(&self, thread_id: &str, run_id: &str) -> graphloom_core::Result<()> {
        self.inner.delete_run(thread_id, run_id).await
    }
    fn saves_in_order(&self) -> bool {
        self.inner.saves_in_order()
    }
}

/// `counter` on a [`Faulty`] around the server's checkpointer: one node counting a step.
/// The factory hands the checkpointer it made to `slot` (one per server). With
/// `fail_reads_at_end`, the graph's end hook makes its reads fail.
pub fn counter(
    slot: &Arc<Mutex<Option<Arc<Faulty>>>>,
    fail_reads_at_end: bool,
) -> graphloom_server::GraphFactory {
    use super::{Chat, ChatUpdate};
    use graphloom_core::{StateGraph, END, START};
    use graphloom_server::{hosted, Hosting, RunEnd};
    let slot = Arc::clone(slot);
    Arc::new(move |deps: &graphloom_server::GraphDeps| {
        let faulty = Arc::clone(
            slot.lock()
                .unwrap()
                .get_or_insert_with(|| Faulty::new(Arc::clone(&deps.checkpointer))),
        );
        let g = StateGraph::<Chat>::new()
            .add_node("count", |_s: Arc<Chat>, _rt| async {
                Ok(ChatUpdate::new().steps(1))
            })
            .add_edge(START, "count")
            .add_edge("count", END)
            .checkpointer_dyn(Arc::clone(&faulty) as Arc<dyn DynCheckpointer>)
            .compile()?;
        if !fail_reads_at_end {
            return Ok(hosted(g));
        }
        Ok(Hosting::new(hosted(g))
            .on_run_end(move |_end: RunEnd| {
                let faulty = Arc::clone(&faulty);
                async move {
                    faulty.fail_reads(true);
                    Ok::<(), String>(())
                }
            })
            .into_hosted())
    })
}
