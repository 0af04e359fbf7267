//! Every request body is read whole before its handler runs, so that every response leaves
//! its connection reusable.
//!
//! A handler that answers without reading the body it was sent (a 404 for a `DELETE` that
//! carried one, a 202 for a cancel, a 406 from `/mcp`) leaves the body's bytes unread on the
//! connection. hyper cannot reuse such a connection and closes it after the response, without
//! saying `connection: close`, and whether the bytes had already arrived decides it: a client
//! sending its next request on that keep-alive connection then fails at random. Reading the
//! body here, up to the configured limit, removes the case. A body over the limit is refused
//! with 413; it is read and thrown away up to as much again, so that a client sending a
//! little too much keeps its connection (and reads the 413 rather than a reset); past that
//! the 413 says `connection: close`.
//!
//! Every route reads a JSON body whole anyway (the API has no streaming uploads); a request
//! without a body passes straight through.

use crate::api::error::ApiError;
use axum::body::HttpBody as _;
use axum::body::{Body, BodyDataStream, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

/// Read the request's body (at most `limit` bytes), then run the rest of the stack with it.
pub(super) async fn read_whole(State(limit): State<usize>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    if body.is_end_stream() {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > (limit as u64).saturating_mul(2)) {
        return closing(too_large(limit));
    }
    let mut stream = body.into_data_stream();
    match read(&mut stream, limit).await {
        Ok(bytes) => next.run(Request::from_parts(parts, Body::from(bytes))).await,
        Err(Unread::TooLarge) => {
            if discard(&mut stream, limit).await {
                too_large(limit).into_response()
            } else {
                closing(too_large(limit))
            }
        }
        Err(Unread::Broken(e)) => closing(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("the request body could not be read: {e}"),
        )),
    }
}

/// Read and drop what is left of a body, at most `most` bytes: whether it ended.
async fn discard(stream: &mut BodyDataStream, most: usize) -> bool {
    let mut seen = 0usize;
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(c) => seen = seen.saturating_add(c.len()),
            Err(_) => return false,
        }
        if seen > most {
            return false;
        }
    }
    true
}

enum Unread {
    TooLarge,
    Broken(axum::Error),
}

async fn read(stream: &mut BodyDataStream, limit: usize) -> Result<Bytes, Unread> {
    let Some(first) = stream.next().await else {
        return Ok(Bytes::new());
    };
    let first = first.map_err(Unread::Broken)?;
    if first.len() > limit {
        return Err(Unread::TooLarge);
    }
    // Most bodies arrive in one frame: no copy then.
    let Some(second) = stream.next().await else {
        return Ok(first);
    };
    let second = second.map_err(Unread::Broken)?;
    let mut all = Vec::with_capacity(first.len() + second.len());
    all.extend_from_slice(&first);
    all.extend_from_slice(&second);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(Unread::Broken)?;
        if all.len() + chunk.len() > limit {
            return Err(Unread::TooLarge);
        }
        all.extend_from_slice(&chunk);
    }
    if all.len() > limit {
        return Err(Unread::TooLarge);
    }
    Ok(Bytes::from(all))
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the request body is over the server's limit of {limit} bytes"),
    )
}

/// A refusal whose body part may still be on the connection: the client must not reuse it.
fn closing(err: ApiError) -> Response {
    let mut res = err.into_response();
    res.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    res
}
