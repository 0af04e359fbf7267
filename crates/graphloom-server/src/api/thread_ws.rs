//! The thread-centric protocol over a WebSocket (`GET /threads/{id}/stream/events` with
//! an upgrade): commands in, their answers and the thread's events out, on one socket.
//!
//! Subscriptions (`subscription.subscribe` / `unsubscribe` / `reconnect`) belong to the
//! socket. A subscription first replays the matching events of the thread's latest run,
//! read from the run's log when it is made, as the reference server does; the socket
//! follows the thread from there and sends each event once, when a subscription wants it.
//!
//! Memory stays bounded whatever the client does: frames larger than [`MAX_FRAME`] close
//! the socket (1009) after an error frame; what goes out passes through a queue of
//! [`OUT_QUEUE`] frames, and a client that reads nothing for [`SEND_TIMEOUT`] while that
//! queue is full loses its connection, so nothing piles up for it.

use super::auth::Owner;
use super::thread_commands::dispatch;
use crate::api::gate::authorize_command;
use crate::auth::Identity;
use crate::protocol::translate::Methods;
use crate::protocol::{
    error_frame, success_frame, BadFrame, Command, ErrorCode, Event, Filter, ProtocolError,
};
use crate::service::thread_stream::commands::{latest_translated, Ctx};
use crate::service::thread_stream::follow::{follow_thread, follow_thread_from, Item, Start};
use crate::state::AppRef;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::response::Response;
use axum::Extension;
use futures::stream::BoxStream;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Largest frame a client may send.
pub(crate) const MAX_FRAME: usize = 1024 * 1024;
/// The socket's read buffer, allocated and zeroed when it opens (a larger frame is read
/// in several reads). The WebSocket library's default, 128 KiB, cost a new socket 40 µs
/// of `memset` and each open one its memory; clients send small commands.
const READ_BUFFER: usize = 8 * 1024;
/// Frames queued for a client before the session waits for it.
const OUT_QUEUE: usize = 32;
/// How long the session waits for a client that reads nothing before dropping the
/// connection.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// Subscriptions one socket may hold.
const MAX_SUBSCRIPTIONS: usize = 256;

#[utoipa::path(get, path = "/threads/{thread_id}/stream/events", tag = "thread-protocol",
    summary = "The thread-centric protocol over a WebSocket",
    description = "Upgrade to a WebSocket. Send commands (`{\"id\", \"method\", \"params\"}`, text frames of at most 1 MiB); receive their answers, and the events of the subscriptions made with `subscription.subscribe` (`{\"channels\", \"namespaces\"?, \"depth\"?}`), which first replays the matching events of the thread's latest run. Frames that are not commands get an error frame with `id: null`.",
    params(("thread_id" = String, Path, description = "Thread id")),
    responses((status = 101, description = "Switching to the WebSocket protocol")))]
pub(crate) async fn socket(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    identity: Option<Extension<Identity>>,
    Path(thread_id): Path<String>,
    ws: WebSocketUpgrade,
) -> Response {
    // The session outlives the request: it carries the identity itself, so the runs its
    // commands start carry it as the HTTP commands' runs do.
    let identity = Arc::new(identity.map_or_else(|| Identity::new(owner.clone()), |Extension(i)| i));
    ws.max_message_size(MAX_FRAME)
        .max_frame_size(MAX_FRAME)
        .read_buffer_size(READ_BUFFER)
        .on_upgrade(move |socket| {
            crate::auth::scope(
                Arc::clone(&identity),
                session(state, identity, owner, thread_id, socket),
            )
        })
}

struct Session {
    state: AppRef,
    identity: Arc<Identity>,
    owner: String,
    thread_id: String,
    out: mpsc::Sender<Message>,
    /// The subscriptions: id and filter.
    subs: Vec<(String, Filter)>,
    /// The thread's events, in order: every subscription's live events come from it.
    follower: BoxStream<'static, Item>,
    /// The last sequence number the socket has dealt with.
    last_seq: u64,
}

/// Why a session ends.
enum End {
    /// The client left (or its socket broke).
    Gone,
    /// The client does not read.
    Stalled,
}

async fn session(
    state: AppRef,
    identity: Arc<Identity>,
    owner: String,
    thread_id: String,
    socket: WebSocket,
) {
    let (mut sink, mut incoming) = socket.split();
    let (tx, mut rx) = mpsc::channel::<Message>(OUT_QUEUE);
    let mut writer = tokio::spawn(async move {
        while let Some(m) = rx.recv().await {
            let closing = matches!(m, Message::Close(_));
            if sink.send(m).await.is_err() || closing {
                break;
            }
        }
        let _ = sink.close().await;
    });
    let follower = follow_thread(
        state.clone(),
        owner.clone(),
        thread_id.clone(),
        Start::LatestRun,
        Methods::ALL,
    )
    .boxed();
    let mut s = Session {
        state,
        identity,
        owner,
        thread_id,
        out: tx,
        subs: Vec::new(),
        follower,
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
            item = s.follower.next() => {
                if let Some(item) = item {
                    if let Err(end) = s.item(item).await {
                        break end;
                    }
                }
            }
        }
    };
    match end {
        End::Stalled => {
            // The writer may be stuck on a socket the client does not read: drop it, and
            // with it the connection.
            tracing::debug!(thread_id = %s.thread_id, "closing a thread WebSocket whose client does not read");
            writer.abort();
        }
        End::Gone => {
            drop(s);
            if tokio::time::timeout(SEND_TIMEOUT, &mut writer).await.is_err() {
                writer.abort();
            }
        }
    }
}

impl Session {
    /// Queue a frame for the client; `Stalled` when it has not read for too long.
    async fn send_text(&mut self, text: String) -> Result<(), End> {
        match tokio::time::timeout(SEND_TIMEOUT, self.out.send(Message::Text(text.into()))).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(End::Gone),
            Err(_) => Err(End::Stalled),
        }
    }

    async fn send_json(&mut self, v: &Value) -> Result<(), End> {
        self.send_text(v.to_string()).await
    }

    /// Events (and run starts) from the thread.
    async fn item(&mut self, item: Item) -> Result<(), End> {
        match item {
            Item::RunStarted | Item::KeepAlive => {}
            Item::Events(evs) => self.deliver(&evs).await?,
        }
        Ok(())
    }

    /// One frame from the client.
    async fn frame(&mut self, bytes: &[u8]) -> Result<(), End> {
        let mut cmd = match Command::parse(bytes) {
            Ok(c) => c,
            Err(bad) => return self.send_json(&bad.response()).await,
        };
        let answer = match cmd.method.as_str() {
            "subscription.subscribe" => self.subscribe(&cmd.params, None).await,
            "subscription.unsubscribe" => self.unsubscribe(&cmd.params),
            "subscription.reconnect" => self.reconnect(&cmd.params).await,
            // Following the thread was authorised at the upgrade; anything else is
            // authorised per command, as over HTTP.
            _ => match authorize_command(
                &self.state,
                &self.identity,
                &self.thread_id,
                &cmd.method,
                &mut cmd.params,
            )
            .await
            {
                Ok(()) => dispatch(&self.state, &self.owner, &self.thread_id, &cmd)
                    .await
                    .map_err(Failure::from),
                Err(e) => Err(Failure::Protocol(ProtocolError::from(e))),
            },
        };
        let frame = match answer {
            Ok(result) => success_frame(cmd.id, result, self.last_seq),
            Err(Failure::Protocol(e)) => error_frame(Some(cmd.id), &e, Some(self.last_seq)),
            Err(Failure::End(end)) => return Err(end),
        };
        self.send_json(&frame).await
    }

    /// Send each of `evs` (once) when a subscription wants it.
    async fn deliver(&mut self, evs: &[Event]) -> Result<(), End> {
        for ev in evs {
            self.last_seq = self.last_seq.max(ev.seq);
            if self.subs.iter().any(|(_, f)| f.matches(ev)) {
                self.send_text(ev.to_text()).await?;
            }
        }
        Ok(())
    }

    /// Add a subscription, replaying the matching events of the thread's latest run (after
    /// `after`, when given). The run is read from its log now: the new subscription gets its
    /// replay, in order, then the subscriptions already there what of the run they have not
    /// had yet (an event both want goes twice; the client keeps one, by its id), and the
    /// socket follows the thread from there.
    async fn subscribe(&mut self, params: &Value, after: Option<&Value>) -> Result<Value, Failure> {
        let filter = Filter::parse(params)?;
        if self.subs.len() >= MAX_SUBSCRIPTIONS {
            return Err(ProtocolError::invalid("at most 256 subscriptions on one socket").into());
        }
        let ctx = Ctx {
            state: &self.state,
            owner: &self.owner,
            thread_id: &self.thread_id,
        };
        let mut replayed = 0;
        if let Some(latest) = latest_translated(&ctx).await? {
            let after = after.and_then(|a| position(a, &latest.events));
            for e in latest
                .events
                .iter()
                .filter(|e| after.is_none_or(|a| e.seq > a) && filter.matches(e))
            {
                self.send_text(e.to_text()).await.map_err(Failure::End)?;
                replayed += 1;
            }
            let last = self.last_seq;
            let fresh: Vec<Event> = latest.events.iter().filter(|e| e.seq > last).cloned().collect();
            self.deliver(&fresh).await.map_err(Failure::End)?;
            self.follower = follow_thread_from(
                self.state.clone(),
                self.owner.clone(),
                self.thread_id.clone(),
                latest,
            )
            .boxed();
        }
        let id = uuid::Uuid::new_v4().to_string();
        self.subs.push((id.clone(), filter));
        Ok(json!({"subscription_id": id, "replayed_events": replayed}))
    }

    fn unsubscribe(&mut self, params: &Value) -> Result<Value, Failure> {
        let id = params
            .get("subscription_id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let before = self.subs.len();
        self.subs.retain(|(s, _)| s != id);
        if self.subs.len() == before {
            return Err(ProtocolError::new(
                ErrorCode::NoSuchSubscription,
                format!("Unknown subscription: {id}"),
            )
            .into());
        }
        Ok(json!({}))
    }

    /// A subscription again after a lost connection: the latest run's matching events
    /// after `last_event_id` (an event id or a sequence number), then the live ones.
    async fn reconnect(&mut self, params: &Value) -> Result<Value, Failure> {
        if params
            .get("channels")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
        {
            return Err(ProtocolError::invalid(
                "subscription.reconnect requires a non-empty channels array.",
            )
            .into());
        }
        let sub = self.subscribe(params, params.get("last_event_id")).await?;
        Ok(json!({
            "restored": true,
            "missed_events": sub["replayed_events"],
            "subscription_id": sub["subscription_id"],
        }))
    }
}

/// The sequence number a reconnect goes on after: a number, or an event id of the
/// latest run's `events` (`<run id>:<n>:<i>`: the `i`-th event made from event `n`).
fn position(last: &Value, events: &[Event]) -> Option<u64> {
    match last {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse::<u64>().ok().or_else(|| {
            if let Some(e) = events.iter().find(|e| &e.event_id == s) {
                return Some(e.seq);
            }
            let mut parts = s.rsplitn(3, ':');
            let i: u64 = parts.next()?.parse().ok()?;
            let n: u64 = parts.next()?.parse().ok()?;
            let ordinal = events.first()?.seq >> 32;
            Some(crate::protocol::seq(ordinal, n, i))
        }),
        _ => None,
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
