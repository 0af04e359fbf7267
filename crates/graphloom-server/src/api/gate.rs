//! The gate of the routes behind auth: authenticate, then authorise the route's action
//! ([`crate::auth::rules`]), applying the grant's filter and stamping its metadata, then handle
//! the request as its identity.

use crate::api::error::ApiError;
use crate::auth::rules::{rule_of, Check, Empty, Rule, Stamp};
use crate::auth::{AuthRequest, Grant, Identity};
use crate::state::AppRef;
use axum::body::{Body, Bytes};
use axum::extract::{MatchedPath, RawPathParams, Request, State};
use axum::http::{header, request::Parts, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// The middleware (see the module docs): 401 before the body is read when authentication
/// fails, 403 when the action is refused, 404 when the grant's filter hides the resource
/// the path names.
pub(crate) async fn gate(State(state): State<AppRef>, req: Request, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    let identity = match state.auth.authenticate(&parts).await {
        Ok(i) => Arc::new(i),
        Err(e) => return ApiError::from(e).into_response(),
    };
    parts.extensions.insert(Identity::clone(&identity));
    let req = if state.auth.authorizes() {
        match authorize(&state, &identity, parts, body).await {
            Ok(req) => req,
            Err(answer) => return answer,
        }
    } else {
        Request::from_parts(parts, body)
    };
    crate::auth::scope(identity, next.run(req)).await
}

/// Authorise the request's route; the request to handle (its body maybe rewritten), or
/// the answer instead.
async fn authorize(
    state: &AppRef,
    identity: &Identity,
    mut parts: Parts,
    body: Body,
) -> Result<Request, Response> {
    let Some(rule) = parts
        .extensions
        .get::<MatchedPath>()
        .and_then(|p| rule_of(&parts.method, p.as_str()))
    else {
        return Ok(Request::from_parts(parts, body));
    };
    let params: Vec<(String, String)> =
        match <RawPathParams as axum::extract::FromRequestParts<AppRef>>::from_request_parts(
            &mut parts, state,
        )
        .await
        {
            Ok(p) => p.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect(),
            Err(_) => Vec::new(),
        };
    let param = |name: &str| params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let has_body = matches!(
        parts.method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    let bytes = if has_body {
        axum::body::to_bytes(body, usize::MAX).await.map_err(|_| {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "request body too large").into_response()
        })?
    } else {
        Bytes::new()
    };
    let parsed = serde_json::from_slice::<Value>(&bytes).ok();
    // A body that is not JSON goes to its handler as it came, for a 422 there.
    let malformed = !bytes.is_empty() && parsed.is_none();
    let mut value = parsed.unwrap_or(Value::Null);
    let id = ["thread_id", "assistant_id", "run_id", "cron_id"]
        .iter()
        .rev()
        .find_map(|k| param(k));
    let ask = AuthRequest {
        identity,
        resource: rule.resource,
        action: rule.action,
        id,
        thread_id: param("thread_id"),
        body: &value,
        query: parts.uri.query(),
    };
    let grant = state
        .auth
        .authorize(&ask)
        .await
        .map_err(|e| ApiError::from(e).into_response())?;
    let owner = identity.identity.as_str();
    let mut changed = apply_filter(state, owner, &rule, &grant, param, &mut value, malformed).await?;
    changed |= !malformed && stamp(&rule, &grant, &mut value);
    let body = if changed {
        let text = serde_json::to_vec(&value).map_err(|e| ApiError::internal(e).into_response())?;
        parts.headers.remove(header::CONTENT_LENGTH);
        parts
            .headers
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        Body::from(text)
    } else {
        Body::from(bytes)
    };
    Ok(Request::from_parts(parts, body))
}

/// Apply the grant's filter where the rule says; whether the body changed.
async fn apply_filter<'p>(
    state: &AppRef,
    owner: &str,
    rule: &Rule,
    grant: &Grant,
    param: impl Fn(&str) -> Option<&'p str>,
    body: &mut Value,
    malformed: bool,
) -> Result<bool, Response> {
    let filter = &grant.filter;
    if filter.is_empty() || (malformed && matches!(rule.check, Check::Search(_) | Check::Prune)) {
        return Ok(false);
    }
    let hidden = |what: String| ApiError::not_found(what).into_response();
    match rule.check {
        Check::Nothing => Ok(false),
        Check::Refuse => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "a metadata filter cannot be applied to {}",
                rule.resource.as_str()
            ),
        )
        .into_response()),
        Check::Thread => {
            let Some(id) = param("thread_id") else {
                return Ok(false);
            };
            thread_visible(state, owner, grant, id)
                .await
                .map(|()| false)
                .map_err(IntoResponse::into_response)
        }
        Check::Assistant => {
            let Some(id) = param("assistant_id") else {
                return Ok(false);
            };
            match crate::service::assistants::resolve(state, owner, id).await {
                Ok(a) if !filter.matches(&a.metadata) => Err(hidden(format!("assistant {id}"))),
                _ => Ok(false),
            }
        }
        Check::Search(empty) => {
            if !matches!(body, Value::Object(_) | Value::Null) {
                return Ok(false);
            }
            let asked = body
                .get("metadata")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            match filter.within(&asked) {
                Some(needle) => {
                    set_key(body, "metadata", Value::Object(needle));
                    Ok(true)
                }
                None => Err(match empty {
                    Empty::List => axum::Json(json!([])).into_response(),
                    Empty::Count => axum::Json(json!(0)).into_response(),
                }),
            }
        }
        Check::Prune => {
            let Some(ids) = body.get("thread_ids").and_then(Value::as_array).cloned() else {
                return Ok(false);
            };
            let mut keep = Vec::with_capacity(ids.len());
            for id in ids {
                let visible = match id.as_str() {
                    Some(s) => match state.db.get_thread(owner, s).await {
                        Ok(Some(t)) => filter.matches(&t.metadata),
                        Ok(None) => true,
                        Err(e) => return Err(ApiError::from(e).into_response()),
                    },
                    None => true,
                };
                if visible {
                    keep.push(id);
                }
            }
            set_key(body, "thread_ids", Value::Array(keep));
            Ok(true)
        }
    }
}

/// Whether the grant's filter lets `owner` see thread `id` (a thread not yet made is
/// visible: the request may create it); a 404 when not.
async fn thread_visible(state: &AppRef, owner: &str, grant: &Grant, id: &str) -> Result<(), ApiError> {
    if grant.filter.is_empty() {
        return Ok(());
    }
    match state.db.get_thread(owner, id).await? {
        Some(t) if !grant.filter.matches(&t.metadata) => Err(ApiError::not_found(format!("thread {id}"))),
        _ => Ok(()),
    }
}

/// Authorise one thread-protocol command that arrived over the thread's WebSocket (whose
/// upgrade was authorised as a thread read) as `POST /threads/{id}/commands` authorises
/// it: the action asked of the [`Auth`](crate::auth::Auth), the grant's filter applied to the
/// thread, its metadata stamped into the command's parameters.
pub(crate) async fn authorize_command(
    state: &AppRef,
    identity: &Identity,
    thread_id: &str,
    method: &str,
    params: &mut Value,
) -> Result<(), ApiError> {
    if !state.auth.authorizes() {
        return Ok(());
    }
    let Some(rule) = rule_of(&Method::POST, "/threads/{thread_id}/commands") else {
        return Ok(());
    };
    let mut command = json!({"method": method, "params": std::mem::take(params)});
    let ask = AuthRequest {
        identity,
        resource: rule.resource,
        action: rule.action,
        id: Some(thread_id),
        thread_id: Some(thread_id),
        body: &command,
        query: None,
    };
    let grant = state.auth.authorize(&ask).await;
    let outcome = match grant {
        Ok(grant) => match thread_visible(state, identity.identity.as_str(), &grant, thread_id).await {
            Ok(()) => {
                stamp(&rule, &grant, &mut command);
                Ok(())
            }
            Err(e) => Err(e),
        },
        Err(e) => Err(ApiError::from(e)),
    };
    if let Some(p) = command.get_mut("params") {
        *params = std::mem::take(p);
    }
    outcome
}

/// The commands whose parameters carry the metadata of the run they start.
const RUN_COMMANDS: [&str; 3] = ["run.start", "input.respond", "state.fork"];

/// Stamp the grant's metadata where the rule says; whether the body changed.
fn stamp(rule: &Rule, grant: &Grant, body: &mut Value) -> bool {
    if grant.metadata.is_empty() {
        return false;
    }
    let one = |v: &mut Value| {
        if !matches!(v, Value::Object(_) | Value::Null) {
            return false;
        }
        let mut meta = v
            .get("metadata")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for (k, x) in &grant.metadata {
            meta.insert(k.clone(), x.clone());
        }
        set_key(v, "metadata", Value::Object(meta));
        true
    };
    match rule.stamp {
        Stamp::Nothing => false,
        Stamp::Body => one(body),
        Stamp::Each => match body {
            Value::Array(items) => items.iter_mut().fold(false, |acc, v| one(v) | acc),
            _ => false,
        },
        Stamp::Command => {
            let starts_run = body
                .get("method")
                .and_then(Value::as_str)
                .is_some_and(|m| RUN_COMMANDS.contains(&m));
            if !starts_run || !matches!(body.get("params"), None | Some(Value::Object(_) | Value::Null)) {
                return false;
            }
            if body.get("params").is_none() {
                set_key(body, "params", Value::Null);
            }
            body.get_mut("params").is_some_and(one)
        }
    }
}

/// `body[key] = value`, making the body an object when it was empty.
fn set_key(body: &mut Value, key: &str, value: Value) {
    if body.is_null() {
        *body = Value::Object(Map::new());
    }
    if let Value::Object(m) = body {
        m.insert(key.to_owned(), value);
    }
}
