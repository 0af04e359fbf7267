//! [`RunEventRecord`]: one stored event of a run's stream.

use serde_json::Value;
use std::sync::Arc;

/// One SSE event of a run: `id` counts from 0 within the run. The payload is shared: the
/// run's log, its readers and the writer that stores it hold one copy.
#[derive(Clone, Debug, PartialEq)]
pub struct RunEventRecord {
    /// Position in the run's log.
    pub id: u64,
    /// Event name (`values`, `updates|ns`, `messages`, ...).
    pub event: String,
    /// Payload.
    pub data: Arc<Value>,
}
