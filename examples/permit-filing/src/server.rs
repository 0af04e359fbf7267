//! The seed's two execution endpoints on a small axum router:
//!
//! - `POST /execute`: runs the pipeline to its end (or its pause) and returns the final
//!   state as JSON.
//! - `POST /conversations/{id}/stream`: the same run on thread `{id}`, streamed as
//!   server-sent events: one `node_end` per finished node, an `interrupt` when the run pauses
//!   for a verdict, then exactly one `done`.
//!
//! Both take `{"thread_id"?: string, "input"?: object, "resume"?: any}`: `input` is a state
//! update (as [`crate::sample_input`]); `resume` answers a pending approval instead.

use crate::PermitState;
use axum::extract::{Path, State as AxumState};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use futures::StreamExt;
use graphloom_core::{
    Command, CompiledGraph, Error, RunConfig, RunEvent, RunInput, RunOutput, RunStatus, State, StreamMode,
    StreamOptions,
};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::convert::Infallible;

/// The body of both endpoints.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ExecuteRequest {
    /// Thread to run on (a new one when absent; the path id for the stream endpoint).
    #[serde(default)]
    pub thread_id: Option<String>,
    /// A state update starting a turn.
    #[serde(default)]
    pub input: Option<Value>,
    /// A verdict for the pending approval.
    #[serde(default)]
    pub resume: Option<Value>,
}

impl ExecuteRequest {
    fn run_input(&self) -> Option<RunInput<PermitState>> {
        match (&self.resume, &self.input) {
            (Some(v), _) => Some(RunInput::Command(Command::resume(v.clone()))),
            (None, Some(input)) => Some(RunInput::Json(input.clone())),
            (None, None) => None,
        }
    }
}

/// The router: `POST /execute` and `POST /conversations/{id}/stream`.
pub fn router(graph: CompiledGraph<PermitState>) -> Router {
    Router::new()
        .route("/execute", post(execute))
        .route("/conversations/{id}/stream", post(stream))
        .with_state(graph)
}

fn bad_request(message: &str) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": message}))).into_response()
}

/// The summary of a finished (or paused, or stopped) run.
#[must_use]
pub fn summary(thread_id: &str, result: &graphloom_core::Result<RunOutput<PermitState>>) -> Value {
    match result {
        Ok(out) => {
            let v = &out.values;
            json!({
                "thread_id": thread_id,
                "execution_id": v.execution_id,
                "status": v.status,
                "paused": out.status == RunStatus::Interrupted,
                "tokens_used": v.tokens_used,
                "cost_usd": v.cost_usd,
                "iteration": v.iteration,
                "error": v.error,
                "interrupts": out.interrupts,
                "state": v.to_json().unwrap_or(Value::Null),
            })
        }
        Err(Error::BudgetExceeded {
            node,
            budget,
            message,
        }) => json!({
            "thread_id": thread_id,
            "status": "budget_exceeded",
            "budget": budget,
            "node": node,
            "error": message,
            "resumable": true,
        }),
        Err(e) => json!({"thread_id": thread_id, "status": "error", "error": e.to_string()}),
    }
}

async fn execute(
    AxumState(graph): AxumState<CompiledGraph<PermitState>>,
    Json(req): Json<ExecuteRequest>,
) -> Response {
    let Some(input) = req.run_input() else {
        return bad_request("give `input` or `resume`");
    };
    let thread = req
        .thread_id
        .clone()
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let result = graph.invoke_input(input, RunConfig::thread(thread.clone())).await;
    let code = match &result {
        Ok(_) | Err(Error::BudgetExceeded { .. }) => StatusCode::OK,
        Err(Error::InvalidResume(_) | Error::Decode(_)) => StatusCode::BAD_REQUEST,
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (code, Json(summary(&thread, &result))).into_response()
}

async fn stream(
    AxumState(graph): AxumState<CompiledGraph<PermitState>>,
    Path(id): Path<String>,
    Json(req): Json<ExecuteRequest>,
) -> Response {
    let Some(input) = req.run_input() else {
        return bad_request("give `input` or `resume`");
    };
    let run = graph.stream(
        input,
        RunConfig::thread(id.clone()),
        StreamOptions::modes([StreamMode::Updates]),
    );
    let mut tokens_used = 0u64;
    let mut status = String::from(crate::status::RUNNING);
    let events = run.map(move |ev| {
        let event = match ev {
            RunEvent::Part(part) => {
                let Ok(Value::Object(map)) = part.data_json() else {
                    return Ok::<_, Infallible>(Event::default().comment("unreadable part"));
                };
                node_end(&map, &mut status, &mut tokens_used)
            }
            RunEvent::End(result) => {
                let mut s = summary(&id, &result);
                if let Some(o) = s.as_object_mut() {
                    o.remove("state");
                }
                let body = json!({"event": "done", "data": s});
                Event::default().event("done").data(body.to_string())
            }
        };
        Ok(event)
    });
    Sse::new(events).keep_alive(KeepAlive::default()).into_response()
}

/// One `node_end` event from an `updates` part (`{node: update}`), carrying the running
/// status and token count and, for model calls, the message.
fn node_end(map: &Map<String, Value>, status: &mut String, tokens_used: &mut u64) -> Event {
    let Some((node, update)) = map.iter().next() else {
        return Event::default().comment("empty update");
    };
    if node == "__interrupt__" {
        let body = json!({"event": "interrupt", "data": update});
        return Event::default().event("interrupt").data(body.to_string());
    }
    if let Some(s) = update["status"].as_str() {
        s.clone_into(status);
    }
    if let Some(t) = update["tokens_used"].as_u64() {
        *tokens_used = t;
    }
    let mut data = json!({"status": status, "tokens_used": tokens_used});
    if node.ends_with("llm_call") {
        if let Some(m) = update["messages"].as_array().and_then(|a| a.last()) {
            data["message"] =
                json!({"role": "assistant", "content": m["content"], "tool_calls": m["tool_calls"]});
        }
    }
    let body = json!({"event": "node_end", "node": node, "data": data});
    Event::default().event("node_end").data(body.to_string())
}
