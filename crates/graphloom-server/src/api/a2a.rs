//! `/a2a/{assistant_id}`: an assistant as an A2A agent (JSON-RPC over HTTP), with its agent
//! card at `/a2a/{assistant_id}/.well-known/agent-card.json` and
//! `/.well-known/agent-card.json?assistant_id=`.
//!
//! Both protocol versions clients speak: 0.3 (`message/send`, `message/stream`,
//! `tasks/get`; `kind`ed parts, lower-case states) and 1.0 (`SendMessage`,
//! `SendStreamingMessage`, `GetTask`; the ProtoJSON shapes). The card offers the 1.0
//! JSON-RPC interface and keeps 0.3's `url` and `protocolVersion` for older clients.
//! Errors are JSON-RPC errors with the protocol's codes.

use crate::api::error::ApiError;
use crate::auth::Identity;
use crate::service::a2a::{self, A2aMessage, Part, Role, RpcError, Task, TaskState};
use crate::service::agents;
use crate::state::AppRef;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// The routes.
pub(crate) fn routes() -> axum::Router<AppRef> {
    axum::Router::new()
        .route("/a2a/{assistant_id}", post(rpc))
        .route("/a2a/{assistant_id}/.well-known/agent-card.json", get(card_at))
        .route("/.well-known/agent-card.json", get(card_by_query))
}

/// The protocol version a method belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dialect {
    V03,
    V10,
}

/// The identity the gate found (anonymous with auth off).
fn who(identity: Option<Extension<Identity>>) -> Arc<Identity> {
    Arc::new(identity.map_or_else(Identity::anonymous, |Extension(i)| i))
}

fn rpc_error(id: &Value, e: &RpcError) -> Response {
    Json(json!({"jsonrpc": "2.0", "id": id, "error": {"code": e.code, "message": e.message}})).into_response()
}

fn rpc_result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// `POST /a2a/{assistant_id}`: one JSON-RPC request.
async fn rpc(
    State(state): State<AppRef>,
    identity: Option<Extension<Identity>>,
    Path(assistant_id): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let Ok(req) = serde_json::from_slice::<Value>(&body) else {
        return rpc_error(
            &Value::Null,
            &RpcError::new(RpcError::PARSE, "invalid JSON payload"),
        );
    };
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    let method = req.get("method").and_then(Value::as_str);
    let (Some(method), Some("2.0")) = (method, req.get("jsonrpc").and_then(Value::as_str)) else {
        return rpc_error(
            &id,
            &RpcError::new(RpcError::INVALID_REQUEST, "not a JSON-RPC 2.0 request"),
        );
    };
    let params = req.get("params").cloned().unwrap_or(Value::Null);
    let identity = who(identity);
    let assistant = match agents::readable(&state, &identity, &assistant_id).await {
        Ok(a) => a,
        Err(e) => return rpc_error(&id, &RpcError::invalid(e.detail)),
    };
    let answer = match method {
        "message/send" => send(&state, &identity, &assistant, &params, Dialect::V03).await,
        "SendMessage" => send(&state, &identity, &assistant, &params, Dialect::V10).await,
        "message/stream" => return stream(state, identity, assistant, id, params, Dialect::V03).await,
        "SendStreamingMessage" => return stream(state, identity, assistant, id, params, Dialect::V10).await,
        "tasks/get" => task(&state, &identity, &assistant, &params, Dialect::V03).await,
        "GetTask" => task(&state, &identity, &assistant, &params, Dialect::V10).await,
        other => Err(RpcError::new(
            RpcError::METHOD_NOT_FOUND,
            format!("method not found: {other}"),
        )),
    };
    match answer {
        Ok(result) => Json(rpc_result(&id, result)).into_response(),
        Err(e) => rpc_error(&id, &e),
    }
}

async fn send(
    state: &AppRef,
    identity: &Arc<Identity>,
    a: &crate::models::Assistant,
    params: &Value,
    d: Dialect,
) -> Result<Value, RpcError> {
    let msg = a2a::parse_message(params)?;
    let accepted = a2a::accept(state, identity, a, msg).await?;
    let task = a2a::settle(state, &identity.identity, accepted).await;
    Ok(match d {
        Dialect::V03 => task_json(&task, d),
        Dialect::V10 => json!({"task": task_json(&task, d)}),
    })
}

async fn task(
    state: &AppRef,
    identity: &Identity,
    a: &crate::models::Assistant,
    params: &Value,
    d: Dialect,
) -> Result<Value, RpcError> {
    let id = params
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid("params.id is missing or not a string"))?;
    let history = params
        .get("historyLength")
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok());
    let task = a2a::get(state, identity, a, id, history).await?;
    Ok(task_json(&task, d))
}

/// `message/stream`: the task as submitted, working, its artifact, and its last status,
/// as server-sent events of JSON-RPC responses.
async fn stream(
    state: AppRef,
    identity: Arc<Identity>,
    a: crate::models::Assistant,
    id: Value,
    params: Value,
    d: Dialect,
) -> Response {
    let accepted = match a2a::parse_message(&params) {
        Ok(msg) => a2a::accept(&state, &identity, &a, msg).await,
        Err(e) => Err(e),
    };
    let accepted = match accepted {
        Ok(acc) => acc,
        Err(e) => return rpc_error(&id, &e),
    };
    let first = a2a::submitted(&accepted);
    let frame = move |result: Value| {
        Event::default()
            .json_data(rpc_result(&id, result))
            .map_err(|e| std::io::Error::other(e.to_string()))
    };
    let events = async_stream(state, identity, accepted, first, d);
    let frames = futures::StreamExt::map(events, frame);
    Sse::new(frames).keep_alive(KeepAlive::default()).into_response()
}

/// The events of a streamed task.
fn async_stream(
    state: AppRef,
    identity: Arc<Identity>,
    accepted: a2a::Accepted,
    first: Task,
    d: Dialect,
) -> impl futures::Stream<Item = Value> + Send {
    let (tx, rx) = tokio::sync::mpsc::channel::<Value>(4);
    tokio::spawn(async move {
        let _ = tx.send(stream_task(&first, d)).await;
        let mut working = first.clone();
        working.state = TaskState::Working;
        let _ = tx.send(status_update(&working, d, false)).await;
        let done = a2a::settle(&state, &identity.identity, accepted).await;
        if !done.artifact.is_empty() {
            let _ = tx.send(artifact_update(&done, d)).await;
        }
        let _ = tx.send(status_update(&done, d, true)).await;
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

fn stream_task(t: &Task, d: Dialect) -> Value {
    match d {
        Dialect::V03 => task_json(t, d),
        Dialect::V10 => json!({"task": task_json(t, d)}),
    }
}

fn status_update(t: &Task, d: Dialect, last: bool) -> Value {
    let mut u = json!({"taskId": t.id, "contextId": t.context_id, "status": status_json(t, d)});
    match d {
        Dialect::V03 => {
            u["kind"] = json!("status-update");
            u["final"] = json!(last);
            u
        }
        Dialect::V10 => json!({"statusUpdate": u}),
    }
}

fn artifact_update(t: &Task, d: Dialect) -> Value {
    let mut u = json!({
        "taskId": t.id, "contextId": t.context_id, "artifact": artifact_json(t, d),
        "append": false, "lastChunk": true,
    });
    match d {
        Dialect::V03 => {
            u["kind"] = json!("artifact-update");
            u
        }
        Dialect::V10 => json!({"artifactUpdate": u}),
    }
}

fn state_name(s: TaskState, d: Dialect) -> &'static str {
    match (d, s) {
        (Dialect::V03, TaskState::Submitted) => "submitted",
        (Dialect::V03, TaskState::Working) => "working",
        (Dialect::V03, TaskState::Completed) => "completed",
        (Dialect::V03, TaskState::Failed) => "failed",
        (Dialect::V03, TaskState::Canceled) => "canceled",
        (Dialect::V03, TaskState::InputRequired) => "input-required",
        (Dialect::V10, TaskState::Submitted) => "TASK_STATE_SUBMITTED",
        (Dialect::V10, TaskState::Working) => "TASK_STATE_WORKING",
        (Dialect::V10, TaskState::Completed) => "TASK_STATE_COMPLETED",
        (Dialect::V10, TaskState::Failed) => "TASK_STATE_FAILED",
        (Dialect::V10, TaskState::Canceled) => "TASK_STATE_CANCELED",
        (Dialect::V10, TaskState::InputRequired) => "TASK_STATE_INPUT_REQUIRED",
    }
}

fn part_json(p: &Part, d: Dialect) -> Value {
    match (p, d) {
        (Part::Text(t), Dialect::V03) => json!({"kind": "text", "text": t}),
        (Part::Data(v), Dialect::V03) => json!({"kind": "data", "data": v}),
        (Part::Text(t), Dialect::V10) => json!({"text": t}),
        (Part::Data(v), Dialect::V10) => json!({"data": v, "mediaType": "application/json"}),
    }
}

fn message_json(m: &A2aMessage, d: Dialect) -> Value {
    let role = match (m.role, d) {
        (Role::User, Dialect::V03) => "user",
        (Role::Agent, Dialect::V03) => "agent",
        (Role::User, Dialect::V10) => "ROLE_USER",
        (Role::Agent, Dialect::V10) => "ROLE_AGENT",
    };
    let mut v = json!({
        "role": role,
        "parts": m.parts.iter().map(|p| part_json(p, d)).collect::<Vec<_>>(),
        "messageId": m.message_id,
    });
    if let Some(t) = &m.task_id {
        v["taskId"] = json!(t);
    }
    if let Some(c) = &m.context_id {
        v["contextId"] = json!(c);
    }
    if d == Dialect::V03 {
        v["kind"] = json!("message");
    }
    v
}

fn status_json(t: &Task, d: Dialect) -> Value {
    let mut s = json!({"state": state_name(t.state, d), "timestamp": t.timestamp});
    if let Some(m) = &t.status_message {
        s["message"] = message_json(m, d);
    }
    s
}

fn artifact_json(t: &Task, d: Dialect) -> Value {
    json!({
        "artifactId": format!("{}-response", t.id),
        "name": "Assistant Response",
        "description": format!("Response from assistant {}", t.assistant_id),
        "parts": t.artifact.iter().map(|p| part_json(p, d)).collect::<Vec<_>>(),
    })
}

fn task_json(t: &Task, d: Dialect) -> Value {
    let mut v = json!({
        "id": t.id,
        "contextId": t.context_id,
        "status": status_json(t, d),
        "history": t.history.iter().map(|m| message_json(m, d)).collect::<Vec<_>>(),
    });
    if !t.artifact.is_empty() {
        v["artifacts"] = json!([artifact_json(t, d)]);
    }
    if d == Dialect::V03 {
        v["kind"] = json!("task");
    }
    v
}

/// The base URL clients reached the server at (`Host`, `X-Forwarded-Proto`).
fn base_url(headers: &HeaderMap) -> String {
    let host = headers
        .get("x-forwarded-host")
        .or_else(|| headers.get("host"))
        .and_then(|v| v.to_str().ok())
        .unwrap_or("localhost");
    let scheme = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("http");
    format!("{scheme}://{host}")
}

/// The agent card of assistant `id`.
async fn card(state: &AppRef, identity: &Identity, id: &str, headers: &HeaderMap) -> Response {
    let a = match agents::readable(state, identity, id).await {
        Ok(a) => a,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let (_, has_messages) = agents::input_schema(state, &a);
    let modes: Vec<&str> = if has_messages {
        vec!["application/json", "text/plain"]
    } else {
        vec!["application/json"]
    };
    let url = format!("{}/a2a/{}", base_url(headers), a.assistant_id);
    let description = a
        .description
        .clone()
        .unwrap_or_else(|| format!("{} assistant", a.name));
    Json(json!({
        "name": a.name,
        "description": description,
        "url": url,
        "protocolVersion": "0.3.0",
        "preferredTransport": "JSONRPC",
        "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "version": env!("CARGO_PKG_VERSION"),
        "capabilities": {"streaming": true, "pushNotifications": false},
        "defaultInputModes": modes,
        "defaultOutputModes": modes,
        "skills": [{
            "id": format!("{}-main", a.assistant_id),
            "name": format!("{} capabilities", a.name),
            "description": description,
            "tags": ["assistant", "graphloom", a.graph_id],
            "inputModes": modes,
            "outputModes": modes,
        }],
    }))
    .into_response()
}

async fn card_at(
    State(state): State<AppRef>,
    identity: Option<Extension<Identity>>,
    Path(assistant_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    card(&state, &who(identity), &assistant_id, &headers).await
}

#[derive(Deserialize)]
struct CardQuery {
    assistant_id: Option<String>,
}

async fn card_by_query(
    State(state): State<AppRef>,
    identity: Option<Extension<Identity>>,
    Query(q): Query<CardQuery>,
    headers: HeaderMap,
) -> Response {
    match q.assistant_id.filter(|s| !s.is_empty()) {
        Some(id) => card(&state, &who(identity), &id, &headers).await,
        None => ApiError::new(
            StatusCode::BAD_REQUEST,
            "missing required query parameter: assistant_id",
        )
        .into_response(),
    }
}
