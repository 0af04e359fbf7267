//! The thread-centric protocol over a WebSocket (`GET /threads/{id}/stream/events` with
//! an upgrade): commands in, their answers and the thread's events out, on one socket.
//!
//! Subscriptions (`subscription.subscribe` / `unsubscribe` / `reconnect`) belong to the
//! socket. The socket follows the thread from its latest run on and keeps that run's
//! events (up to [`REPLAY_EVENTS`] and [`REPLAY_BYTES`]), so a subscription replays the
//! latest run's matching events before the live ones, as the reference server does.
//!
//! Memory stays bounded whatever the client does: frames larger than [`MAX_FRAME`] close
//! the socket (1009) after an error frame; what goes out passes through a queue of
//! [`OUT_QUEUE`] frames, and a client that reads nothing for [`SEND_TIMEOUT`] while that
//! queue is full is disconnected (1008), so nothing piles up for it.

use super::auth::Owner;
use super::thread_commands::dispatch;
use crate::protocol::{error_frame, success_frame, BadFrame, Command, ErrorCode, Event, Filter, ProtocolError};
use crate::service::thread_stream::follow::{follow_thread, Item, Start};
use crate::state::AppRef;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::time::Duration;
use tokio::sync::mpsc;

/// Largest frame a client may send.
pub(crate) const MAX_FRAME: usize = 1024 * 1024;
/// Frames queued for a client before the session waits for it.
const OUT_QUEUE: usize = 256;
/// How long the session waits for a client that reads nothing before disconnecting it.
const SEND_TIMEOUT: Duration = Duration::from_secs(20);
/// Events of the latest run kept for subscriptions' replays (at most).
const REPLAY_EVENTS: usize = 20_000;
/// Bytes of events of the latest run kept for replays (about, at most).
const REPLAY_BYTES: usize = 32 * 1024 * 1024;

#[utoipa::path(get, path = "/threads/{thread_id}/stream/events", tag = "thread-protocol",
    summary = "The thread-centric protocol over a WebSocket",
    description = "Upgrade to a WebSocket. Send commands (`{\"id\", \"method\", \"params\"}`, text frames of at most 1 MiB); receive their answers, and the events of the subscriptions made with `subscription.subscribe` (`{\"channels\", \"namespaces\"?, \"depth\"?}`), which first replays the matching events of the thread's latest run. Frames that are not commands get an error frame with `id: null`.",
    params(("thread_id" = String, Path, description = "Thread id")),
    responses((status = 101, description = "Switching to the WebSocket protocol")))]
pub(crate) async fn socket(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(thread_id): Path<String>,
    ws: WebSocketUpgrade,
) -> Response {
    ws.max_message_size(MAX_FRAME)
        .max_frame_size(MAX_FRAME)
        .on_upgrade(move |socket| session(state, owner, thread_id, socket))
}

/// The latest run's events, bounded.
#[derive(Default)]
struct Replay {
    events: VecDeque<(Event, usize)>,
    bytes: usize,
}

impl Replay {
    fn push(&mut self, ev: Event, size: usize) {
        self.bytes += size;
        self.events.push_back((ev, size));
        while self.events.len() > REPLAY_EVENTS || self.bytes > REPLAY_BYTES {
            match self.events.pop_front() {
                Some((_, s)) => self.bytes -= s,
                None => break,
            }
        }
    }

    fn clear(&mut self) {
        self.events.clear();
        self.bytes = 0;
    }
}

struct Session {
    state: AppRef,
    owner: String,
    thread_id: String,
    out: mpsc::Sender<Message>,
    subs: Vec<(String, Filter)>,
    replay: Replay,
    last_seq: u64,
}

/// Why a session ends.
enum End {
    /// The client left (or its socket broke).
    Gone,
    /// The client does not read.
    Stalled,
}

async fn session(state: AppRef, owner: String, thread_id: String, socket: WebSocket) {
    let (mut sink, mut incoming) = socket.split();
    let (tx, mut rx) = mpsc::channel::<Message>(OUT_QUEUE);
    let writer = tokio::spawn(async move {
        while let Some(m) = rx.recv().await {
            let closing = matches!(m, Message::Close(_));
            if sink.send(m).await.is_err() || closing {
                break;
            }
        }
        let _ = sink.close().await;
    });
    let mut follower = Box::pin(follow_thread(
        state.clone(),
        owner.clone(),
        thread_id.clone(),
        Start::LatestRun,
    ));
    let mut s = Session {
        state,
        owner,
        thread_id,
        out: tx,
        subs: Vec::new(),
        replay: Replay::default(),
        last_seq: 0,
    };
    let end = loop {
        tokio::select! {
            msg = incoming.next() => {
                let r = match msg {
                    Some(Ok(Message::Text(t))) => s.frame(t.as_bytes()).await,
                    Some(Ok(Message::Binary(b))) => s.frame(&b).await,
                    Some(Ok(Message::Close(_))) | None => Err(End::Gone),
                    Some(Ok(_)) => Ok(()),
                    Some(Err(e)) => {
                        // A frame over the limit, or a broken socket: say why, then close.
                        let bad = BadFrame {
                            id: None,
                            error: ProtocolError::invalid(format!("The frame could not be read: {e}")),
                        };
                        let _ = s.send_json(&bad.response()).await;
                        let _ = s.out.try_send(Message::Close(Some(CloseFrame {
                            code: 1009,
                            reason: "frame too large or malformed".into(),
                        })));
                        Err(End::Gone)
                    }
                };
                if let Err(end) = r {
                    break end;
                }
            }
            item = follower.next() => {
                if let Some(item) = item {
                    if let Err(end) = s.item(item).await {
                        break end;
                    }
                }
            }
        }
    };
    if matches!(end, End::Stalled) {
        tracing::debug!(thread_id = %s.thread_id, "closing a thread WebSocket whose client does not read");
        let _ = s.out.try_send(Message::Close(Some(CloseFrame {
            code: 1008,
            reason: "the client does not read".into(),
        })));
    }
    drop(s);
    drop(follower);
    let _ = writer.await;
}

impl Session {
    /// Queue a frame for the client; `Stalled` when it has not read for too long.
    async fn send_text(&self, text: String) -> Result<(), End> {
        match tokio::time::timeout(SEND_TIMEOUT, self.out.send(Message::Text(text.into()))).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(End::Gone),
            Err(_) => Err(End::Stalled),
        }
    }

    async fn send_json(&self, v: &Value) -> Result<(), End> {
        self.send_text(v.to_string()).await
    }

    /// Events (and run starts) from the thread.
    async fn item(&mut self, item: Item) -> Result<(), End> {
        match item {
            Item::RunStarted => self.replay.clear(),
            Item::KeepAlive => {}
            Item::Events(evs) => {
                for ev in evs {
                    self.last_seq = self.last_seq.max(ev.seq);
                    let text = ev.to_json().to_string();
                    if self.subs.iter().any(|(_, f)| f.matches(&ev)) {
                        self.send_text(text.clone()).await?;
                    }
                    self.replay.push(ev, text.len());
                }
            }
        }
        Ok(())
    }

    /// One frame from the client.
    async fn frame(&mut self, bytes: &[u8]) -> Result<(), End> {
        let cmd = match Command::parse(bytes) {
            Ok(c) => c,
            Err(bad) => return self.send_json(&bad.response()).await,
        };
        let answer = match cmd.method.as_str() {
            "subscription.subscribe" => self.subscribe(&cmd.params, None).await,
            "subscription.unsubscribe" => self.unsubscribe(&cmd.params),
            "subscription.reconnect" => self.reconnect(&cmd.params).await,
            _ => dispatch(&self.state, &self.owner, &self.thread_id, &cmd)
                .await
                .map_err(Failure::from),
        };
        let frame = match answer {
            Ok(result) => success_frame(cmd.id, result, self.last_seq),
            Err(Failure::Protocol(e)) => error_frame(Some(cmd.id), &e, Some(self.last_seq)),
            Err(Failure::End(end)) => return Err(end),
        };
        self.send_json(&frame).await
    }

    /// Add a subscription and replay the latest run's matching events after `after`
    /// (a sequence number; `None`: all of them).
    async fn subscribe(&mut self, params: &Value, after: Option<u64>) -> Result<Value, Failure> {
        let filter = Filter::parse(params)?;
        let mut replayed = 0;
        let texts: Vec<String> = self
            .replay
            .events
            .iter()
            .filter(|(e, _)| after.is_none_or(|a| e.seq > a) && filter.matches(e))
            .map(|(e, _)| e.to_json().to_string())
            .collect();
        for t in texts {
            self.send_text(t).await.map_err(Failure::End)?;
            replayed += 1;
        }
        if self.subs.len() >= 256 {
            return Err(ProtocolError::invalid("at most 256 subscriptions on one socket").into());
        }
        let id = uuid::Uuid::new_v4().to_string();
        self.subs.push((id.clone(), filter));
        Ok(json!({"subscription_id": id, "replayed_events": replayed}))
    }

    fn unsubscribe(&mut self, params: &Value) -> Result<Value, Failure> {
        let id = params.get("subscription_id").and_then(Value::as_str).unwrap_or_default();
        let before = self.subs.len();
        self.subs.retain(|(s, _)| s != id);
        if self.subs.len() == before {
            return Err(ProtocolError::new(ErrorCode::NoSuchSubscription, format!("Unknown subscription: {id}")).into());
        }
        Ok(json!({}))
    }

    /// A subscription again after a lost connection: the latest run's matching events
    /// after `last_event_id` (an event id or a sequence number), then the live ones.
    async fn reconnect(&mut self, params: &Value) -> Result<Value, Failure> {
        if !params.get("channels").and_then(Value::as_array).is_some_and(|c| !c.is_empty()) {
            return Err(ProtocolError::invalid("subscription.reconnect requires a non-empty channels array.").into());
        }
        let after = match params.get("last_event_id") {
            Some(Value::String(s)) => s.parse::<u64>().ok().or_else(|| {
                self.replay.events.iter().find(|(e, _)| &e.event_id == s).map(|(e, _)| e.seq)
            }),
            Some(Value::Number(n)) => n.as_u64(),
            _ => None,
        };
        let sub = self.subscribe(params, after).await?;
        Ok(json!({
            "restored": true,
            "missed_events": sub["replayed_events"],
            "subscription_id": sub["subscription_id"],
        }))
    }
}

/// A command that failed, or a session that must end while answering it.
enum Failure {
    Protocol(ProtocolError),
    End(End),
}

impl From<ProtocolError> for Failure {
    fn from(e: ProtocolError) -> Self {
        Self::Protocol(e)
    }
}
