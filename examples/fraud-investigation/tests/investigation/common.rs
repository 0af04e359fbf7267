//! Shared setup: a service over a SQLite file in a temp dir, scripted planner answers,
//! tools that count their runs.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use fraud_investigation::tools::{standard_tools, ToolFailure, ToolOutcome};
use fraud_investigation::{
    Dataset, GraphParts, InvestigationService, InvestigationState, InvestigationTool, Metrics, Settings,
    ToolRegistry,
};
use futures::future::BoxFuture;
use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::store::DynStore;
use graphloom_llm::{DynChatModel, Reply};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Settings for tests: generous limits, so only the limit a test lowers is ever hit.
pub fn settings() -> Settings {
    let mut s = Settings::default();
    s.langgraph.tool_timeout = Duration::from_secs(20);
    s.langgraph.investigation_timeout = Duration::from_secs(60);
    s.planner.timeout = Duration::from_secs(5);
    s
}

/// A planner answer.
pub fn choose(tool: &str, reason: &str, confidence: f64) -> Reply {
    Reply::json(json!({"tool": tool, "reason": reason, "confidence": confidence}))
}

/// Checkpointer and store on one SQLite file.
pub async fn sqlite(path: &Path) -> (Arc<dyn DynCheckpointer>, Arc<dyn DynStore>) {
    let saver = graphloom_sqlite::SqliteSaver::open(path).await.unwrap();
    let store = graphloom_sqlite::SqliteStore::open(path).await.unwrap();
    (Arc::new(saver), Arc::new(store))
}

/// Finished runs per tool name.
pub type Counts = Arc<Mutex<BTreeMap<String, usize>>>;

/// Wraps a tool and counts its finished runs.
pub struct Counting {
    pub inner: Arc<dyn InvestigationTool>,
    pub counts: Counts,
}

impl InvestigationTool for Counting {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn execute(
        &self,
        state: Arc<InvestigationState>,
    ) -> BoxFuture<'static, Result<ToolOutcome, ToolFailure>> {
        let fut = self.inner.execute(state);
        let counts = Arc::clone(&self.counts);
        let name = self.inner.name().to_owned();
        Box::pin(async move {
            let out = fut.await;
            *counts.lock().unwrap().entry(name).or_default() += 1;
            out
        })
    }
}

/// The standard tools, each wrapped in [`Counting`], with `replace` swapped in by name.
pub fn registry(
    settings: &Settings,
    counts: &Counts,
    replace: Vec<Arc<dyn InvestigationTool>>,
) -> ToolRegistry {
    let mut r = ToolRegistry::new();
    for t in standard_tools(Dataset::bundled().unwrap(), settings, None) {
        r.register(Arc::new(Counting {
            inner: t,
            counts: Arc::clone(counts),
        }))
        .unwrap();
    }
    for t in replace {
        r.replace(Arc::new(Counting {
            inner: t,
            counts: Arc::clone(counts),
        }));
    }
    r
}

/// A service and what a test inspects.
pub struct Setup {
    pub service: InvestigationService,
    pub metrics: Arc<Metrics>,
    pub store: Arc<dyn DynStore>,
    pub counts: Counts,
}

/// A service over `path` with `llm` as planner and the standard tools (some replaced).
pub async fn setup(
    path: &Path,
    settings: Settings,
    llm: Option<Arc<dyn DynChatModel>>,
    replace: Vec<Arc<dyn InvestigationTool>>,
    counts: Counts,
) -> Setup {
    let (saver, store) = sqlite(path).await;
    let metrics = Arc::new(Metrics::new());
    let parts = GraphParts {
        registry: Arc::new(registry(&settings, &counts, replace)),
        llm,
        settings,
        metrics: Arc::clone(&metrics),
        checkpointer: saver,
        store: Some(Arc::clone(&store)),
    };
    Setup {
        service: InvestigationService::new(&parts).unwrap(),
        metrics,
        store,
        counts,
    }
}

/// Tool names of the execution records, in order.
pub fn executed(s: &InvestigationState) -> Vec<(String, String)> {
    s.tool_executions
        .iter()
        .map(|e| (e.tool_name.clone(), e.status.as_str().to_owned()))
        .collect()
}

/// Selected tools of the planner decisions, in order.
pub fn decided(s: &InvestigationState) -> Vec<String> {
    s.planner_decisions
        .iter()
        .map(|d| d.selected_tool.clone())
        .collect()
}
