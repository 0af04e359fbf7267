//! [`FuncState`]: the state of an entrypoint's graph — its input, its return value and the
//! value it saved for the next run on the thread (`previous`).

use crate::state::{Changed, FieldChange, State, StateError, TaskUpdate};
use serde_json::{json, Value};

const FIELDS: [&str; 3] = ["input", "output", "previous"];

/// The state behind an [`Entrypoint`](super::Entrypoint): three last-value JSON fields.
///
/// - `input`: what the run was invoked with;
/// - `output`: what the entrypoint returned (`null` until it has);
/// - `previous`: what it saved for the next run on the thread (its return value, or the
///   `save` of a [`Final`](super::Final)).
///
/// As a whole (`values` stream, [`State::to_json`]) it reads as its `output`, the way
/// LangGraph shows an entrypoint's state as its return value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FuncState {
    input: Value,
    output: Value,
    previous: Value,
    /// Whether `output` belongs to the current input (set when the entrypoint returns,
    /// cleared by new input). Not a field: it is never saved.
    returned: bool,
}

impl FuncState {
    /// The input of the last run.
    #[must_use]
    pub fn input(&self) -> &Value {
        &self.input
    }
    /// The entrypoint's return value (`null` before it has returned).
    #[must_use]
    pub fn output(&self) -> &Value {
        &self.output
    }
    /// The value saved for the next run on the thread (`null` on a new thread).
    #[must_use]
    pub fn previous(&self) -> &Value {
        &self.previous
    }
    /// Whether this state holds the return value of the entrypoint for its current input
    /// (false in the step that only applied the input).
    #[must_use]
    pub fn returned(&self) -> bool {
        self.returned
    }
}

/// A partial update of a [`FuncState`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FuncUpdate {
    /// New input.
    pub input: Option<Value>,
    /// The return value.
    pub output: Option<Value>,
    /// The value saved for the next run.
    pub previous: Option<Value>,
}

impl FuncUpdate {
    fn get(&self, idx: usize) -> Option<&Value> {
        match idx {
            0 => self.input.as_ref(),
            1 => self.output.as_ref(),
            2 => self.previous.as_ref(),
            _ => None,
        }
    }
    fn slot(&mut self, idx: usize) -> Option<&mut Option<Value>> {
        match idx {
            0 => Some(&mut self.input),
            1 => Some(&mut self.output),
            2 => Some(&mut self.previous),
            _ => None,
        }
    }
}

impl FuncState {
    fn slot(&mut self, idx: usize) -> Option<&mut Value> {
        match idx {
            0 => Some(&mut self.input),
            1 => Some(&mut self.output),
            2 => Some(&mut self.previous),
            _ => None,
        }
    }
    fn get(&self, idx: usize) -> Option<&Value> {
        match idx {
            0 => Some(&self.input),
            1 => Some(&self.output),
            2 => Some(&self.previous),
            _ => None,
        }
    }
}

fn unknown(idx: usize) -> StateError {
    StateError::UnknownField(format!("#{idx}"))
}

impl State for FuncState {
    type Update = FuncUpdate;

    fn field_count(&self) -> usize {
        FIELDS.len()
    }
    fn field_name(&self, idx: usize) -> &str {
        FIELDS.get(idx).copied().unwrap_or("")
    }

    fn merge(
        &mut self,
        updates: Vec<TaskUpdate<'_, FuncUpdate>>,
        changes: &mut Vec<Changed>,
    ) -> Result<(), StateError> {
        for (idx, name) in FIELDS.iter().enumerate() {
            let writers: Vec<&TaskUpdate<'_, FuncUpdate>> =
                updates.iter().filter(|u| u.update.get(idx).is_some()).collect();
            if writers.len() > 1 {
                return Err(StateError::Conflict {
                    field: (*name).to_owned(),
                    nodes: writers.iter().map(|u| u.node.to_owned()).collect(),
                });
            }
        }
        for u in updates {
            let mut u = u.update;
            for idx in 0..FIELDS.len() {
                let Some(v) = u.slot(idx).and_then(Option::take) else {
                    continue;
                };
                if idx == 0 {
                    self.returned = false;
                }
                if idx == 1 {
                    self.returned = true;
                }
                if let Some(field) = self.slot(idx) {
                    *field = v;
                }
                changes.push(Changed {
                    field: idx,
                    change: FieldChange::Replaced,
                });
            }
        }
        Ok(())
    }

    fn update_fields(&self, update: &FuncUpdate) -> Vec<String> {
        (0..FIELDS.len())
            .filter(|&i| update.get(i).is_some())
            .map(|i| FIELDS[i].to_owned())
            .collect()
    }

    fn field_to_json(&self, idx: usize) -> Result<Value, StateError> {
        self.get(idx).cloned().ok_or_else(|| unknown(idx))
    }

    fn field_tail_to_json(&self, _idx: usize, _n: usize) -> Option<Result<Vec<Value>, StateError>> {
        None
    }

    fn set_field_from_json(&mut self, idx: usize, value: Value) -> Result<(), StateError> {
        let field = self.slot(idx).ok_or_else(|| unknown(idx))?;
        *field = value;
        Ok(())
    }

    fn update_to_json(&self, update: &FuncUpdate) -> Result<Value, StateError> {
        let mut m = serde_json::Map::new();
        for (idx, name) in FIELDS.iter().enumerate() {
            if let Some(v) = update.get(idx) {
                m.insert((*name).to_owned(), v.clone());
            }
        }
        Ok(Value::Object(m))
    }

    fn update_from_json(&self, value: Value) -> Result<FuncUpdate, StateError> {
        let Value::Object(map) = value else {
            return Err(StateError::Decode {
                field: String::new(),
                message: "an update of an entrypoint's state must be a JSON object".into(),
            });
        };
        let mut u = FuncUpdate::default();
        for (k, v) in map {
            let idx = FIELDS
                .iter()
                .position(|f| *f == k)
                .ok_or_else(|| StateError::UnknownField(k.clone()))?;
            if let Some(slot) = u.slot(idx) {
                *slot = Some(v);
            }
        }
        Ok(u)
    }

    fn json_schema(&self) -> Value {
        json!({
            "type": "object",
            "title": "EntrypointState",
            "properties": {"input": {}, "output": {}, "previous": {}},
            "additionalProperties": false,
        })
    }

    /// The return value: LangGraph shows an entrypoint's state as what it returned.
    fn to_json(&self) -> Result<Value, StateError> {
        Ok(self.output.clone())
    }

    fn empty_like(&self) -> Self {
        Self::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_input_clears_returned_and_output_sets_it() {
        let mut s = FuncState::default();
        let mut ch = Vec::new();
        let up = |u: FuncUpdate| vec![TaskUpdate { node: "n", update: u }];
        s.merge(
            up(FuncUpdate {
                input: Some(json!(1)),
                ..FuncUpdate::default()
            }),
            &mut ch,
        )
        .unwrap();
        assert!(!s.returned());
        s.merge(
            up(FuncUpdate {
                output: Some(json!(2)),
                previous: Some(json!(3)),
                ..FuncUpdate::default()
            }),
            &mut ch,
        )
        .unwrap();
        assert!(s.returned());
        assert_eq!(s.to_json().unwrap(), json!(2));
        assert_eq!(s.previous(), &json!(3));
        assert_eq!(ch.len(), 3);
    }

    #[test]
    fn unknown_update_key_is_an_error_naming_it() {
        let err = FuncState::default()
            .update_from_json(json!({"nope": 1}))
            .unwrap_err();
        assert_eq!(err, StateError::UnknownField("nope".into()));
    }
}
