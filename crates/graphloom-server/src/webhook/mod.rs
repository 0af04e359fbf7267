//! Webhooks: when a run that names a `webhook` URL ends (success, error, timeout,
//! interrupted), its final state is POSTed there.
//!
//! - **Durable.** The delivery is a row of the database ([`crate::db::WebhookDb`]), queued
//!   as the run ends, keyed by the run id: a run that ends twice (taken over after a crash)
//!   queues one. A dispatcher in every replica claims deliveries with a lease, only once
//!   their run has ended in the database, so a delivery survives a restart and is sent by
//!   one replica at a time.
//! - **Never twice after a 2xx.** A 2xx marks the delivery done; it is never claimed again.
//!   (A crash between the 2xx and that mark sends it again: receivers dedupe on the
//!   `x-graphloom-webhook-id` header, the run id.)
//! - **Retries.** Anything else (an error status, a refused connection, no answer within
//!   [`WebhookConfig::timeout`]) is retried with exponential backoff, up to
//!   [`WebhookConfig::max_attempts`] attempts.
//! - **Signed.** With [`WebhookConfig::secret`] set, `x-graphloom-signature:
//!   sha256=<hex>` carries the HMAC-SHA256 of the body bytes under that secret.
//! - **Guarded.** Only `https` URLs (`http` too with [`WebhookConfig::allow_http`]); hosts
//!   that are or resolve to loopback, private, link-local and other non-public addresses
//!   are refused unless listed in [`WebhookConfig::allowed_hosts`]; redirects are not
//!   followed. [`WebhookConfig::allowed_domains`], [`WebhookConfig::allowed_ports`] and
//!   [`WebhookConfig::max_url_length`] narrow the URLs accepted further (see [`guard`]).
//! - **Static headers.** [`WebhookConfig::headers`] go with every delivery (checked by
//!   [`header_map`]).
//!
//! The body is the run as `GET /runs/{id}` shows it with its final `status`, plus
//! `values` (the final state), `error` (when it failed), `run_started_at`, `run_ended_at`
//! and `webhook_sent_at`.

mod deliver;
mod headers;

use crate::db::{NewWebhook, ThreadOutcome};
use crate::models::{rfc3339_from_micros, Run, RunStatus};
use crate::state::AppState;
use graphloom_server_db::kit::now_micros;
use serde_json::{json, Value};
use std::time::Instant;

pub use crate::config::WebhookConfig;
/// The address guard of webhook URLs (kept with the services, which check a request's URL).
pub use crate::service::url_guard as guard;
pub(crate) use deliver::run;
pub use deliver::signature;
pub use headers::{header_map, HeaderError};

/// The body of a run's delivery.
fn body(run: &Run, status: RunStatus, outcome: &ThreadOutcome, started: Instant) -> Value {
    let mut run = crate::service::runs::public(run.clone());
    run.status = status;
    let mut body = serde_json::to_value(&run).unwrap_or_else(|_| json!({}));
    let now = now_micros();
    let ran = i64::try_from(started.elapsed().as_micros()).unwrap_or(0);
    if let Some(o) = body.as_object_mut() {
        o.insert("values".into(), outcome.values.clone().unwrap_or(Value::Null));
        if let Some(e) = &outcome.error {
            o.insert("error".into(), e.clone());
        }
        o.insert("run_started_at".into(), json!(rfc3339_from_micros(now - ran)));
        o.insert("run_ended_at".into(), json!(rfc3339_from_micros(now)));
    }
    body
}

/// Queue the delivery of a run's end to `url` (called as the run ends, before its end is
/// recorded: the dispatcher waits for that record).
pub(crate) async fn enqueue(
    state: &AppState,
    url: &str,
    run: &Run,
    status: RunStatus,
    outcome: &ThreadOutcome,
    started: Instant,
) {
    let new = NewWebhook {
        run_id: run.run_id.clone(),
        thread_id: run.thread_id.clone(),
        url: url.to_owned(),
        body: body(run, status, outcome, started),
    };
    if let Err(e) = state.db.enqueue_webhook(&new).await {
        tracing::warn!(run_id = %run.run_id, error = %e, "queueing the run's webhook failed");
    }
}
