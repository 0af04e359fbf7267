//! The server's settings: [`ServerConfig`] and where it keeps its data ([`Database`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

mod jobs;

pub use jobs::{CronConfig, RetentionConfig, WebhookConfig};

/// Where the server keeps everything (checkpoints, store, assistants, threads, the run queue).
#[derive(Clone, Debug)]
pub enum Database {
    /// One SQLite file (the embedded default; cargo feature `sqlite`).
    Sqlite(PathBuf),
    /// A PostgreSQL URL; several server processes may share it (cargo feature `postgres`).
    Postgres(String),
}

/// The CORS origins allowed by default: the hosted LangGraph Studio, and pages served from
/// this machine on any port.
pub const DEFAULT_CORS_ORIGINS: [&str; 4] = [
    "https://smith.langchain.com",
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
];

/// Server settings.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Persistence.
    pub database: Database,
    /// Runs executed at once by this process; 0 serves the API only (other replicas on
    /// the same PostgreSQL database execute the runs).
    pub workers: usize,
    /// Lease of a claimed run: its worker renews it every [`heartbeat`](Self::heartbeat),
    /// and a run whose lease runs out (its process died) is taken over by another worker.
    ///
    /// On SQLite the server holds the database file's lock (`<db>.lock`) and at start takes
    /// over at once the runs a crashed predecessor left running, so the lease matters only
    /// on PostgreSQL, where replicas share the queue. There a shorter lease means a faster
    /// takeover after a crash, but more heartbeat writes, and a worker that stalls longer
    /// than the lease (an overloaded machine, a database that does not answer in time)
    /// loses its run to another replica, which runs the unfinished step again. Either way a run finishes once: a worker that lost its lease stops, and
    /// finishing checks the lease in the same transaction. Default 30 s.
    pub lease: Duration,
    /// How often a worker renews the lease of its run; `None`: a third of
    /// [`lease`](Self::lease). Must be shorter than the lease (a renewal that comes later
    /// than the lease lets another worker take the run).
    pub heartbeat: Option<Duration>,
    /// Time limit of background runs (`None`: no limit).
    pub run_timeout: Option<Duration>,
    /// API keys (sent as `x-api-key` or `Authorization: Bearer`) and the owner each one
    /// stands for. Empty: auth off, everything belongs to owner `""`. With keys, each
    /// owner sees only its own assistants, threads, runs and store items, and a graph's
    /// runs read and write the store as their owner's (under the same hidden namespace
    /// label as `/store`).
    pub api_keys: HashMap<String, String>,
    /// Serve `/info`, `/metrics` and `/openapi.json` without a key even when keys are
    /// configured (for a scraper or a load balancer that has none). Default `false`: they
    /// need a key like every other route; `/ok` never does.
    pub public_system_routes: bool,
    /// Largest request body, in bytes (larger: 413).
    pub body_limit: usize,
    /// Allowed CORS origins: exact (`https://smith.langchain.com`), `*` for any, or with
    /// `:*` for any port (`http://localhost:*`); empty: no CORS headers. Preflights that ask
    /// for Private Network Access are allowed it. Default: [`DEFAULT_CORS_ORIGINS`] (the
    /// hosted LangGraph Studio and localhost, so Studio and local frontends work as they
    /// do against `langgraph dev`).
    pub cors_origins: Vec<String>,
    /// How long a graceful shutdown waits for running steps before stopping them (their
    /// finished writes are kept and the runs resume elsewhere or on restart).
    pub shutdown_grace: Duration,
    /// Prices of models, for the `graphloom_model_cost_usd` metric of AI messages whose
    /// `response_metadata` names the model (`model_name`) but carries no `cost_usd`. The
    /// built-in list prices by default; models not in it add nothing.
    pub prices: graphloom_llm::PriceTable,
    /// The cron scheduler (on by default).
    pub crons: CronConfig,
    /// Webhook deliveries: signature secret, address guard, timeout, retries.
    pub webhooks: WebhookConfig,
    /// Thread and store item expiry, and the sweeper's pace.
    pub retention: RetentionConfig,
    /// The store's vector index: with one, a store search's `query` ranks the items by
    /// similarity (the seeds' memory searches); without, the query is ignored. Graphloom's
    /// command reads it from `GRAPHLOOM_EMBEDDINGS` (`graphloom_llm::index_from_spec`).
    pub store_index: Option<graphloom_core::store::IndexConfig>,
}

impl ServerConfig {
    /// Defaults on a SQLite file.
    #[must_use]
    pub fn sqlite(path: impl Into<PathBuf>) -> Self {
        Self::new(Database::Sqlite(path.into()))
    }
    /// Defaults on PostgreSQL.
    #[must_use]
    pub fn postgres(url: impl Into<String>) -> Self {
        Self::new(Database::Postgres(url.into()))
    }
    fn new(database: Database) -> Self {
        Self {
            database,
            workers: 8,
            lease: Duration::from_secs(30),
            heartbeat: None,
            run_timeout: Some(Duration::from_secs(3600)),
            api_keys: HashMap::new(),
            public_system_routes: false,
            body_limit: 10 * 1024 * 1024,
            cors_origins: DEFAULT_CORS_ORIGINS.iter().map(|o| (*o).to_owned()).collect(),
            shutdown_grace: Duration::from_secs(10),
            prices: graphloom_llm::PriceTable::builtin(),
            crons: CronConfig::default(),
            webhooks: WebhookConfig::default(),
            retention: RetentionConfig::default(),
            store_index: None,
        }
    }

    /// How often a worker renews its lease: [`heartbeat`](Self::heartbeat), or a third of
    /// the lease.
    #[must_use]
    pub fn heartbeat_interval(&self) -> Duration {
        self.heartbeat.unwrap_or(self.lease / 3)
    }

    /// Check the settings that must agree with each other.
    ///
    /// # Errors
    /// The first setting that does not fit.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.lease.is_zero() {
            return Err(ConfigError::ZeroLease);
        }
        let every = self.heartbeat_interval();
        if every.is_zero() || every >= self.lease {
            return Err(ConfigError::Heartbeat {
                heartbeat: every,
                lease: self.lease,
            });
        }
        Ok(())
    }
}

/// Settings that do not agree with each other.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// [`ServerConfig::lease`] is zero.
    #[error("lease must be longer than zero")]
    ZeroLease,
    /// [`ServerConfig::heartbeat_interval`] is zero or not shorter than the lease.
    #[error("heartbeat ({heartbeat:?}) must be longer than zero and shorter than the lease ({lease:?})")]
    Heartbeat {
        /// The heartbeat interval.
        heartbeat: Duration,
        /// The lease.
        lease: Duration,
    },
}
