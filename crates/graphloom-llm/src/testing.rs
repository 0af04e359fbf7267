//! A local server speaking the OpenAI Chat Completions wire format (feature `testing`),
//! for tests and benchmarks that run a whole program against "a provider" without the
//! network: point `OPENAI_BASE_URL` at [`OpenAiWireServer::base_url`] and set
//! `GRAPHLOOM_MODEL=openai-compatible:<any name>`.
//!
//! It answers `POST .../chat/completions`, streamed (`"stream": true`: SSE
//! `chat.completion.chunk` frames, a usage frame when `stream_options.include_usage` asks
//! for it, then `data: [DONE]`) or not (one `chat.completion` object), with what a
//! [`Responder`] decides from the request body. It keeps nothing per request but a counter,
//! so it can serve millions of calls in a soak test.
//!
//! ```
//! use graphloom_llm::testing::{OpenAiWireServer, WireAnswer};
//! use graphloom_llm::{ChatModel, ChatOptions, Message, OpenAiModel};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = OpenAiWireServer::start(OpenAiWireServer::react()).await?;
//! let model = OpenAiModel::new("fake").base_url(server.base_url());
//! let answer = model.invoke(&[Message::human("hi")], &ChatOptions::new()).await?;
//! assert!(answer.text().starts_with("Answer to: hi"));
//! assert_eq!(server.served(), 1);
//! # let _ = WireAnswer::text("unused");
//! # Ok(()) }
//! ```

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::Response;
use axum::Router;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What the server answers: text, and tool calls (name, arguments).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WireAnswer {
    /// The assistant's text.
    pub text: String,
    /// Tool calls: name and JSON arguments.
    pub tool_calls: Vec<(String, Value)>,
}

impl WireAnswer {
    /// A text answer.
    #[must_use]
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            tool_calls: Vec::new(),
        }
    }
    /// One tool call.
    #[must_use]
    pub fn tool_call(name: impl Into<String>, args: Value) -> Self {
        Self {
            text: String::new(),
            tool_calls: vec![(name.into(), args)],
        }
    }
}

/// Decides the answer from the request body (`model`, `messages`, `tools`,
/// `response_format`, ...).
pub type Responder = Arc<dyn Fn(&Value) -> WireAnswer + Send + Sync>;

struct Shared {
    responder: Responder,
    served: AtomicU64,
}

/// The server; it stops when dropped.
pub struct OpenAiWireServer {
    base: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for OpenAiWireServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for OpenAiWireServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiWireServer")
            .field("base", &self.base)
            .field("served", &self.served())
            .finish_non_exhaustive()
    }
}

/// The text of the last message of a request, and its role.
fn last_message(body: &Value) -> (&str, String) {
    let last = body
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.last());
    let role = last
        .and_then(|m| m.get("role"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let text = match last.and_then(|m| m.get("content")) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    };
    (role, text)
}

impl OpenAiWireServer {
    /// Serve on `127.0.0.1` at a free port.
    ///
    /// # Errors
    /// When no port can be bound.
    pub async fn start(responder: Responder) -> std::io::Result<Self> {
        Self::bind("127.0.0.1:0", responder).await
    }

    /// Serve on `addr`.
    ///
    /// # Errors
    /// When `addr` cannot be bound.
    pub async fn bind(addr: &str, responder: Responder) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            responder,
            served: AtomicU64::new(0),
        });
        let app = Router::new().fallback(handle).with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        // A streamed answer goes out frame by frame: without TCP_NODELAY each frame after
        // the first waits for the client's delayed ACK (~40 ms on Linux).
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            base: format!("http://{local}/v1"),
            shared,
            task,
        })
    }

    /// The base URL (`http://127.0.0.1:<port>/v1`), as `OPENAI_BASE_URL` takes it.
    #[must_use]
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// Chat completions answered so far.
    #[must_use]
    pub fn served(&self) -> u64 {
        self.shared.served.load(Ordering::Relaxed)
    }

    /// A ReAct-style provider: when the last message is a tool result it answers with
    /// text; otherwise, when the request offers tools, it calls the first one with
    /// `{"query": <last message text>}`; otherwise it answers `Answer to: <last text>`.
    #[must_use]
    pub fn react() -> Responder {
        Arc::new(|body: &Value| {
            let (role, text) = last_message(body);
            if role == "tool" {
                return WireAnswer::text(format!(
                    "Based on what the tool found: {}",
                    text.chars().take(80).collect::<String>()
                ));
            }
            let first_tool = body
                .get("tools")
                .and_then(Value::as_array)
                .and_then(|t| t.first())
                .and_then(|t| t.pointer("/function/name"))
                .and_then(Value::as_str);
            match first_tool {
                Some(name) => WireAnswer::tool_call(name, json!({ "query": text })),
                None => WireAnswer::text(format!("Answer to: {text}")),
            }
        })
    }
}

fn id() -> String {
    format!("chatcmpl-{}", uuid::Uuid::new_v4().simple())
}

/// About four bytes a token.
fn tokens(s: &str) -> u64 {
    (s.len() as u64).div_ceil(4)
}

fn prompt_tokens(body: &Value) -> u64 {
    body.get("messages").map_or(0, |m| tokens(&m.to_string()))
}

fn completion_tokens(a: &WireAnswer) -> u64 {
    tokens(&a.text)
        + a.tool_calls
            .iter()
            .map(|(n, args)| tokens(n) + tokens(&args.to_string()))
            .sum::<u64>()
}

fn finish_reason(a: &WireAnswer) -> &'static str {
    if a.tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
}

fn call_id(i: usize) -> String {
    format!("call_{}_{i}", uuid::Uuid::new_v4().simple())
}

async fn handle(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "the body is not JSON");
    };
    if !body.get("messages").is_some_and(Value::is_array) {
        return error(StatusCode::BAD_REQUEST, "`messages` must be an array");
    }
    let answer = (shared.responder)(&body);
    shared.served.fetch_add(1, Ordering::Relaxed);
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("fake")
        .to_owned();
    let usage = json!({
        "prompt_tokens": prompt_tokens(&body),
        "completion_tokens": completion_tokens(&answer),
        "total_tokens": prompt_tokens(&body) + completion_tokens(&answer),
    });
    if body.get("stream").and_then(Value::as_bool) == Some(true) {
        let include_usage = body
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            == Some(true);
        stream_response(&model, &answer, include_usage.then_some(usage))
    } else {
        let calls: Vec<Value> = answer
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| {
                json!({"id": call_id(i), "type": "function",
                       "function": {"name": name, "arguments": args.to_string()}})
            })
            .collect();
        let mut message = json!({"role": "assistant", "content": answer.text});
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
            if answer.text.is_empty() {
                message["content"] = Value::Null;
            }
        }
        let out = json!({
            "id": id(),
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(&answer)}],
            "usage": usage,
        });
        json_response(StatusCode::OK, &out)
    }
}

fn stream_response(model: &str, answer: &WireAnswer, usage: Option<Value>) -> Response {
    let id = id();
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({
            "id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    };
    let mut frames = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    for word in answer.text.split_inclusive(' ') {
        frames.push(chunk(json!({ "content": word }), None));
    }
    for (i, (name, args)) in answer.tool_calls.iter().enumerate() {
        let args = args.to_string();
        let mut mid = args.len() / 2;
        while !args.is_char_boundary(mid) {
            mid += 1;
        }
        let (a, b) = args.split_at(mid);
        frames.push(chunk(
            json!({"tool_calls": [{"index": i, "id": call_id(i), "type": "function",
                                   "function": {"name": name, "arguments": a}}]}),
            None,
        ));
        frames.push(chunk(
            json!({"tool_calls": [{"index": i, "function": {"arguments": b}}]}),
            None,
        ));
    }
    frames.push(chunk(json!({}), Some(finish_reason(answer))));
    if let Some(usage) = usage {
        frames.push(json!({
            "id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [], "usage": usage,
        }));
    }
    let mut text: Vec<Result<String, Infallible>> =
        frames.iter().map(|f| Ok(format!("data: {f}\n\n"))).collect();
    text.push(Ok("data: [DONE]\n\n".to_owned()));
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(futures::stream::iter(text)))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

fn json_response(status: StatusCode, v: &Value) -> Response {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(v.to_string()))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

fn error(status: StatusCode, message: &str) -> Response {
    json_response(
        status,
        &json!({"error": {"message": message, "type": "invalid_request_error"}}),
    )
}
