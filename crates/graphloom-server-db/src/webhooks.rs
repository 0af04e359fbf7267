//! Webhooks: the durable queue of deliveries ([`WebhookDb`], a part of [`Db`](crate::Db)).
//!
//! A run that ends with a `webhook` URL queues one delivery, keyed by its run id, so a run
//! that ends twice (taken over after a crash) still queues one. A delivery is claimed
//! with a lease like a run, only once its run has ended in the database, and is marked
//! delivered after a 2xx; one that was delivered is never claimed again.

use crate::db::DbResult;
use async_trait::async_trait;
use serde_json::Value;
use std::time::Duration;

/// A delivery to queue.
#[derive(Clone, Debug, PartialEq)]
pub struct NewWebhook {
    /// The run whose end it reports (also the delivery's id).
    pub run_id: String,
    /// The run's thread.
    pub thread_id: String,
    /// Where to POST.
    pub url: String,
    /// The JSON body.
    pub body: Value,
}

/// A delivery claimed by a dispatcher.
#[derive(Clone, Debug, PartialEq)]
pub struct WebhookDelivery {
    /// The run whose end it reports (the delivery's id).
    pub run_id: String,
    /// Where to POST.
    pub url: String,
    /// The JSON body.
    pub body: Value,
    /// Attempts made before this one.
    pub attempts: i64,
}

/// A delivery's state, as [`WebhookDb::webhook_status`] reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct WebhookStatus {
    /// `pending`, `delivered` or `failed`.
    pub status: String,
    /// Attempts made.
    pub attempts: i64,
    /// The last attempt's error, if it failed.
    pub last_error: Option<String>,
}

/// Storage of webhook deliveries (see the module docs).
#[async_trait]
pub trait WebhookDb: Send + Sync {
    /// Queue a delivery; one already queued for the run is kept as it is. True when queued.
    async fn enqueue_webhook(&self, new: &NewWebhook) -> DbResult<bool>;
    /// Claim the oldest pending delivery that is due, whose run has ended (or is gone),
    /// and whose lease (if any) has run out, for `worker` with a `lease`.
    async fn claim_webhook(&self, worker: &str, lease: Duration) -> DbResult<Option<WebhookDelivery>>;
    /// Record a 2xx: the delivery is done and never claimed again. False when `worker` no
    /// longer holds it.
    async fn webhook_delivered(&self, run_id: &str, worker: &str) -> DbResult<bool>;
    /// Record a failed attempt: retried after `retry_in`, or given up (`None`).
    async fn webhook_failed(
        &self,
        run_id: &str,
        worker: &str,
        error: &str,
        retry_in: Option<Duration>,
    ) -> DbResult<bool>;
    /// A delivery's state; None when none is queued for the run.
    async fn webhook_status(&self, run_id: &str) -> DbResult<Option<WebhookStatus>>;
    /// Delete delivered and failed deliveries that ended before `before_us` (at most
    /// `limit`); how many.
    async fn prune_webhooks(&self, before_us: i64, limit: i64) -> DbResult<usize>;
}
