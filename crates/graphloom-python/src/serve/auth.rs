//! `PyAuth`: the `Auth` object of `langgraph.json`'s `auth.path` as the server's
//! [`Auth`]. Its handlers run on the graphs' event loop (`graphloom/server/_auth.py`):
//! `@auth.authenticate` answers the request's identity, the `@auth.on` handlers a grant (a
//! metadata filter, metadata to stamp) or a refusal.

use super::graph::call;
use axum::http::request::Parts;
use graphloom_server::auth::{Auth, AuthError, AuthRequest, Grant, Identity};
use graphloom_server_wire::json::ForeignError;
use pyo3::prelude::*;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// The Python `Auth` behind the server (see the module docs).
pub(crate) struct PyAuth {
    bridge: Arc<Py<PyAny>>,
    authorizes: bool,
}

impl PyAuth {
    pub(crate) fn new(bridge: Arc<Py<PyAny>>, authorizes: bool) -> Self {
        Self { bridge, authorizes }
    }
}

/// A refusal of the Python side: an `HTTPException` comes as a failure of class
/// `HTTPException` whose "node" is its status code; any other exception means the handler
/// itself failed (503, logged).
fn refusal(e: &graphloom_core::Error) -> AuthError {
    match (e, e.find_source::<ForeignError>()) {
        (graphloom_core::Error::Node { node, .. }, Some(f)) if f.class == "HTTPException" => {
            let detail = if f.message.is_empty() {
                "unauthorized".to_owned()
            } else {
                f.message.clone()
            };
            if node == "403" {
                AuthError::forbidden(detail)
            } else {
                AuthError::unauthenticated(detail)
            }
        }
        _ => AuthError::Unavailable(e.to_string().into()),
    }
}

fn identity_json(id: &Identity) -> Value {
    json!({
        "identity": id.identity,
        "display_name": id.display_name,
        "permissions": id.permissions,
        "is_authenticated": id.is_authenticated,
        "extra": id.extra,
    })
}

impl Auth for PyAuth {
    async fn authenticate(&self, req: &Parts) -> Result<Identity, AuthError> {
        let headers: Map<String, Value> = req
            .headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_owned(), Value::String(v.to_str().ok()?.to_owned()))))
            .collect();
        let payload = json!({
            "method": req.method.as_str(),
            "path": req.uri.path(),
            "query": req.uri.query(),
            "headers": headers,
        });
        let who = call(&self.bridge, "authenticate", payload)
            .await
            .map_err(|e| refusal(&e))?;
        let text = |k: &str| who.get(k).and_then(Value::as_str).map(str::to_owned);
        let Some(name) = text("identity") else {
            return Err(AuthError::Unavailable(
                "the authenticate handler answered no identity".into(),
            ));
        };
        let mut id = Identity::new(name).with_permissions(
            who.get("permissions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned),
        );
        id.display_name = text("display_name");
        if let Some(Value::Object(extra)) = who.get("extra") {
            id.extra = extra.clone();
        }
        Ok(id)
    }

    async fn authorize(&self, req: &AuthRequest<'_>) -> Result<Grant, AuthError> {
        let payload = json!({
            "user": identity_json(req.identity),
            "resource": req.resource.as_str(),
            "action": req.action.as_str(),
            "id": req.id,
            "thread_id": req.thread_id,
            "body": req.body,
            "query": req.query,
        });
        let answer = call(&self.bridge, "authorize", payload)
            .await
            .map_err(|e| refusal(&e))?;
        if answer.get("allow").and_then(Value::as_bool) == Some(false) {
            return Err(AuthError::forbidden("forbidden by the auth handler"));
        }
        let mut grant = Grant::allow();
        if let Some(Value::Object(filter)) = answer.get("filter") {
            for (key, cond) in filter {
                grant = match cond {
                    Value::Object(op) if op.contains_key("$contains") => {
                        grant.filter_contains(key.clone(), op["$contains"].clone())
                    }
                    Value::Object(op) if op.contains_key("$eq") => {
                        grant.filter(key.clone(), op["$eq"].clone())
                    }
                    other => grant.filter(key.clone(), other.clone()),
                };
            }
        }
        if let Some(Value::Object(stamps)) = answer.get("metadata") {
            for (k, v) in stamps {
                grant = grant.stamp(k.clone(), v.clone());
            }
        }
        Ok(grant)
    }

    fn authorizes(&self) -> bool {
        self.authorizes
    }
}
