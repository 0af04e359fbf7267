//! Checkpoints of the server's threads kept outside its checkpointer: a second store of
//! them that the server deletes, copies and prunes along with its own.
//!
//! A graph that checkpoints through a saver of its own (a Python LangGraph graph, whose
//! savers keep LangGraph's checkpoints in tables of their own) still has its threads
//! deleted (`DELETE /threads/{id}`, thread TTLs), copied (`POST /threads/{id}/copy`),
//! pruned (`keep_latest`) and rolled back (a `rollback` cancel) by the server: give those
//! checkpoints as [`ThreadCheckpoints`] to
//! [`ServerBuilder::mirror_checkpoints`](crate::ServerBuilder::mirror_checkpoints).

use futures::future::BoxFuture;
use graphloom_core::checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointTuple, DynCheckpointer, ListQuery,
    TaskWrites, ThreadStorage, Version,
};
use graphloom_core::Result;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What the server does to the threads of a second checkpoint store (see the module docs).
pub trait ThreadCheckpoints: Send + Sync + 'static {
    /// Delete every checkpoint of `thread_id`.
    fn delete_thread<'a>(&'a self, thread_id: &'a str) -> BoxFuture<'a, Result<()>>;
    /// Copy every checkpoint of `source` to `target`.
    fn copy_thread<'a>(&'a self, source: &'a str, target: &'a str) -> BoxFuture<'a, Result<()>>;
    /// Delete what run `run_id` checkpointed on `thread_id`.
    fn delete_run<'a>(&'a self, thread_id: &'a str, run_id: &'a str) -> BoxFuture<'a, Result<()>>;
    /// Keep only the latest checkpoint of `thread_id`.
    fn prune_to_latest<'a>(&'a self, thread_id: &'a str) -> BoxFuture<'a, Result<()>>;
    /// What the checkpoints of `thread_id` take in storage here.
    fn thread_storage<'a>(&'a self, thread_id: &'a str) -> BoxFuture<'a, Result<ThreadStorage>>;
}

/// The server's checkpointer with a mirror: reads and writes are the checkpointer's; thread
/// deletes, copies, run deletes and prunes go to both (the mirror second); a thread's
/// storage is what both hold.
pub(crate) struct Mirrored {
    main: Arc<dyn DynCheckpointer>,
    mirror: Arc<dyn ThreadCheckpoints>,
}

impl Mirrored {
    pub(crate) fn wrap(
        main: Arc<dyn DynCheckpointer>,
        mirror: Arc<dyn ThreadCheckpoints>,
    ) -> Arc<dyn DynCheckpointer> {
        Arc::new(Self { main, mirror })
    }
}

impl DynCheckpointer for Mirrored {
    fn get_tuple<'a>(
        &'a self,
        config: &'a CheckpointConfig,
    ) -> BoxFuture<'a, Result<Option<CheckpointTuple>>> {
        self.main.get_tuple(config)
    }
    fn list<'a>(&'a self, query: &'a ListQuery) -> BoxFuture<'a, Result<Vec<CheckpointTuple>>> {
        self.main.list(query)
    }
    fn put<'a>(
        &'a self,
        config: &'a CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> BoxFuture<'a, Result<CheckpointConfig>> {
        self.main.put(config, checkpoint, metadata, new_versions)
    }
    fn put_writes<'a>(
        &'a self,
        config: &'a CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &'a str,
        task_path: &'a str,
    ) -> BoxFuture<'a, Result<()>> {
        self.main.put_writes(config, writes, task_id, task_path)
    }
    fn put_writes_then_checkpoint<'a>(
        &'a self,
        writes: TaskWrites,
        config: &'a CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> BoxFuture<'a, Result<CheckpointConfig>> {
        self.main
            .put_writes_then_checkpoint(writes, config, checkpoint, metadata, new_versions)
    }
    fn delete_thread<'a>(&'a self, thread_id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            self.main.delete_thread(thread_id).await?;
            self.mirror.delete_thread(thread_id).await
        })
    }
    fn copy_thread<'a>(&'a self, source: &'a str, target: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            self.main.copy_thread(source, target).await?;
            self.mirror.copy_thread(source, target).await
        })
    }
    fn delete_run<'a>(&'a self, thread_id: &'a str, run_id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            self.main.delete_run(thread_id, run_id).await?;
            self.mirror.delete_run(thread_id, run_id).await
        })
    }
    fn saves_in_order(&self) -> bool {
        self.main.saves_in_order()
    }
    fn prune_to_latest<'a>(&'a self, thread_id: &'a str) -> BoxFuture<'a, Result<usize>> {
        Box::pin(async move {
            let pruned = self.main.prune_to_latest(thread_id).await?;
            self.mirror.prune_to_latest(thread_id).await?;
            Ok(pruned)
        })
    }
    fn thread_storage<'a>(&'a self, thread_id: &'a str) -> BoxFuture<'a, Result<ThreadStorage>> {
        Box::pin(async move {
            let mut all = self.main.thread_storage(thread_id).await?;
            all.add(&self.mirror.thread_storage(thread_id).await?);
            Ok(all)
        })
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self.main.as_any()
    }
}
