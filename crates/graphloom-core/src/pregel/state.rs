//! The loop's view of one thread: state, channel versions, what each node has seen, and
//! how it is encoded into (and restored from) a checkpoint.

use crate::checkpoint::{
    ChannelValue, Checkpoint, CheckpointTuple, DeltaMeta, PendingSend, PendingWrite, Version,
    CHECKPOINT_FORMAT,
};
use crate::error::{Error, Result};
use crate::graph::spec::GraphInner;
use crate::state::{FieldChange, State};
use crate::types::{Packet, Route, Send};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Channel holding a run's input until the start task applies it.
pub(crate) const START_CHANNEL: &str = "__start__";

/// Input waiting to be applied by the start task.
#[derive(Clone)]
pub(crate) struct StartInput<S: State> {
    pub update: Option<S::Update>,
    /// Routes replacing the edges out of START (a `Command` input with `goto`).
    pub goto: Option<Vec<Route>>,
}

/// A sequence field stored whole again once the appends since its last whole copy reach
/// this many items or its length then, whichever is larger (so whole copies cost at most
/// about twice the final list, and a read follows a bounded chain).
const MIN_FULL_EVERY: usize = 32;

pub(crate) struct LoopState<S: State> {
    pub state: Arc<S>,
    pub versions: BTreeMap<String, Version>,
    pub seen: BTreeMap<String, BTreeMap<String, Version>>,
    pub barriers: BTreeMap<String, BTreeSet<String>>,
    pub sends: Vec<Send>,
    pub start: Option<StartInput<S>>,
    pub step: i64,
    /// Id of the checkpoint the next step is planned from (saved or not).
    pub checkpoint_id: String,
    /// Id of the last checkpoint actually saved (the parent of the next one saved).
    pub saved_id: Option<String>,
    /// Writes already made against `checkpoint_id` (reused instead of re-running tasks).
    pub pending_writes: Vec<PendingWrite>,
    /// Channels changed since the last save, and how.
    pub dirty: BTreeMap<String, FieldChange>,
    /// Versions at the last save (bases for appends).
    pub saved_versions: BTreeMap<String, Version>,
    pub delta_meta: BTreeMap<String, DeltaMeta>,
    /// Nodes to check for triggers next step (`None`: all).
    pub candidates: Option<BTreeSet<String>>,
    pub salt: u64,
    /// Channels updated by the last step.
    pub updated: Vec<String>,
    /// State fields changed by node tasks during this run (not by the input), for shared-key
    /// subgraphs that hand only their changes back to the parent.
    pub run_changes: BTreeMap<usize, FieldChange>,
    /// Highest version counter of any channel: versions are ordered across channels, so
    /// "which node ran last" has an answer.
    pub clock: u64,
}

impl<S: State> LoopState<S> {
    pub fn fresh(shape: &S) -> Self {
        Self {
            state: Arc::new(shape.empty_like()),
            versions: BTreeMap::new(),
            seen: BTreeMap::new(),
            barriers: BTreeMap::new(),
            sends: Vec::new(),
            start: None,
            step: -2,
            checkpoint_id: crate::checkpoint::new_checkpoint_id(),
            saved_id: None,
            pending_writes: Vec::new(),
            dirty: BTreeMap::new(),
            saved_versions: BTreeMap::new(),
            delta_meta: BTreeMap::new(),
            candidates: None,
            // 32 random bits tell forks apart and keep stored versions short.
            salt: u64::from(rand::random::<u32>()),
            updated: Vec::new(),
            clock: 0,
            run_changes: BTreeMap::new(),
        }
    }

    /// Rebuild from a stored checkpoint.
    pub fn restore(g: &GraphInner<S>, tuple: &CheckpointTuple) -> Result<Self> {
        let cp = &tuple.checkpoint;
        let corrupt = |message: String| Error::CorruptCheckpoint {
            thread_id: tuple.config.thread_id.clone(),
            checkpoint_id: cp.id.clone(),
            message,
        };
        if cp.v > CHECKPOINT_FORMAT {
            return Err(corrupt(format!(
                "format {} is newer than this build reads ({CHECKPOINT_FORMAT})",
                cp.v
            )));
        }
        let mut state = g.shape.empty_like();
        let mut barriers = BTreeMap::new();
        let mut start = None;
        for (ch, val) in &cp.channel_values {
            let shared;
            let v = match val {
                ChannelValue::Full(v) => v,
                ChannelValue::Items(items) => {
                    shared = crate::checkpoint::items_to_json(items);
                    &shared
                }
                ChannelValue::Append { .. } => {
                    return Err(corrupt(format!("channel `{ch}` was not resolved")));
                }
            };
            if let Some(idx) = state.field_index(ch) {
                state
                    .set_field_from_json(idx, v.clone())
                    .map_err(|e| corrupt(e.to_string()))?;
            } else if ch.starts_with("join:") {
                let names: BTreeSet<String> =
                    serde_json::from_value(v.clone()).map_err(|e| corrupt(format!("channel `{ch}`: {e}")))?;
                barriers.insert(ch.clone(), names);
            } else if ch == START_CHANNEL {
                start = Some(decode_start(&state, v.clone()).map_err(corrupt)?);
            }
        }
        let mut me = Self::fresh(&g.shape);
        me.state = Arc::new(state);
        me.versions = cp.channel_versions.clone();
        me.clock = me
            .versions
            .values()
            .chain(cp.versions_seen.values().flat_map(|m| m.values()))
            .map(|v| v.n)
            .max()
            .unwrap_or(0);
        me.seen = cp.versions_seen.clone();
        me.barriers = barriers;
        me.sends = cp
            .pending_sends
            .iter()
            .map(|p| Send {
                node: p.node.clone(),
                packet: Packet::Json(p.packet.clone()),
            })
            .collect();
        let start_pending = me.version_newer(START_CHANNEL, START_CHANNEL);
        me.start = if start_pending { start } else { None };
        me.step = tuple.metadata.step;
        me.checkpoint_id = cp.id.clone();
        me.saved_id = Some(cp.id.clone());
        me.saved_versions = me.versions.clone();
        me.delta_meta = cp.delta_meta.clone();
        me.pending_writes = tuple.pending_writes.clone();
        Ok(me)
    }

    /// True if channel `ch` has a version newer than what `node` has seen.
    pub fn version_newer(&self, node: &str, ch: &str) -> bool {
        match self.versions.get(ch) {
            None => false,
            Some(v) => self.seen.get(node).and_then(|m| m.get(ch)).is_none_or(|s| v > s),
        }
    }

    /// Bump channel `ch` and return the new version.
    pub fn bump(&mut self, ch: &str) -> Version {
        self.clock += 1;
        let next = Version {
            n: self.clock,
            salt: self.salt,
        };
        self.versions.insert(ch.to_owned(), next);
        next
    }

    /// Record that `node` has seen the current version of `ch`.
    pub fn mark_seen(&mut self, node: &str, ch: &str) {
        if let Some(v) = self.versions.get(ch).copied() {
            self.seen
                .entry(node.to_owned())
                .or_default()
                .insert(ch.to_owned(), v);
        }
    }

    pub fn mark_dirty(&mut self, ch: &str, change: FieldChange) {
        let merged = match self.dirty.get(ch) {
            Some(prev) => prev.then(change),
            None => change,
        };
        self.dirty.insert(ch.to_owned(), merged);
    }

    /// Build the checkpoint to save: values of channels changed since the last save only.
    pub fn build_checkpoint(&mut self, g: &GraphInner<S>) -> Result<(Checkpoint, BTreeMap<String, Version>)> {
        let mut values = BTreeMap::new();
        let mut new_versions = BTreeMap::new();
        let dirty = std::mem::take(&mut self.dirty);
        for (ch, change) in dirty {
            let Some(version) = self.versions.get(&ch).copied() else {
                continue;
            };
            let value = if let Some(idx) = self.state.field_index(&ch) {
                Some(self.encode_field(&ch, idx, change)?)
            } else if let Some(set) = self.barriers.get(&ch) {
                Some(ChannelValue::Full(json!(set)))
            } else if ch == START_CHANNEL {
                match &self.start {
                    Some(start) => Some(ChannelValue::Full(
                        encode_start(&*self.state, start).map_err(Error::Decode)?,
                    )),
                    None => None,
                }
            } else {
                None
            };
            if let Some(value) = value {
                values.insert(ch.clone(), value);
                new_versions.insert(ch, version);
            }
        }
        let mut pending_sends = Vec::with_capacity(self.sends.len());
        for s in &self.sends {
            let packet = s.packet.to_json().map_err(|e| Error::Node {
                node: s.node.clone(),
                message: format!("Send packet cannot be saved: {e}"),
                kind: crate::types::NodeErrorKind::Terminal,
                source: Some(e.into()),
            })?;
            pending_sends.push(PendingSend {
                node: s.node.clone(),
                packet,
            });
        }
        let _ = g;
        let cp = Checkpoint {
            v: CHECKPOINT_FORMAT,
            id: self.checkpoint_id.clone(),
            ts: crate::checkpoint::now_rfc3339(),
            channel_values: values,
            channel_versions: self.versions.clone(),
            versions_seen: self.seen.clone(),
            pending_sends,
            updated_channels: self.updated.clone(),
            delta_meta: self.delta_meta.clone(),
        };
        self.saved_versions
            .extend(new_versions.iter().map(|(k, v)| (k.clone(), *v)));
        Ok((cp, new_versions))
    }

    fn encode_field(&mut self, ch: &str, idx: usize, change: FieldChange) -> Result<ChannelValue> {
        let base = self.saved_versions.get(ch).copied();
        if let (FieldChange::Appended(n), Some(base)) = (change, base) {
            let meta = self.delta_meta.get(ch).copied().unwrap_or_default();
            let since = meta.since_full + n;
            if since < meta.full_len.max(MIN_FULL_EVERY) {
                if let Some(tail) = self.state.field_tail_to_json(idx, n) {
                    let items = tail.map_err(Error::Decode)?;
                    self.delta_meta.insert(
                        ch.to_owned(),
                        DeltaMeta {
                            full_len: meta.full_len,
                            since_full: since,
                        },
                    );
                    return Ok(ChannelValue::Append { base, items });
                }
            }
        }
        if let Some(items) = self.state.field_shared_items(idx) {
            if matches!(change, FieldChange::Appended(_)) {
                self.delta_meta.insert(
                    ch.to_owned(),
                    DeltaMeta {
                        full_len: items.len(),
                        since_full: 0,
                    },
                );
            } else {
                self.delta_meta.remove(ch);
            }
            return Ok(ChannelValue::Items(items));
        }
        let full = self.state.field_to_json(idx).map_err(Error::Decode)?;
        if let (FieldChange::Appended(_), Value::Array(a)) = (change, &full) {
            self.delta_meta.insert(
                ch.to_owned(),
                DeltaMeta {
                    full_len: a.len(),
                    since_full: 0,
                },
            );
        } else {
            self.delta_meta.remove(ch);
        }
        Ok(ChannelValue::Full(full))
    }
}

fn encode_start<S: State>(state: &S, start: &StartInput<S>) -> Result<Value, crate::state::StateError> {
    let update = match &start.update {
        Some(u) => state.update_to_json(u)?,
        None => Value::Null,
    };
    let goto: Option<Vec<Value>> = start.goto.as_ref().map(|routes| {
        routes
            .iter()
            .filter_map(|r| match r {
                Route::To(n) => Some(json!({"to": n})),
                Route::End => Some(json!({"to": crate::types::END})),
                Route::Send(s) => s
                    .packet
                    .to_json()
                    .ok()
                    .map(|p| json!({"send": s.node, "packet": p})),
            })
            .collect()
    });
    Ok(json!({"update": update, "goto": goto}))
}

fn decode_start<S: State>(state: &S, v: Value) -> Result<StartInput<S>, String> {
    let update = match v.get("update") {
        None | Some(Value::Null) => None,
        Some(u) => Some(state.update_from_json(u.clone()).map_err(|e| e.to_string())?),
    };
    let goto = match v.get("goto") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .map(|it| {
                    if let Some(n) = it.get("to").and_then(Value::as_str) {
                        Ok(Route::from(n))
                    } else if let Some(n) = it.get("send").and_then(Value::as_str) {
                        Ok(Route::Send(Send::json(
                            n,
                            it.get("packet").cloned().unwrap_or(Value::Null),
                        )))
                    } else {
                        Err(format!("bad goto entry {it}"))
                    }
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(other) => return Err(format!("bad goto {other}")),
    };
    Ok(StartInput { update, goto })
}
