//! The thread-centric protocol's commands at the edge: each command's parameters read
//! into typed requests (a run's checked against the same bounds as a run request's),
//! the operation called, the result shaped as the client reads it. Shared by
//! `POST /threads/{id}/commands` and the thread's WebSocket.

use super::extract::RunBody;
use crate::protocol::{Command, ErrorCode, ProtocolError};
use crate::run::RunRequest;
use crate::service::thread_stream::commands::{self, Answer, Ctx};
use crate::state::AppRef;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::time::Duration;

type Result<T> = std::result::Result<T, ProtocolError>;

/// Run `cmd` on thread `thread_id` for `owner`: its result, or its error.
pub(super) async fn dispatch(state: &AppRef, owner: &str, thread_id: &str, cmd: &Command) -> Result<Value> {
    let ctx = Ctx {
        state,
        owner,
        thread_id,
    };
    let p = &cmd.params;
    match cmd.method.as_str() {
        "run.start" => {
            let (request, delay) = run_start_request(p)?;
            let run = commands::start(&ctx, request, delay).await?;
            Ok(json!({"run_id": run.run_id}))
        }
        "input.respond" => {
            let (answers, rest) = respond_request(p)?;
            let run = commands::respond(&ctx, answers, rest).await?;
            Ok(json!({"run_id": run.run_id}))
        }
        "input.inject" => {
            let p: InjectParams = params(p)?;
            if !matches!(p.message.role.as_str(), "user" | "system") {
                return Err(ProtocolError::invalid("message.role must be user or system."));
            }
            commands::inject(&ctx, &p.message.role, p.message.content, p.message.name).await?;
            Ok(json!({}))
        }
        "agent.getTree" => {
            let p: TreeParams = params(p)?;
            commands::tree(&ctx, p.run_id.as_deref()).await
        }
        "state.get" => {
            let p: StateGetParams = params(p)?;
            commands::state_get(&ctx, &p.namespace, p.keys).await
        }
        "state.listCheckpoints" => {
            let p: ListParams = params(p)?;
            if p.limit.is_some_and(|l| !(1..=1000).contains(&l)) {
                return Err(ProtocolError::invalid("limit must be 1..=1000."));
            }
            commands::list_checkpoints(&ctx, p.limit, p.before).await
        }
        "state.fork" => {
            let p: ForkParams = params(p)?;
            let mut body = Map::new();
            body.insert("assistant_id".into(), json!(""));
            copy(&mut body, &cmd.params, &["input", "config", "metadata"]);
            let (request, _) = run_request(Value::Object(body))?;
            let run = commands::fork(&ctx, p.checkpoint_id, request).await?;
            Ok(json!({"run_id": run.run_id, "thread_id": thread_id}))
        }
        // Over HTTP a stream is its own subscription; the command is accepted for
        // clients that send it anyway (the WebSocket handles these itself).
        "subscription.subscribe" => {
            crate::protocol::Filter::parse(p)?;
            Ok(json!({"subscription_id": uuid::Uuid::new_v4().to_string(), "replayed_events": 0}))
        }
        "subscription.unsubscribe" => {
            let p: UnsubscribeParams = params(p)?;
            Err(ProtocolError::new(
                ErrorCode::NoSuchSubscription,
                format!("Unknown subscription: {}", p.subscription_id),
            ))
        }
        "subscription.reconnect" => Err(ProtocolError::new(
            ErrorCode::NotSupported,
            "subscription.reconnect is a WebSocket command; over HTTP open /stream/events with `since`.",
        )),
        other => Err(ProtocolError::new(
            ErrorCode::UnknownCommand,
            format!("Unknown protocol command: {other}"),
        )),
    }
}

/// Parameters read into `T`; a field that does not read is named.
fn params<T: for<'de> Deserialize<'de>>(v: &Value) -> Result<T> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            ProtocolError::invalid(format!("params: {}", e.inner()))
        } else {
            ProtocolError::invalid(format!("params.{path}: {}", e.inner()))
        }
    })
}

/// A run request from its JSON, checked as `RunBody`s are at the edge.
fn run_request(v: Value) -> Result<(RunRequest, Option<Duration>)> {
    let request: RunRequest = params(&v)?;
    let checked = RunBody::check(request)?;
    Ok((checked.request, checked.delay))
}

fn copy(to: &mut Map<String, Value>, from: &Value, keys: &[&str]) {
    for k in keys {
        if let Some(v) = from.get(*k).filter(|v| !v.is_null()) {
            to.insert((*k).to_owned(), v.clone());
        }
    }
}

/// `run.start`'s run request: `assistant_id`, `input`, `config` (with a fork target in
/// `config.configurable.checkpoint_id`), `metadata`, `context`, the multitask strategy
/// (`multitask_strategy` or `multitaskStrategy`), and the interrupt and durability options.
fn run_start_request(p: &Value) -> Result<(RunRequest, Option<Duration>)> {
    if !p.get("assistant_id").is_some_and(Value::is_string) {
        return Err(ProtocolError::invalid("run.start requires an assistant_id."));
    }
    let mut body = Map::new();
    copy(
        &mut body,
        p,
        &[
            "assistant_id",
            "input",
            "config",
            "metadata",
            "context",
            "interrupt_before",
            "interrupt_after",
            "durability",
            "after_seconds",
        ],
    );
    if let Some(s) = p.get("multitask_strategy").or_else(|| p.get("multitaskStrategy")) {
        body.insert("multitask_strategy".into(), s.clone());
    }
    if let Some(id) = p
        .pointer("/config/configurable/checkpoint_id")
        .filter(|v| v.is_string())
    {
        body.insert("checkpoint_id".into(), id.clone());
    }
    run_request(Value::Object(body))
}

/// `input.respond`: one answer (`interrupt_id`, `response`) or several (`responses`),
/// with the command's `update` and `goto`, `config` and `metadata`.
fn respond_request(p: &Value) -> Result<(Vec<Answer>, RunRequest)> {
    let answer = |v: &Value| -> Result<Answer> {
        let id = v.get("interrupt_id").and_then(Value::as_str);
        match (id, v.get("response")) {
            (Some(id), Some(r)) => Ok(Answer {
                interrupt_id: id.to_owned(),
                response: r.clone(),
            }),
            _ => Err(ProtocolError::invalid(
                "input.respond requires interrupt_id and response (or responses: [{interrupt_id, response}]).",
            )),
        }
    };
    let answers = match p.get("responses") {
        Some(Value::Array(list)) if !list.is_empty() && list.len() <= 256 => {
            list.iter().map(answer).collect::<Result<Vec<_>>>()?
        }
        Some(_) => {
            return Err(ProtocolError::invalid(
                "responses must be a list of 1 to 256 answers.",
            ))
        }
        None => vec![answer(p)?],
    };
    let mut body = Map::new();
    body.insert("assistant_id".into(), json!(""));
    copy(&mut body, p, &["config", "metadata"]);
    let mut command = Map::new();
    copy(&mut command, p, &["update", "goto"]);
    if !command.is_empty() {
        body.insert("command".into(), Value::Object(command));
    }
    let (request, _) = run_request(Value::Object(body))?;
    Ok((answers, request))
}

#[derive(Deserialize)]
struct TreeParams {
    #[serde(default)]
    run_id: Option<String>,
}

#[derive(Deserialize)]
struct StateGetParams {
    #[serde(default)]
    namespace: Vec<String>,
    #[serde(default)]
    keys: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct ListParams {
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    before: Option<String>,
}

#[derive(Deserialize)]
struct ForkParams {
    checkpoint_id: String,
}

#[derive(Deserialize)]
struct UnsubscribeParams {
    subscription_id: String,
}

#[derive(Deserialize)]
struct InjectParams {
    message: InjectMessage,
}

#[derive(Deserialize)]
struct InjectMessage {
    role: String,
    content: Value,
    #[serde(default)]
    name: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_start_reads_the_clients_spellings() {
        let (r, _) = run_start_request(&json!({
            "assistant_id": "a", "input": {"x": 1}, "multitaskStrategy": "enqueue",
            "config": {"configurable": {"checkpoint_id": "c1"}},
        }))
        .unwrap();
        assert_eq!(r.start_checkpoint().as_deref(), Some("c1"));
        assert_eq!(
            r.multitask_strategy,
            Some(crate::models::MultitaskStrategy::Enqueue)
        );
        let e = run_start_request(&json!({"input": {}})).unwrap_err();
        assert_eq!(e.message, "run.start requires an assistant_id.");
        let e = run_start_request(&json!({"assistant_id": "a", "config": "fast"})).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArgument);
    }

    #[test]
    fn respond_takes_one_answer_or_several() {
        let (a, r) = respond_request(
            &json!({"namespace": [], "interrupt_id": "i", "response": 1, "update": {"x": 2}}),
        )
        .unwrap();
        assert_eq!((a.len(), a[0].interrupt_id.as_str()), (1, "i"));
        assert_eq!(r.command.and_then(|c| c.update), Some(json!({"x": 2})));
        let (a, _) = respond_request(&json!({"responses": [
            {"namespace": [], "interrupt_id": "i", "response": 1},
            {"namespace": [], "interrupt_id": "j", "response": 2}]}))
        .unwrap();
        assert_eq!(a.len(), 2);
        assert!(respond_request(&json!({"namespace": []})).is_err());
        assert!(respond_request(&json!({"responses": []})).is_err());
    }
}
