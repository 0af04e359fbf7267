//! `/openapi.json`: the routes this server answers, as an OpenAPI 3.1 document.

use axum::Json;
use serde_json::{json, Map, Value};

/// (path, method, summary)
const ROUTES: &[(&str, &str, &str)] = &[
    ("/assistants", "post", "Create an assistant"),
    ("/assistants/search", "post", "Search assistants"),
    ("/assistants/count", "post", "Count assistants"),
    ("/assistants/{assistant_id}", "get", "Get an assistant"),
    (
        "/assistants/{assistant_id}",
        "patch",
        "Update an assistant (new version)",
    ),
    ("/assistants/{assistant_id}", "delete", "Delete an assistant"),
    (
        "/assistants/{assistant_id}/graph",
        "get",
        "Drawing data of the assistant's graph",
    ),
    (
        "/assistants/{assistant_id}/schemas",
        "get",
        "Input, output, state and context schemas",
    ),
    (
        "/assistants/{assistant_id}/subgraphs",
        "get",
        "Subgraphs of the assistant's graph",
    ),
    ("/assistants/{assistant_id}/versions", "post", "List versions"),
    (
        "/assistants/{assistant_id}/latest",
        "post",
        "Set the current version",
    ),
    ("/threads", "post", "Create a thread"),
    ("/threads/search", "post", "Search threads"),
    ("/threads/count", "post", "Count threads"),
    ("/threads/prune", "post", "Delete threads"),
    ("/threads/{thread_id}", "get", "Get a thread"),
    (
        "/threads/{thread_id}",
        "patch",
        "Update a thread's metadata or ttl",
    ),
    (
        "/threads/{thread_id}",
        "delete",
        "Delete a thread and its checkpoints",
    ),
    ("/threads/{thread_id}/copy", "post", "Copy a thread"),
    ("/threads/{thread_id}/state", "get", "Latest state"),
    ("/threads/{thread_id}/state", "post", "Update the state as a node"),
    (
        "/threads/{thread_id}/state/{checkpoint_id}",
        "get",
        "State at a checkpoint",
    ),
    (
        "/threads/{thread_id}/state/checkpoint",
        "post",
        "State at a checkpoint",
    ),
    ("/threads/{thread_id}/history", "get", "Checkpoint history"),
    (
        "/threads/{thread_id}/history",
        "post",
        "Checkpoint history with filters",
    ),
    ("/threads/{thread_id}/runs", "post", "Create a background run"),
    ("/threads/{thread_id}/runs", "get", "List runs"),
    (
        "/threads/{thread_id}/runs/stream",
        "post",
        "Create a run and stream it (SSE)",
    ),
    (
        "/threads/{thread_id}/runs/wait",
        "post",
        "Create a run and wait for its output",
    ),
    ("/threads/{thread_id}/runs/{run_id}", "get", "Get a run"),
    ("/threads/{thread_id}/runs/{run_id}", "delete", "Delete a run"),
    (
        "/threads/{thread_id}/runs/{run_id}/join",
        "get",
        "Wait for a run's output",
    ),
    (
        "/threads/{thread_id}/runs/{run_id}/stream",
        "get",
        "Join a run's stream (Last-Event-ID)",
    ),
    (
        "/threads/{thread_id}/runs/{run_id}/cancel",
        "post",
        "Cancel a run",
    ),
    ("/runs", "post", "Create a stateless background run"),
    ("/runs/stream", "post", "Create a stateless run and stream it"),
    ("/runs/wait", "post", "Create a stateless run and wait"),
    ("/runs/batch", "post", "Create stateless runs"),
    ("/runs/cancel", "post", "Cancel runs"),
    ("/store/items", "put", "Put an item"),
    ("/store/items", "get", "Get an item"),
    ("/store/items", "delete", "Delete an item"),
    ("/store/items/search", "post", "Search items"),
    ("/store/namespaces", "post", "List namespaces"),
    ("/ok", "get", "Health"),
    ("/info", "get", "Server information"),
    ("/metrics", "get", "Prometheus metrics"),
    ("/openapi.json", "get", "This document"),
];

pub(crate) async fn document() -> Json<Value> {
    let mut paths = Map::new();
    for (path, method, summary) in ROUTES {
        let entry = paths.entry((*path).to_owned()).or_insert_with(|| json!({}));
        if let Some(o) = entry.as_object_mut() {
            o.insert(
                (*method).to_owned(),
                json!({
                    "summary": summary,
                    "responses": {
                        "200": {"description": "Success"},
                        "404": {"description": "Not found", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                        "422": {"description": "Invalid request", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                    }
                }),
            );
        }
    }
    Json(json!({
        "openapi": "3.1.0",
        "info": {"title": "graphloom", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths,
        "components": {"schemas": {"Error": {"type": "object", "properties": {"detail": {"type": "string"}}, "required": ["detail"]}}},
    }))
}
