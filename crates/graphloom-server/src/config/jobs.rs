//! Settings of the background jobs: the cron scheduler, webhook deliveries and retention.

use graphloom_core::store::TtlConfig;
use graphloom_server_db::DefaultTtl;
use std::time::Duration;

/// Settings of the cron scheduler.
#[derive(Clone, Debug)]
pub struct CronConfig {
    /// Whether this process fires crons (default `true`; the API serves them either way).
    pub enabled: bool,
    /// How often the scheduler looks for due crons (default 1 s).
    pub poll: Duration,
    /// At most this many crons fired per look (default 100).
    pub batch: usize,
}

impl Default for CronConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            poll: Duration::from_secs(1),
            batch: 100,
        }
    }
}

/// Settings of webhook deliveries.
#[derive(Clone, Debug)]
pub struct WebhookConfig {
    /// Key of the `x-graphloom-signature` HMAC-SHA256 header (`None`: no signature).
    pub secret: Option<String>,
    /// Allow `http://` URLs (default `false`: `https` only).
    pub allow_http: bool,
    /// Hosts exempt from the address guard, as written in URLs (`"127.0.0.1"`,
    /// `"hooks.internal"`, `"::1"`). Default: none.
    pub allowed_hosts: Vec<String>,
    /// Let deliveries reach loopback addresses (`127.0.0.0/8`, `::1`) and `localhost`
    /// names, whatever the host (default `false`: refused unless in
    /// [`allowed_hosts`](Self::allowed_hosts)). Private and link-local ranges stay blocked.
    pub allow_loopback: bool,
    /// When not empty, the only hosts a webhook URL may name: exact hosts
    /// (`"hooks.example.com"`, `"127.0.0.1"`) or `"*.example.com"`, which matches any
    /// subdomain of `example.com` but not `example.com` itself. This narrows what the
    /// address guard lets through; it exempts nothing from it (that is
    /// [`allowed_hosts`](Self::allowed_hosts)). Default: empty, any host.
    pub allowed_domains: Vec<String>,
    /// When not empty, the only ports a webhook URL may use (a URL without one uses 443 for
    /// https, 80 for http). Default: empty, any port.
    pub allowed_ports: Vec<u16>,
    /// Longest webhook URL accepted, in characters (default `None`: no limit).
    pub max_url_length: Option<usize>,
    /// Headers sent with every delivery, as `(name, value)`. They do not replace the
    /// headers a delivery sets itself (`content-type`, `x-graphloom-webhook-id`,
    /// `x-graphloom-signature`). Default: none.
    pub headers: Vec<(String, String)>,
    /// How long one attempt may take (default 10 s).
    pub timeout: Duration,
    /// Attempts before a delivery is given up (default 5).
    pub max_attempts: u32,
    /// Wait before the first retry; each retry waits twice as long (default 1 s).
    pub backoff: Duration,
    /// Longest wait between retries (default 5 minutes).
    pub max_backoff: Duration,
    /// How often an idle dispatcher looks for deliveries (default 500 ms).
    pub poll: Duration,
    /// Deliveries in flight at once in this process (default 8).
    pub concurrency: usize,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        Self {
            secret: None,
            allow_http: false,
            allowed_hosts: Vec::new(),
            allow_loopback: false,
            allowed_domains: Vec::new(),
            allowed_ports: Vec::new(),
            max_url_length: None,
            headers: Vec::new(),
            timeout: Duration::from_secs(10),
            max_attempts: 5,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(300),
            poll: Duration::from_millis(500),
            concurrency: 8,
        }
    }
}

impl WebhookConfig {
    /// The wait before retry number `attempt` (1 for the first retry).
    #[must_use]
    pub fn retry_after(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1).min(20));
        self.backoff.saturating_mul(factor).min(self.max_backoff)
    }
}

/// Settings of retention.
#[derive(Clone, Debug)]
pub struct RetentionConfig {
    /// Time to live of threads created without a `ttl` of their own (`None`, the default:
    /// they live until deleted).
    pub thread_ttl: Option<DefaultTtl>,
    /// Expiry of store items: a default time to live for items put without one (none by
    /// default) and whether reads refresh it (yes by default).
    pub store_ttl: TtlConfig,
    /// How often the sweeper runs (default 60 s).
    pub sweep_interval: Duration,
    /// Threads handled per batch (default 100).
    pub batch: usize,
    /// How long delivered and given-up webhook deliveries are kept (default 7 days).
    pub webhook_retention: Duration,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            thread_ttl: None,
            store_ttl: TtlConfig::default(),
            sweep_interval: Duration::from_secs(60),
            batch: 100,
            webhook_retention: Duration::from_secs(7 * 24 * 3600),
        }
    }
}
