//! How a run's output reaches a client: the `runs/wait` body (with keep-alive spaces) and
//! the SSE stream of its event frames.

use crate::broker::Reader;
use crate::models::Run;
use crate::service::runs::events::{self, Follow, Frame, KEEPALIVE};
use crate::service::runs::wait_outcome_from;
use crate::state::AppRef;
use crate::wire;
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::Response;
use futures::StreamExt;
use std::convert::Infallible;

/// The JSON body of a run once it ends. A run that ends within the first keep-alive
/// interval (most do) is answered with a plain body, in one write; a longer one gets its
/// headers then, and a space every few seconds until the body, so proxies keep the
/// connection open. `held`: a waiter taken before the run could start (see
/// [`crate::broker::Broker::waiter`]).
pub(super) async fn wait_response(
    state: AppRef,
    owner: String,
    run: Run,
    headers: HeaderMap,
    held: Option<Reader>,
) -> Response {
    let mut fut = Box::pin(async move { wait_outcome_from(&state, &owner, &run, held).await });
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
            Body::from_stream(first.chain(rest))
        }
    };
    let mut res = Response::new(body);
    *res.headers_mut() = headers;
    res.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    res
}

/// The SSE response of a run from event `from.cursor` on.
pub(super) fn sse_response(
    state: AppRef,
    owner: String,
    run: Run,
    from: Follow,
    headers: HeaderMap,
) -> Response {
    let with_ids = from.resumable;
    let frames = events::follow(state, owner, run, from);
    let bytes = frames
        .filter_map(move |frame| std::future::ready(sse_bytes(&frame, with_ids).map(Ok::<_, Infallible>)));
    let mut res = Response::new(Body::from_stream(bytes));
    *res.headers_mut() = headers;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

/// A frame as SSE text (none for a frame that writes nothing); events carry their ids when
/// `with_ids`.
fn sse_bytes(frame: &Frame, with_ids: bool) -> Option<Bytes> {
    match frame {
        Frame::Events(evs) => {
            let mut out = String::new();
            for e in evs {
                let id = e.id.to_string();
                out.push_str(&wire::sse_frame(
                    &e.event,
                    &e.data,
                    with_ids.then_some(id.as_str()),
                ));
            }
            Some(Bytes::from(out))
        }
        Frame::KeepAlive => Some(Bytes::from_static(wire::HEARTBEAT.as_bytes())),
        Frame::Pending | Frame::Ended(_) => None,
        Frame::Last { event, data } => Some(Bytes::from(wire::sse_frame(event, data, None))),
    }
}
