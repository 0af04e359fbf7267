//! Start-up: [`ServerBuilder`] opens the database, compiles the graphs and creates their
//! system assistants; [`Server`] serves the routes and runs the workers.

use crate::broker::Broker;
use crate::config::ServerConfig;
use crate::db::{Db, DbError};
use crate::host::{GraphDeps, GraphFactory, HostedGraph};
use crate::metrics::Metrics;
use crate::models::{now_rfc3339, Assistant};
use crate::service::assistants::system_assistant_id;
pub use crate::start_error::StartError;
use crate::state::AppState;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::{watch, Notify};

/// Builds a [`Server`].
pub struct ServerBuilder {
    config: ServerConfig,
    graphs: Vec<(String, GraphFactory)>,
    auth: Option<Arc<dyn crate::auth::DynAuth>>,
    custom: crate::custom::Custom,
    samples: BTreeMap<String, serde_json::Value>,
    models: BTreeMap<String, String>,
    mirror: Option<Arc<dyn crate::host::ThreadCheckpoints>>,
}

impl ServerBuilder {
    /// A builder with these settings.
    #[must_use]
    pub fn new(config: ServerConfig) -> Self {
        Self {
            config,
            graphs: Vec::new(),
            auth: None,
            custom: crate::custom::Custom::default(),
            samples: BTreeMap::new(),
            models: BTreeMap::new(),
            mirror: None,
        }
    }

    /// Delete, copy and prune the threads of `mirror` (checkpoints of the same threads kept
    /// by a saver of the graphs' own) with the server's checkpoints (see
    /// [`crate::host::mirror`]).
    #[must_use]
    pub fn mirror_checkpoints(mut self, mirror: Arc<dyn crate::host::ThreadCheckpoints>) -> Self {
        self.mirror = Some(mirror);
        self
    }

    /// Authenticate and authorise requests with `auth` (see [`crate::auth`]) instead of
    /// [`ServerConfig::api_keys`], which are then not read.
    #[must_use]
    pub fn auth(mut self, auth: impl crate::auth::Auth) -> Self {
        self.auth = Some(Arc::new(auth));
        self
    }

    /// Serve `router`'s routes beside the server's, behind its auth: a request that does
    /// not authenticate is refused with 401 before the route runs, and handlers read the
    /// caller with the [`Identity`](crate::auth::Identity) extractor
    /// (`Extension<Identity>`). The paths must not overlap the server's (axum refuses
    /// overlapping routes when the router is built).
    #[must_use]
    pub fn routes(mut self, router: axum::Router) -> Self {
        self.custom.routes.push(router);
        self
    }

    /// Serve `router`'s routes beside the server's without auth (a health check, a
    /// webhook receiver with its own check).
    #[must_use]
    pub fn public_routes(mut self, router: axum::Router) -> Self {
        self.custom.public.push(router);
        self
    }

    /// Answer the requests no route matches (the server's, the user's, the console's) with
    /// `router` instead of the JSON 404 `no such route`, without auth: an app of the
    /// user's own mounted beside the server (the Python package's `http.app`), whose
    /// routes never shadow the server's.
    #[must_use]
    pub fn fallback(mut self, router: axum::Router) -> Self {
        self.custom.fallback = Some(router);
        self
    }

    /// Wrap every route (the server's and the user's) in a tower `layer`, as
    /// `axum::Router::layer` does. Behind auth it runs after authentication (the
    /// request's [`Identity`](crate::auth::Identity) is in its extensions) and before the
    /// handler; a layer added later wraps those added before it.
    #[must_use]
    pub fn layer<L>(mut self, layer: L) -> Self
    where
        L: tower::Layer<axum::routing::Route> + Clone + Send + Sync + 'static,
        L::Service: tower::Service<axum::extract::Request> + Clone + Send + Sync + 'static,
        <L::Service as tower::Service<axum::extract::Request>>::Response:
            axum::response::IntoResponse + 'static,
        <L::Service as tower::Service<axum::extract::Request>>::Error:
            Into<std::convert::Infallible> + 'static,
        <L::Service as tower::Service<axum::extract::Request>>::Future: Send + 'static,
    {
        self.custom.push_layer(layer);
        self
    }

    /// Register a graph under `graph_id`; it gets a system assistant.
    #[must_use]
    pub fn graph(mut self, graph_id: impl Into<String>, factory: GraphFactory) -> Self {
        self.graphs.push((graph_id.into(), factory));
        self
    }

    /// An example input of graph `graph_id`: the console's start form shows it.
    #[must_use]
    pub fn sample_input(mut self, graph_id: impl Into<String>, input: serde_json::Value) -> Self {
        self.samples.insert(graph_id.into(), input);
        self
    }

    /// The model graph `graph_id` answers with (`scripted` for a canned demo model, or a
    /// model string such as `openai:gpt-4o-mini`): `/info` lists it under `models`, the
    /// graph's system assistant carries it as `metadata.model`, the console shows it.
    #[must_use]
    pub fn model(mut self, graph_id: impl Into<String>, model: impl Into<String>) -> Self {
        self.models.insert(graph_id.into(), model.into());
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
        } = crate::db::open(
            &self.config.database,
            self.config.retention.store_ttl,
            self.config.store_index.clone(),
        )
        .await?;
        let checkpointer = match self.mirror {
            Some(mirror) => crate::host::Mirrored::wrap(checkpointer, mirror),
            None => checkpointer,
        };
        let deps = GraphDeps::new(Arc::clone(&checkpointer), Arc::clone(&store));
        let (graphs, validators) = compile_graphs(&self.graphs, &deps)?;
        create_system_assistants(db.as_ref(), &graphs, &self.models).await?;
        let (shutdown, _) = watch::channel(false);
        let state = Arc::new(AppState {
            db,
            graphs,
            checkpointer,
            store,
            broker: Broker::default(),
            metrics: Metrics::new(),
            graph_metrics: deps.metrics.clone(),
            worker_id: uuid::Uuid::new_v4().to_string(),
            wake: Notify::new(),
            slots: std::sync::OnceLock::new(),
            start_claimed: crate::worker::spawn_claimed,
            local: Mutex::new(HashMap::new()),
            shutdown,
            validators,
            openapi: std::sync::OnceLock::new(),
            auth: self
                .auth
                .unwrap_or_else(|| crate::auth::from_config(&self.config.api_keys)),
            config: self.config,
            file_lock: Mutex::new(file_lock),
            thread_signals: crate::signals::ThreadSignals::default(),
            samples: self.samples,
            models: self.models,
        });
        Ok(Server {
            state,
            custom: Arc::new(self.custom),
        })
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
        if !g.validates_input_schema() {
            graphs.insert(id.clone(), g);
            continue;
        }
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

/// Create each graph's system assistant (owner `""`), unless it exists; one that exists
/// gets the graph's model into its metadata when that changed since.
async fn create_system_assistants(
    db: &dyn Db,
    graphs: &BTreeMap<String, Arc<dyn HostedGraph>>,
    models: &BTreeMap<String, String>,
) -> Result<(), StartError> {
    for id in graphs.keys() {
        let now = now_rfc3339();
        let mut metadata = serde_json::Map::new();
        metadata.insert("created_by".into(), "system".into());
        if let Some(m) = models.get(id) {
            metadata.insert("model".into(), m.clone().into());
        }
        let a = Assistant {
            assistant_id: system_assistant_id(id),
            graph_id: id.clone(),
            config: serde_json::json!({}),
            context: serde_json::json!({}),
            created_at: now.clone(),
            updated_at: now,
            metadata: metadata.clone(),
            version: 1,
            name: id.clone(),
            description: None,
        };
        match db.create_assistant("", &a).await {
            Ok(_) => {}
            Err(DbError::Conflict(_)) => {
                let Some(model) = models.get(id) else { continue };
                let existing = db
                    .get_assistant("", &a.assistant_id)
                    .await
                    .map_err(StartError::database("reading the system assistants"))?;
                if existing.is_some_and(|e| e.metadata.get("model").and_then(|v| v.as_str()) != Some(model)) {
                    let patch = crate::db::AssistantPatch {
                        metadata: Some(metadata),
                        ..Default::default()
                    };
                    db.patch_assistant("", &a.assistant_id, patch)
                        .await
                        .map_err(StartError::database("updating the system assistants"))?;
                }
            }
            Err(e) => return Err(StartError::database("creating the system assistants")(e)),
        }
    }
    Ok(())
}

/// A built server: call [`Server::serve`] (or take the [`Server::router`] and run the
/// workers with [`Server::start_workers`]).
#[derive(Clone)]
pub struct Server {
    pub(crate) state: Arc<AppState>,
    /// The user's routes and layers, mounted by [`Server::router`].
    custom: Arc<crate::custom::Custom>,
}

impl Server {
    /// A builder.
    #[must_use]
    pub fn builder(config: ServerConfig) -> ServerBuilder {
        ServerBuilder::new(config)
    }

    /// The HTTP routes.
    pub fn router(&self) -> axum::Router {
        crate::http::router(Arc::clone(&self.state), &self.custom)
    }

    /// Start the worker pool and the TTL sweeper; they stop at [`Server::shutdown`]. Until
    /// then requests only queue runs; once started, a request that finds a worker slot
    /// free claims its run as it creates it and starts it at once, and the workers take
    /// the rest from the queue.
    pub fn start_workers(&self) -> Vec<tokio::task::JoinHandle<()>> {
        crate::worker::start(Arc::clone(&self.state))
    }

    /// Begin a graceful shutdown: stop claiming runs and drain the running ones. Each stops
    /// at its next step boundary, its checkpoint saved, and goes back to the queue for
    /// another replica (or this server, restarted) to continue. A run whose step is still
    /// running after `shutdown_grace` (or whose graph cannot drain) is stopped then, keeping
    /// its finished writes, and goes back to the queue too.
    pub fn shutdown(&self) {
        let _ = self.state.shutdown.send(true);
        self.state.drain_local();
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

    /// Threads that thread-protocol streams (SSE or WebSocket) of this process follow now.
    #[must_use]
    pub fn followed_threads(&self) -> usize {
        self.state.thread_signals.followed()
    }

    /// The registered graph ids.
    #[must_use]
    pub fn graph_ids(&self) -> Vec<String> {
        self.state.graphs.keys().cloned().collect()
    }
}
