//! Joining the answers of one message's tool calls into one `Command` when some tools
//! returned a [`ToolCommand`](crate::ToolCommand) (LangGraph's `Command` from a tool): the
//! node's single output carries what LangGraph applies as several writes of one step, and
//! lists those writes for the `updates` stream.

use crate::tool_node::ToolAnswer;
use graphloom_core::{Command, Message, MessageKind, NodeError, NodeOutput, State, StateError, ToolCall};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// One `Command` from the answers, in call order: messages concatenated, other keys
/// combined by their reducers, every `goto`.
pub(crate) fn join_answers<S: State>(
    state: &S,
    answers: Vec<crate::ToolAnswer>,
    make_update: MessagesOut<S>,
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

/// Where a tool node's messages go: the update a function builds from them, or a state
/// field by name.
pub(crate) enum MessagesOut<S: State> {
    /// `make_update(messages)`.
    Update(fn(Vec<Message>) -> S::Update),
    /// The field of this name, through the state's JSON update.
    Field(&'static str),
}

impl<S: State> MessagesOut<S> {
    /// The update that appends `messages`.
    pub(crate) fn update(&self, state: &S, messages: Vec<Message>) -> Result<S::Update, NodeError> {
        match self {
            MessagesOut::Update(make) => Ok(make(messages)),
            MessagesOut::Field(key) => {
                let mut update = Map::new();
                let messages = serde_json::to_value(messages).map_err(NodeError::terminal)?;
                update.insert((*key).to_owned(), messages);
                state.update_from_json(Value::Object(update)).map_err(|e| {
                    NodeError::fatal(format!(
                        "ToolNode: the tool messages do not fit field `{key}`: {e}"
                    ))
                    .with_source(e)
                })
            }
        }
    }
}

/// The state key the tool node's messages go to: the field named, or the one key of an
/// empty message update.
fn messages_key<S: State>(state: &S, make_update: MessagesOut<S>) -> Result<String, NodeError> {
    let make_update = match make_update {
        MessagesOut::Field(key) => return Ok(key.to_owned()),
        MessagesOut::Update(make) => make,
    };
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
    NodeError::terminal(UnansweredToolCall {
        tool: call.name.clone(),
        call_id: call.id.clone(),
        answers,
        key: key.to_owned(),
    })
}

/// A tool returned a `Command` (or a list of them) that does not answer its call with
/// exactly one tool message: LangGraph's "Expected to have a matching ToolMessage in
/// Command.update". It is the source of the node's error, so a caller can match it:
/// `err.find_source::<UnansweredToolCall>()` on the run's error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnansweredToolCall {
    /// The tool that returned the command.
    pub tool: String,
    /// The id of the call it did not answer.
    pub call_id: String,
    /// How many tool messages in its commands answer the call: 0, or more than 1 in a
    /// list of commands.
    pub answers: usize,
    /// The state key the answer belongs in (the tool node's messages key).
    pub key: String,
}

impl std::fmt::Display for UnansweredToolCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self {
            tool,
            call_id,
            answers,
            key,
        } = self;
        if *answers == 0 {
            write!(
                f,
                "tool `{tool}` (call `{call_id}`) returned a Command whose update has no tool message answering the call: put a tool message with tool_call_id `{call_id}` in its `{key}` (every tool call needs its answer)"
            )
        } else {
            write!(
                f,
                "tool `{tool}` (call `{call_id}`) returned a list of commands with {answers} tool messages answering the call; exactly one of them must answer it"
            )
        }
    }
}

impl std::error::Error for UnansweredToolCall {}

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
            let e = NodeError::fatal(format!(
                "{first} and {who} both update `{key}` in one step, and `{key}` {why}; write it from one tool"
            ));
            // The two invalid updates of a step are the state's own errors, so
            // `is_invalid_update` finds them as it finds the merge's.
            let (field, nodes) = (key.to_owned(), vec![first.to_owned(), who.to_owned()]);
            match why {
                KEEPS_ONE => e.with_source(StateError::Conflict { field, nodes }),
                OVERWRITTEN => e.with_source(StateError::OverwriteConflict { field, nodes }),
                _ => e,
            }
        })
    }
}

/// Why two writes of a last-value key cannot be joined.
const KEEPS_ONE: &str = "keeps one value per step";
/// Why two writes of which one is an `Overwrite` cannot be joined.
const OVERWRITTEN: &str = "is overwritten by one of them";

/// Fold `new` into `cur` as the field's reducer would fold the two writes in turn.
fn combine(reducer: Option<&str>, cur: &mut Value, new: Value) -> Result<(), &'static str> {
    if graphloom_core::state::overwrite_of(cur).is_some()
        || graphloom_core::state::overwrite_of(&new).is_some()
    {
        return Err(OVERWRITTEN);
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
        Some("last") => Err(KEEPS_ONE),
        _ => Err("has a custom reducer, which cannot combine the two before the merge"),
    }
}
