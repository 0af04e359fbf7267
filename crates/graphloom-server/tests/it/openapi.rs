//! `/openapi.json` is generated from the routes the server serves: every LangGraph route is in
//! it with its path parameters, query parameters and request body; every documented
//! operation is answered by a handler; the error model and the API key schemes are declared.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::TestServer;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// The routes of the LangGraph Server API this server answers.
const ROUTES: &[(&str, &str)] = &[
    ("post", "/assistants"),
    ("post", "/assistants/search"),
    ("post", "/assistants/count"),
    ("get", "/assistants/{assistant_id}"),
    ("patch", "/assistants/{assistant_id}"),
    ("delete", "/assistants/{assistant_id}"),
    ("get", "/assistants/{assistant_id}/graph"),
    ("get", "/assistants/{assistant_id}/schemas"),
    ("get", "/assistants/{assistant_id}/subgraphs"),
    ("get", "/assistants/{assistant_id}/subgraphs/{namespace}"),
    ("post", "/assistants/{assistant_id}/versions"),
    ("post", "/assistants/{assistant_id}/latest"),
    ("post", "/threads"),
    ("post", "/threads/search"),
    ("post", "/threads/count"),
    ("post", "/threads/prune"),
    ("get", "/threads/{thread_id}"),
    ("patch", "/threads/{thread_id}"),
    ("delete", "/threads/{thread_id}"),
    ("post", "/threads/{thread_id}/copy"),
    ("get", "/threads/{thread_id}/storage"),
    ("get", "/threads/{thread_id}/state"),
    ("post", "/threads/{thread_id}/state"),
    ("post", "/threads/{thread_id}/state/checkpoint"),
    ("get", "/threads/{thread_id}/state/{checkpoint_id}"),
    ("get", "/threads/{thread_id}/history"),
    ("post", "/threads/{thread_id}/history"),
    ("post", "/threads/{thread_id}/runs"),
    ("get", "/threads/{thread_id}/runs"),
    ("post", "/threads/{thread_id}/runs/stream"),
    ("post", "/threads/{thread_id}/runs/wait"),
    ("get", "/threads/{thread_id}/runs/{run_id}"),
    ("delete", "/threads/{thread_id}/runs/{run_id}"),
    ("get", "/threads/{thread_id}/runs/{run_id}/join"),
    ("get", "/threads/{thread_id}/runs/{run_id}/stream"),
    ("post", "/threads/{thread_id}/runs/{run_id}/cancel"),
    ("post", "/runs"),
    ("post", "/runs/stream"),
    ("post", "/runs/wait"),
    ("post", "/runs/batch"),
    ("post", "/runs/cancel"),
    ("get", "/store/items"),
    ("put", "/store/items"),
    ("delete", "/store/items"),
    ("post", "/store/items/search"),
    ("post", "/store/namespaces"),
    ("get", "/ok"),
    ("get", "/info"),
    ("get", "/metrics"),
    ("get", "/openapi.json"),
    ("post", "/threads/{thread_id}/runs/crons"),
    ("post", "/runs/crons"),
    ("post", "/runs/crons/search"),
    ("post", "/runs/crons/count"),
    ("post", "/threads/{thread_id}/commands"),
    ("post", "/threads/{thread_id}/stream/events"),
    ("get", "/threads/{thread_id}/stream/events"),
    ("get", "/threads/{thread_id}/stream"),
    ("get", "/runs/crons/{cron_id}"),
    ("patch", "/runs/crons/{cron_id}"),
    ("delete", "/runs/crons/{cron_id}"),
];

/// Routes whose request carries no body.
const NO_BODY: &[(&str, &str)] = &[
    ("post", "/threads/{thread_id}/copy"),
    ("post", "/threads/{thread_id}/runs/{run_id}/cancel"),
];

fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                out.push((method.clone(), path.clone(), op.clone()));
            }
        }
    }
    out
}

/// Follow a `$ref` into `components`.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.rsplit('/').next().unwrap();
            &doc["components"]["schemas"][name]
        }
        None => schema,
    }
}

#[tokio::test]
async fn the_document_lists_every_route_and_nothing_else() {
    let s = TestServer::sqlite(|_| {}).await;
    let (st, doc) = s.get("/openapi.json").await;
    assert_eq!(st, 200);
    assert_eq!(doc["openapi"].as_str().map(|v| &v[..2]), Some("3."), "{doc}");
    assert_eq!(doc["info"]["title"], "graphloom");
    let documented: BTreeSet<(String, String)> =
        operations(&doc).into_iter().map(|(m, p, _)| (m, p)).collect();
    let expected: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    let missing: Vec<_> = expected.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&expected).collect();
    assert!(
        missing.is_empty(),
        "routes missing from the document: {missing:?}"
    );
    assert!(extra.is_empty(), "documented routes not in the list: {extra:?}");
    let mut ids = BTreeSet::new();
    for (method, path, op) in operations(&doc) {
        let id = op["operationId"].as_str().unwrap_or_default().to_owned();
        assert!(!id.is_empty(), "{method} {path} has no operationId");
        assert!(
            ids.insert(id.clone()),
            "operationId {id} repeats ({method} {path})"
        );
        assert!(op["summary"].is_string(), "{method} {path} has no summary");
        assert!(
            op["tags"].as_array().is_some_and(|t| !t.is_empty()),
            "{method} {path} has no tag"
        );
        assert!(op["responses"]["500"].is_object(), "{method} {path}: no 500");
    }
    s.stop().await;
}

#[tokio::test]
async fn path_parameters_query_parameters_and_bodies_are_declared() {
    let s = TestServer::sqlite(|_| {}).await;
    let (_, doc) = s.get("/openapi.json").await;
    for (method, path, op) in operations(&doc) {
        let params = op["parameters"].as_array().cloned().unwrap_or_default();
        let declared = |name: &str, place: &str| {
            params
                .iter()
                .any(|p| p["name"] == name && p["in"] == place && p["schema"].is_object())
        };
        // Every `{name}` of the path template is a declared path parameter.
        for seg in path.split('/') {
            if let Some(name) = seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                assert!(
                    declared(name, "path"),
                    "{method} {path}: path parameter {name} not declared"
                );
                assert!(op["responses"]["404"].is_object(), "{method} {path}: no 404");
            }
        }
        let takes_body = ["post", "put", "patch"].contains(&method.as_str())
            && !NO_BODY.contains(&(method.as_str(), path.as_str()));
        if takes_body {
            let schema = &op["requestBody"]["content"]["application/json"]["schema"];
            assert!(schema.is_object(), "{method} {path}: no JSON request body");
            let schema = resolve(&doc, schema);
            assert!(
                schema["properties"].is_object() || schema["type"] == "array",
                "{method} {path}: request body schema without properties: {schema}"
            );
            // The thread protocol answers a body that is not a command with its own error
            // frame and 400, as the reference server does.
            assert!(
                op["responses"]["422"].is_object() || op["responses"]["400"].is_object(),
                "{method} {path}: no 422"
            );
        }
    }
    // Query parameters of the GET routes that take them.
    let query_params = |method: &str, path: &str| -> BTreeSet<String> {
        doc["paths"][path][method]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["in"] == "query")
            .map(|p| p["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        query_params("get", "/threads/{thread_id}/runs"),
        ["limit", "offset", "status", "select"].map(String::from).into()
    );
    assert_eq!(
        query_params("get", "/store/items"),
        ["namespace", "key"].map(String::from).into()
    );
    assert_eq!(
        query_params("get", "/threads/{thread_id}/history"),
        ["limit", "before"].map(String::from).into()
    );
    assert!(query_params("get", "/assistants/{assistant_id}/subgraphs").contains("recurse"));
    // The run request, field by field.
    let run = resolve(
        &doc,
        &doc["paths"]["/threads/{thread_id}/runs/wait"]["post"]["requestBody"]["content"]["application/json"]
            ["schema"],
    );
    for field in [
        "assistant_id",
        "input",
        "command",
        "config",
        "context",
        "metadata",
        "stream_mode",
        "stream_subgraphs",
        "interrupt_before",
        "interrupt_after",
        "multitask_strategy",
        "if_not_exists",
        "after_seconds",
        "durability",
        "checkpoint_id",
    ] {
        assert!(
            run["properties"][field].is_object(),
            "RunBody lacks {field}: {run}"
        );
        assert!(
            run["properties"][field]["description"].is_string(),
            "RunBody.{field} has no description"
        );
    }
    assert!(
        run["required"]
            .as_array()
            .is_some_and(|r| r.contains(&json!("assistant_id"))),
        "{run}"
    );
    // The bounds the server enforces are in the document.
    assert_eq!(
        run["properties"]["after_seconds"]["maximum"],
        json!(31_536_000),
        "{run}"
    );
    assert_eq!(run["properties"]["after_seconds"]["minimum"], json!(0), "{run}");
    // Responses name their types.
    let thread = resolve(
        &doc,
        &doc["paths"]["/threads"]["post"]["responses"]["200"]["content"]["application/json"]["schema"],
    );
    for field in ["thread_id", "status", "values", "metadata", "created_at"] {
        assert!(
            thread["properties"][field].is_object(),
            "Thread lacks {field}: {thread}"
        );
    }
    let stream = &doc["paths"]["/runs/stream"]["post"]["responses"]["200"]["content"];
    assert!(stream["text/event-stream"].is_object(), "{stream}");
    let error = &doc["components"]["schemas"]["ErrorBody"];
    assert_eq!(error["required"], json!(["detail"]), "{error}");
    s.stop().await;
}

/// Every documented operation reaches a handler: never the router's fallback (404 "no such
/// route") or a 405.
#[tokio::test]
async fn every_documented_operation_is_served() {
    let s = TestServer::sqlite(|_| {}).await;
    let (_, doc) = s.get("/openapi.json").await;
    let ops = operations(&doc);
    assert!(ops.len() >= ROUTES.len());
    for (method, path, _) in ops {
        let url = s.u(&path
            .replace("{assistant_id}", "echo")
            .replace("{namespace}", "inner")
            .replace("{thread_id}", "00000000-0000-0000-0000-000000000000")
            .replace("{run_id}", "00000000-0000-0000-0000-000000000001")
            .replace("{checkpoint_id}", "nope"));
        let req = match method.as_str() {
            "get" => s.http.get(&url),
            "post" => s.http.post(&url).json(&json!({})),
            "put" => s.http.put(&url).json(&json!({})),
            "patch" => s.http.patch(&url).json(&json!({})),
            "delete" => s.http.delete(&url).json(&json!({})),
            other => panic!("method {other}"),
        };
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        let body = res.text().await.unwrap();
        assert_ne!(status, 405, "{method} {path}: {body}");
        assert!(!body.contains("no such route"), "{method} {path}: {body}");
        assert!(status < 500, "{method} {path}: {status} {body}");
    }
    s.stop().await;
}

#[tokio::test]
async fn with_api_keys_the_document_declares_them() {
    let s = TestServer::sqlite(|c| {
        c.api_keys.insert("k1".into(), "alice".into());
    })
    .await;
    let doc: Value = s
        .http
        .get(s.u("/openapi.json"))
        .header("x-api-key", "k1")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let schemes = &doc["components"]["securitySchemes"];
    assert_eq!(schemes["api_key"]["name"], "x-api-key", "{schemes}");
    assert_eq!(schemes["bearer"]["scheme"], "bearer", "{schemes}");
    let op = &doc["paths"]["/threads"]["post"];
    assert!(op["responses"]["401"].is_object(), "{op}");
    assert!(op["security"].is_array(), "{op}");
    assert!(doc["paths"]["/ok"]["get"]["responses"]["401"].is_null());
    s.stop().await;
}
