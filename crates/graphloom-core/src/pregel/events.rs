//! Stream events of the loop: task start/result and checkpoint events (`tasks`,
//! `checkpoints`, `debug` modes).

use super::task::{plan, Outcome, Task, TaskKind};
use super::Loop;
use crate::checkpoint;
use crate::state::State;
use crate::stream::{CheckpointEvents, StreamData, StreamMode};
use serde_json::{json, Value};

impl<S: State> Loop<S> {
    pub(super) fn emit_checkpoint_event(&self) {
        let wants_cp = self.run.wants(StreamMode::Checkpoints, self.ns.len());
        let wants_dbg = self.run.wants(StreamMode::Debug, self.ns.len());
        if !wants_cp && !wants_dbg {
            return;
        }
        let config = |id: &str| json!({"configurable": {"thread_id": self.cfg.thread_id, "checkpoint_ns": self.ns_str, "checkpoint_id": id}});
        let mut payload = json!({
            "config": config(&self.ls.checkpoint_id),
            "parent_config": self.event_parent.as_deref().map(config),
            "metadata": {"source": "loop", "step": self.ls.step},
        });
        // The envelope alone (a few hundred bytes) when the run asks for no more.
        let envelope = self.run.checkpoint_events == CheckpointEvents::Envelope;
        if envelope && wants_cp {
            let data = if wants_dbg {
                payload.clone()
            } else {
                std::mem::take(&mut payload)
            };
            self.run
                .emit(&self.ns, StreamMode::Checkpoints, StreamData::Json(data));
            if !wants_dbg {
                return;
            }
        }
        let planned = plan(&self.g, &self.ls, &self.ns_str);
        let next: Vec<&str> = planned.iter().map(|t| t.node.as_str()).collect();
        let tasks: Vec<Value> = planned
            .iter()
            .map(|t| json!({"id": t.id, "name": t.node, "interrupts": []}))
            .collect();
        // The state and the tasks move in (`json!` would serialize a copy of each).
        if let Value::Object(m) = &mut payload {
            m.insert("next".into(), json!(next));
            m.insert("values".into(), self.ls.state.to_json().unwrap_or(Value::Null));
            m.insert("tasks".into(), Value::Array(tasks));
        }
        if wants_dbg {
            let p = if wants_cp && !envelope {
                payload.clone()
            } else {
                std::mem::take(&mut payload)
            };
            self.run.emit(&self.ns, StreamMode::Debug, StreamData::Json(json!({"step": self.ls.step, "timestamp": checkpoint::now_rfc3339(), "type": "checkpoint", "payload": p})));
        }
        if wants_cp && !envelope {
            self.run
                .emit(&self.ns, StreamMode::Checkpoints, StreamData::Json(payload));
        }
    }

    pub(super) fn task_event(&self, task: &Task, result: Option<&Outcome<S>>) {
        let wants_t = self.run.wants(StreamMode::Tasks, self.ns.len());
        let wants_d = self.run.wants(StreamMode::Debug, self.ns.len());
        if !wants_t && !wants_d {
            return;
        }
        let payload = match result {
            None => {
                json!({"id": task.id, "name": task.node, "path": task.path(), "triggers": task.triggers(), "input": match &task.kind {
                    TaskKind::Push(_, p) => p.to_json().unwrap_or(Value::Null),
                    _ => self.ls.state.to_json().unwrap_or(Value::Null),
                }})
            }
            Some(o) => {
                let (error, result, interrupts) = match o {
                    Outcome::Done { update, .. } | Outcome::Handled { update, .. } => (
                        Value::Null,
                        update
                            .as_ref()
                            .and_then(|u| self.ls.state.update_to_json(u).ok())
                            .unwrap_or(Value::Null),
                        json!([]),
                    ),
                    Outcome::Interrupted(i, _) => (Value::Null, Value::Null, json!(i)),
                    Outcome::Failed(e) => (json!(e.to_string()), Value::Null, json!([])),
                    Outcome::HandlerDue(f) => (json!(f.to_string()), Value::Null, json!([])),
                };
                json!({"id": task.id, "name": task.node, "error": error, "result": result, "interrupts": interrupts})
            }
        };
        if wants_d {
            let ty = if result.is_some() { "task_result" } else { "task" };
            self.run.emit(&self.ns, StreamMode::Debug, StreamData::Json(json!({"step": self.ls.step + 1, "timestamp": checkpoint::now_rfc3339(), "type": ty, "payload": payload.clone()})));
        }
        if wants_t {
            self.run
                .emit(&self.ns, StreamMode::Tasks, StreamData::Json(payload));
        }
    }
}
