//! Time travel: read a thread's state and history, edit it, delete or copy it.

use super::compiled::CompiledGraph;
use super::spec::GraphInner;
use crate::checkpoint::{
    self, CheckpointConfig, CheckpointMetadata, CheckpointSource, CheckpointTuple, DynCheckpointer, ListQuery,
};
use crate::config::RunConfig;
use crate::error::{Error, Result};
use crate::pregel::state::LoopState;
use crate::pregel::{fire_edges, pending_tasks};
use crate::state::{State, TaskUpdate};
use crate::types::{Interrupt, START};
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::sync::Arc;

/// A task pending at a checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingTask {
    /// Task id.
    pub id: String,
    /// Node name.
    pub name: String,
    /// Error of its last attempt, if it failed.
    pub error: Option<String>,
    /// Its pending interrupts.
    pub interrupts: Vec<Interrupt>,
    /// Whether it already finished (its writes wait for the step's other tasks).
    pub finished: bool,
}

/// A thread's state at one checkpoint.
#[derive(Debug, Clone)]
pub struct StateSnapshot<S> {
    /// The state values.
    pub values: S,
    /// Nodes that run next (tasks that have not finished).
    pub next: Vec<String>,
    /// Every task of the next step, finished or not.
    pub tasks: Vec<PendingTask>,
    /// Pending interrupts.
    pub interrupts: Vec<Interrupt>,
    /// This checkpoint.
    pub config: CheckpointConfig,
    /// The checkpoint before it.
    pub parent_config: Option<CheckpointConfig>,
    /// Its metadata (`None` for a thread with no checkpoint).
    pub metadata: Option<CheckpointMetadata>,
    /// When it was written.
    pub created_at: Option<String>,
}

/// Filters for [`CompiledGraph::get_state_history`].
#[derive(Debug, Clone, Default)]
pub struct HistoryQuery {
    /// Only checkpoints whose metadata matches every key.
    pub filter: Map<String, Value>,
    /// Only checkpoints older than this id.
    pub before: Option<String>,
    /// At most this many, newest first.
    pub limit: Option<usize>,
}

/// `latest`: the thread's current checkpoint, whose finished tasks are not "next" any more.
/// Older checkpoints list every task of their next step (as it ran then).
fn snapshot<S: State>(g: &GraphInner<S>, t: &CheckpointTuple, latest: bool) -> Result<StateSnapshot<S>> {
    let ls = LoopState::restore(g, t)?;
    let planned = pending_tasks(g, &ls, &t.config.checkpoint_ns);
    let mut tasks = Vec::with_capacity(planned.len());
    let mut interrupts = Vec::new();
    for task in planned {
        // A task whose node failed into its error handler: the handler's writes are the
        // task's (its interrupts, or its result, which finishes the task).
        let handler = crate::pregel::handler_task_id(&task);
        let mine = t
            .pending_writes
            .iter()
            .filter(|w| w.task_id == task.id || w.task_id == handler);
        let mut pt = PendingTask {
            id: task.id.clone(),
            name: task.node.clone(),
            error: None,
            interrupts: Vec::new(),
            finished: false,
        };
        for w in mine {
            match w.channel.as_str() {
                checkpoint::ERROR => {
                    pt.error = Some(
                        w.value
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("error")
                            .to_owned(),
                    );
                }
                checkpoint::INTERRUPT => {
                    pt.interrupts = serde_json::from_value(w.value.clone()).unwrap_or_default();
                }
                checkpoint::RESUME | checkpoint::ERROR_HANDLER => {}
                _ => pt.finished = true,
            }
        }
        if pt.finished {
            pt.interrupts.clear();
            pt.error = None;
        }
        interrupts.extend(pt.interrupts.iter().cloned());
        tasks.push(pt);
    }
    Ok(StateSnapshot {
        values: (*ls.state).clone(),
        next: tasks
            .iter()
            .filter(|t| !(latest && t.finished))
            .map(|t| t.name.clone())
            .collect(),
        tasks,
        interrupts,
        config: t.config.clone(),
        parent_config: t.parent_config.clone(),
        metadata: Some(t.metadata.clone()),
        created_at: Some(t.checkpoint.ts.clone()),
    })
}

impl<S: State> CompiledGraph<S> {
    fn saver(&self) -> Result<&Arc<dyn DynCheckpointer>> {
        self.inner
            .checkpointer
            .as_ref()
            .ok_or(Error::NoCheckpointer("reading or editing thread state"))
    }

    fn thread_cfg(config: &RunConfig) -> Result<CheckpointConfig> {
        let thread = config
            .thread_id
            .clone()
            .ok_or_else(|| Error::NotFound("no thread_id in the run config".into()))?;
        Ok(CheckpointConfig {
            thread_id: thread,
            checkpoint_ns: String::new(),
            checkpoint_id: config.checkpoint_id.clone(),
        })
    }

    /// The thread's state at its latest checkpoint (or `config.checkpoint_id`). A thread
    /// with no checkpoint gives empty values and no metadata.
    pub async fn get_state(&self, config: &RunConfig) -> Result<StateSnapshot<S>> {
        let cfg = Self::thread_cfg(config)?;
        match self.saver()?.get_tuple(&cfg).await? {
            Some(t) => snapshot(&self.inner, &t, true),
            None if cfg.checkpoint_id.is_some() => Err(Error::NotFound(format!(
                "checkpoint of thread `{}`",
                cfg.thread_id
            ))),
            None => Ok(StateSnapshot {
                values: self.inner.shape.empty_like(),
                next: Vec::new(),
                tasks: Vec::new(),
                interrupts: Vec::new(),
                config: cfg,
                parent_config: None,
                metadata: None,
                created_at: None,
            }),
        }
    }

    /// The thread's checkpoints, newest first: all of them with `None` (LangGraph's
    /// `get_state_history(config)`), or those a [`HistoryQuery`] selects.
    pub async fn get_state_history(
        &self,
        config: &RunConfig,
        query: impl Into<Option<HistoryQuery>>,
    ) -> Result<Vec<StateSnapshot<S>>> {
        let query = query.into().unwrap_or_default();
        let cfg = Self::thread_cfg(config)?;
        let before_none = query.before.is_none() && cfg.checkpoint_id.is_none();
        let list = self
            .saver()?
            .list(&ListQuery {
                thread_id: Some(cfg.thread_id),
                checkpoint_ns: Some(String::new()),
                filter: query.filter,
                before: query.before.or(cfg.checkpoint_id),
                limit: query.limit,
            })
            .await?;
        list.iter()
            .enumerate()
            .map(|(i, t)| snapshot(&self.inner, t, i == 0 && before_none))
            .collect()
    }

    /// Apply `update` as if node `as_node` had written it (`None`: the node that ran last,
    /// or START on an empty thread), follow that node's edges, and save a new checkpoint.
    /// Editing an older checkpoint forks the thread from it.
    pub async fn update_state(
        &self,
        config: &RunConfig,
        update: Option<S::Update>,
        as_node: Option<&str>,
    ) -> Result<CheckpointConfig> {
        let saver = Arc::clone(self.saver()?);
        let cfg = Self::thread_cfg(config)?;
        let tuple = saver.get_tuple(&cfg).await?;
        if cfg.checkpoint_id.is_some() && tuple.is_none() {
            return Err(Error::NotFound(format!(
                "checkpoint of thread `{}`",
                cfg.thread_id
            )));
        }
        let g = &self.inner;
        let mut ls = match &tuple {
            Some(t) => LoopState::restore(g, t)?,
            None => LoopState::fresh(&g.shape),
        };
        let node = match as_node {
            Some(n) if n == START || g.nodes.contains_key(n) => n.to_owned(),
            Some(n) => return Err(Error::UnknownNode(n.to_owned())),
            None => last_node(&ls).unwrap_or_else(|| START.to_owned()),
        };
        let is_start = node == START;
        if let Some(triggers) = g.node_triggers.get(&node) {
            for ch in triggers {
                ls.mark_seen(&node, ch);
            }
        }
        let step = ls.step + 1;
        let mut changes = Vec::new();
        if let Some(u) = update {
            Arc::make_mut(&mut ls.state)
                .merge(
                    vec![TaskUpdate {
                        node: node.as_str(),
                        update: u,
                    }],
                    &mut changes,
                )
                .map_err(|source| Error::State { step, source })?;
        }
        for c in &changes {
            let name = ls.state.field_name(c.field).to_owned();
            ls.bump(&name);
            ls.mark_dirty(&name, c.change);
        }
        let mut candidates = BTreeSet::new();
        let mut sends = std::mem::take(&mut ls.sends);
        fire_edges(
            g,
            &mut ls,
            &node,
            is_start,
            Vec::new(),
            &mut candidates,
            &mut sends,
        )?;
        ls.sends = sends;
        ls.step = step;
        ls.checkpoint_id = checkpoint::new_checkpoint_id();
        let (cp, nv) = ls.build_checkpoint(g)?;
        let parent = CheckpointConfig {
            checkpoint_id: ls.saved_id.clone(),
            ..cfg.clone()
        };
        let meta = CheckpointMetadata {
            source: CheckpointSource::Update,
            step,
            parents: Default::default(),
            run_id: None,
            extra: config.metadata.clone(),
        };
        saver.put(&parent, cp, meta, nv).await
    }

    /// Delete a thread's checkpoints.
    pub async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        self.saver()?.delete_thread(thread_id).await
    }

    /// Copy a thread's checkpoints to another thread id.
    pub async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        self.saver()?.copy_thread(source, target).await
    }
}

/// The node that ran most recently: the one whose seen trigger version is newest.
fn last_node<S: State>(ls: &LoopState<S>) -> Option<String> {
    ls.seen
        .iter()
        .filter(|(n, _)| n.as_str() != START)
        .filter_map(|(n, m)| m.values().max().map(|v| (v, n)))
        .max()
        .map(|(_, n)| n.clone())
}
