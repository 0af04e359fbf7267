//! Search filters: conditions on an item's value, evaluated in Rust so every backend (SQL
//! ones included, as a post-filter) gives the same answers.
//!
//! A filter is a JSON object; every entry must hold. The key names a field of the value: a
//! top-level key, or a dotted path (`"author.name"`, `"tags.0"` for an array element). A
//! top-level key that itself contains dots is found before the path is split. The entry's
//! condition is
//!
//! - a plain value (string, number, boolean, null, array): the field must equal it. Numbers
//!   compare by value (`1` equals `1.0`); arrays compare element by element;
//! - an object of operators, `{"$gte": 3, "$lt": 10}`, all of which must hold:
//!   - `$eq` / `$ne`: equal / not equal (as above);
//!   - `$gt`, `$gte`, `$lt`, `$lte`: ordered comparison of two numbers or two strings
//!     (byte-wise); any other pair of types fails the condition;
//!   - `$in` / `$nin`: the field equals one / none of the elements of an array operand
//!     (`{"status": {"$in": ["open", "held"]}}`);
//! - any other object: the field must be an object matching it as a nested filter
//!   (`{"author": {"name": "ada"}}` equals `{"author.name": "ada"}`).
//!
//! A missing field fails every condition except `$ne` and `$nin`. An object mixing operator
//! keys (starting with `$`) and plain keys, an unknown operator, an ordered comparison against
//! anything but a number or string, or `$in` / `$nin` with anything but an array is rejected
//! with
//! [`BackendErrorKind::InvalidInput`](crate::BackendErrorKind::InvalidInput).

use super::invalid_input;
use crate::error::Result;
use serde_json::{Map, Value};
use std::cmp::Ordering;

/// A parsed, validated filter.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Filter {
    conditions: Vec<(String, Condition)>,
}

#[derive(Debug, Clone, PartialEq)]
enum Condition {
    Equals(Value),
    Operators(Vec<(Operator, Value)>),
    Nested(Filter),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    Eq,
    Ne,
    Gt,
    Gte,
    Lt,
    Lte,
    In,
    Nin,
}

/// The operators a filter may use, as the error for an unknown one lists them.
const SUPPORTED: &str = "$eq, $ne, $gt, $gte, $lt, $lte, $in, $nin";

impl Operator {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "$eq" => Self::Eq,
            "$ne" => Self::Ne,
            "$gt" => Self::Gt,
            "$gte" => Self::Gte,
            "$lt" => Self::Lt,
            "$lte" => Self::Lte,
            "$in" => Self::In,
            "$nin" => Self::Nin,
            _ => return None,
        })
    }

    fn is_ordered(self) -> bool {
        matches!(self, Self::Gt | Self::Gte | Self::Lt | Self::Lte)
    }

    fn is_set(self) -> bool {
        matches!(self, Self::In | Self::Nin)
    }

    fn holds(self, field: Option<&Value>, operand: &Value) -> bool {
        let in_set = || {
            field.is_some_and(|f| {
                operand
                    .as_array()
                    .is_some_and(|set| set.iter().any(|x| json_eq(f, x)))
            })
        };
        match self {
            Self::Eq => field.is_some_and(|f| json_eq(f, operand)),
            Self::Ne => !field.is_some_and(|f| json_eq(f, operand)),
            Self::In => in_set(),
            Self::Nin => !in_set(),
            Self::Gt | Self::Gte | Self::Lt | Self::Lte => {
                let Some(ord) = field.and_then(|f| compare(f, operand)) else {
                    return false;
                };
                match self {
                    Self::Gt => ord == Ordering::Greater,
                    Self::Gte => ord != Ordering::Less,
                    Self::Lt => ord == Ordering::Less,
                    _ => ord != Ordering::Greater,
                }
            }
        }
    }
}

impl Filter {
    /// Parse and validate a filter (see the module docs for the syntax).
    ///
    /// # Errors
    /// [`crate::BackendErrorKind::InvalidInput`] for a malformed condition.
    pub fn parse(filter: &Map<String, Value>) -> Result<Self> {
        Self::parse_at(filter, "")
    }

    fn parse_at(filter: &Map<String, Value>, parent: &str) -> Result<Self> {
        let mut conditions = Vec::with_capacity(filter.len());
        for (field, condition) in filter {
            let path = if parent.is_empty() {
                field.clone()
            } else {
                format!("{parent}.{field}")
            };
            conditions.push((field.clone(), Condition::parse(condition, &path)?));
        }
        Ok(Self { conditions })
    }

    /// True if the filter has no conditions (matches everything).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.conditions.is_empty()
    }

    /// Whether `value` satisfies every condition.
    #[must_use]
    pub fn matches(&self, value: &Value) -> bool {
        self.conditions
            .iter()
            .all(|(field, condition)| condition.holds(value_at_path(value, field)))
    }
}

impl Condition {
    fn parse(condition: &Value, path: &str) -> Result<Self> {
        let Value::Object(map) = condition else {
            return Ok(Self::Equals(condition.clone()));
        };
        let operators = map.keys().filter(|k| k.starts_with('$')).count();
        if operators == 0 {
            return Ok(Self::Nested(Filter::parse_at(map, path)?));
        }
        if operators != map.len() {
            return Err(invalid_input(format!(
                "filter on `{path}` mixes operators (keys starting with '$') and plain keys"
            )));
        }
        let mut ops = Vec::with_capacity(map.len());
        for (name, operand) in map {
            let Some(op) = Operator::parse(name) else {
                return Err(invalid_input(format!(
                    "filter on `{path}` uses unknown operator `{name}` (supported: {SUPPORTED})"
                )));
            };
            if op.is_ordered() && !(operand.is_number() || operand.is_string()) {
                return Err(invalid_input(format!(
                    "filter on `{path}`: `{name}` needs a number or a string, got {}",
                    kind_of(operand)
                )));
            }
            if op.is_set() && !operand.is_array() {
                return Err(invalid_input(format!(
                    "filter on `{path}`: `{name}` needs an array of values, got {}",
                    kind_of(operand)
                )));
            }
            ops.push((op, operand.clone()));
        }
        Ok(Self::Operators(ops))
    }

    fn holds(&self, field: Option<&Value>) -> bool {
        match self {
            Self::Equals(expected) => field.is_some_and(|f| json_eq(f, expected)),
            Self::Operators(ops) => ops.iter().all(|(op, operand)| op.holds(field, operand)),
            Self::Nested(filter) => field.is_some_and(|f| f.is_object() && filter.matches(f)),
        }
    }
}

/// The JSON type of `v`, for error messages (never the value itself: it may be huge).
fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Whether `value` matches `filter` (parsing it first; see the module docs).
///
/// # Errors
/// [`crate::BackendErrorKind::InvalidInput`] for a malformed filter.
pub fn matches_filter(value: &Value, filter: &Map<String, Value>) -> Result<bool> {
    Ok(Filter::parse(filter)?.matches(value))
}

/// The field of `value` at `path`: the top-level key `path` if there is one, else the dotted
/// path walked through objects (by key) and arrays (by index).
#[must_use]
pub fn value_at_path<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    if let Some(found) = value.as_object().and_then(|o| o.get(path)) {
        return Some(found);
    }
    if !path.contains('.') {
        return None;
    }
    path.split('.').try_fold(value, |current, segment| match current {
        Value::Object(map) => map.get(segment),
        Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

/// JSON equality, comparing numbers by value.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                x == y
            } else if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
                x == y
            } else {
                x.as_f64() == y.as_f64()
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, a)| y.get(k).is_some_and(|b| json_eq(a, b)))
        }
        _ => a == b,
    }
}

/// Order of two numbers or two strings; `None` for any other pair.
fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                Some(x.cmp(&y))
            } else if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
                Some(x.cmp(&y))
            } else {
                x.as_f64()?.partial_cmp(&y.as_f64()?)
            }
        }
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(value: &Value, filter: Value) -> bool {
        let Value::Object(map) = filter else {
            panic!("filter must be an object")
        };
        matches_filter(value, &map).unwrap()
    }

    fn rejects(filter: Value) -> bool {
        let Value::Object(map) = filter else {
            panic!("filter must be an object")
        };
        matches!(
            Filter::parse(&map),
            Err(crate::Error::Backend(ref e)) if e.kind() == crate::BackendErrorKind::InvalidInput
        )
    }

    #[test]
    fn equality_and_paths() {
        let v = json!({
            "kind": "note", "n": 3, "f": 2.5, "done": false, "tags": ["a", "b"],
            "author": {"name": "ada", "age": 36}, "dotted.key": 1
        });
        assert!(check(&v, json!({})));
        assert!(check(&v, json!({"kind": "note", "n": 3})));
        assert!(check(&v, json!({"n": 3.0})), "numbers compare by value");
        assert!(!check(&v, json!({"kind": "todo"})));
        assert!(check(&v, json!({"done": false, "tags": ["a", "b"]})));
        assert!(!check(&v, json!({"tags": ["a"]})));
        assert!(check(&v, json!({"author.name": "ada"})));
        assert!(
            check(&v, json!({"author": {"name": "ada"}})),
            "nested filter object"
        );
        assert!(!check(&v, json!({"author": {"name": "bob"}})));
        assert!(check(&v, json!({"tags.1": "b"})));
        assert!(check(&v, json!({"dotted.key": 1})), "literal dotted key wins");
        assert!(!check(&v, json!({"missing": null})), "missing never equals");
        assert!(!check(&v, json!({"kind.x": "note"})));
    }

    #[test]
    fn operators() {
        let v = json!({"n": 5, "f": 1.5, "s": "m", "big": u64::MAX});
        assert!(check(&v, json!({"n": {"$gt": 4, "$lte": 5}})));
        assert!(!check(&v, json!({"n": {"$gt": 5}})));
        assert!(check(&v, json!({"n": {"$gte": 5.0, "$lt": 5.5}})));
        assert!(check(&v, json!({"f": {"$lt": 2}})));
        assert!(check(&v, json!({"s": {"$gt": "a", "$lt": "z"}})));
        assert!(
            !check(&v, json!({"s": {"$gt": 1}})),
            "string vs number never orders"
        );
        assert!(check(&v, json!({"n": {"$eq": 5}, "s": {"$ne": "x"}})));
        assert!(!check(&v, json!({"n": {"$ne": 5}})));
        assert!(
            check(&v, json!({"missing": {"$ne": 1}})),
            "$ne holds for a missing field"
        );
        assert!(!check(&v, json!({"missing": {"$lt": 1}})));
        assert!(check(&v, json!({"big": {"$gt": 1}})));
        assert!(check(&v, json!({"big": u64::MAX})));
    }

    #[test]
    fn set_membership() {
        let v = json!({"n": 5, "s": "open", "tags": ["a"], "none": null});
        assert!(check(&v, json!({"s": {"$in": ["held", "open"]}})));
        assert!(!check(&v, json!({"s": {"$in": ["held"]}})));
        assert!(check(&v, json!({"n": {"$in": [1, 5.0]}})), "numbers by value");
        assert!(!check(&v, json!({"n": {"$in": []}})));
        assert!(
            check(&v, json!({"tags": {"$in": [["a"], ["b"]]}})),
            "arrays as values"
        );
        assert!(check(&v, json!({"none": {"$in": [null]}})));
        assert!(
            !check(&v, json!({"missing": {"$in": [null]}})),
            "missing is in no set"
        );
        assert!(check(&v, json!({"s": {"$nin": ["held", "closed"]}})));
        assert!(!check(&v, json!({"s": {"$nin": ["open"]}})));
        assert!(
            check(&v, json!({"missing": {"$nin": [1]}})),
            "$nin holds for a missing field"
        );
        assert!(check(&v, json!({"n": {"$in": [5, 6], "$nin": [6], "$gt": 4}})));
    }

    #[test]
    fn malformed_filters_are_invalid_input() {
        assert!(rejects(json!({"n": {"$in": 1}})));
        assert!(rejects(json!({"n": {"$nin": {"a": 1}}})));
        assert!(rejects(json!({"n": {"$bogus": [1]}})));
        assert!(rejects(json!({"n": {"$gt": 1, "x": 2}})));
        assert!(rejects(json!({"n": {"$gt": [1]}})));
        assert!(rejects(json!({"a": {"b": {"$lt": null}}})));
        assert!(!rejects(json!({"n": {"$eq": [1]}})));
    }
}
