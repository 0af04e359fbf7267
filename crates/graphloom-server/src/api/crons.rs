//! Crons: `/threads/{thread_id}/runs/crons`, `/runs/crons` (create), and search, count,
//! get, update, delete, as the `langgraph-sdk` clients call them.

use super::assistants::sort_order;
use super::auth::Owner;
use super::extract::Body;
use super::respond::page_response;
use crate::api::error::{ApiError, ApiResult, ErrorBody};
use crate::db::CronQuery;
use crate::models::Cron;
use crate::run::{OnCompletion, RunRequest};
use crate::service::{self, assistants, crons};
use crate::state::AppRef;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// The body of a cron's creation: the schedule, and the run request each tick makes (the
/// fields of `POST /runs`). Read as [`CronFields`] and a [`RunRequest`]; this type
/// documents it.
#[derive(Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub(crate) struct CronBody {
    /// Standard 5-field cron expression (`minute hour day_of_month month day_of_week`) or a
    /// nickname (`@hourly`, `@daily`, ...), in UTC unless `timezone` says otherwise.
    schedule: String,
    /// IANA time zone of the schedule (`null`: UTC).
    #[serde(default)]
    timezone: Option<String>,
    /// RFC 3339 time after which the cron stops firing.
    #[serde(default)]
    end_time: Option<String>,
    /// Whether it fires (default `true`).
    #[serde(default)]
    enabled: Option<bool>,
    /// Stateless crons: `delete` (the default) or `keep` each run's thread.
    #[serde(default)]
    #[schema(inline)]
    on_run_completed: Option<OnCompletion>,
    /// The assistant each run uses: an assistant id, or a graph id for its system assistant.
    assistant_id: String,
    /// Each run's input.
    #[serde(default)]
    input: Option<Value>,
    /// Metadata of the cron and of each run (which also gets `cron_id`).
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    /// Each run's configuration.
    #[serde(default)]
    config: Option<Value>,
    /// Each run's context.
    #[serde(default)]
    context: Option<Value>,
    /// Where each run's end is POSTed.
    #[serde(default)]
    webhook: Option<String>,
    /// Pause before these nodes (a list of names, or `"*"`).
    #[serde(default)]
    interrupt_before: Option<Value>,
    /// Pause after these nodes (a list of names, or `"*"`).
    #[serde(default)]
    interrupt_after: Option<Value>,
    /// When the thread is busy: `reject`, `interrupt`, `rollback` or `enqueue`.
    #[serde(default)]
    multitask_strategy: Option<String>,
    /// Stream modes of each run (kept for clients that join it).
    #[serde(default)]
    stream_mode: Option<Value>,
    /// `sync`, `async` or `exit`.
    #[serde(default)]
    durability: Option<String>,
}

/// The keys of a cron body that are the cron's, not its runs'.
const CRON_KEYS: [&str; 5] = ["schedule", "timezone", "end_time", "enabled", "on_run_completed"];

/// The run request keys an update may replace.
const PAYLOAD_KEYS: [&str; 13] = [
    "input",
    "command",
    "config",
    "context",
    "webhook",
    "interrupt_before",
    "interrupt_after",
    "stream_mode",
    "stream_subgraphs",
    "stream_resumable",
    "durability",
    "multitask_strategy",
    "checkpoint_during",
];

/// `value` as a `T`, a 422 naming the field's path when it is not one.
fn typed<T: DeserializeOwned>(value: &Map<String, Value>) -> ApiResult<T> {
    serde_path_to_error::deserialize(Value::Object(value.clone())).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            ApiError::invalid(format!("invalid body: {}", e.inner()))
        } else {
            ApiError::invalid(format!("invalid body: {path}: {}", e.inner()))
        }
    })
}

/// The cron's own fields of a [`CronBody`].
#[derive(Deserialize)]
struct CronFields {
    schedule: String,
    #[serde(default)]
    timezone: Option<String>,
    #[serde(default)]
    end_time: Option<String>,
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    on_run_completed: Option<OnCompletion>,
}

/// The cron request of a body: typed, bounded, and its runs' payload (without `null`s and
/// the cron's own keys). The two parts are read one after the other (not flattened), so
/// that a 422 names the field's path.
fn cron_request(body: Map<String, Value>) -> ApiResult<crons::CronRequest> {
    let (own, payload): (Map<String, Value>, Map<String, Value>) = body
        .into_iter()
        .filter(|(_, v)| !v.is_null())
        .partition(|(k, _)| CRON_KEYS.contains(&k.as_str()));
    let c: CronFields = typed(&own)?;
    let request: RunRequest = typed(&payload)?;
    super::bounds::run_config(request.config.as_ref())?;
    Ok(crons::CronRequest {
        schedule: c.schedule,
        timezone: c.timezone,
        end_time: c.end_time,
        enabled: c.enabled,
        on_run_completed: c.on_run_completed,
        payload,
        request,
    })
}

#[utoipa::path(post, path = "/threads/{thread_id}/runs/crons", tag = "crons", summary = "Create a cron on a thread",
    params(("thread_id" = String, Path, description = "Thread id")), request_body = CronBody,
    responses((status = 200, body = Cron), (status = 404, description = "No such thread or assistant", body = ErrorBody),
        (status = 422, description = "Invalid cron schedule, time zone, end time, input or webhook", body = ErrorBody)))]
pub(crate) async fn create_for_thread(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(thread_id): Path<String>,
    Body(body): Body<Map<String, Value>>,
) -> ApiResult<Json<Cron>> {
    let req = cron_request(body)?;
    Ok(Json(crons::create(&state, &owner, Some(thread_id), req).await?))
}

#[utoipa::path(post, path = "/runs/crons", tag = "crons", summary = "Create a stateless cron (each run on a new thread)",
    request_body = CronBody,
    responses((status = 200, body = Cron), (status = 404, description = "No such assistant", body = ErrorBody),
        (status = 422, description = "Invalid cron schedule, time zone, end time, input or webhook", body = ErrorBody)))]
pub(crate) async fn create(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Body(body): Body<Map<String, Value>>,
) -> ApiResult<Json<Cron>> {
    let req = cron_request(body)?;
    Ok(Json(crons::create(&state, &owner, None, req).await?))
}

#[utoipa::path(get, path = "/runs/crons/{cron_id}", tag = "crons", summary = "Get a cron",
    params(("cron_id" = String, Path, description = "Cron id")), responses((status = 200, body = Cron)))]
pub(crate) async fn get_one(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(id): Path<String>,
) -> ApiResult<Json<Cron>> {
    Ok(Json(crons::get(&state, &owner, &id).await?))
}

/// `Some(value)` for a field that is present, `null` included.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// `PATCH /runs/crons/{cron_id}`: the fields to change (run fields replace the stored
/// ones; `metadata` is merged into the cron's and replaces its runs'). The run fields are
/// typed here so that a wrong type answers 422; their values go through the payload.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[allow(dead_code)]
pub(crate) struct UpdateBody {
    /// New schedule.
    schedule: Option<String>,
    /// New end (`null`: none).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    end_time: Option<Option<String>>,
    /// New time zone (`null`: UTC).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    timezone: Option<Option<String>>,
    /// Enable or disable.
    enabled: Option<bool>,
    /// Stateless crons: `delete` or `keep` each run's thread.
    #[schema(inline)]
    on_run_completed: Option<OnCompletion>,
    /// Metadata.
    metadata: Option<Map<String, Value>>,
    /// New input of the runs.
    input: Option<Value>,
    /// New config of the runs.
    config: Option<Value>,
    /// New context of the runs.
    context: Option<Value>,
    /// New webhook of the runs.
    webhook: Option<String>,
}

#[utoipa::path(patch, path = "/runs/crons/{cron_id}", tag = "crons", summary = "Update a cron",
    params(("cron_id" = String, Path, description = "Cron id")), request_body = UpdateBody,
    responses((status = 200, body = Cron), (status = 422, description = "Invalid cron schedule, time zone, end time, input or webhook", body = ErrorBody)))]
pub(crate) async fn update(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(id): Path<String>,
    Body(body): Body<Map<String, Value>>,
) -> ApiResult<Json<Cron>> {
    let b: UpdateBody = typed(&body)?;
    let payload: Map<String, Value> = body
        .into_iter()
        .filter(|(k, v)| !v.is_null() && PAYLOAD_KEYS.contains(&k.as_str()))
        .collect();
    if payload.contains_key("config") {
        super::bounds::run_config(payload.get("config"))?;
    }
    let up = crons::CronUpdate {
        schedule: b.schedule,
        timezone: b.timezone,
        end_time: b.end_time,
        enabled: b.enabled,
        on_run_completed: b.on_run_completed,
        metadata: b.metadata,
        payload,
    };
    Ok(Json(crons::update(&state, &owner, &id, up).await?))
}

#[utoipa::path(delete, path = "/runs/crons/{cron_id}", tag = "crons", summary = "Delete a cron",
    params(("cron_id" = String, Path, description = "Cron id")),
    responses((status = 204, description = "Deleted"), (status = 404, description = "No such cron", body = ErrorBody)))]
pub(crate) async fn delete(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    crons::delete(&state, &owner, &id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /runs/crons/search` and `/runs/crons/count`.
#[derive(Deserialize, Default, utoipa::ToSchema)]
pub(crate) struct SearchBody {
    /// Only crons of this assistant (an id, or a graph id for its system assistant).
    assistant_id: Option<String>,
    /// Only crons of this thread.
    thread_id: Option<String>,
    /// Only enabled (or disabled) crons.
    enabled: Option<bool>,
    /// Metadata containment.
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    /// Page size (1..=1000, default 10).
    limit: Option<i64>,
    /// Crons to skip.
    offset: Option<i64>,
    /// `cron_id`, `assistant_id`, `thread_id`, `created_at` (default), `updated_at`,
    /// `next_run_date` or `end_time`.
    sort_by: Option<String>,
    /// `asc` or `desc` (default).
    sort_order: Option<String>,
    /// Fields to return.
    #[serde(default)]
    select: Option<Vec<String>>,
}

const SORTS: [&str; 7] = [
    "cron_id",
    "assistant_id",
    "thread_id",
    "created_at",
    "updated_at",
    "next_run_date",
    "end_time",
];

async fn query(state: &AppRef, owner: &str, b: SearchBody) -> ApiResult<CronQuery> {
    let (limit, offset) = service::page(b.limit, b.offset)?;
    if let Some(s) = &b.sort_by {
        if !SORTS.contains(&s.as_str()) {
            return Err(ApiError::invalid(format!("cannot sort crons by {s:?}")));
        }
    }
    // A graph id stands for its system assistant; an unknown id matches nothing.
    let assistant_id = match b.assistant_id {
        Some(a) => Some(match assistants::resolve(state, owner, &a).await {
            Ok(found) => found.assistant_id,
            Err(_) => a,
        }),
        None => None,
    };
    Ok(CronQuery {
        assistant_id,
        thread_id: b.thread_id,
        enabled: b.enabled,
        metadata: b.metadata.unwrap_or_default(),
        limit,
        offset,
        sort_by: b.sort_by,
        sort_order: sort_order(b.sort_order.as_deref())?,
    })
}

#[utoipa::path(post, path = "/runs/crons/search", tag = "crons", summary = "Search crons",
    request_body = SearchBody,
    responses((status = 200, body = Vec<Cron>, headers(("x-pagination-total" = i64), ("x-pagination-next" = i64)))))]
pub(crate) async fn search(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Body(mut b): Body<SearchBody>,
) -> ApiResult<Response> {
    let select = b.select.take().unwrap_or_default();
    let q = query(&state, &owner, b).await?;
    let (list, total) = crons::search(&state, &owner, &q).await?;
    page_response(&list, total, q.offset, &select)
}

#[utoipa::path(post, path = "/runs/crons/count", tag = "crons", summary = "Count crons",
    request_body = SearchBody, responses((status = 200, body = i64)))]
pub(crate) async fn count(
    State(state): State<AppRef>,
    Owner(owner): Owner,
    Body(b): Body<SearchBody>,
) -> ApiResult<Json<i64>> {
    let mut q = query(&state, &owner, b).await?;
    q.limit = 1;
    q.offset = 0;
    let (_, total) = crons::search(&state, &owner, &q).await?;
    Ok(Json(total))
}
