//! Object-safe form of [`Checkpointer`], so graphs can hold any saver behind an `Arc`.

use super::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointTuple, Checkpointer, ListQuery, TaskWrites,
    ThreadStorage, Version,
};
use crate::error::Result;
use futures::future::BoxFuture;
use serde_json::Value;
use std::collections::BTreeMap;

/// [`Checkpointer`] with boxed futures. Every `Checkpointer` implements it.
pub trait DynCheckpointer: Send + Sync + 'static {
    /// See [`Checkpointer::get_tuple`].
    fn get_tuple<'a>(
        &'a self,
        config: &'a CheckpointConfig,
    ) -> BoxFuture<'a, Result<Option<CheckpointTuple>>>;
    /// See [`Checkpointer::list`].
    fn list<'a>(&'a self, query: &'a ListQuery) -> BoxFuture<'a, Result<Vec<CheckpointTuple>>>;
    /// See [`Checkpointer::put`].
    fn put<'a>(
        &'a self,
        config: &'a CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> BoxFuture<'a, Result<CheckpointConfig>>;
    /// See [`Checkpointer::put_writes`].
    fn put_writes<'a>(
        &'a self,
        config: &'a CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &'a str,
        task_path: &'a str,
    ) -> BoxFuture<'a, Result<()>>;
    /// See [`Checkpointer::put_writes_then_checkpoint`].
    fn put_writes_then_checkpoint<'a>(
        &'a self,
        writes: TaskWrites,
        config: &'a CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> BoxFuture<'a, Result<CheckpointConfig>>;
    /// See [`Checkpointer::delete_thread`].
    fn delete_thread<'a>(&'a self, thread_id: &'a str) -> BoxFuture<'a, Result<()>>;
    /// See [`Checkpointer::copy_thread`].
    fn copy_thread<'a>(&'a self, source: &'a str, target: &'a str) -> BoxFuture<'a, Result<()>>;
    /// See [`Checkpointer::delete_run`].
    fn delete_run<'a>(&'a self, thread_id: &'a str, run_id: &'a str) -> BoxFuture<'a, Result<()>>;
    /// [`Checkpointer::saves_in_order`].
    fn saves_in_order(&self) -> bool;
    /// See [`Checkpointer::prune_to_latest`].
    fn prune_to_latest<'a>(&'a self, thread_id: &'a str) -> BoxFuture<'a, Result<usize>>;
    /// See [`Checkpointer::thread_storage`].
    fn thread_storage<'a>(&'a self, thread_id: &'a str) -> BoxFuture<'a, Result<ThreadStorage>>;
    /// The saver itself, so code that knows a backend can reach its own API through a
    /// shared `Arc<dyn DynCheckpointer>` (`as_any().downcast_ref::<PostgresSaver>()`, say).
    fn as_any(&self) -> &dyn std::any::Any;
}

impl<T: Checkpointer> DynCheckpointer for T {
    fn get_tuple<'a>(
        &'a self,
        config: &'a CheckpointConfig,
    ) -> BoxFuture<'a, Result<Option<CheckpointTuple>>> {
        Box::pin(Checkpointer::get_tuple(self, config))
    }
    fn list<'a>(&'a self, query: &'a ListQuery) -> BoxFuture<'a, Result<Vec<CheckpointTuple>>> {
        Box::pin(Checkpointer::list(self, query))
    }
    fn put<'a>(
        &'a self,
        config: &'a CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> BoxFuture<'a, Result<CheckpointConfig>> {
        Box::pin(Checkpointer::put(
            self,
            config,
            checkpoint,
            metadata,
            new_versions,
        ))
    }
    fn put_writes<'a>(
        &'a self,
        config: &'a CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &'a str,
        task_path: &'a str,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(Checkpointer::put_writes(self, config, writes, task_id, task_path))
    }
    fn put_writes_then_checkpoint<'a>(
        &'a self,
        writes: TaskWrites,
        config: &'a CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> BoxFuture<'a, Result<CheckpointConfig>> {
        Box::pin(Checkpointer::put_writes_then_checkpoint(
            self,
            writes,
            config,
            checkpoint,
            metadata,
            new_versions,
        ))
    }
    fn delete_thread<'a>(&'a self, thread_id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(Checkpointer::delete_thread(self, thread_id))
    }
    fn copy_thread<'a>(&'a self, source: &'a str, target: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(Checkpointer::copy_thread(self, source, target))
    }
    fn delete_run<'a>(&'a self, thread_id: &'a str, run_id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(Checkpointer::delete_run(self, thread_id, run_id))
    }
    fn saves_in_order(&self) -> bool {
        Checkpointer::saves_in_order(self)
    }
    fn prune_to_latest<'a>(&'a self, thread_id: &'a str) -> BoxFuture<'a, Result<usize>> {
        Box::pin(Checkpointer::prune_to_latest(self, thread_id))
    }
    fn thread_storage<'a>(&'a self, thread_id: &'a str) -> BoxFuture<'a, Result<ThreadStorage>> {
        Box::pin(Checkpointer::thread_storage(self, thread_id))
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
