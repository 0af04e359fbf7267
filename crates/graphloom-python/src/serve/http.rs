//! The custom routes of `langgraph.json`'s `http.app` (an ASGI app: FastAPI, Starlette):
//! a request no route of the server answers goes to the app, run on the graphs' event loop
//! (`graphloom/server/_http.py`), and its response comes back whole. Bodies cross as
//! Latin-1 text (one character per byte), so any bytes pass unchanged.

use super::graph::call;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use pyo3::prelude::*;
use serde_json::{json, Value};
use std::sync::Arc;

/// The largest request body forwarded to the app.
const BODY_LIMIT: usize = 16 * 1024 * 1024;

fn latin1(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| char::from(b)).collect()
}

fn bytes_of(text: &str) -> Option<Vec<u8>> {
    text.chars().map(|c| u8::try_from(u32::from(c)).ok()).collect()
}

/// A router whose fallback hands every request the server's routes do not answer to the
/// app behind `bridge`.
pub(crate) fn fallback(bridge: Arc<Py<PyAny>>) -> axum::Router {
    axum::Router::new().fallback(move |req: Request| {
        let bridge = Arc::clone(&bridge);
        async move { forward(&bridge, req).await }
    })
}

async fn forward(bridge: &Arc<Py<PyAny>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let Ok(body) = axum::body::to_bytes(body, BODY_LIMIT).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large").into_response();
    };
    let headers: Vec<Value> = parts
        .headers
        .iter()
        .map(|(k, v)| json!([k.as_str(), latin1(v.as_bytes())]))
        .collect();
    let payload = json!({
        "method": parts.method.as_str(),
        "path": parts.uri.path(),
        "query": parts.uri.query().unwrap_or_default(),
        "headers": headers,
        "body": latin1(&body),
    });
    let answer = match call(bridge, "request", payload).await {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(error = %e, "the http.app of langgraph.json failed");
            return (StatusCode::INTERNAL_SERVER_ERROR, "the custom app failed").into_response();
        }
    };
    let status = answer
        .get("status")
        .and_then(Value::as_u64)
        .and_then(|s| u16::try_from(s).ok())
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = answer
        .get("body")
        .and_then(Value::as_str)
        .and_then(bytes_of)
        .unwrap_or_default();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    for pair in answer
        .get("headers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let (Some(k), Some(v)) = (
            pair.get(0).and_then(Value::as_str),
            pair.get(1).and_then(Value::as_str),
        ) else {
            continue;
        };
        let (Ok(name), Some(Ok(value))) = (
            HeaderName::from_bytes(k.as_bytes()),
            bytes_of(v).map(|b| HeaderValue::from_bytes(&b)),
        ) else {
            continue;
        };
        response.headers_mut().append(name, value);
    }
    response
}
