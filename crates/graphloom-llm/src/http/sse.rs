//! Server-sent events into chunks: connect (with retries), parse events with
//! `eventsource-stream`, decode each with a provider's decoder, detect truncation.

use crate::chunk::ChatChunk;
use crate::error::{Error, Result};
use crate::model::ChunkStream;
use eventsource_stream::{EventStreamError, Eventsource};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::StreamExt;
use std::collections::VecDeque;
use std::future::Future;
use std::time::Duration;

/// A provider's event decoder.
pub(crate) trait SseDecoder: Send + 'static {
    /// Decode one event (`event` is the SSE event name, `message` when absent).
    fn on_event(&mut self, event: &str, data: &str) -> Result<Vec<ChatChunk>>;
    /// True once the provider's end marker was seen; nothing more is read.
    fn is_done(&self) -> bool;
    /// The body ended: final chunks, or why the stream is incomplete.
    fn on_eof(&mut self) -> Result<Vec<ChatChunk>>;
}

type Events = BoxStream<'static, Result<eventsource_stream::Event, EventStreamError<reqwest::Error>>>;

struct State<D> {
    provider: String,
    connect: Option<BoxFuture<'static, Result<reqwest::Response>>>,
    events: Option<Events>,
    decoder: D,
    queue: VecDeque<Result<ChatChunk>>,
    finished: bool,
    idle: Duration,
}

fn transport_message(e: &EventStreamError<reqwest::Error>) -> (bool, String) {
    match e {
        EventStreamError::Transport(t) => {
            let mut m = t.to_string();
            let mut src = std::error::Error::source(t);
            while let Some(s) = src {
                m.push_str(": ");
                m.push_str(&s.to_string());
                src = s.source();
            }
            (true, m)
        }
        EventStreamError::Utf8(u) => (false, format!("invalid UTF-8 in the event stream: {u}")),
        EventStreamError::Parser(p) => (false, format!("unparsable event stream: {p}")),
    }
}

/// A chunk stream over a provider's SSE response. `connect` opens the response (with its
/// retries); `idle` is the longest wait for the next event.
pub(crate) fn sse_stream<D: SseDecoder>(
    provider: String,
    connect: impl Future<Output = Result<reqwest::Response>> + Send + 'static,
    decoder: D,
    idle: Duration,
) -> ChunkStream {
    let state = State {
        provider,
        connect: Some(Box::pin(connect)),
        events: None,
        decoder,
        queue: VecDeque::new(),
        finished: false,
        idle,
    };
    Box::pin(futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(item) = st.queue.pop_front() {
                return Some((item, st));
            }
            if st.finished {
                return None;
            }
            if let Some(connect) = st.connect.take() {
                match connect.await {
                    Ok(resp) => st.events = Some(Box::pin(resp.bytes_stream().eventsource())),
                    Err(e) => {
                        st.finished = true;
                        return Some((Err(e), st));
                    }
                }
                continue;
            }
            let events = st.events.as_mut()?;
            match tokio::time::timeout(st.idle, events.next()).await {
                Err(_) => {
                    st.finished = true;
                    let e = Error::Timeout {
                        provider: st.provider.clone(),
                        after_ms: u64::try_from(st.idle.as_millis()).unwrap_or(u64::MAX),
                        attempts: 1,
                    };
                    return Some((Err(e), st));
                }
                Ok(None) => {
                    st.finished = true;
                    match st.decoder.on_eof() {
                        Ok(chunks) => st.queue.extend(chunks.into_iter().map(Ok)),
                        Err(e) => st.queue.push_back(Err(e)),
                    }
                }
                Ok(Some(Err(e))) => {
                    st.finished = true;
                    let (broken, message) = transport_message(&e);
                    let err = if broken {
                        Error::truncated(&st.provider, format!("the connection broke: {message}"))
                    } else {
                        Error::invalid_response(&st.provider, message, "")
                    };
                    return Some((Err(err), st));
                }
                Ok(Some(Ok(ev))) => {
                    match st.decoder.on_event(&ev.event, &ev.data) {
                        Ok(chunks) => st.queue.extend(chunks.into_iter().map(Ok)),
                        Err(e) => {
                            st.finished = true;
                            st.queue.push_back(Err(e));
                        }
                    }
                    if st.decoder.is_done() {
                        st.finished = true;
                    }
                }
            }
        }
    }))
}
