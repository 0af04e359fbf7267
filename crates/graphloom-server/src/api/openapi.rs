//! `/openapi.json`: the OpenAPI 3.1 document of the routes this server answers, generated
//! from the handlers' `#[utoipa::path]` annotations and the request and response types as
//! the router is built ([`super::router`] registers every route through
//! `utoipa_axum::routes!`, so a route cannot be served without being documented).

use crate::state::AppRef;
use axum::extract::State;
use axum::Json;
use serde_json::{json, Map, Value};
use utoipa::OpenApi as _;

/// The document's fixed parts: title, version, tags and the error schema.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "graphloom",
        description = "The LangGraph Server HTTP API served by graphloom: assistants, threads, runs, store."
    ),
    components(schemas(crate::api::error::ErrorBody)),
    tags(
        (name = "assistants", description = "Graphs with their configuration"),
        (name = "threads", description = "Durable state: threads, their state and history"),
        (name = "thread-runs", description = "Runs on a thread"),
        (name = "stateless-runs", description = "Runs on a temporary thread"),
        (name = "store", description = "Long-term memory"),
        (name = "system", description = "Health, information, metrics, this document"),
        (name = "crons", description = "Schedules that create runs"),
    )
)]
struct Base;

/// The fixed parts of the document (the router adds the paths).
pub(crate) fn base() -> utoipa::openapi::OpenApi {
    Base::openapi()
}

/// The generated document as JSON, completed with what every route shares: the error
/// responses (`422` for routes that take input, `404` for routes with path parameters,
/// `401` for routes behind the API key when keys are configured, `500`), and the API key
/// security schemes.
pub(crate) fn finish(doc: &utoipa::openapi::OpenApi, secured: &[&str], keys: bool) -> Value {
    let mut v = serde_json::to_value(doc).unwrap_or_else(|_| json!({}));
    if let Some(info) = v.get_mut("info").and_then(Value::as_object_mut) {
        info.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
    }
    let error = |what: &str| {
        json!({
            "description": what,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
        })
    };
    if let Some(paths) = v.get_mut("paths").and_then(Value::as_object_mut) {
        for (path, item) in paths.iter_mut() {
            let has_params = path.contains('{');
            let is_secured = keys && secured.iter().any(|p| p == path);
            let Some(ops) = item.as_object_mut() else { continue };
            for op in ops.values_mut() {
                let Some(op) = op.as_object_mut() else { continue };
                // Handler names repeat across modules (`create`, `get_one`): prefix the tag.
                let tag = op
                    .get("tags")
                    .and_then(|t| t.get(0))
                    .and_then(Value::as_str)
                    .map(|t| t.replace('-', "_"));
                if let (Some(tag), Some(Value::String(id))) = (tag, op.get_mut("operationId")) {
                    if !id.starts_with(&tag) {
                        *id = format!("{tag}_{id}");
                    }
                }
                let takes_input = has_params
                    || op.contains_key("requestBody")
                    || op
                        .get("parameters")
                        .and_then(Value::as_array)
                        .is_some_and(|p| !p.is_empty());
                let responses = op.entry("responses").or_insert_with(|| json!({})).as_object_mut();
                let Some(responses) = responses else { continue };
                // OpenAPI requires a description on every response.
                for (code, r) in responses.iter_mut() {
                    if let Some(r) = r.as_object_mut() {
                        if !r.contains_key("description") {
                            let reason = code
                                .parse::<u16>()
                                .ok()
                                .and_then(|c| axum::http::StatusCode::from_u16(c).ok())
                                .and_then(|c| c.canonical_reason())
                                .unwrap_or("Response");
                            r.insert("description".into(), json!(reason));
                        }
                    }
                }
                let mut add = |code: &str, what: &str| {
                    responses.entry(code.to_owned()).or_insert_with(|| error(what));
                };
                if takes_input {
                    add("422", "Invalid request: the detail names the field");
                }
                if has_params {
                    add("404", "Not found (or owned by another API key)");
                }
                if is_secured {
                    add("401", "Missing or unknown API key");
                }
                add("500", "Internal error (logged with the request id)");
                if is_secured {
                    op.insert("security".into(), json!([{"api_key": []}, {"bearer": []}]));
                }
            }
        }
    }
    if keys {
        let components = v
            .as_object_mut()
            .map(|o| o.entry("components").or_insert_with(|| json!({})));
        if let Some(Value::Object(c)) = components {
            let mut schemes = Map::new();
            schemes.insert(
                "api_key".into(),
                json!({"type": "apiKey", "in": "header", "name": "x-api-key"}),
            );
            schemes.insert("bearer".into(), json!({"type": "http", "scheme": "bearer"}));
            c.insert("securitySchemes".into(), Value::Object(schemes));
        }
    }
    v
}

#[utoipa::path(get, path = "/openapi.json", tag = "system", summary = "This document",
    responses((status = 200, description = "OpenAPI 3.1", body = Object)))]
pub(crate) async fn document(State(state): State<AppRef>) -> Json<Value> {
    Json(state.openapi.get().cloned().unwrap_or(Value::Null))
}
