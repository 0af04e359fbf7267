//! The dispatcher: claims due deliveries from the queue and POSTs them, signed, through
//! the guarded client; records each outcome (delivered, retried later, given up).

use super::WebhookConfig;
use crate::db::WebhookDelivery;
use crate::models::now_rfc3339;
use crate::service::url_guard::{self as guard, GuardedResolver};
use crate::state::AppState;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Claims of webhook deliveries: one log line when they start failing, one when they work
/// again.
static CLAIMS: crate::outage::Outage = crate::outage::Outage::new("claiming webhook deliveries");

/// The dispatcher's loop, until shutdown.
pub(crate) async fn run(state: Arc<AppState>) {
    let config = Arc::new(state.config.webhooks.clone());
    let client = match client(&config) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "the webhook client cannot be built; webhooks are not delivered");
            return;
        }
    };
    let lease = config.timeout + Duration::from_secs(30);
    let slots = Arc::new(Semaphore::new(config.concurrency.max(1)));
    let mut shutdown = state.shutdown.subscribe();
    loop {
        if *shutdown.borrow() {
            return;
        }
        let slot = tokio::select! {
            s = Arc::clone(&slots).acquire_owned() => match s {
                Ok(s) => s,
                Err(_) => return,
            },
            _ = shutdown.changed() => continue,
        };
        let claimed = state.db.claim_webhook(&state.worker_id, lease).await;
        if claimed.is_ok() {
            CLAIMS.worked();
        }
        match claimed {
            Ok(Some(d)) => {
                let (state, config, client) = (Arc::clone(&state), Arc::clone(&config), client.clone());
                tokio::spawn(deliver(state, config, client, d, slot));
            }
            Ok(None) => {
                drop(slot);
                tokio::select! {
                    () = tokio::time::sleep(config.poll) => {}
                    _ = shutdown.changed() => {}
                }
            }
            Err(e) => {
                drop(slot);
                CLAIMS.failed(&e);
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = shutdown.changed() => {}
                }
            }
        }
    }
}

/// The delivery client: the guarded resolver, the attempt timeout, no redirects, the
/// configured static headers (a request's own headers win over them).
fn client(config: &Arc<WebhookConfig>) -> Result<reqwest::Client, Box<dyn std::error::Error + Send + Sync>> {
    let headers = super::header_map(config)?;
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .timeout(config.timeout)
        .connect_timeout(config.timeout)
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(Arc::new(GuardedResolver {
            config: Arc::clone(config),
        }))
        .user_agent(concat!("graphloom/", env!("CARGO_PKG_VERSION")))
        .build()?;
    Ok(client)
}

/// `sha256=<hex>` of the HMAC-SHA256 of `body` under `secret`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    // HMAC takes a key of any length.
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(m) => m,
        Err(_) => return String::new(),
    };
    mac.update(body);
    let bytes = mac.finalize().into_bytes();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// How one attempt went.
enum Attempt {
    Delivered,
    /// Worth trying again.
    Failed(String),
    /// Never worth trying again (the URL is refused now).
    Refused(String),
}

async fn attempt(config: &WebhookConfig, client: &reqwest::Client, d: &WebhookDelivery) -> Attempt {
    if let Err(e) = guard::check(config, &d.url) {
        return Attempt::Refused(e.to_string());
    }
    let mut body = d.body.clone();
    if let Some(o) = body.as_object_mut() {
        o.insert("webhook_sent_at".into(), serde_json::json!(now_rfc3339()));
    }
    let bytes = match serde_json::to_vec(&body) {
        Ok(b) => b,
        Err(e) => return Attempt::Refused(format!("the body does not encode: {e}")),
    };
    let mut req = client
        .post(&d.url)
        .header("content-type", "application/json")
        .header("x-graphloom-webhook-id", &d.run_id);
    if let Some(secret) = &config.secret {
        req = req.header("x-graphloom-signature", signature(secret, &bytes));
    }
    match req.body(bytes).send().await {
        Ok(res) if res.status().is_success() => Attempt::Delivered,
        Ok(res) => Attempt::Failed(format!("the receiver answered {}", res.status())),
        Err(e) if e.is_timeout() => Attempt::Failed(format!("no answer within {:?}", config.timeout)),
        Err(e) => {
            let blocked = std::error::Error::source(&e)
                .and_then(|s| find_refusal(s))
                .map(ToString::to_string);
            match blocked {
                Some(why) => Attempt::Refused(why),
                None => Attempt::Failed(format!("sending failed: {e}")),
            }
        }
    }
}

/// The guard's refusal somewhere in an error's chain of causes.
fn find_refusal<'a>(mut e: &'a (dyn std::error::Error + 'static)) -> Option<&'a guard::Refused> {
    loop {
        if let Some(r) = e.downcast_ref::<guard::Refused>() {
            return Some(r);
        }
        e = e.source()?;
    }
}

/// Make one attempt and record it.
async fn deliver(
    state: Arc<AppState>,
    config: Arc<WebhookConfig>,
    client: reqwest::Client,
    d: WebhookDelivery,
    slot: OwnedSemaphorePermit,
) {
    let outcome = attempt(&config, &client, &d).await;
    let (db, worker) = (&state.db, &state.worker_id);
    let recorded = match outcome {
        Attempt::Delivered => db.webhook_delivered(&d.run_id, worker).await,
        Attempt::Failed(why) => {
            let done = u32::try_from(d.attempts.saturating_add(1)).unwrap_or(u32::MAX);
            let retry = (done < config.max_attempts).then(|| config.retry_after(done));
            if retry.is_none() {
                tracing::warn!(run_id = %d.run_id, error = %why, attempts = done, "webhook given up");
            }
            db.webhook_failed(&d.run_id, worker, &why, retry).await
        }
        Attempt::Refused(why) => {
            tracing::warn!(run_id = %d.run_id, error = %why, "webhook refused");
            db.webhook_failed(&d.run_id, worker, &why, None).await
        }
    };
    if let Err(e) = recorded {
        tracing::warn!(run_id = %d.run_id, error = %e, "recording a webhook attempt failed");
    }
    drop(slot);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_is_hmac_sha256_of_the_body() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn retries_back_off() {
        let c = WebhookConfig {
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(10),
            ..WebhookConfig::default()
        };
        assert_eq!(c.retry_after(1), Duration::from_secs(1));
        assert_eq!(c.retry_after(2), Duration::from_secs(2));
        assert_eq!(c.retry_after(3), Duration::from_secs(4));
        assert_eq!(c.retry_after(9), Duration::from_secs(10));
    }
}
