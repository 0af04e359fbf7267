//! Running a step's tasks: each task's writes saved as it finishes, and the finished
//! writes of a step that stops kept for a resume.

use super::{Loop, UpdateValue};

use super::task::{
    decode_writes, encode_writes, handler_due, handler_task, saved_resumes, task_input, Outcome, Task,
    TaskKind, TaskRun,
};
use crate::checkpoint::{self, CheckpointConfig};
use crate::config::TaskEnd;
use crate::error::{Error, Result};
use crate::graph::node::NodeInput;
use crate::state::State;
use crate::stream::{StreamData, StreamMode, StreamValue};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

impl<S: State> Loop<S> {
    /// In `exit` mode, save the finished writes of a step that did not complete, so a
    /// resume does not run those tasks again.
    pub(super) async fn keep_finished(&mut self, tasks: &[Task], outcomes: &[Outcome<S>]) -> Result<()> {
        if !self.saver.is_exit() {
            return Ok(());
        }
        let cfg = self.current_cfg();
        for (t, o) in tasks.iter().zip(outcomes) {
            let (update, goto, id) = match o {
                Outcome::Done {
                    update,
                    goto,
                    parent: None,
                    ..
                } => (update, goto, t.id.clone()),
                Outcome::Handled { update, goto } => (update, goto, handler_task(t).id),
                _ => continue,
            };
            if matches!(t.kind, TaskKind::Start) {
                continue;
            }
            let writes = encode_writes(&*self.ls.state, update.as_deref(), goto)
                .map_err(|e| Error::node_caused_by(t.node.clone(), e))?;
            self.saver.put_writes(&cfg, writes, &id).await?;
        }
        Ok(())
    }

    /// Run the step's tasks; save each one's writes as it finishes.
    pub(super) async fn run_tasks(&mut self, tasks: &[Task], remaining: usize) -> Result<Vec<Outcome<S>>> {
        let step = self.ls.step + 1;
        let mut outcomes: Vec<Option<Outcome<S>>> = tasks.iter().map(|_| None).collect();
        let mut to_run: Vec<(usize, TaskRun<S>)> = Vec::new();
        let mut started: Vec<Option<Instant>> = vec![None; tasks.len()];
        let mut from_handler = vec![false; tasks.len()];
        let step_checkpoint = self.step_checkpoint();
        for (i, t) in tasks.iter().enumerate() {
            if matches!(t.kind, TaskKind::Start) {
                // The start task cannot fail, so its input is consumed here.
                let start = self.ls.start.take();
                let (update, goto) = start.map_or((None, None), |s| (s.update, s.goto));
                outcomes[i] = Some(Outcome::Done {
                    update: update.map(Arc::new),
                    goto: goto.unwrap_or_default(),
                    parent: None,
                    per_write: None,
                });
                continue;
            }
            if let Some(prev) = decode_writes(&*self.ls.state, &t.id, &self.ls.pending_writes) {
                let prev = prev.map_err(|message| Error::CorruptCheckpoint {
                    thread_id: self.cfg.thread_id.clone(),
                    checkpoint_id: self.ls.checkpoint_id.clone(),
                    message,
                })?;
                self.emit_result(t, &prev, true);
                outcomes[i] = Some(prev);
                continue;
            }
            if let Some(failure) = handler_due(&t.id, &self.ls.pending_writes) {
                // The node failed before the run stopped: its handler runs, not the node.
                let h = handler_task(t);
                if let Some(prev) = decode_writes(&*self.ls.state, &h.id, &self.ls.pending_writes) {
                    let prev = match prev {
                        Ok(Outcome::Done { update, goto, .. }) => Outcome::Handled { update, goto },
                        Ok(other) => other,
                        Err(message) => {
                            return Err(Error::CorruptCheckpoint {
                                thread_id: self.cfg.thread_id.clone(),
                                checkpoint_id: self.ls.checkpoint_id.clone(),
                                message,
                            })
                        }
                    };
                    self.emit_result(t, &prev, true);
                    outcomes[i] = Some(prev);
                    continue;
                }
                started[i] = Some(Instant::now());
                let run = self.handler_run(t, Arc::new(failure), step, remaining, step_checkpoint.clone());
                from_handler[i] = true;
                to_run.push((i, run));
                continue;
            }
            let input = match task_input(&self.g, &self.ls, t) {
                Ok(i) => i,
                Err(e) => {
                    outcomes[i] = Some(Outcome::Failed(e));
                    continue;
                }
            };
            let cache_key = match (&input, self.g.nodes.get(&t.node).and_then(|s| s.cache.as_ref())) {
                (NodeInput::State(s), Some(policy)) => Some((policy.key)(s)),
                _ => None,
            };
            self.task_event(t, None);
            started[i] = Some(Instant::now());
            to_run.push((
                i,
                TaskRun {
                    graph: Arc::clone(&self.g),
                    run: Arc::clone(&self.run),
                    ns: Arc::clone(&self.ns),
                    task: t.clone(),
                    input,
                    cache_key,
                    step,
                    remaining,
                    resumed: saved_resumes(&t.id, &self.ls.pending_writes),
                    events: self.events.clone(),
                    step_checkpoint: step_checkpoint.clone(),
                    failure: None,
                },
            ));
        }
        let cfg = self.current_cfg();
        if to_run.len() == 1 {
            let Some((i, run)) = to_run.pop() else {
                return Err(Error::Cancelled);
            };
            let mut out = self.bounded(run.execute()).await?;
            if let Outcome::HandlerDue(failure) = out {
                // Saved before the handler starts: a run stopped while it runs resumes
                // into the handler, not into the node.
                self.record(
                    &cfg,
                    &tasks[i],
                    &Outcome::HandlerDue(Arc::clone(&failure)),
                    false,
                    false,
                )
                .await?;
                let handler = self.handler_run(&tasks[i], failure, step, remaining, step_checkpoint.clone());
                out = self.bounded(handler.execute()).await?;
                from_handler[i] = true;
            }
            self.task_ended(&tasks[i], &out, started[i]);
            self.emit_result(&tasks[i], &out, false);
            self.record(&cfg, &tasks[i], &out, true, from_handler[i]).await?;
            outcomes[i] = Some(out);
        } else if !to_run.is_empty() {
            let mut set = tokio::task::JoinSet::new();
            for (i, run) in to_run {
                // Spawned tasks keep the current span, so their node spans nest under it.
                set.spawn(tracing::Instrument::in_current_span(async move {
                    (i, run.execute().await)
                }));
            }
            // Each task's update streams when the task ends, together with those of the
            // siblings that have ended by then: a step whose tasks end together wakes the
            // reader once, and a branch that ends well before a slow sibling is seen at once.
            let mut unsent: Vec<usize> = Vec::new();
            loop {
                let next = match self.bounded(set.join_next()).await {
                    Ok(n) => n,
                    Err(e) => {
                        set.abort_all();
                        return Err(e);
                    }
                };
                let mut joined = next;
                while let Some(ended) = joined.take() {
                    let (i, out) = ended.map_err(|e| Error::Node {
                        node: "?".into(),
                        message: format!("task panicked or was cancelled: {e}"),
                        kind: crate::types::NodeErrorKind::Terminal,
                        source: Some(e.into()),
                    })?;
                    if let Outcome::HandlerDue(failure) = out {
                        // Saved before the handler starts (see the single-task case).
                        self.record(
                            &cfg,
                            &tasks[i],
                            &Outcome::HandlerDue(Arc::clone(&failure)),
                            false,
                            false,
                        )
                        .await?;
                        let handler =
                            self.handler_run(&tasks[i], failure, step, remaining, step_checkpoint.clone());
                        set.spawn(tracing::Instrument::in_current_span(async move {
                            (i, handler.execute().await)
                        }));
                        from_handler[i] = true;
                        joined = set.try_join_next();
                        continue;
                    }
                    let last = set.is_empty();
                    self.task_ended(&tasks[i], &out, started[i]);
                    self.record(&cfg, &tasks[i], &out, last, from_handler[i]).await?;
                    outcomes[i] = Some(out);
                    unsent.push(i);
                    joined = set.try_join_next();
                }
                self.emit_results(tasks, &outcomes, &mut unsent);
                if set.is_empty() {
                    break;
                }
            }
        }
        Ok(outcomes
            .into_iter()
            .map(|o| o.unwrap_or(Outcome::Failed(Error::Cancelled)))
            .collect())
    }

    /// Stream the results of the tasks in `unsent` (in the order they ended).
    fn emit_results(&self, tasks: &[Task], outcomes: &[Option<Outcome<S>>], unsent: &mut Vec<usize>) {
        for i in unsent.drain(..) {
            if let (Some(t), Some(Some(o))) = (tasks.get(i), outcomes.get(i)) {
                self.emit_result(t, o, false);
            }
        }
    }

    /// Stream a task's result in `updates` mode as soon as the task ends, as LangGraph
    /// does: a fast branch is seen before its slow siblings finish, and its update is
    /// seen even when a sibling fails. A write replayed from the checkpoint (the task
    /// finished before the run stopped) is marked `"__metadata__": {"cached": true}`.
    /// An interrupted task streams its interrupts as `{"__interrupt__": [...]}`.
    fn emit_result(&self, task: &Task, out: &Outcome<S>, cached: bool) {
        if !self.run.wants(StreamMode::Updates, self.ns.len()) {
            return;
        }
        let data = match out {
            Outcome::Done { parent: Some(_), .. } | Outcome::Failed(_) | Outcome::HandlerDue(_) => return,
            Outcome::Done {
                per_write: Some(writes),
                ..
            } if !cached => StreamData::Json(json!({ task.node.as_str(): writes })),
            Outcome::Done { update, .. } | Outcome::Handled { update, .. } => {
                let node = match out {
                    Outcome::Handled { .. } => self
                        .g
                        .nodes
                        .get(&task.node)
                        .map_or_else(|| task.node.clone(), |s| s.handler_name(&task.node)),
                    _ => task.node.clone(),
                };
                let value: Arc<dyn StreamValue> = match update {
                    Some(u) => Arc::new(UpdateValue(Arc::clone(&self.g), Arc::clone(u))),
                    None => Arc::new(Value::Null),
                };
                if cached {
                    let Ok(v) = value.to_json() else { return };
                    StreamData::Json(json!({ node: v, "__metadata__": {"cached": true} }))
                } else {
                    StreamData::Update { node, update: value }
                }
            }
            Outcome::Interrupted(ints, _) => StreamData::Interrupts(ints.clone()),
        };
        self.run.emit(&self.ns, StreamMode::Updates, data);
    }

    /// The checkpoint this step's tasks run from, with its saver (when the run persists).
    /// Only an entrypoint's graph uses it (its task calls save their results against it):
    /// for every other state type the check is a constant and nothing is built.
    fn step_checkpoint(&self) -> Option<Arc<crate::runtime::StepCheckpoint>> {
        if std::any::TypeId::of::<S>() != std::any::TypeId::of::<crate::func::FuncState>()
            || self.saver.is_none()
        {
            return None;
        }
        let saver = self
            .g
            .checkpointer
            .clone()
            .or_else(|| self.run.checkpointer.clone())?;
        Some(Arc::new(crate::runtime::StepCheckpoint {
            saver,
            config: self.current_cfg(),
        }))
    }

    /// Tell the run's task observer (root graph only) that `task` ended.
    fn task_ended(&self, task: &Task, out: &Outcome<S>, started: Option<Instant>) {
        if let (Some(observe), true, Some(t0)) = (&self.run.on_task_end, self.ns.is_empty(), started) {
            observe.notify(&TaskEnd {
                node: &task.node,
                elapsed: t0.elapsed(),
                failed: matches!(out, Outcome::Failed(_)),
            });
        }
    }

    /// Save one finished task's writes and emit its result event. In `sync` mode the writes
    /// of the step's `last` task, when it succeeded, are kept for the step's checkpoint and
    /// saved with it in one operation (or on their own if the step stops before it).
    /// `handler`: `out` is what the task's error handler produced.
    async fn record(
        &mut self,
        cfg: &CheckpointConfig,
        task: &Task,
        out: &Outcome<S>,
        last: bool,
        handler: bool,
    ) -> Result<()> {
        self.task_event(task, Some(out));
        if self.saver.is_none() {
            return Ok(());
        }
        let succeeded = matches!(out, Outcome::Done { .. } | Outcome::Handled { .. });
        if self.saver.is_exit() && succeeded {
            // `exit` saves a step's finished writes only if the step does not complete
            // (see `keep_finished`); encoding them for every step would be wasted work.
            return Ok(());
        }
        let writes = match out {
            Outcome::Done { parent: Some(_), .. } => return Ok(()),
            Outcome::Done { update, goto, .. } => encode_writes(&*self.ls.state, update.as_deref(), goto)
                .map_err(|e| Error::node_caused_by(task.node.clone(), e))?,
            Outcome::Interrupted(ints, consumed) => {
                let mut w = vec![(checkpoint::INTERRUPT.to_owned(), json!(ints))];
                if !consumed.is_empty() {
                    w.push((checkpoint::RESUME.to_owned(), json!(consumed)));
                }
                w
            }
            Outcome::Failed(e) => vec![(checkpoint::ERROR.to_owned(), json!({"message": e.to_string()}))],
            Outcome::HandlerDue(f) => vec![
                (checkpoint::ERROR.to_owned(), json!({"message": f.message})),
                (checkpoint::ERROR_HANDLER.to_owned(), f.to_json()),
            ],
            Outcome::Handled { update, goto } => encode_writes(&*self.ls.state, update.as_deref(), goto)
                .map_err(|e| Error::node_caused_by(task.node.clone(), e))?,
        };
        // What a handler did is saved under its own task id, beside the node's failure.
        let id = if handler {
            handler_task(task).id
        } else {
            task.id.clone()
        };
        if last && self.saver.is_sync() && succeeded {
            self.deferred = Some(checkpoint::TaskWrites {
                config: cfg.clone(),
                task_id: id,
                task_path: String::new(),
                writes,
            });
            return Ok(());
        }
        self.saver.put_writes(cfg, writes, &id).await
    }

    /// The run of `task`'s error handler for `failure`.
    fn handler_run(
        &self,
        task: &Task,
        failure: Arc<crate::node_failure::NodeFailure>,
        step: i64,
        remaining: usize,
        step_checkpoint: Option<Arc<crate::runtime::StepCheckpoint>>,
    ) -> TaskRun<S> {
        let h = handler_task(task);
        // A handler reads the state: a node fed `Send` packets hands it the step's state.
        let input = match task_input(&self.g, &self.ls, task) {
            Ok(NodeInput::State(s)) => NodeInput::State(s),
            _ => NodeInput::State(Arc::clone(&self.ls.state)),
        };
        TaskRun {
            graph: Arc::clone(&self.g),
            run: Arc::clone(&self.run),
            ns: Arc::clone(&self.ns),
            resumed: saved_resumes(&h.id, &self.ls.pending_writes),
            task: h,
            input,
            cache_key: None,
            step,
            remaining,
            events: None,
            step_checkpoint,
            failure: Some(failure),
        }
    }
}
