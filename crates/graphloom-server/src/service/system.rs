//! What the server is and how it is doing: its graphs, and its metrics with the queue's
//! gauges read fresh from the database.

use crate::metrics::StatusLabel;
use crate::models::RunStatus;
use crate::state::AppState;

/// The registered graph ids.
pub(crate) fn graph_ids(state: &AppState) -> Vec<&str> {
    state.graphs.keys().map(String::as_str).collect()
}

/// The metrics in the OpenMetrics text format (the server's, then the graphs' own), the queue depth and the runs by status
/// counted now (a count the database cannot give keeps its last value).
pub(crate) async fn metrics_text(state: &AppState) -> String {
    if let Ok(depth) = state.db.queue_depth().await {
        state.metrics.queue_depth.set(depth);
    }
    if let Ok(counts) = state.db.runs_by_status().await {
        for s in [
            RunStatus::Pending,
            RunStatus::Running,
            RunStatus::Error,
            RunStatus::Success,
            RunStatus::Timeout,
            RunStatus::Interrupted,
        ] {
            let n = counts.iter().find(|(st, _)| *st == s).map_or(0, |(_, n)| *n);
            state
                .metrics
                .runs_current
                .get_or_create(&StatusLabel {
                    status: s.as_str().into(),
                })
                .set(n);
        }
    }
    let mut text = state.metrics.render();
    let eof = text.ends_with("# EOF\n");
    if eof {
        text.truncate(text.len() - "# EOF\n".len());
    }
    state.graph_metrics.encode_into(&mut text);
    if eof {
        text.push_str("# EOF\n");
    }
    text
}
