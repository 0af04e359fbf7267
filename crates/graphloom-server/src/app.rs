//! The server: configuration, start-up (persistence, graphs, system assistants), workers.

use crate::broker::Broker;
use crate::db::file_lock::FileLock;
pub use crate::db::Database;
use crate::db::Db;
use crate::hosted::{GraphDeps, GraphFactory, HostedGraph};
use crate::metrics::Metrics;
use crate::models::{now_rfc3339, Assistant, CancelAction};
use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::store::DynStore;
use graphloom_core::CancelToken;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{watch, Notify};

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
    /// Allowed CORS origins (`["*"]` for any); empty: no CORS headers.
    pub cors_origins: Vec<String>,
    /// How long a graceful shutdown waits for running steps before stopping them (their
    /// finished writes are kept and the runs resume elsewhere or on restart).
    pub shutdown_grace: Duration,
    /// Prices of models, for the `graphloom_model_cost_usd` metric of AI messages whose
    /// `response_metadata` names the model (`model_name`) but carries no `cost_usd`. The
    /// built-in list prices by default; models not in it add nothing.
    pub prices: graphloom_llm::PriceTable,
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
            cors_origins: Vec::new(),
            shutdown_grace: Duration::from_secs(10),
            prices: graphloom_llm::PriceTable::builtin(),
        }
    }

    /// How often a worker renews its lease: [`heartbeat`](Self::heartbeat), or a third of
    /// the lease.
    #[must_use]
    pub fn heartbeat_interval(&self) -> Duration {
        self.heartbeat.unwrap_or(self.lease / 3)
    }

    /// Check the settings that must agree with each other.
    fn validate(&self) -> Result<(), StartError> {
        if self.lease.is_zero() {
            return Err(StartError("lease must be longer than zero".into()));
        }
        let every = self.heartbeat_interval();
        if every.is_zero() || every >= self.lease {
            return Err(StartError(format!(
                "heartbeat ({every:?}) must be longer than zero and shorter than the lease ({:?})",
                self.lease
            )));
        }
        Ok(())
    }
}

/// A run executing in this process.
pub(crate) struct LocalRun {
    pub thread_id: String,
    pub token: CancelToken,
    pub action: Mutex<Option<CancelAction>>,
}

/// Shared state of handlers and workers.
pub struct AppState {
    pub(crate) db: Arc<dyn Db>,
    pub(crate) graphs: BTreeMap<String, Arc<dyn HostedGraph>>,
    pub(crate) checkpointer: Arc<dyn DynCheckpointer>,
    pub(crate) store: Arc<dyn DynStore>,
    pub(crate) broker: Broker,
    pub(crate) metrics: Metrics,
    pub(crate) config: ServerConfig,
    pub(crate) worker_id: String,
    pub(crate) wake: Notify,
    /// Execution slots of this process's worker pool (set when the workers start).
    pub(crate) slots: std::sync::OnceLock<Arc<tokio::sync::Semaphore>>,
    pub(crate) local: Mutex<HashMap<String, Arc<LocalRun>>>,
    pub(crate) shutdown: watch::Sender<bool>,
    pub(crate) validators: BTreeMap<String, Arc<jsonschema::Validator>>,
    /// The OpenAPI document, generated when the router is built.
    pub(crate) openapi: std::sync::OnceLock<serde_json::Value>,
    /// The SQLite file's lock (none on PostgreSQL), released when [`Server::serve`] is
    /// done or the state is dropped.
    pub(crate) file_lock: Mutex<Option<FileLock>>,
}

impl AppState {
    /// Ask a run executing here to stop now.
    pub(crate) fn cancel_local(&self, run_id: &str, action: CancelAction) -> bool {
        let run = self
            .local
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(run_id)
            .cloned();
        match run {
            Some(r) => {
                *r.action.lock().unwrap_or_else(PoisonError::into_inner) = Some(action);
                r.token.cancel();
                true
            }
            None => false,
        }
    }

    /// Stop every run of a thread executing here.
    pub(crate) fn cancel_local_thread(&self, thread_id: &str, action: CancelAction) {
        let ids: Vec<String> = self
            .local
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(_, r)| r.thread_id == thread_id)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.cancel_local(&id, action);
        }
    }
}

/// The id of the system assistant of a graph: UUID v5 of the graph id, as the reference
/// server computes it, so clients that hard-code it keep working.
#[must_use]
pub fn system_assistant_id(graph_id: &str) -> String {
    let ns = uuid::Uuid::from_u128(0x6ba7_b821_9dad_11d1_80b4_00c0_4fd4_30c8);
    uuid::Uuid::new_v5(&ns, graph_id.as_bytes()).to_string()
}

/// Builds a [`Server`].
pub struct ServerBuilder {
    config: ServerConfig,
    graphs: Vec<(String, GraphFactory)>,
}

impl ServerBuilder {
    /// A builder with these settings.
    #[must_use]
    pub fn new(config: ServerConfig) -> Self {
        Self {
            config,
            graphs: Vec::new(),
        }
    }

    /// Register a graph under `graph_id`; it gets a system assistant.
    #[must_use]
    pub fn graph(mut self, graph_id: impl Into<String>, factory: GraphFactory) -> Self {
        self.graphs.push((graph_id.into(), factory));
        self
    }

    /// Open the database (running migrations), compile the graphs, create their system
    /// assistants.
    ///
    /// # Errors
    /// If the database cannot be opened or a graph does not compile.
    pub async fn build(self) -> Result<Server, StartError> {
        self.config.validate()?;
        let crate::db::Opened {
            db,
            checkpointer,
            store,
            file_lock,
        } = crate::db::open(&self.config.database).await.map_err(StartError)?;
        let deps = GraphDeps {
            checkpointer: Arc::clone(&checkpointer),
            store: Arc::clone(&store),
        };
        let mut graphs = BTreeMap::new();
        let mut validators = BTreeMap::new();
        for (id, factory) in &self.graphs {
            let g = factory(&deps).map_err(|e| StartError(format!("graph `{id}`: {e}")))?;
            let schema = g.input_schema();
            match jsonschema::validator_for(&schema) {
                Ok(v) => {
                    validators.insert(id.clone(), Arc::new(v));
                }
                Err(e) => {
                    tracing::warn!(graph = %id, error = %e, "input schema does not compile; input not validated")
                }
            }
            graphs.insert(id.clone(), g);
        }
        for id in graphs.keys() {
            let now = now_rfc3339();
            let a = Assistant {
                assistant_id: system_assistant_id(id),
                graph_id: id.clone(),
                config: serde_json::json!({}),
                context: serde_json::json!({}),
                created_at: now.clone(),
                updated_at: now,
                metadata: serde_json::from_value(serde_json::json!({"created_by": "system"}))
                    .unwrap_or_default(),
                version: 1,
                name: id.clone(),
                description: None,
            };
            match db.create_assistant("", &a).await {
                Ok(_) | Err(crate::db::DbError::Conflict(_)) => {}
                Err(e) => return Err(StartError(e.to_string())),
            }
        }
        let (shutdown, _) = watch::channel(false);
        let state = Arc::new(AppState {
            db,
            graphs,
            checkpointer,
            store,
            broker: Broker::default(),
            metrics: Metrics::new(),
            worker_id: uuid::Uuid::new_v4().to_string(),
            wake: Notify::new(),
            slots: std::sync::OnceLock::new(),
            local: Mutex::new(HashMap::new()),
            shutdown,
            validators,
            openapi: std::sync::OnceLock::new(),
            config: self.config,
            file_lock: Mutex::new(file_lock),
        });
        Ok(Server { state })
    }
}

/// Start-up failure.
#[derive(Debug, thiserror::Error)]
#[error("server start: {0}")]
pub struct StartError(pub String);

/// A built server: call [`Server::serve`] (or take the [`Server::router`] and run the
/// workers with [`Server::start_workers`]).
#[derive(Clone)]
pub struct Server {
    pub(crate) state: Arc<AppState>,
}

impl Server {
    /// A builder.
    #[must_use]
    pub fn builder(config: ServerConfig) -> ServerBuilder {
        ServerBuilder::new(config)
    }

    /// The HTTP routes.
    pub fn router(&self) -> axum::Router {
        crate::api::router(Arc::clone(&self.state))
    }

    /// Start the worker pool and the TTL sweeper; they stop at [`Server::shutdown`]. Until
    /// then requests only queue runs; once started, a request that finds a worker slot
    /// free claims its run as it creates it and starts it at once, and the workers take
    /// the rest from the queue.
    pub fn start_workers(&self) -> Vec<tokio::task::JoinHandle<()>> {
        crate::worker::start(Arc::clone(&self.state))
    }

    /// Begin a graceful shutdown: stop claiming runs, give running steps
    /// `shutdown_grace` to finish, then stop them keeping their finished writes.
    pub fn shutdown(&self) {
        let _ = self.state.shutdown.send(true);
        self.state.wake.notify_waiters();
    }

    /// Serve on `listener` with workers until `stop` completes, then shut down gracefully.
    /// On SQLite the database file's lock is released once the workers have stopped (or
    /// when the server is dropped), so another server may then start on the file.
    ///
    /// # Errors
    /// If the listener fails.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let workers = self.start_workers();
        let me = self.clone();
        let mut rx = self.state.shutdown.subscribe();
        // Without TCP_NODELAY a response written in two segments waits for the client's
        // delayed ACK (~40 ms on Linux) before its second part leaves.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "could not set TCP_NODELAY");
            }
        });
        let http = axum::serve(listener, self.router()).with_graceful_shutdown(async move {
            tokio::select! {
                () = stop => {}
                _ = rx.wait_for(|v| *v) => {}
            }
            me.shutdown();
        });
        let res = http.await;
        self.shutdown();
        for w in workers {
            let _ = w.await;
        }
        // No run of this process holds a lease any more: another server may use the file.
        drop(
            self.state
                .file_lock
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        res
    }

    /// The registered graph ids.
    #[must_use]
    pub fn graph_ids(&self) -> Vec<String> {
        self.state.graphs.keys().cloned().collect()
    }
}
