//! [`Filter`]: the metadata a [`Grant`](super::Grant) restricts an action to, as a
//! containment needle the databases already search by (PostgreSQL's `@>`).

use graphloom_server_db::kit::{json_contains, map_contains};
use serde_json::{Map, Value};

/// Metadata conditions, all of which must hold: `key` equal to a value, or `key` a list
/// holding a value. Empty: no condition.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filter {
    /// As a containment needle: `{"k": v}` for equality, `{"k": [v]}` for membership.
    needle: Map<String, Value>,
    /// Conditions that contradict each other (`k` equal to two values): nothing matches.
    impossible: bool,
}

impl Filter {
    /// Also `key` equal to `value`.
    #[must_use]
    pub fn eq(self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        let mut one = Map::new();
        one.insert(key.into(), value.into());
        self.and_needle(&one)
    }

    /// Also `key` a list holding `value`.
    #[must_use]
    pub fn contains(self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        let mut one = Map::new();
        one.insert(key.into(), Value::Array(vec![value.into()]));
        self.and_needle(&one)
    }

    /// A filter in LangGraph's JSON form: `{"k": v}`, `{"k": {"$eq": v}}`,
    /// `{"k": {"$contains": v}}`; `None` when an operator is unknown.
    #[must_use]
    pub fn from_json(filter: &Map<String, Value>) -> Option<Self> {
        let mut out = Self::default();
        for (k, v) in filter {
            out = match v {
                Value::Object(op) if op.len() == 1 && op.contains_key("$eq") => {
                    out.eq(k.clone(), op["$eq"].clone())
                }
                Value::Object(op) if op.len() == 1 && op.contains_key("$contains") => {
                    match &op["$contains"] {
                        Value::Array(all) => all.iter().fold(out, |f, x| f.contains(k.clone(), x.clone())),
                        x => out.contains(k.clone(), x.clone()),
                    }
                }
                Value::Object(op) if op.keys().any(|k| k.starts_with('$')) => return None,
                v => out.eq(k.clone(), v.clone()),
            };
        }
        Some(out)
    }

    /// Whether the filter sets no condition.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.needle.is_empty() && !self.impossible
    }

    /// Whether `metadata` meets every condition.
    #[must_use]
    pub fn matches(&self, metadata: &Map<String, Value>) -> bool {
        !self.impossible && map_contains(metadata, &self.needle)
    }

    /// The needle of a search asking for `asked` (its own metadata filter) within this
    /// filter; `None` when no resource can match both.
    pub(crate) fn within(&self, asked: &Map<String, Value>) -> Option<Map<String, Value>> {
        let both = self.clone().and_needle(asked);
        (!both.impossible).then_some(both.needle)
    }

    /// Also every condition of containment needle `more`.
    fn and_needle(mut self, more: &Map<String, Value>) -> Self {
        for (k, v) in more {
            let merged = match self.needle.remove(k) {
                None => Some(v.clone()),
                Some(old) => and_values(old, v),
            };
            match merged {
                Some(m) => {
                    self.needle.insert(k.clone(), m);
                }
                None => self.impossible = true,
            }
        }
        self
    }
}

/// One needle holding both `a` and `b` (containment of both is containment of this), or
/// `None` when no value contains both.
fn and_values(a: Value, b: &Value) -> Option<Value> {
    match (a, b) {
        (Value::Array(mut x), Value::Array(y)) => {
            for v in y {
                if !x
                    .iter()
                    .any(|have| json_contains(have, v) && json_contains(v, have))
                {
                    x.push(v.clone());
                }
            }
            Some(Value::Array(x))
        }
        (Value::Object(mut x), Value::Object(y)) => {
            for (k, v) in y {
                let merged = match x.remove(k) {
                    None => v.clone(),
                    Some(old) => and_values(old, v)?,
                };
                x.insert(k.clone(), merged);
            }
            Some(Value::Object(x))
        }
        (a, b) if json_contains(&a, b) && json_contains(b, &a) => Some(a),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn equality_and_membership_match_as_langgraph_filters() {
        let f = Filter::from_json(&map(
            json!({"team": "red", "users": {"$contains": "ann"}, "tier": {"$eq": 2}}),
        ))
        .unwrap();
        assert!(f.matches(&map(
            json!({"team": "red", "users": ["bob", "ann"], "tier": 2, "x": 1})
        )));
        assert!(!f.matches(&map(json!({"team": "red", "users": ["bob"], "tier": 2}))));
        assert!(!f.matches(&map(json!({"team": "blue", "users": ["ann"], "tier": 2}))));
        assert!(!f.matches(&map(json!({"users": ["ann"], "tier": 2}))));
        assert!(Filter::from_json(&map(json!({"k": {"$gt": 1}}))).is_none());
        assert!(Filter::default().matches(&Map::new()));
    }

    #[test]
    fn a_search_within_a_filter_meets_both_or_nothing() {
        let f = Filter::default().eq("team", "red").contains("users", "ann");
        assert_eq!(
            f.within(&map(json!({"users": ["bob"], "x": 1}))),
            Some(map(json!({"team": "red", "users": ["ann", "bob"], "x": 1})))
        );
        assert_eq!(
            f.within(&map(json!({"team": "red"}))),
            Some(map(json!({"team": "red", "users": ["ann"]})))
        );
        assert_eq!(f.within(&map(json!({"team": "blue"}))), None);
        let f = f.eq("team", "blue");
        assert!(!f.matches(&map(json!({"team": "red", "users": ["ann"]}))));
        assert_eq!(f.within(&Map::new()), None);
    }
}
