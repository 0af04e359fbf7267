//! The Pregel executor: plan the tasks of a superstep, run them concurrently against one
//! snapshot, save each finished task's writes, merge all writes in a fixed order, save the
//! checkpoint, repeat.

mod edges;
mod events;
mod persist;
mod run;
pub(crate) mod state;
pub(crate) mod task;

use self::edges::clone_err;
pub(crate) use self::edges::fire_edges;
use self::persist::Saver;
use self::state::{LoopState, StartInput, START_CHANNEL};
use self::task::{plan, Outcome, Task, TaskKind};
use crate::checkpoint::{self, CheckpointConfig, CheckpointMetadata, CheckpointSource, DynCheckpointer};
use crate::config::{RunConfig, RunInput};
use crate::error::{Error, Result};
use crate::graph::spec::GraphInner;
use crate::runtime::RunShared;
use crate::state::{State, TaskUpdate};
use crate::stream::{StreamData, StreamMode, StreamValue};
use crate::types::{Interrupt, NodeSet, Resume, Route, START};
use serde_json::Value;
use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tokio::time::Instant;

/// How a run of one graph ended (errors aside).
pub(crate) enum LoopEnd {
    /// No more tasks.
    Done,
    /// Paused: dynamic interrupts (empty for a static interrupt).
    Interrupted(Vec<Interrupt>),
    /// A node sent a `Command` to the parent graph.
    Parent(Option<Value>, Vec<Route>),
}

/// What a finished loop hands back.
pub(crate) struct LoopResult<S> {
    pub state: Arc<S>,
    /// Fields changed by nodes during the run, by index.
    pub changes: BTreeMap<usize, crate::state::FieldChange>,
    pub end: LoopEnd,
    pub config: Option<CheckpointConfig>,
}

/// A state as a stream payload.
pub(crate) struct StateValue<S>(pub Arc<S>);
impl<S: State> StreamValue for StateValue<S> {
    fn to_json(&self) -> Result<Value, crate::state::StateError> {
        self.0.to_json()
    }
    fn as_any(&self) -> &dyn Any {
        self.0.as_ref()
    }
}

/// An update as a stream payload. It holds the graph (for its state shape), never the
/// state: keeping the pre-merge state alive would force a copy of the whole state at merge.
pub(crate) struct UpdateValue<S: State>(pub Arc<GraphInner<S>>, pub Arc<S::Update>);
impl<S: State> StreamValue for UpdateValue<S> {
    fn to_json(&self) -> Result<Value, crate::state::StateError> {
        self.0.shape.update_to_json(&self.1)
    }
    fn as_any(&self) -> &dyn Any {
        &*self.1
    }
}

/// How [`Loop::save`] saves (in `sync` mode; other modes save as they always do).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Save {
    /// Put now and wait for it (a run's input checkpoint is held all the same).
    Now,
    /// Hold until the next save or the end of the run: no node code runs before either.
    Hold,
    /// Issue now, wait with the next save, where the backend saves in order.
    Issue,
}

struct Loop<S: State> {
    g: Arc<GraphInner<S>>,
    run: Arc<RunShared>,
    ns: Arc<[String]>,
    ns_str: String,
    ls: LoopState<S>,
    saver: Saver,
    cfg: CheckpointConfig,
    limit: usize,
    interrupt_before: NodeSet,
    interrupt_after: NodeSet,
    deadline: Option<Instant>,
    timeout_ms: u64,
    cancel: Option<crate::config::CancelToken>,
    /// Asks the run to stop at the next step boundary (the root graph's loop only).
    control: Option<crate::config::RunControl>,
    /// Parent of the last saved checkpoint (for checkpoint stream events).
    event_parent: Option<String>,
    /// `sync` mode: the writes of the task that finished the step, saved with its checkpoint.
    deferred: Option<checkpoint::TaskWrites>,
    metadata: serde_json::Map<String, Value>,
    /// The root run's completion hook.
    on_complete: Option<crate::config::CompletionHook>,
    /// This graph's `events` run, when the run streams events.
    events: Option<Arc<crate::events::EventRun>>,
}

/// Run graph `g` in namespace `ns` (empty for the root).
pub(crate) async fn run_loop<S: State>(
    g: Arc<GraphInner<S>>,
    input: RunInput<S>,
    rc: &RunConfig,
    run: Arc<RunShared>,
    ns: Arc<[String]>,
    resuming: bool,
    events: Option<Arc<crate::events::EventRun>>,
) -> Result<LoopResult<S>> {
    let is_root = ns.is_empty();
    let checkpointer: Option<Arc<dyn DynCheckpointer>> =
        g.checkpointer.clone().or_else(|| run.checkpointer.clone());
    let persist = checkpointer.is_some() && run.thread_id.is_some();
    let ns_str = ns.join("|");
    let cfg = CheckpointConfig {
        thread_id: run.thread_id.clone().unwrap_or_default(),
        checkpoint_ns: ns_str.clone(),
        checkpoint_id: None,
    };
    let needs_saved =
        matches!(&input, RunInput::Continue) || matches!(&input, RunInput::Command(c) if c.resume.is_some());
    if needs_saved && !persist && is_root {
        return Err(Error::NoCheckpointer("resuming a run"));
    }
    // Load the thread's checkpoint (or the one asked for).
    let mut tuple = None;
    let mut fork = false;
    if let (true, Some(saver)) = (persist, &checkpointer) {
        let want = CheckpointConfig {
            checkpoint_id: if is_root { rc.checkpoint_id.clone() } else { None },
            ..cfg.clone()
        };
        tuple = saver.get_tuple(&want).await?;
        if let Some(id) = &want.checkpoint_id {
            let Some(t) = &tuple else {
                return Err(Error::NotFound(format!(
                    "checkpoint `{id}` of thread `{}`",
                    cfg.thread_id
                )));
            };
            let latest = saver.get_tuple(&cfg).await?;
            fork = latest.is_some_and(|l| l.checkpoint.id != t.checkpoint.id);
        }
    }
    let mut ls = match &tuple {
        Some(t) => LoopState::restore(&g, t)?,
        None => LoopState::fresh(&g.shape),
    };
    if fork {
        // Tasks of a past checkpoint run again on a fork; its pending interrupts stay so
        // they can be resumed from there.
        ls.pending_writes.retain(|w| w.channel == checkpoint::INTERRUPT);
    }
    let deadline = rc.timeout.map(|t| Instant::now() + t);
    let mut lp = Loop {
        saver: Saver::new(if persist { checkpointer } else { None }, rc.durability),
        g,
        run,
        ns,
        ns_str,
        ls,
        cfg,
        limit: rc.recursion_limit,
        interrupt_before: merge_sets(&rc.interrupt_before, is_root),
        interrupt_after: merge_sets(&rc.interrupt_after, is_root),
        deadline,
        cancel: rc.cancel.clone(),
        control: if is_root { rc.control.clone() } else { None },
        event_parent: None,
        deferred: None,
        timeout_ms: rc
            .timeout
            .map_or(0, |t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
        metadata: rc.metadata.clone(),
        on_complete: if is_root { rc.on_complete.clone() } else { None },
        events,
    };
    let graph_before = lp.g.interrupt_before.clone();
    let graph_after = lp.g.interrupt_after.clone();
    lp.interrupt_before = union(lp.interrupt_before, graph_before);
    lp.interrupt_after = union(lp.interrupt_after, graph_after);

    // A nested graph re-run by a resumed parent task continues where it stopped.
    let has_pending = tuple.is_some() && !plan(&lp.g, &lp.ls, &lp.ns_str).is_empty();
    let input = if !is_root && resuming && has_pending {
        RunInput::Continue
    } else {
        input
    };
    let mut skip_before = false;
    match input {
        RunInput::Update(u) => {
            lp.new_input(StartInput {
                update: Some(u),
                goto: None,
            })
            .await?
        }
        RunInput::Json(v) => {
            let u = lp.g.shape.update_from_json(v).map_err(Error::Decode)?;
            lp.new_input(StartInput {
                update: Some(u),
                goto: None,
            })
            .await?;
        }
        RunInput::Command(c) => {
            if let Some(r) = c.resume {
                if tuple.is_none() {
                    return Err(Error::InvalidResume(
                        "the thread has no checkpoint to resume".into(),
                    ));
                }
                lp.apply_resume(r)?;
                skip_before = true;
            }
            if c.update.is_some() || !c.goto.is_empty() {
                let goto = if c.goto.is_empty() { None } else { Some(c.goto) };
                lp.new_input(StartInput {
                    update: c.update,
                    goto,
                })
                .await?;
            }
        }
        RunInput::Continue => {
            if tuple.is_none() && is_root {
                return Err(Error::NotFound(format!(
                    "thread `{}` has no checkpoint to continue from",
                    lp.cfg.thread_id
                )));
            }
            skip_before = true;
        }
    }
    if skip_before && lp.ls.start.is_none() {
        // A run that carries on from the checkpoint (continue, or resume without new
        // input) first streams the values it starts from, as LangGraph does.
        let st = Arc::clone(&lp.ls.state);
        lp.emit(StreamMode::Values, || {
            StreamData::Values(Arc::new(StateValue(st)))
        });
    }
    lp.main(skip_before).await
}

fn merge_sets(run: &NodeSet, is_root: bool) -> NodeSet {
    if is_root {
        run.clone()
    } else {
        NodeSet::None
    }
}

fn union(a: NodeSet, b: NodeSet) -> NodeSet {
    match (a, b) {
        (NodeSet::All, _) | (_, NodeSet::All) => NodeSet::All,
        (NodeSet::None, x) | (x, NodeSet::None) => x,
        (NodeSet::Some(mut x), NodeSet::Some(y)) => {
            x.extend(y);
            NodeSet::Some(x)
        }
    }
}

impl<S: State> Loop<S> {
    fn current_cfg(&self) -> CheckpointConfig {
        CheckpointConfig {
            checkpoint_id: Some(self.ls.checkpoint_id.clone()),
            ..self.cfg.clone()
        }
    }

    fn meta(&self, source: CheckpointSource) -> CheckpointMetadata {
        CheckpointMetadata {
            source,
            step: self.ls.step,
            parents: BTreeMap::new(),
            run_id: Some(self.run.run_id.clone()),
            extra: self.metadata.clone(),
        }
    }

    /// A fresh checkpoint id. Without a saver nobody sees it, so a counter does (task ids
    /// only need to differ between steps).
    fn next_checkpoint_id(&self) -> String {
        if self.saver.is_none() {
            format!("{:x}-{}", self.ls.salt, self.ls.step + 1)
        } else {
            checkpoint::new_checkpoint_id()
        }
    }

    /// Save the current checkpoint (it must have a new id), as `how` says.
    async fn save(&mut self, source: CheckpointSource, how: Save) -> Result<()> {
        if self.saver.is_none() {
            return Ok(());
        }
        let (cp, nv) = self.ls.build_checkpoint(&self.g)?;
        let parent = CheckpointConfig {
            checkpoint_id: self.ls.saved_id.clone(),
            ..self.cfg.clone()
        };
        let meta = self.meta(source);
        let writes = self.deferred.take();
        // An input checkpoint waits for the start task's writes; one that the start task
        // already ran in (`input_runs_start`) is saved as a step's is.
        let bare_input = source == CheckpointSource::Input && writes.is_none() && !self.g.input_runs_start;
        if how == Save::Hold || bare_input {
            self.saver.hold(writes, &parent, cp, meta, nv).await?;
        } else if how == Save::Issue {
            self.saver.issue(writes, &parent, cp, meta, nv).await?;
        } else {
            self.saver.put_after(writes, &parent, cp, meta, nv).await?;
        }
        self.event_parent = self.ls.saved_id.replace(self.ls.checkpoint_id.clone());
        Ok(())
    }

    /// Start a new run on the thread: pending work of the old checkpoint is dropped.
    async fn new_input(&mut self, start: StartInput<S>) -> Result<()> {
        for (node, triggers) in &self.g.node_triggers {
            for ch in triggers {
                self.ls.mark_seen(node, ch);
            }
        }
        self.ls.sends.clear();
        self.ls.pending_writes.clear();
        self.ls.bump(START_CHANNEL);
        self.ls
            .mark_dirty(START_CHANNEL, crate::state::FieldChange::Replaced);
        self.ls.start = Some(start);
        self.ls.candidates = Some(BTreeSet::new());
        self.ls.checkpoint_id = checkpoint::new_checkpoint_id();
        self.ls.updated = vec![START_CHANNEL.to_owned()];
        if self.g.input_runs_start {
            // The start task's step is the input's step and saves its checkpoint.
            return Ok(());
        }
        self.ls.step += 1;
        if self.saver.per_step() {
            self.save(CheckpointSource::Input, Save::Now).await?;
        }
        Ok(())
    }

    /// Pending interrupts of the current checkpoint, by task.
    fn pending_interrupts(&self) -> Vec<(String, Interrupt)> {
        let done: BTreeSet<&str> = self
            .ls
            .pending_writes
            .iter()
            .filter(|w| {
                !matches!(
                    w.channel.as_str(),
                    checkpoint::ERROR
                        | checkpoint::INTERRUPT
                        | checkpoint::RESUME
                        | checkpoint::ERROR_HANDLER
                )
            })
            .map(|w| w.task_id.as_str())
            .collect();
        self.ls
            .pending_writes
            .iter()
            .filter(|w| w.channel == checkpoint::INTERRUPT && !done.contains(w.task_id.as_str()))
            .flat_map(|w| {
                serde_json::from_value::<Vec<Interrupt>>(w.value.clone())
                    .unwrap_or_default()
                    .into_iter()
                    .map(move |i| (w.task_id.clone(), i))
            })
            .collect()
    }

    fn apply_resume(&mut self, resume: Resume) -> Result<()> {
        let pending = self.pending_interrupts();
        let map: BTreeMap<String, Value> = match resume {
            Resume::Value(v) => match pending.as_slice() {
                [] => {
                    return Err(Error::InvalidResume(
                        "no interrupt is pending on this thread".into(),
                    ))
                }
                [(_, only)] => BTreeMap::from([(only.id.clone(), v)]),
                many => {
                    let ids: Vec<&str> = many.iter().map(|(_, i)| i.id.as_str()).collect();
                    return Err(Error::InvalidResume(format!(
                        "{} interrupts are pending ({}); resume them with a map from interrupt id to value",
                        ids.len(),
                        ids.join(", ")
                    )));
                }
            },
            Resume::ById(m) => {
                if m.is_empty() {
                    return Err(Error::InvalidResume("the resume map is empty".into()));
                }
                for id in m.keys() {
                    if !pending.iter().any(|(_, i)| &i.id == id) {
                        return Err(Error::InvalidResume(format!(
                            "no pending interrupt has id `{id}`"
                        )));
                    }
                }
                m
            }
        };
        for (id, value) in &map {
            if let Some((_, i)) = pending.iter().find(|(_, i)| &i.id == id) {
                check_resume(i, value)?;
            }
        }
        let mut guard = self
            .run
            .resume
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        guard.extend(map);
        Ok(())
    }

    fn emit(&self, mode: StreamMode, data: impl FnOnce() -> StreamData) {
        if self.run.wants(mode, self.ns.len()) {
            self.run.emit(&self.ns, mode, data());
        }
    }

    async fn finish(mut self, end: LoopEnd) -> Result<LoopResult<S>> {
        // The step did not reach its checkpoint: save its last task's writes on their own.
        if let Some(w) = self.deferred.take() {
            self.saver.put_writes(&w.config, w.writes, &w.task_id).await?;
        }
        if matches!(self.saver, Saver::Exit(..))
            && self.ls.saved_id.as_deref() != Some(self.ls.checkpoint_id.as_str())
        {
            let source = if self.ls.step < 0 {
                CheckpointSource::Input
            } else {
                CheckpointSource::Loop
            };
            self.save(source, Save::Now).await?;
        }
        let cfg = self.current_cfg();
        let persisted = !self.saver.is_none();
        self.saver.finish(&cfg, None).await?;
        Ok(LoopResult {
            changes: self.ls.run_changes,
            state: self.ls.state,
            end,
            config: persisted.then_some(cfg),
        })
    }

    /// No task left: the run completed. Its hook (if any) runs alongside the last save.
    async fn complete(mut self) -> Result<LoopResult<S>> {
        let Some(hook) = self.on_complete.take() else {
            return self.finish(LoopEnd::Done).await;
        };
        let (run_id, thread_id) = (self.run.run_id.clone(), self.run.thread_id.clone());
        if !self.saver.is_sync() {
            // Nothing held: save as any run does, then tell the hook.
            let r = self.finish(LoopEnd::Done).await?;
            let completion = crate::config::Completion {
                run_id,
                thread_id,
                checkpoint_id: r.config.as_ref().and_then(|c| c.checkpoint_id.clone()),
                values: Arc::new(StateValue(Arc::clone(&r.state))),
            };
            hook.call(completion).await;
            return Ok(r);
        }
        if let Some(w) = self.deferred.take() {
            self.saver.put_writes(&w.config, w.writes, &w.task_id).await?;
        }
        let then = hook.call(crate::config::Completion {
            run_id,
            thread_id,
            checkpoint_id: self.ls.saved_id.clone(),
            values: Arc::new(StateValue(Arc::clone(&self.ls.state))),
        });
        let cfg = self.current_cfg();
        let persisted = !self.saver.is_none();
        self.saver.finish(&cfg, Some(then)).await?;
        Ok(LoopResult {
            changes: self.ls.run_changes,
            state: self.ls.state,
            end: LoopEnd::Done,
            config: persisted.then_some(cfg),
        })
    }

    async fn fail(self, err: Error) -> Result<LoopResult<S>> {
        // Save what finished so a resume does not repeat it; report the original error.
        let _ = self.finish(LoopEnd::Done).await;
        Err(err)
    }

    /// Await `fut` within the run's deadline and until the run is cancelled.
    async fn bounded<T>(&self, fut: impl std::future::Future<Output = T>) -> Result<T> {
        let timed = async {
            match self.deadline {
                Some(d) => tokio::time::timeout_at(d, fut)
                    .await
                    .map_err(|_| Error::RunTimeout {
                        after_ms: self.timeout_ms,
                    }),
                None => Ok(fut.await),
            }
        };
        match &self.cancel {
            Some(c) => tokio::select! {
                r = timed => r,
                () = c.cancelled() => Err(Error::Cancelled),
            },
            None => timed.await,
        }
    }

    async fn main(mut self, mut skip_before: bool) -> Result<LoopResult<S>> {
        let mut executed = 0usize;
        loop {
            if self
                .cancel
                .as_ref()
                .is_some_and(crate::config::CancelToken::is_cancelled)
            {
                return self.fail(Error::Cancelled).await;
            }
            let tasks = plan(&self.g, &self.ls, &self.ns_str);
            if tasks.is_empty() {
                return self.complete().await;
            }
            let only_start = tasks.iter().all(|t| matches!(t.kind, TaskKind::Start));
            if !only_start {
                if self.draining() {
                    return self.drained().await;
                }
                if executed >= self.limit {
                    let limit = self.limit;
                    return self.fail(Error::RecursionLimit { limit }).await;
                }
                if !skip_before && tasks.iter().any(|t| self.interrupt_before.contains(&t.node)) {
                    return self.static_interrupt().await;
                }
                executed += 1;
            }
            skip_before = false;
            let remaining = self.limit.saturating_sub(executed).saturating_add(1);
            let outcomes = match self.run_tasks(&tasks, remaining).await {
                Ok(o) => o,
                Err(e) => return self.fail(e).await,
            };
            // Failures first (in task order), then a command for the parent, then interrupts.
            let mut first_err = None;
            let mut parent = None;
            let mut interrupts = Vec::new();
            for o in &outcomes {
                match o {
                    Outcome::Failed(e) if first_err.is_none() => first_err = Some(clone_err(e)),
                    Outcome::HandlerDue(f) if first_err.is_none() => {
                        first_err = Some(Error::node_failed(f.node.clone(), f.message.clone()));
                    }
                    Outcome::Done { parent: Some(p), .. } if parent.is_none() => parent = Some(p.clone()),
                    Outcome::Interrupted(i, _) => interrupts.extend(i.iter().cloned()),
                    _ => {}
                }
            }
            if let Some(e) = first_err {
                if let Err(save) = self.keep_finished(&tasks, &outcomes).await {
                    return self.fail(save).await;
                }
                return self.fail(e).await;
            }
            if let Some((update, goto)) = parent {
                return self.finish(LoopEnd::Parent(update, goto)).await;
            }
            if !interrupts.is_empty() {
                self.keep_finished(&tasks, &outcomes).await?;
                return self.finish(LoopEnd::Interrupted(interrupts)).await;
            }
            if let Err(e) = self.apply(&tasks, outcomes) {
                return self.fail(e).await;
            }
            self.saver.step_done();
            if self.saver.per_step() {
                // Held (sync mode): a completing run's last checkpoint goes with its
                // completion hook. Not when the caller watches checkpoint events that
                // say their checkpoint is saved.
                let watched = (self.run.wants(StreamMode::Checkpoints, self.ns.len())
                    && !self.run.early_checkpoint_events)
                    || self.run.wants(StreamMode::Debug, self.ns.len());
                let how = if watched {
                    Save::Now
                } else if self.on_complete.is_some()
                    && self.saver.is_sync()
                    && plan(&self.g, &self.ls, &self.ns_str).is_empty()
                {
                    Save::Hold
                } else if only_start {
                    // The first node starts while the input is being saved.
                    Save::Issue
                } else {
                    Save::Now
                };
                let source = if only_start && self.g.input_runs_start {
                    CheckpointSource::Input
                } else {
                    CheckpointSource::Loop
                };
                self.save(source, how).await?;
            }
            let st = Arc::clone(&self.ls.state);
            self.emit(StreamMode::Values, || {
                StreamData::Values(Arc::new(StateValue(st)))
            });
            self.emit_checkpoint_event();
            if tasks
                .iter()
                .any(|t| !matches!(t.kind, TaskKind::Start) && self.interrupt_after.contains(&t.node))
            {
                let next = plan(&self.g, &self.ls, &self.ns_str);
                if !next.is_empty() {
                    return self.static_interrupt().await;
                }
            }
        }
    }

    /// Whether the run was asked to drain. The start step (the input, no node code) is
    /// never a boundary: the input is applied and checkpointed first.
    fn draining(&self) -> bool {
        self.control
            .as_ref()
            .is_some_and(crate::config::RunControl::is_draining)
    }

    /// Stop at this step boundary: the last step's checkpoint (already saved in `sync`
    /// mode) is made durable, and the run ends as drained.
    async fn drained(self) -> Result<LoopResult<S>> {
        self.finish(LoopEnd::Done).await?;
        Err(Error::Drained)
    }

    /// Pause at a static interrupt (`interrupt_before`/`interrupt_after`): as LangGraph
    /// does, the `updates` stream says so with an empty `{"__interrupt__": []}`, so a client
    /// watching the stream sees the pause as it sees a dynamic one.
    async fn static_interrupt(self) -> Result<LoopResult<S>> {
        self.emit(StreamMode::Updates, || StreamData::Interrupts(Vec::new()));
        self.finish(LoopEnd::Interrupted(Vec::new())).await
    }

    /// Merge the step's writes, fire edges, and move to the next checkpoint id.
    fn apply(&mut self, tasks: &[Task], outcomes: Vec<Outcome<S>>) -> Result<()> {
        let step = self.ls.step + 1;
        // Record what each task has seen, before any edge bumps a trigger again.
        for t in tasks {
            match &t.kind {
                TaskKind::Start => self.ls.mark_seen(START, START_CHANNEL),
                TaskKind::Pull(triggers) => {
                    for ch in triggers {
                        self.ls.mark_seen(&t.node, ch);
                    }
                }
                TaskKind::Push(..) => {}
            }
        }
        let mut updates = Vec::new();
        let mut gotos: Vec<(usize, Vec<Route>, bool)> = Vec::new();
        // Each task's update was streamed as the task ended (`Loop::emit_result`).
        for (i, (t, o)) in tasks.iter().zip(outcomes).enumerate() {
            let (update, goto, handled) = match o {
                Outcome::Done { update, goto, .. } => (update, goto, false),
                Outcome::Handled { update, goto } => (update, goto, true),
                _ => continue,
            };
            {
                if let Some(u) = update {
                    updates.push(TaskUpdate {
                        node: t.node.as_str(),
                        // A copy only when a stream reader still holds the update.
                        update: Arc::try_unwrap(u).unwrap_or_else(|u| (*u).clone()),
                    });
                }
                gotos.push((i, goto, handled));
            }
        }
        let mut changes = Vec::new();
        {
            let st = Arc::make_mut(&mut self.ls.state);
            st.merge(updates, &mut changes)
                .map_err(|source| Error::State { step, source })?;
        }
        let mut updated = Vec::with_capacity(changes.len());
        let input_step = matches!(tasks.first().map(|t| &t.kind), Some(TaskKind::Start));
        for c in &changes {
            if !input_step {
                let prev = self.ls.run_changes.get(&c.field).copied();
                self.ls
                    .run_changes
                    .insert(c.field, prev.map_or(c.change, |p| p.then(c.change)));
            }
            let name = self.ls.state.field_name(c.field).to_owned();
            self.ls.bump(&name);
            self.ls.mark_dirty(&name, c.change);
            updated.push(name);
        }
        // Consume join barriers that fired.
        for t in tasks {
            if let TaskKind::Pull(triggers) = &t.kind {
                for ch in triggers.iter().filter(|c| c.starts_with("join:")) {
                    if let Some(set) = self.ls.barriers.get_mut(ch) {
                        set.clear();
                    }
                    self.ls.bump(ch);
                    self.ls.mark_dirty(ch, crate::state::FieldChange::Replaced);
                }
            }
        }
        let mut candidates = BTreeSet::new();
        let mut sends = Vec::new();
        for (i, goto, handled) in gotos {
            let t = &tasks[i];
            let is_start = matches!(t.kind, TaskKind::Start);
            // A handled failure follows its handler's routes only: the handler's name has
            // no edges of its own.
            let source = if handled {
                crate::node_failure::handler_name(&t.node)
            } else {
                t.node.clone()
            };
            fire_edges(
                &self.g,
                &mut self.ls,
                &source,
                is_start,
                goto,
                &mut candidates,
                &mut sends,
            )?;
        }
        if matches!(tasks.first().map(|t| &t.kind), Some(TaskKind::Start)) {
            self.ls.start = None;
            self.ls.versions.remove(START_CHANNEL);
            self.ls.dirty.remove(START_CHANNEL);
        }
        self.ls.sends = sends;
        self.ls.candidates = Some(candidates);
        self.ls.pending_writes.clear();
        self.ls.step = step;
        self.ls.checkpoint_id = self.next_checkpoint_id();
        self.ls.updated = updated;
        Ok(())
    }
}

/// A state snapshot's `next` nodes and tasks, computed from a stored checkpoint.
pub(crate) fn pending_tasks<S: State>(g: &GraphInner<S>, ls: &LoopState<S>, ns: &str) -> Vec<Task> {
    plan(g, ls, ns)
}

/// The id `task`'s error handler saves its writes under.
pub(crate) fn handler_task_id(task: &Task) -> String {
    task::handler_task(task).id
}

/// Refuse a resume value that does not match its interrupt's response schema, naming
/// where it differs.
fn check_resume(i: &Interrupt, value: &Value) -> Result<()> {
    let Some(schema) = &i.response_schema else {
        return Ok(());
    };
    let validator = jsonschema::validator_for(schema).map_err(|e| {
        Error::InvalidResume(format!(
            "interrupt `{}` has a response schema that does not compile: {e}",
            i.id
        ))
    })?;
    let problems: Vec<String> = validator
        .iter_errors(value)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    if problems.is_empty() {
        return Ok(());
    }
    Err(Error::InvalidResume(format!(
        "the resume for interrupt `{}` does not match its response schema: {}",
        i.id,
        problems.join("; ")
    )))
}
