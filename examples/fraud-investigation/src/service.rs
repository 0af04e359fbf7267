//! The service layer (TDD-002 §10-11): start an investigation under the run timeout,
//! record `TIMED_OUT` / `FAILED`, resume after a crash, open the database.

use crate::config::Settings;
use crate::graph::{build_investigation_graph, GraphParts, COMPLETION};
use crate::metrics::Metrics;
use crate::state::{InvestigationState, InvestigationStateUpdate, InvestigationStatus};
use crate::tools::ToolRegistry;
use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::store::DynStore;
use graphloom_core::{CompiledGraph, Error, RunConfig, RunInput};
use graphloom_llm::DynChatModel;
use std::path::PathBuf;
use std::sync::Arc;
use tracing::Instrument;

/// Where investigations are persisted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database {
    /// A SQLite file (checkpoints and audit store in one file).
    Sqlite(PathBuf),
    /// A PostgreSQL URL.
    Postgres(String),
}

/// The checkpointer and store of `db`.
///
/// # Errors
/// When the database cannot be opened or migrated.
pub async fn open_database(
    db: &Database,
) -> graphloom_core::Result<(Arc<dyn DynCheckpointer>, Arc<dyn DynStore>)> {
    match db {
        Database::Sqlite(path) => {
            let saver = graphloom_sqlite::SqliteSaver::open(path).await?;
            let store = graphloom_sqlite::SqliteStore::open(path).await?;
            Ok((Arc::new(saver), Arc::new(store)))
        }
        Database::Postgres(url) => {
            let saver = graphloom_postgres::PostgresSaver::connect(url)
                .await?
                .with_hook(crate::record::RecordHook);
            // The checkpoint tables and the investigation record's (`crate::record`).
            saver.migrate().await?;
            let store = graphloom_postgres::PostgresStore::from_pool(saver.pool().clone());
            Ok((Arc::new(saver), Arc::new(store)))
        }
    }
}

/// A service error.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// No investigation with this id.
    #[error("no state found for investigation {0}")]
    NotFound(String),
    /// The graph or its storage failed, and the failure could not be recorded.
    #[error(transparent)]
    Graph(#[from] Error),
}

/// Runs and resumes investigations.
pub struct InvestigationService {
    graph: CompiledGraph<InvestigationState>,
    settings: Settings,
    metrics: Arc<Metrics>,
    planner_model: bool,
}

impl std::fmt::Debug for InvestigationService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InvestigationService")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl InvestigationService {
    /// A service over a graph built from these parts.
    ///
    /// # Errors
    /// When the graph does not compile.
    pub fn new(parts: &GraphParts) -> graphloom_core::Result<Self> {
        Ok(Self {
            graph: build_investigation_graph(parts)?,
            settings: parts.settings.clone(),
            metrics: Arc::clone(&parts.metrics),
            planner_model: parts.llm.is_some(),
        })
    }

    /// A service with the standard tools over the bundled data set.
    ///
    /// # Errors
    /// When the data set or the graph is broken.
    pub fn standard(
        settings: Settings,
        llm: Option<Arc<dyn DynChatModel>>,
        checkpointer: Arc<dyn DynCheckpointer>,
        store: Option<Arc<dyn DynStore>>,
    ) -> anyhow::Result<Self> {
        let data = crate::data::Dataset::bundled()?;
        let registry = ToolRegistry::standard(data, &settings, llm.clone())?;
        Ok(Self::new(&GraphParts {
            registry: Arc::new(registry),
            llm,
            settings,
            metrics: Arc::new(Metrics::new()),
            checkpointer,
            store,
        })?)
    }

    /// The compiled graph.
    #[must_use]
    pub fn graph(&self) -> &CompiledGraph<InvestigationState> {
        &self.graph
    }

    /// The metrics.
    #[must_use]
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The settings.
    #[must_use]
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The run config of an investigation: its thread, the run timeout, a step budget
    /// that fits `max_steps` planner/executor round trips.
    #[must_use]
    pub fn run_config(&self, investigation_id: &str) -> RunConfig {
        let lg = &self.settings.langgraph;
        RunConfig::thread(investigation_id)
            .timeout(lg.investigation_timeout)
            .recursion_limit(2 * lg.max_steps as usize + 10)
    }

    /// Run a complete investigation of `transaction_id` under a new id (UUID v7).
    ///
    /// # Errors
    /// Only when the graph's storage fails; a failed or timed-out run is returned as a
    /// state with status `FAILED` / `TIMED_OUT`.
    pub async fn run_investigation(&self, transaction_id: &str) -> Result<InvestigationState, ServiceError> {
        let id = uuid::Uuid::now_v7().to_string();
        self.start(&id, transaction_id).await
    }

    /// Run a complete investigation under a given id.
    ///
    /// # Errors
    /// See [`Self::run_investigation`].
    pub async fn start(
        &self,
        investigation_id: &str,
        transaction_id: &str,
    ) -> Result<InvestigationState, ServiceError> {
        let initial = self
            .settings
            .initial_state(investigation_id, transaction_id, self.planner_model);
        let input = initial.to_input().map_err(Error::Decode)?;
        let span = tracing::info_span!("agent.investigation", investigation_id = %investigation_id, transaction_id = %transaction_id);
        self.drive(RunInput::Update(input), investigation_id)
            .instrument(span)
            .await
    }

    /// Resume an interrupted investigation (a crash, a timeout, a failure) from its last
    /// checkpoint: finished tools are not run again. A finished investigation is returned
    /// as it is.
    ///
    /// # Errors
    /// [`ServiceError::NotFound`] for an unknown id; storage failures.
    pub async fn resume_investigation(
        &self,
        investigation_id: &str,
    ) -> Result<InvestigationState, ServiceError> {
        let cfg = RunConfig::thread(investigation_id);
        let snap = self.graph.get_state(&cfg).await?;
        if snap.metadata.is_none() {
            return Err(ServiceError::NotFound(investigation_id.to_owned()));
        }
        if snap.next.is_empty() {
            return Ok(snap.values);
        }
        let span =
            tracing::info_span!("agent.investigation", investigation_id = %investigation_id, resumed = true);
        self.drive(RunInput::Continue, investigation_id)
            .instrument(span)
            .await
    }

    /// The stored state of an investigation.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn load_state(
        &self,
        investigation_id: &str,
    ) -> Result<Option<InvestigationState>, ServiceError> {
        let snap = self.graph.get_state(&RunConfig::thread(investigation_id)).await?;
        Ok(snap.metadata.map(|_| snap.values))
    }

    async fn drive(
        &self,
        input: RunInput<InvestigationState>,
        id: &str,
    ) -> Result<InvestigationState, ServiceError> {
        match self.graph.invoke_input(input, self.run_config(id)).await {
            Ok(out) => Ok(out.values),
            Err(Error::RunTimeout { after_ms }) => {
                tracing::warn!(investigation_id = %id, after_ms, "investigation timed out");
                self.record_end(
                    id,
                    InvestigationStatus::TimedOut,
                    timeout_reason(std::time::Duration::from_millis(after_ms)),
                )
                .await
            }
            Err(e) => {
                tracing::error!(investigation_id = %id, error = %e, "investigation failed");
                match self
                    .record_end(id, InvestigationStatus::Failed, e.to_string())
                    .await
                {
                    Ok(s) => Ok(s),
                    Err(_) => Err(e.into()),
                }
            }
        }
    }

    /// Persist a terminal status written from outside the graph: [`record_end`].
    async fn record_end(
        &self,
        id: &str,
        status: InvestigationStatus,
        error: String,
    ) -> Result<InvestigationState, ServiceError> {
        Ok(record_end(&self.graph, &self.metrics, id, status, error).await?)
    }
}

/// Why an investigation timed out, as its `error` says: `investigation timed out after
/// 120s`.
#[must_use]
pub fn timeout_reason(after: std::time::Duration) -> String {
    format!("investigation timed out after {}s", after.as_secs_f64())
}

/// Persist a terminal status (`TIMED_OUT`, `FAILED`) and its reason into the
/// investigation on thread `id` (the investigation id in the service layer, the server's
/// thread when hosted), written from outside the graph as the completion node (so no further node is scheduled by it; a task the
/// run left unfinished stays pending and [`InvestigationService::resume_investigation`]
/// can still finish the investigation), and count it in the completion metric. The
/// service layer calls it when a run fails or times out, and so does the end hook of the
/// graph hosted by `graphloom serve`.
///
/// Idempotent: an investigation that already has this status and a reason is returned as
/// it is, nothing written or counted again (a hosted run's end hook may be called more
/// than once for one end).
///
/// # Errors
/// When the state cannot be read or written.
pub async fn record_end(
    graph: &CompiledGraph<InvestigationState>,
    metrics: &Metrics,
    id: &str,
    status: InvestigationStatus,
    reason: String,
) -> graphloom_core::Result<InvestigationState> {
    let cfg = RunConfig::thread(id);
    let before = graph.get_state(&cfg).await?.values;
    if before.status == status && before.error.is_some() {
        return Ok(before);
    }
    let update = InvestigationStateUpdate::new()
        .status(status)
        .error(Some(reason))
        .completed_at(Some(graphloom_core::checkpoint::now_rfc3339()));
    graph.update_state(&cfg, Some(update), Some(COMPLETION)).await?;
    let state = graph.get_state(&cfg).await?.values;
    metrics.investigation_finished(status.as_str(), state.severity.as_str(), state.step_count);
    Ok(state)
}
