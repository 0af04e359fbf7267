//! Start-up: [`ServerBuilder`] opens the database, compiles the graphs and creates their
//! system assistants; [`Server`] serves the routes and runs the workers.

use crate::broker::Broker;
use crate::config::{ConfigError, Database, ServerConfig};
use crate::db::file_lock::FileLock;
use crate::db::{Db, DbError, PgDb, SqliteDb};
use crate::hosted::{GraphDeps, GraphFactory, HostedGraph};
use crate::metrics::Metrics;
use crate::models::{now_rfc3339, Assistant};
use crate::service::assistants::system_assistant_id;
use crate::state::AppState;
use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::store::DynStore;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::{watch, Notify};

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
        let mut file_lock = None;
        let (db, checkpointer, store): (Arc<dyn Db>, Arc<dyn DynCheckpointer>, Arc<dyn DynStore>) =
            match &self.config.database {
                Database::Sqlite(path) => {
                    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                        std::fs::create_dir_all(dir).map_err(|source| StartError::CreateDir {
                            path: dir.to_owned(),
                            source,
                        })?;
                    }
                    // This process alone executes the file's runs from here on.
                    file_lock = Some(FileLock::acquire(path).map_err(StartError::Locked)?);
                    // One writer for the checkpoints, the store and the server's tables:
                    // their commits for concurrent runs are grouped into shared transactions.
                    let shared = graphloom_sqlite::SqliteDatabase::open(
                        graphloom_sqlite::SqliteOptions::new(path.clone()),
                    )
                    .await
                    .map_err(StartError::storage("SQLite database"))?;
                    let saver = shared.saver();
                    let store = shared.store().await.map_err(StartError::storage("store"))?;
                    let db = SqliteDb::new(shared)
                        .await
                        .map_err(StartError::database("opening the server's tables"))?;
                    // With the lock held, runs still marked running were left by a process
                    // that died: the workers take them over at once, not a lease later.
                    let orphans = db
                        .expire_leases()
                        .await
                        .map_err(StartError::database("taking over orphaned runs"))?;
                    if orphans > 0 {
                        tracing::info!(
                            runs = orphans,
                            "taking over runs left running by a stopped server"
                        );
                    }
                    (Arc::new(db), Arc::new(saver), Arc::new(store))
                }
                Database::Postgres(url) => {
                    let saver = graphloom_postgres::PostgresSaver::connect(url)
                        .await
                        .map_err(StartError::storage("PostgreSQL checkpointer"))?;
                    let store = graphloom_postgres::PostgresStore::connect(url)
                        .await
                        .map_err(StartError::storage("PostgreSQL store"))?;
                    let db = PgDb::connect(url)
                        .await
                        .map_err(StartError::database("opening the server's tables"))?;
                    (Arc::new(db), Arc::new(saver), Arc::new(store))
                }
            };
        let deps = GraphDeps {
            checkpointer: Arc::clone(&checkpointer),
            store: Arc::clone(&store),
        };
        let (graphs, validators) = compile_graphs(&self.graphs, &deps)?;
        create_system_assistants(db.as_ref(), &graphs).await?;
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

/// Compile the registered graphs, and the validators of their input schemas.
fn compile_graphs(factories: &[(String, GraphFactory)], deps: &GraphDeps) -> Result<Graphs, StartError> {
    let mut graphs = BTreeMap::new();
    let mut validators = BTreeMap::new();
    for (id, factory) in factories {
        let g = factory(deps).map_err(|source| StartError::Graph {
            graph_id: id.clone(),
            source,
        })?;
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
    Ok((graphs, validators))
}

/// The compiled graphs and their input validators, by graph id.
type Graphs = (
    BTreeMap<String, Arc<dyn HostedGraph>>,
    BTreeMap<String, Arc<jsonschema::Validator>>,
);

/// Create each graph's system assistant (owner `""`), unless it exists.
async fn create_system_assistants(
    db: &dyn Db,
    graphs: &BTreeMap<String, Arc<dyn HostedGraph>>,
) -> Result<(), StartError> {
    for id in graphs.keys() {
        let now = now_rfc3339();
        let a = Assistant {
            assistant_id: system_assistant_id(id),
            graph_id: id.clone(),
            config: serde_json::json!({}),
            context: serde_json::json!({}),
            created_at: now.clone(),
            updated_at: now,
            metadata: serde_json::from_value(serde_json::json!({"created_by": "system"})).unwrap_or_default(),
            version: 1,
            name: id.clone(),
            description: None,
        };
        match db.create_assistant("", &a).await {
            Ok(_) | Err(DbError::Conflict(_)) => {}
            Err(e) => return Err(StartError::database("creating the system assistants")(e)),
        }
    }
    Ok(())
}

/// Start-up failure, with its cause as the error's source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// Settings that do not agree with each other.
    #[error("server start: {0}")]
    Config(#[from] ConfigError),
    /// The SQLite file's directory could not be created.
    #[error("server start: cannot create {}: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Another server holds the SQLite file, or its lock file cannot be used (the message
    /// names the file and what to do).
    #[error("server start: {0}")]
    Locked(String),
    /// The checkpointer or the store could not be opened.
    #[error("server start: opening the {what}: {source}")]
    Storage {
        /// What was being opened.
        what: &'static str,
        /// Why it failed.
        #[source]
        source: graphloom_core::Error,
    },
    /// The server's own tables could not be opened or written.
    #[error("server start: {what}: {source}")]
    Database {
        /// What was being done.
        what: &'static str,
        /// Why it failed.
        #[source]
        source: DbError,
    },
    /// A graph's factory failed.
    #[error("server start: graph `{graph_id}`: {source}")]
    Graph {
        /// The graph.
        graph_id: String,
        /// Why it did not compile.
        #[source]
        source: graphloom_core::Error,
    },
}

impl StartError {
    fn storage(what: &'static str) -> impl FnOnce(graphloom_core::Error) -> Self {
        move |source| Self::Storage { what, source }
    }

    fn database(what: &'static str) -> impl FnOnce(DbError) -> Self {
        move |source| Self::Database { what, source }
    }
}

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
