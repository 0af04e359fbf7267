//! A local HTTP server (axum on 127.0.0.1:0) that answers with scripted provider replies —
//! JSON bodies, SSE streams (clean, cut short, or broken mid-frame), raw bytes, delays —
//! and records every request it received.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use axum::Router;
use futures::StreamExt;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One scripted HTTP answer.
#[derive(Clone, Debug)]
pub enum MockReply {
    /// A JSON body with a status and extra headers.
    Json {
        status: u16,
        body: Value,
        headers: Vec<(String, String)>,
    },
    /// Raw bytes.
    Raw { status: u16, body: Vec<u8> },
    /// An SSE stream of these frames (each sent split in two network writes). With
    /// `abort`, the connection breaks after the last frame instead of ending cleanly.
    Sse { frames: Vec<String>, abort: bool },
    /// Wait, then answer.
    Delayed(Duration, Box<MockReply>),
}

impl MockReply {
    pub fn json(body: Value) -> Self {
        MockReply::Json {
            status: 200,
            body,
            headers: Vec::new(),
        }
    }
    pub fn status(status: u16, body: Value) -> Self {
        MockReply::Json {
            status,
            body,
            headers: Vec::new(),
        }
    }
    pub fn with_header(self, name: &str, value: &str) -> Self {
        match self {
            MockReply::Json {
                status,
                body,
                mut headers,
            } => {
                headers.push((name.to_owned(), value.to_owned()));
                MockReply::Json {
                    status,
                    body,
                    headers,
                }
            }
            other => other,
        }
    }
    pub fn sse(frames: Vec<String>) -> Self {
        MockReply::Sse { frames, abort: false }
    }
    pub fn sse_abort(frames: Vec<String>) -> Self {
        MockReply::Sse { frames, abort: true }
    }
    pub fn after(self, d: Duration) -> Self {
        MockReply::Delayed(d, Box::new(self))
    }
}

/// `data: <json>` frames (OpenAI style).
pub fn data_frames(values: &[Value]) -> Vec<String> {
    values.iter().map(|v| format!("data: {v}\n\n")).collect()
}

/// `event: <type>` + `data: <json>` frames (Anthropic style).
pub fn event_frames(values: &[Value]) -> Vec<String> {
    values
        .iter()
        .map(|v| {
            format!(
                "event: {}\ndata: {v}\n\n",
                v["type"].as_str().unwrap_or("message")
            )
        })
        .collect()
}

/// A request the server received.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }
}

struct Shared {
    replies: Mutex<VecDeque<MockReply>>,
    repeat: Option<MockReply>,
    requests: Mutex<Vec<Recorded>>,
}

pub struct MockServer {
    pub base: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockServer {
    /// A server answering with `replies` in order (then 500s).
    pub async fn start(replies: Vec<MockReply>) -> Self {
        Self::start_with(replies, None).await
    }
    /// A server answering every request with `reply`.
    pub async fn repeating(reply: MockReply) -> Self {
        Self::start_with(Vec::new(), Some(reply)).await
    }
    async fn start_with(replies: Vec<MockReply>, repeat: Option<MockReply>) -> Self {
        let shared = Arc::new(Shared {
            replies: Mutex::new(replies.into()),
            repeat,
            requests: Mutex::new(Vec::new()),
        });
        let app = Router::new().fallback(handle).with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            base: format!("http://{addr}"),
            shared,
            task,
        }
    }
    /// Base URL with `/v1` (as OpenAI-compatible clients are configured).
    pub fn v1(&self) -> String {
        format!("{}/v1", self.base)
    }
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }
    pub fn request_count(&self) -> usize {
        self.shared.requests.lock().unwrap().len()
    }
}

async fn handle(State(shared): State<Arc<Shared>>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let body_json = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.requests.lock().unwrap().push(Recorded {
        path: uri.path().to_owned(),
        headers,
        body: body_json,
    });
    let next = shared.replies.lock().unwrap().pop_front();
    let reply = next.or_else(|| shared.repeat.clone()).unwrap_or_else(|| {
        MockReply::status(500, json!({"error": {"message": "mock server: no reply left"}}))
    });
    respond(reply).await
}

fn respond(reply: MockReply) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send>> {
    Box::pin(async move {
        match reply {
            MockReply::Delayed(d, inner) => {
                tokio::time::sleep(d).await;
                respond(*inner).await
            }
            MockReply::Json {
                status,
                body,
                headers,
            } => {
                let mut b = Response::builder()
                    .status(StatusCode::from_u16(status).unwrap())
                    .header("content-type", "application/json");
                for (k, v) in headers {
                    b = b.header(k, v);
                }
                b.body(Body::from(body.to_string())).unwrap()
            }
            MockReply::Raw { status, body } => Response::builder()
                .status(StatusCode::from_u16(status).unwrap())
                .header("content-type", "application/json")
                .body(Body::from(body))
                .unwrap(),
            MockReply::Sse { frames, abort } => {
                let mut pieces: Vec<Result<Bytes, std::io::Error>> = Vec::new();
                for f in frames {
                    let bytes = f.into_bytes();
                    let mid = bytes.len() / 2;
                    pieces.push(Ok(Bytes::copy_from_slice(&bytes[..mid])));
                    pieces.push(Ok(Bytes::copy_from_slice(&bytes[mid..])));
                }
                // The break comes a moment after the frames, so that they leave the server's
                // buffers first, as they would on a real network.
                let tail = futures::stream::iter(abort.then_some(())).then(|()| async {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Err(std::io::Error::other("connection broken by the mock server"))
                });
                Response::builder()
                    .status(200)
                    .header("content-type", "text/event-stream")
                    .body(Body::from_stream(futures::stream::iter(pieces).chain(tail)))
                    .unwrap()
            }
        }
    })
}

/// A port on 127.0.0.1 with nothing listening.
pub async fn closed_port() -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    port
}
