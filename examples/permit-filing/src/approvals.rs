//! Approvals of the approval gate: the durable record in the store (the source of truth
//! for a verdict), and the reviewer's verdict parsed from a resume value.

use graphloom_core::store::{DynStore, PutOptions};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

fn approvals_ns() -> Vec<String> {
    vec!["approvals".into()]
}

/// A reviewer's verdict, parsed from a resume value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Go ahead.
    Approved {
        /// Who decided.
        reviewer_id: Option<String>,
        /// Why.
        comment: Option<String>,
    },
    /// Do not.
    Rejected {
        /// Who decided.
        reviewer_id: Option<String>,
        /// Why.
        comment: Option<String>,
    },
    /// Not decided yet.
    Pending,
}

/// Parse a resume value: `"approved"`, `"rejected"`, `"pending"` (also `approve`, `reject`)
/// or `{"decision": ..., "reviewer_id": ..., "comment": ...}`, or LangChain's HITL response
/// `{"decisions": [{"type": "approve"}]}` (`reject` with an optional `message`, kept as the
/// comment; `edit` and `respond` are not offered for approvals). Anything else is `None`,
/// which the gate treats as "cannot evaluate" and pauses again.
#[must_use]
pub fn parse_verdict(value: &Value) -> Option<Verdict> {
    // LangChain's HITL response: the first decision rules (one action per request).
    if let Some(d) = value
        .get("decisions")
        .and_then(Value::as_array)
        .and_then(|d| d.first())
    {
        let comment = d.get("message").and_then(Value::as_str).map(str::to_owned);
        return match d.get("type").and_then(Value::as_str)? {
            "approve" => Some(Verdict::Approved {
                reviewer_id: None,
                comment,
            }),
            "reject" => Some(Verdict::Rejected {
                reviewer_id: None,
                comment,
            }),
            _ => None,
        };
    }
    let (decision, reviewer_id, comment) = match value {
        Value::String(s) => (s.as_str(), None, None),
        Value::Object(m) => {
            let text = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_owned);
            (
                m.get("decision").and_then(Value::as_str)?,
                text("reviewer_id"),
                text("comment"),
            )
        }
        _ => return None,
    };
    match decision.trim().to_ascii_lowercase().as_str() {
        "approved" | "approve" => Some(Verdict::Approved { reviewer_id, comment }),
        "rejected" | "reject" => Some(Verdict::Rejected { reviewer_id, comment }),
        "pending" => Some(Verdict::Pending),
        _ => None,
    }
}

/// The durable approval record (the source of truth for a verdict).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    /// Approval id.
    pub id: String,
    /// `pending`, `approved` or `rejected`.
    pub status: String,
    /// Checkpoint label.
    pub checkpoint_type: String,
    /// The frozen tool call, for mutation approvals.
    #[serde(default)]
    pub tool_call: Option<Value>,
    /// Who decided.
    #[serde(default)]
    pub reviewer_id: Option<String>,
    /// The reviewer's comment.
    #[serde(default)]
    pub comment: Option<String>,
    /// What the reviewer saw.
    #[serde(default)]
    pub snapshot: Value,
}

/// Read an approval's verdict. Soft-fails to `None` on a store error, a missing record or
/// one that does not parse: callers must treat `None` as "deny and pause again".
pub async fn get_approval_status(
    store: Option<&Arc<dyn DynStore>>,
    approval_id: &str,
) -> Option<ApprovalRecord> {
    let item = store?.get(&approvals_ns(), approval_id).await.ok()??;
    let record: ApprovalRecord = serde_json::from_value(item.value).ok()?;
    matches!(record.status.as_str(), "pending" | "approved" | "rejected").then_some(record)
}

pub(crate) async fn create_approval_request(
    store: Option<&Arc<dyn DynStore>>,
    record: &ApprovalRecord,
) -> Result<(), String> {
    let store = store.ok_or("no approval store")?;
    if let Ok(Some(_)) = store.get(&approvals_ns(), &record.id).await {
        return Ok(()); // created by an earlier attempt of the same task
    }
    let value = serde_json::to_value(record).map_err(|e| e.to_string())?;
    store
        .put(&approvals_ns(), &record.id, value, PutOptions::default())
        .await
        .map_err(|e| e.to_string())
}

/// Write a parsed verdict into a pending approval record (decided records stay decided).
pub(crate) async fn record_verdict(store: Option<&Arc<dyn DynStore>>, approval_id: &str, value: &Value) {
    let (status, reviewer_id, comment) = match parse_verdict(value) {
        Some(Verdict::Approved { reviewer_id, comment }) => ("approved", reviewer_id, comment),
        Some(Verdict::Rejected { reviewer_id, comment }) => ("rejected", reviewer_id, comment),
        Some(Verdict::Pending) | None => return,
    };
    let Some(mut record) = get_approval_status(store, approval_id).await else {
        return;
    };
    if record.status != "pending" {
        return;
    }
    record.status = status.to_owned();
    record.reviewer_id = reviewer_id;
    record.comment = comment;
    if let (Some(store), Ok(v)) = (store, serde_json::to_value(&record)) {
        if let Err(e) = store
            .put(&approvals_ns(), approval_id, v, PutOptions::default())
            .await
        {
            tracing::warn!("could not record the verdict of {approval_id}: {e}");
        }
    }
}
