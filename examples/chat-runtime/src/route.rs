//! The chat route: `POST /api/v1/ai/chat` calls the AI runtime and streams its events as
//! data stream protocol lines (header `x-vercel-ai-data-stream: v1`). The route only maps
//! events to the wire; a client that disconnects stops the response, not the run.
//!
//! Request body (the shape `useChat` posts): `{"id": "<thread>", "messages": [{"role":
//! "user", "content": "..."}, ...]}`. The thread's history lives in the checkpoints, so only
//! the last user message is new. Correlation headers: `x-request-id`, `x-trace-id` (generated
//! when absent), `x-billing-account`, `x-virtual-key`.

use crate::events::LlmCaller;
use crate::runtime::{ChatRequest, ChatRuntime};
use crate::wire::{DataStreamEncoder, DATA_STREAM_HEADER};
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use futures::StreamExt;
use graphloom_llm::Message;
use serde::Deserialize;
use std::convert::Infallible;

/// One message of the request.
#[derive(Debug, Clone, Deserialize)]
pub struct WireMessage {
    /// `user`, `assistant`, `system`.
    pub role: String,
    /// The text.
    #[serde(default)]
    pub content: String,
}

/// The request body.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatBody {
    /// The conversation (thread) id.
    #[serde(alias = "threadId")]
    pub id: String,
    /// The conversation as the client has it.
    pub messages: Vec<WireMessage>,
}

/// The route, over a runtime.
pub fn router(runtime: ChatRuntime) -> Router {
    Router::new()
        .route("/api/v1/ai/chat", post(chat))
        .with_state(runtime)
}

fn header_or(headers: &HeaderMap, name: &str, default: impl FnOnce() -> String) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map_or_else(default, str::to_owned)
}

async fn chat(
    State(runtime): State<ChatRuntime>,
    headers: HeaderMap,
    Json(body): Json<ChatBody>,
) -> Response {
    let Some(last) = body.messages.iter().rev().find(|m| m.role == "user") else {
        return (StatusCode::BAD_REQUEST, "no user message").into_response();
    };
    if last.content.trim().is_empty() || body.id.trim().is_empty() {
        return (StatusCode::BAD_REQUEST, "empty message or thread id").into_response();
    }
    let caller = LlmCaller {
        billing_account_id: header_or(&headers, "x-billing-account", || "anonymous".into()),
        virtual_key_id: header_or(&headers, "x-virtual-key", || "default".into()),
        request_id: header_or(&headers, "x-request-id", || uuid::Uuid::now_v7().to_string()),
        trace_id: header_or(&headers, "x-trace-id", || {
            uuid::Uuid::new_v4().simple().to_string()
        }),
    };
    let run = runtime.run_chat_stream(ChatRequest {
        caller,
        thread_id: body.id,
        messages: vec![Message::human(last.content.clone())],
    });
    let mut encoder = DataStreamEncoder::new();
    let lines = run
        .events
        .map(move |e| Ok::<_, Infallible>(encoder.encode(&e.event)));
    Response::builder()
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .header(DATA_STREAM_HEADER.0, DATA_STREAM_HEADER.1)
        .header("x-graph-run-id", run.graph_run_id)
        .body(Body::from_stream(lines))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
