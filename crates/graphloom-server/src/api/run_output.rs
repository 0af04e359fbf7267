//! How a run's output reaches a client: the `runs/wait` body (with keep-alive spaces) and
//! the SSE stream, from this process's broker or, for a run executing elsewhere, the
//! database.

use super::AppRef;
use crate::broker::Next;
use crate::models::{CancelAction, Run, RunStatus};
use crate::wire;
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::Response;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::time::Duration;

/// Keep-alive interval of open responses.
pub(super) const KEEPALIVE: Duration = Duration::from_secs(5);

/// The `runs/wait` body of a run that ended in another process (or whose log is gone):
/// derived from the thread.
pub(super) async fn settled_body(state: &AppRef, owner: &str, run: &Run) -> Value {
    let thread = state.db.get_thread(owner, &run.thread_id).await.ok().flatten();
    let values = thread.as_ref().map_or(json!({}), |t| t.values.clone());
    match run.status {
        RunStatus::Error | RunStatus::Timeout => json!({"__error__": {
            "error": if run.status == RunStatus::Timeout { "TimeoutError" } else { "Error" },
            "message": thread.and_then(|t| t.error).unwrap_or(Value::Null),
        }}),
        RunStatus::Interrupted => {
            let list: Vec<Value> = thread
                .and_then(|t| t.interrupts.as_object().cloned())
                .map(|m| {
                    m.into_values()
                        .flat_map(|v| v.as_array().cloned().unwrap_or_default())
                        .collect()
                })
                .unwrap_or_default();
            let mut v = values;
            if let (Some(obj), false) = (v.as_object_mut(), list.is_empty()) {
                obj.insert("__interrupt__".into(), Value::Array(list));
            }
            v
        }
        _ => values,
    }
}

/// Wait until a run ends; its `runs/wait` body.
pub(super) async fn wait_outcome(state: &AppRef, owner: &str, run: &Run) -> Value {
    wait_outcome_from(state, owner, run, None).await
}

/// [`wait_outcome`], from `reader` (a waiter) when the caller took one before the run
/// could start.
async fn wait_outcome_from(
    state: &AppRef,
    owner: &str,
    run: &Run,
    reader: Option<crate::broker::Reader>,
) -> Value {
    if let Some(r) = reader {
        // None: the run was handed off to another process; follow it below.
        if let Some(v) = r.outcome().await {
            return v;
        }
    }
    if state.broker.knows(&run.run_id) {
        if let Some(v) = state.broker.outcome(&run.run_id).await {
            return v;
        }
    }
    loop {
        match state.db.get_run(owner, Some(&run.thread_id), &run.run_id).await {
            Ok(Some(r)) if r.status.is_final() => return settled_body(state, owner, &r).await,
            Ok(Some(_)) => {}
            Ok(None) => return json!({"__error__": {"error": "NotFound", "message": "run was deleted"}}),
            Err(e) => tracing::warn!(error = %e, "polling a run failed"),
        }
        if state.broker.knows(&run.run_id) {
            if let Some(v) = state.broker.outcome(&run.run_id).await {
                return v;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The JSON body of a run once it ends. A run that ends within the first keep-alive
/// interval (most do) is answered with a plain body, in one write; a longer one gets its
/// headers then, and a space every few seconds until the body, so proxies keep the
/// connection open. `reader`: a waiter taken before the run could start (see
/// [`crate::broker::Broker::waiter`]).
pub(super) async fn wait_response(
    state: AppRef,
    owner: String,
    run: Run,
    headers: HeaderMap,
    reader: Option<crate::broker::Reader>,
) -> Response {
    let mut fut = Box::pin(async move { wait_outcome_from(&state, &owner, &run, reader).await });
    let body = tokio::select! {
        v = &mut fut => Body::from(v.to_string()),
        () = tokio::time::sleep(KEEPALIVE) => {
            let rest = futures::stream::unfold(Some(fut), |fut| async move {
                let mut fut = fut?;
                tokio::select! {
                    v = &mut fut => Some((Ok::<_, Infallible>(Bytes::from(v.to_string())), None)),
                    () = tokio::time::sleep(KEEPALIVE) => Some((Ok(Bytes::from_static(b" ")), Some(fut))),
                }
            });
            let first = futures::stream::once(async { Ok::<_, Infallible>(Bytes::from_static(b" ")) });
            Body::from_stream(futures::StreamExt::chain(first, rest))
        }
    };
    let mut res = Response::new(body);
    *res.headers_mut() = headers;
    res.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    res
}

/// Cancels the run if the client goes away before it ends (`on_disconnect: cancel`).
struct DisconnectGuard {
    state: AppRef,
    owner: String,
    run: Run,
    cancel: bool,
    done: bool,
}

impl Drop for DisconnectGuard {
    fn drop(&mut self) {
        if self.cancel && !self.done {
            let state = self.state.clone();
            let owner = self.owner.clone();
            let run = self.run.clone();
            tokio::spawn(async move {
                let _ = state
                    .db
                    .cancel_run(&owner, Some(&run.thread_id), &run.run_id, CancelAction::Interrupt)
                    .await;
                state.cancel_local(&run.run_id, CancelAction::Interrupt);
            });
        }
    }
}

struct SseState {
    guard: DisconnectGuard,
    cursor: u64,
    with_ids: bool,
    /// Keeps the run's events here while this stream reads them.
    _reader: Option<crate::broker::Reader>,
}

/// Where an SSE response starts reading a run's events.
pub(super) struct StreamFrom {
    /// The first event id sent.
    pub cursor: u64,
    /// Whether frames carry ids (resumable runs).
    pub with_ids: bool,
    /// A reader taken before the run could start (else one is taken now).
    pub reader: Option<crate::broker::Reader>,
}

/// The SSE response of a run from event `from.cursor` on.
pub(super) fn sse_response(
    state: AppRef,
    owner: String,
    run: Run,
    from: StreamFrom,
    cancel_on_disconnect: bool,
    headers: HeaderMap,
) -> Response {
    let StreamFrom {
        cursor,
        with_ids,
        reader,
    } = from;
    let reader = reader.or_else(|| state.broker.reader(&run.run_id));
    let init = SseState {
        _reader: reader,
        guard: DisconnectGuard {
            state,
            owner,
            run,
            cancel: cancel_on_disconnect,
            done: false,
        },
        cursor,
        with_ids,
    };
    let stream = futures::stream::unfold(init, |mut s| async move {
        if s.guard.done {
            return None;
        }
        let state = s.guard.state.clone();
        let run_id = s.guard.run.run_id.clone();
        match state.broker.next(&run_id, s.cursor, KEEPALIVE).await {
            Some(Next::Events(evs)) if evs.is_empty() => Some((
                Ok::<_, Infallible>(Bytes::from_static(wire::HEARTBEAT.as_bytes())),
                s,
            )),
            Some(Next::Events(evs)) => {
                let mut out = String::new();
                for e in &evs {
                    let id = e.id.to_string();
                    out.push_str(&wire::sse_frame(
                        &e.event,
                        &e.data,
                        s.with_ids.then_some(id.as_str()),
                    ));
                }
                s.cursor = evs.last().map_or(s.cursor, |e| e.id + 1);
                Some((Ok(Bytes::from(out)), s))
            }
            Some(Next::End(_)) => {
                s.guard.done = true;
                drop(s);
                None
            }
            None if s.with_ids => {
                // A resumable run executing elsewhere (or before a restart): its events
                // from the database.
                let run = s.guard.run.clone();
                let owner = s.guard.owner.clone();
                let ended = match state.db.get_run(&owner, Some(&run.thread_id), &run.run_id).await {
                    Ok(Some(r)) => r.status.is_final(),
                    Ok(None) => true,
                    Err(_) => false,
                };
                // Read after the status: a run is marked ended only once its events are stored.
                let evs = state
                    .db
                    .run_events(&run.run_id, s.cursor, 256)
                    .await
                    .unwrap_or_default();
                if !evs.is_empty() {
                    let mut out = String::new();
                    for e in &evs {
                        let id = e.id.to_string();
                        out.push_str(&wire::sse_frame(&e.event, &e.data, Some(id.as_str())));
                    }
                    s.cursor = evs.last().map_or(s.cursor, |e| e.id + 1);
                    return Some((Ok(Bytes::from(out)), s));
                }
                if ended {
                    s.guard.done = true;
                    if s.cursor == 0 {
                        // Nothing was stored (an older run): its final values.
                        let body = settled_body(&state, &owner, &run).await;
                        return Some((Ok(Bytes::from(wire::sse_frame("values", &body, None))), s));
                    }
                    return None;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                Some((Ok(Bytes::new()), s))
            }
            None => {
                // Not executing here: wait for its end through the database, then send the
                // final values.
                let run = s.guard.run.clone();
                let owner = s.guard.owner.clone();
                let waited = tokio::time::timeout(KEEPALIVE, wait_outcome(&state, &owner, &run)).await;
                match waited {
                    Ok(body) => {
                        s.guard.done = true;
                        let frame = if let Some(err) = body.get("__error__") {
                            wire::sse_frame("error", err, None)
                        } else {
                            wire::sse_frame("values", &body, None)
                        };
                        Some((Ok(Bytes::from(frame)), s))
                    }
                    Err(_) => Some((Ok(Bytes::from_static(wire::HEARTBEAT.as_bytes())), s)),
                }
            }
        }
    });
    let mut res = Response::new(Body::from_stream(stream));
    *res.headers_mut() = headers;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}
