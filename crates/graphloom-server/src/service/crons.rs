//! Crons: schedules that create runs of an assistant, on one thread or each on a new
//! thread (stateless). Creating and changing one checks everything a tick will need
//! (schedule, time zone, assistant, thread, input, webhook) so that nothing bad is stored;
//! [`fire_due`] fires the ticks that are due (see [`crate::scheduler`]).

use super::runs::{self, Hold, Submit, ThreadRead};
use super::{assistants, threads};
use crate::db::{CronPatch, CronQuery, CronTick, DueCron, Fired, NewCron};
use crate::error::{ServiceError, ServiceResult};
use crate::models::{now_rfc3339, Cron};
use crate::run::{OnCompletion, RunRequest};
use crate::service::schedule::{parse_time_micros, Schedule};
use crate::state::AppRef;
use graphloom_server_db::kit::now_micros;
use serde_json::{json, Map, Value};

/// A new cron, as the request gives it (parsed and bounded at the edge).
pub(crate) struct CronRequest {
    /// Cron expression.
    pub schedule: String,
    /// IANA time zone (`None`: UTC).
    pub timezone: Option<String>,
    /// RFC 3339 time after which it stops.
    pub end_time: Option<String>,
    /// Whether it fires (default true).
    pub enabled: Option<bool>,
    /// Stateless crons: keep or delete each run's thread.
    pub on_run_completed: Option<OnCompletion>,
    /// The run request of each tick, as given (a JSON object).
    pub payload: Map<String, Value>,
    /// The same, typed.
    pub request: RunRequest,
}

/// A change of a cron, as the request gives it.
pub(crate) struct CronUpdate {
    /// New schedule.
    pub schedule: Option<String>,
    /// New time zone (`Some(None)`: UTC).
    pub timezone: Option<Option<String>>,
    /// New end (`Some(None)`: none).
    pub end_time: Option<Option<String>>,
    /// Enable or disable.
    pub enabled: Option<bool>,
    /// Stateless crons: keep or delete each run's thread.
    pub on_run_completed: Option<OnCompletion>,
    /// Metadata merged into the cron's (and replacing its runs').
    pub metadata: Option<Map<String, Value>>,
    /// Run request fields replacing the stored payload's.
    pub payload: Map<String, Value>,
}

fn invalid(e: impl std::fmt::Display) -> ServiceError {
    ServiceError::invalid(e.to_string())
}

fn on_completion_text(o: OnCompletion) -> String {
    match o {
        OnCompletion::Delete => "delete".into(),
        OnCompletion::Keep => "keep".into(),
    }
}

/// The next tick after now, or none when it would come after `end_us`.
fn first_tick(schedule: &Schedule, end_us: Option<i64>) -> Option<i64> {
    let next = schedule.next_after_micros(now_micros())?;
    match end_us {
        Some(end) if next > end => None,
        _ => Some(next),
    }
}

/// Check what a payload's runs need: the assistant (resolved to its id in the payload),
/// its graph, the input, the webhook.
async fn check_payload(
    state: &AppRef,
    owner: &str,
    payload: &mut Map<String, Value>,
) -> ServiceResult<String> {
    let request: RunRequest = serde_json::from_value(Value::Object(payload.clone()))
        .map_err(|e| ServiceError::invalid(format!("invalid body: {e}")))?;
    let assistant = assistants::resolve(state, owner, &request.assistant_id).await?;
    if !state.graphs.contains_key(&assistant.graph_id) {
        return Err(ServiceError::not_found(format!("graph {}", assistant.graph_id)));
    }
    runs::check_input(state, &assistant.graph_id, request.input.as_ref())?;
    crate::service::url_guard::check_url(&state.config.webhooks, request.webhook.as_deref())?;
    if request.has_input_and_command() {
        return Err(ServiceError::invalid("give either input or command, not both"));
    }
    payload.insert("assistant_id".into(), json!(assistant.assistant_id));
    Ok(assistant.assistant_id)
}

/// Create a cron of `owner` on `thread_id` (`None`: stateless).
pub(crate) async fn create(
    state: &AppRef,
    owner: &str,
    thread_id: Option<String>,
    mut req: CronRequest,
) -> ServiceResult<Cron> {
    let schedule = Schedule::parse(&req.schedule, req.timezone.as_deref()).map_err(invalid)?;
    let end_us = req
        .end_time
        .as_deref()
        .map(parse_time_micros)
        .transpose()
        .map_err(ServiceError::invalid)?;
    if let Some(id) = &thread_id {
        threads::load(state, owner, id).await?;
    }
    let assistant_id = check_payload(state, owner, &mut req.payload).await?;
    let now = now_rfc3339();
    let cron = Cron {
        cron_id: uuid::Uuid::now_v7().to_string(),
        assistant_id,
        thread_id,
        user_id: Some(owner.to_owned()),
        end_time: req.end_time.clone(),
        schedule: req.schedule,
        timezone: req.timezone,
        payload: Value::Object(req.payload),
        next_run_date: None,
        metadata: req.request.metadata.clone().unwrap_or_default(),
        on_run_completed: req.on_run_completed.map(on_completion_text),
        enabled: req.enabled.unwrap_or(true),
        created_at: now.clone(),
        updated_at: now,
    };
    let new = NewCron {
        next_run_us: first_tick(&schedule, end_us),
        end_time_us: end_us,
        owner: owner.to_owned(),
        cron,
    };
    Ok(state.db.create_cron(&new).await?)
}

/// A cron of `owner`.
pub(crate) async fn get(state: &AppRef, owner: &str, id: &str) -> ServiceResult<Cron> {
    state
        .db
        .get_cron(owner, id)
        .await?
        .ok_or_else(|| ServiceError::not_found(format!("cron {id}")))
}

/// Change a cron of `owner`: the schedule, zone, end or a re-enable move its next tick to
/// the first one after now.
pub(crate) async fn update(state: &AppRef, owner: &str, id: &str, up: CronUpdate) -> ServiceResult<Cron> {
    let old = get(state, owner, id).await?;
    let expr = up.schedule.clone().unwrap_or_else(|| old.schedule.clone());
    let tz = up.timezone.clone().unwrap_or_else(|| old.timezone.clone());
    let schedule = Schedule::parse(&expr, tz.as_deref()).map_err(invalid)?;
    let end_us = match &up.end_time {
        Some(Some(t)) => Some(parse_time_micros(t).map_err(ServiceError::invalid)?),
        Some(None) => None,
        None => old.end_time.as_deref().and_then(|t| parse_time_micros(t).ok()),
    };
    let mut payload = match old.payload {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    for (k, v) in up.payload {
        payload.insert(k, v);
    }
    if let Some(m) = &up.metadata {
        payload.insert("metadata".into(), Value::Object(m.clone()));
    }
    check_payload(state, owner, &mut payload).await?;
    let reschedule = up.schedule.is_some()
        || up.timezone.is_some()
        || up.end_time.is_some()
        || (up.enabled == Some(true) && !old.enabled);
    let patch = CronPatch {
        schedule: up.schedule,
        timezone: up.timezone,
        end_time_us: up.end_time.as_ref().map(|_| end_us),
        payload: Some(Value::Object(payload)),
        metadata: up.metadata,
        on_run_completed: up.on_run_completed.map(|o| Some(on_completion_text(o))),
        enabled: up.enabled,
        next_run_us: reschedule.then(|| first_tick(&schedule, end_us)),
    };
    state
        .db
        .patch_cron(owner, id, &patch)
        .await?
        .ok_or_else(|| ServiceError::not_found(format!("cron {id}")))
}

/// Delete a cron of `owner`.
pub(crate) async fn delete(state: &AppRef, owner: &str, id: &str) -> ServiceResult<()> {
    if state.db.delete_cron(owner, id).await? {
        Ok(())
    } else {
        Err(ServiceError::not_found(format!("cron {id}")))
    }
}

/// A page of the owner's crons, and the total.
pub(crate) async fn search(state: &AppRef, owner: &str, q: &CronQuery) -> ServiceResult<(Vec<Cron>, i64)> {
    Ok(state.db.search_crons(owner, q).await?)
}

/// Fire the crons that are due now (at most a batch); how many were due.
pub(crate) async fn fire_due(state: &AppRef) -> ServiceResult<usize> {
    let due = state
        .db
        .due_crons(
            now_micros(),
            i64::try_from(state.config.crons.batch).unwrap_or(100),
        )
        .await?;
    let n = due.len();
    for d in due {
        fire(state, d).await;
    }
    Ok(n)
}

/// Move a cron past a tick without a run.
async fn skip(state: &AppRef, tick: &CronTick) {
    if let Err(e) = state.db.fire_cron(tick, None).await {
        tracing::warn!(cron_id = %tick.cron_id, error = %e, "moving a cron past a tick failed");
    }
}

/// Fire one due tick: its run is created (by this replica or another), or the tick is
/// skipped when it cannot run (its end passed, its thread is busy with a `reject`
/// strategy, its assistant is gone); a cron whose thread is gone is deleted.
async fn fire(state: &AppRef, d: DueCron) {
    let cron = d.cron;
    let end_us = cron.end_time.as_deref().and_then(|t| parse_time_micros(t).ok());
    let schedule = Schedule::parse(&cron.schedule, cron.timezone.as_deref());
    let next_us = schedule
        .as_ref()
        .ok()
        .and_then(|s| s.next_after_micros(now_micros().max(d.due_us)))
        .filter(|next| end_us.is_none_or(|end| *next <= end));
    let tick = CronTick {
        cron_id: cron.cron_id.clone(),
        due_us: d.due_us,
        next_us,
    };
    if schedule.is_err() || end_us.is_some_and(|end| d.due_us > end) {
        return skip(state, &tick).await;
    }
    let request = serde_json::from_value::<RunRequest>(cron.payload.clone());
    let Ok(mut request) = request else {
        tracing::warn!(cron_id = %cron.cron_id, "a cron's payload is not a run request; tick skipped");
        return skip(state, &tick).await;
    };
    let mut metadata = request.metadata.take().unwrap_or_default();
    metadata.insert("cron_id".into(), json!(cron.cron_id));
    request.metadata = Some(metadata);
    request.on_completion = match cron.on_run_completed.as_deref() {
        Some("keep") => Some(OnCompletion::Keep),
        _ => Some(OnCompletion::Delete),
    };
    if let Some(thread_id) = &cron.thread_id {
        if matches!(state.db.get_thread(&d.owner, thread_id).await, Ok(None)) {
            tracing::info!(cron_id = %cron.cron_id, "the cron's thread is gone; cron deleted");
            let _ = state.db.delete_cron(&d.owner, &cron.cron_id).await;
            return;
        }
    }
    let submit = Submit {
        owner: d.owner.clone(),
        thread_id: cron.thread_id.clone(),
        request,
        delay: None,
        hold: Hold::Nothing,
        read: ThreadRead::Unread,
    };
    match runs::enqueue_tick(state, submit, &tick).await {
        Ok(Ok(e)) => {
            tracing::debug!(cron_id = %cron.cron_id, run_id = %e.run.run_id, "cron fired");
        }
        Ok(Err(Fired::ThreadGone)) => {
            tracing::info!(cron_id = %cron.cron_id, "the cron's thread is gone; cron deleted");
            let _ = state.db.delete_cron(&d.owner, &cron.cron_id).await;
        }
        Ok(Err(Fired::Busy)) => skip(state, &tick).await,
        Ok(Err(_)) => {}
        Err(e) if e.is_client_error() => {
            tracing::warn!(cron_id = %cron.cron_id, error = %e.detail, "a cron's tick cannot run; skipped");
            skip(state, &tick).await;
        }
        // The database failed: the tick stays due and is tried again.
        Err(e) => tracing::warn!(cron_id = %cron.cron_id, error = %e.detail, "firing a cron failed"),
    }
}
