//! Joining the answers of one message's tool calls into one `Command` when some tools
//! returned a [`ToolCommand`](crate::ToolCommand) (LangGraph's `Command` from a tool): the
//! node's single output carries what LangGraph applies as several writes of one step, and
//! lists those writes for the `updates` stream.

use crate::tool_node::ToolAnswer;
use graphloom_core::{Command, Message, MessageKind, NodeError, NodeOutput, State, ToolCall};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// One `Command` from the answers, in call order: messages concatenated, other keys
/// combined by their reducers, every `goto`.
pub(crate) fn join_answers<S: State>(
    state: &S,
    answers: Vec<crate::ToolAnswer>,
    make_update: fn(Vec<Message>) -> S::Update,
) -> Result<NodeOutput<S>, NodeError> {
    let key = messages_key(state, make_update)?;
    let mut acc = Joined {
        update: Map::new(),
        first: HashMap::new(),
        writes: Vec::new(),
    };
    let mut goto: Vec<String> = Vec::new();
    for answer in answers {
        match answer {
            ToolAnswer::Message(m) => {
                let who = format!("the answer to call `{}`", m.tool_call_id.as_deref().unwrap_or(""));
                let v = serde_json::to_value(vec![m]).map_err(NodeError::terminal)?;
                acc.add(state, &key, v, &who, true)?;
            }
            ToolAnswer::Command { call, command, then } => {
                let who = format!("tool `{}` (call `{}`)", call.name, call.id);
                let single = then.is_empty();
                let mut answers = 0;
                for command in std::iter::once(command).chain(then) {
                    for (k, v) in command.update {
                        if k == key {
                            let (messages, n) = answered(&call, v);
                            answers += n;
                            acc.add(state, &key, messages, &who, true)?;
                        } else {
                            acc.add(state, &k, v, &who, false)?;
                        }
                    }
                    goto.extend(command.goto);
                }
                if answers == 0 || (!single && answers > 1) {
                    return Err(unanswered(&call, &key, answers));
                }
            }
        }
    }
    let update = state.update_from_json(Value::Object(acc.update)).map_err(|e| {
        NodeError::fatal(format!("the tools' commands do not fit the graph's state: {e}")).with_source(e)
    })?;
    Ok(NodeOutput::Command(
        Command::new().update(update).goto(goto).writes(acc.writes),
    ))
}

/// The state key the tool node's messages go to: the one key of an empty message update.
fn messages_key<S: State>(
    state: &S,
    make_update: fn(Vec<Message>) -> S::Update,
) -> Result<String, NodeError> {
    match state.update_to_json(&make_update(Vec::new())) {
        Ok(Value::Object(m)) if m.len() == 1 => m.keys().next().cloned().ok_or_else(no_key),
        Ok(_) => Err(no_key()),
        Err(e) => Err(NodeError::terminal(e)),
    }
}

fn no_key() -> NodeError {
    NodeError::fatal("ToolNode: the message update does not write exactly one state key")
}

/// The messages of a command's update with the tool named on those answering `call` (as
/// LangGraph does), and how many answer it.
fn answered(call: &ToolCall, messages: Value) -> (Value, usize) {
    let items = match messages {
        Value::Null => Vec::new(),
        Value::Array(a) => a,
        one => vec![one],
    };
    let mut found = 0;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match serde_json::from_value::<Message>(item.clone()) {
            Ok(mut m)
                if m.kind == MessageKind::Tool && m.tool_call_id.as_deref() == Some(call.id.as_str()) =>
            {
                found += 1;
                if m.name.is_none() {
                    m.name = Some(call.name.clone());
                }
                out.push(serde_json::to_value(&m).unwrap_or(item));
            }
            _ => out.push(item),
        }
    }
    (Value::Array(out), found)
}

/// A tool's commands that do not answer its call (a list of commands: exactly once).
fn unanswered(call: &ToolCall, key: &str, answers: usize) -> NodeError {
    if answers == 0 {
        NodeError::fatal(format!(
            "tool `{}` (call `{}`) returned a Command whose update has no tool message answering the call: put a tool message with tool_call_id `{}` in its `{key}` (every tool call needs its answer)",
            call.name, call.id, call.id
        ))
    } else {
        NodeError::fatal(format!(
            "tool `{}` (call `{}`) returned a list of commands with {answers} tool messages answering the call; exactly one of them must answer it",
            call.name, call.id
        ))
    }
}

/// The joined update, who wrote each key first (for conflict messages), and every write
/// in order (for the `updates` stream).
struct Joined {
    update: Map<String, Value>,
    first: HashMap<String, String>,
    writes: Vec<(String, Value)>,
}

impl Joined {
    fn add<S: State>(
        &mut self,
        state: &S,
        key: &str,
        value: Value,
        who: &str,
        messages: bool,
    ) -> Result<(), NodeError> {
        self.writes.push((key.to_owned(), value.clone()));
        let Some(cur) = self.update.get_mut(key) else {
            self.update.insert(key.to_owned(), value);
            self.first.insert(key.to_owned(), who.to_owned());
            return Ok(());
        };
        let reducer = if messages {
            Some("add_messages")
        } else {
            state.field_index(key).and_then(|i| state.field_reducer(i))
        };
        combine(reducer, cur, value).map_err(|why| {
            let first = self.first.get(key).map_or("another tool", String::as_str);
            NodeError::fatal(format!(
                "{first} and {who} both update `{key}` in one step, and `{key}` {why}; write it from one tool"
            ))
        })
    }
}

/// Fold `new` into `cur` as the field's reducer would fold the two writes in turn.
fn combine(reducer: Option<&str>, cur: &mut Value, new: Value) -> Result<(), &'static str> {
    if graphloom_core::state::overwrite_of(cur).is_some()
        || graphloom_core::state::overwrite_of(&new).is_some()
    {
        return Err("is overwritten by one of them");
    }
    let list = |v: Value| match v {
        Value::Array(a) => a,
        Value::Null => Vec::new(),
        one => vec![one],
    };
    match reducer {
        Some("append" | "add_messages") => {
            let mut items = list(std::mem::take(cur));
            items.extend(list(new));
            *cur = Value::Array(items);
            Ok(())
        }
        Some("add") => {
            *cur = match (std::mem::take(cur), new) {
                (Value::Number(a), Value::Number(b)) => match (a.as_i64(), b.as_i64()) {
                    (Some(x), Some(y)) => Value::from(x.checked_add(y).ok_or("overflows when added")?),
                    _ => Value::from(a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0)),
                },
                (Value::String(a), Value::String(b)) => Value::String(a + &b),
                (Value::Array(mut a), Value::Array(b)) => {
                    a.extend(b);
                    Value::Array(a)
                }
                _ => return Err("has values that cannot be added"),
            };
            Ok(())
        }
        Some("merge") => match (cur, new) {
            (Value::Object(a), Value::Object(b)) => {
                a.extend(b);
                Ok(())
            }
            _ => Err("is merged from objects, and one of the values is not an object"),
        },
        Some("last") => Err("keeps one value per step"),
        _ => Err("has a custom reducer, which cannot combine the two before the merge"),
    }
}
