//! A local webhook receiver: an HTTP server on 127.0.0.1 that answers each request as its
//! script says (a status, or no answer at all), then 200, and keeps what it received.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// How the receiver answers one request.
#[derive(Clone, Copy, Debug)]
pub enum Answer {
    /// This status.
    Status(u16),
    /// No answer: the request hangs until the sender gives up.
    Hang,
}

/// One request received.
#[derive(Clone, Debug)]
pub struct Got {
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub json: Value,
    /// What the receiver answered (None: it hung).
    pub answered: Option<u16>,
}

#[derive(Default)]
struct Inner {
    script: Mutex<VecDeque<Answer>>,
    got: Mutex<Vec<Got>>,
    notify: Notify,
}

pub struct Receiver {
    pub url: String,
    inner: Arc<Inner>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

async fn hook(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let answer = inner
        .script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or(Answer::Status(200));
    let answered = match answer {
        Answer::Status(s) => Some(s),
        Answer::Hang => None,
    };
    inner.got.lock().unwrap().push(Got {
        headers,
        json: serde_json::from_slice(&body).unwrap_or(Value::Null),
        body: body.to_vec(),
        answered,
    });
    inner.notify.notify_waiters();
    match answer {
        Answer::Status(s) => StatusCode::from_u16(s).unwrap(),
        Answer::Hang => {
            std::future::pending::<()>().await;
            StatusCode::OK
        }
    }
}

impl Receiver {
    /// A receiver on 127.0.0.1 answering `script` first, then 200 to everything.
    pub async fn start(script: Vec<Answer>) -> Self {
        let inner = Arc::new(Inner {
            script: Mutex::new(script.into()),
            ..Inner::default()
        });
        let app = Router::new()
            .route("/hook", post(hook))
            .with_state(Arc::clone(&inner));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await
        });
        Self {
            url,
            inner,
            stop: Some(tx),
        }
    }

    /// What was received so far.
    pub fn got(&self) -> Vec<Got> {
        self.inner.got.lock().unwrap().clone()
    }

    /// Wait (at most `within`) until at least `n` requests were received; them all.
    pub async fn wait_for(&self, n: usize, within: Duration) -> Vec<Got> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let notified = self.inner.notify.notified();
            let got = self.got();
            if got.len() >= n {
                return got;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!(
                    "the receiver got {} requests, not {n}, within {within:?}",
                    self.got().len()
                );
            }
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}
