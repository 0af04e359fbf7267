//! [`RunEventRecord`]: one stored event of a run's stream.

use serde_json::Value;

/// One SSE event of a run: `id` counts from 0 within the run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunEventRecord {
    /// Position in the run's log.
    pub id: u64,
    /// Event name (`values`, `updates|ns`, `messages`, ...).
    pub event: String,
    /// Payload.
    pub data: Value,
}
