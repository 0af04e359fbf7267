//! Assistants offered to other agent protocols (MCP tools, A2A agents): which ones an
//! identity may use, the input they take, and running one to its end.

use crate::auth::{self, Action, Identity, Resource};
use crate::db::{AssistantQuery, SortOrder};
use crate::error::{ServiceError, ServiceResult};
use crate::models::{Assistant, Run};
use crate::run::RunRequest;
use crate::service::runs::{self, Enqueued, Hold, Submit, ThreadRead};
use crate::service::MAX_PAGE;
use crate::state::AppRef;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// What a `messages` field is offered as: one string, the user's message.
pub(crate) const MESSAGES_TEXT: &str = "The user message to send to the agent.";

/// The assistants `identity` may search (its own and the system ones, narrowed by its
/// grant's filter), oldest first.
pub(crate) async fn visible(state: &AppRef, identity: &Identity) -> ServiceResult<Vec<Assistant>> {
    let grant = auth::check(
        &*state.auth,
        identity,
        Resource::Assistants,
        Action::Search,
        None,
        &Value::Null,
    )
    .await?;
    let q = AssistantQuery {
        limit: MAX_PAGE,
        sort_by: Some("created_at".into()),
        sort_order: SortOrder::Asc,
        ..AssistantQuery::default()
    };
    let (list, _) = super::assistants::search(state, &identity.identity, &q).await?;
    Ok(list
        .into_iter()
        .filter(|a| grant.filter.matches(&a.metadata) && state.graphs.contains_key(&a.graph_id))
        .collect())
}

/// The assistant `id` as `identity` may read it (404 when hidden by its grant's filter).
pub(crate) async fn readable(state: &AppRef, identity: &Identity, id: &str) -> ServiceResult<Assistant> {
    let grant = auth::check(
        &*state.auth,
        identity,
        Resource::Assistants,
        Action::Read,
        Some(id),
        &Value::Null,
    )
    .await?;
    let a = super::assistants::resolve(state, &identity.identity, id).await?;
    if !grant.filter.matches(&a.metadata) {
        return Err(ServiceError::not_found(format!("assistant {id}")));
    }
    Ok(a)
}

/// The JSON Schema of an assistant's input, as an object schema; whether its graph takes
/// `messages`.
pub(crate) fn input_schema(state: &AppRef, a: &Assistant) -> (Map<String, Value>, bool) {
    let schema = state.graphs.get(&a.graph_id).map(|g| g.input_schema());
    let mut schema = match schema {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    schema.insert("type".into(), json!("object"));
    let has_messages = schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| p.contains_key("messages"));
    (schema, has_messages)
}

/// [`input_schema`] with `messages` offered as one string (as tool-using models write
/// it), required.
pub(crate) fn text_input_schema(state: &AppRef, a: &Assistant) -> (Map<String, Value>, bool) {
    let (mut schema, has_messages) = input_schema(state, a);
    if has_messages {
        if let Some(Value::Object(props)) = schema.get_mut("properties") {
            props.insert(
                "messages".into(),
                json!({"type": "string", "title": "Messages", "description": MESSAGES_TEXT}),
            );
        }
        let mut required: Vec<Value> = schema
            .get("required")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if !required.iter().any(|r| r == "messages") {
            required.push(json!("messages"));
        }
        schema.insert("required".into(), Value::Array(required));
    }
    (schema, has_messages)
}

/// A user message in the form the graphs read.
pub(crate) fn user_message(text: &str) -> Value {
    json!({"type": "human", "content": text})
}

/// A run started by [`start`].
pub(crate) struct Started {
    /// The run, as it was created.
    pub run: Run,
    /// A waiter for its outcome, taken before it could start.
    pub reader: Option<crate::broker::Reader>,
}

/// Start assistant `a` for `identity` on `thread_id` (created when missing; `None`: a
/// stateless run) with `input`. The run is authorised as a run the identity creates (the
/// thread hidden by the grant's filter is a 404) and carries the identity.
pub(crate) async fn start(
    state: &AppRef,
    identity: &Arc<Identity>,
    a: &Assistant,
    thread_id: Option<String>,
    input: Value,
    metadata: Map<String, Value>,
) -> ServiceResult<Started> {
    let mut body = json!({
        "assistant_id": a.assistant_id,
        "input": input,
        "metadata": metadata,
        "if_not_exists": "create",
    });
    let grant = auth::check(
        &*state.auth,
        identity,
        Resource::Runs,
        Action::Create,
        thread_id.as_deref(),
        &body,
    )
    .await?;
    if let Some(Value::Object(m)) = body.get_mut("metadata") {
        m.extend(grant.metadata.clone());
    }
    if let Some(id) = &thread_id {
        if let Some(t) = state.db.get_thread(&identity.identity, id).await? {
            if !grant.filter.matches(&t.metadata) {
                return Err(ServiceError::not_found(format!("thread {id}")));
            }
        }
    }
    let request: RunRequest =
        serde_json::from_value(body).map_err(|e| ServiceError::invalid(format!("run request: {e}")))?;
    let submit = Submit {
        owner: identity.identity.clone(),
        thread_id,
        request,
        delay: None,
        hold: Hold::Outcome,
        read: ThreadRead::Unread,
    };
    // The run carries the whole identity (permissions, claims) into its config.
    let Enqueued { run, reader, .. } =
        auth::scope(Arc::clone(identity), runs::enqueue(state, submit)).await?;
    Ok(Started { run, reader })
}

/// Wait for the end of a run [`start`]ed for `owner`: its `runs/wait` body (the final
/// values, or `{"__error__": ...}`, with `__interrupt__` when it paused).
pub(crate) async fn finish(state: &AppRef, owner: &str, started: Started) -> Value {
    runs::wait_outcome_from(state, owner, &started.run, started.reader).await
}

/// [`start`], then [`finish`]: the run's end.
pub(crate) async fn run_to_end(
    state: &AppRef,
    identity: &Arc<Identity>,
    a: &Assistant,
    thread_id: Option<String>,
    input: Value,
    metadata: Map<String, Value>,
) -> ServiceResult<Value> {
    let started = start(state, identity, a, thread_id, input, metadata).await?;
    Ok(finish(state, &identity.identity, started).await)
}
