//! Infrastructure ids come from the runtime, never from the model (ADR-007 §2.1).
//!
//! Tools and nodes resolve the user and the session with [`resolve_ids`]:
//!
//! 1. the run's immutable context ([`trusted_context`]): a [`MemoryContext`]
//!    (`RunConfig::context`), which `ToolRuntime::context` hands to tools, or, for a run
//!    hosted by `graphloom serve` with auth on, the authenticated identity the server puts
//!    in the run's JSON context (`langgraph_auth_user_id`; the session is the thread):
//!    a client's input cannot name another user;
//! 2. without one, the state's `user_id` / `session_id` (set by the caller's input; no node
//!    or tool writes them), with the thread id as the session when the state has none;
//! 3. without a user, the call fails: memory is never read or written for "nobody".
//!
//! The tool schemas have no id parameters at all, and every memory tool declares `user_id`,
//! `session_id` and `thread_id` as injected, so the tool node drops them from the model's
//! arguments before validation: a model that sends `"session_id": "someone-else"` is
//! ignored.

use serde_json::Value;

/// Names dropped from the model's tool arguments.
pub const INJECTED: [&str; 3] = ["user_id", "session_id", "thread_id"];

/// The immutable per-run context: who is talking, in which session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryContext {
    /// The authenticated user.
    pub user_id: String,
    /// The conversation session.
    pub session_id: String,
}

impl MemoryContext {
    /// A context.
    pub fn new(user_id: impl Into<String>, session_id: impl Into<String>) -> Self {
        Self {
            user_id: user_id.into(),
            session_id: session_id.into(),
        }
    }
}

/// Resolved ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ids {
    /// The user.
    pub user_id: String,
    /// The session.
    pub session_id: String,
}

/// Why no ids could be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no user for this run: pass a MemoryContext in the run config (or user_id in the input)")]
pub struct NoUser;

fn non_empty(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// The context that names the run's user: a typed [`MemoryContext`], else the identity a
/// server authenticated (`langgraph_auth_user_id` in a JSON context), in session
/// `thread_id` (`"default"` without a thread).
#[must_use]
pub fn trusted_context(
    typed: Option<&MemoryContext>,
    json: Option<&Value>,
    thread_id: Option<&str>,
) -> Option<MemoryContext> {
    if let Some(c) = typed {
        return Some(c.clone());
    }
    let user = non_empty(json?.get("langgraph_auth_user_id"))?;
    Some(MemoryContext::new(user, thread_id.unwrap_or("default")))
}

/// The user and session of a run (see the module docs for the order).
///
/// # Errors
/// [`NoUser`] when neither the context nor the state names a user.
pub fn resolve_ids(
    context: Option<&MemoryContext>,
    state: &Value,
    thread_id: Option<&str>,
) -> Result<Ids, NoUser> {
    if let Some(c) = context {
        if !c.user_id.trim().is_empty() {
            return Ok(Ids {
                user_id: c.user_id.clone(),
                session_id: c.session_id.clone(),
            });
        }
    }
    let user_id = non_empty(state.get("user_id")).ok_or(NoUser)?;
    let session_id = non_empty(state.get("session_id"))
        .or_else(|| thread_id.map(str::to_owned))
        .unwrap_or_else(|| "default".to_owned());
    Ok(Ids { user_id, session_id })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn context_first_then_state_then_nothing() {
        let ctx = MemoryContext::new("alice", "s1");
        let state = json!({"user_id": "bob", "session_id": "s9"});
        let ids = resolve_ids(Some(&ctx), &state, Some("t")).unwrap();
        assert_eq!((ids.user_id.as_str(), ids.session_id.as_str()), ("alice", "s1"));
        let ids = resolve_ids(None, &state, Some("t")).unwrap();
        assert_eq!((ids.user_id.as_str(), ids.session_id.as_str()), ("bob", "s9"));
        let ids = resolve_ids(None, &json!({"user_id": "bob"}), Some("thread-7")).unwrap();
        assert_eq!(ids.session_id, "thread-7");
        assert_eq!(resolve_ids(None, &json!({"user_id": "  "}), None), Err(NoUser));
        // A server's authenticated identity wins over the input's ids.
        let served = json!({"langgraph_auth_user_id": "carol", "user_id": "mallory"});
        let ctx = trusted_context(None, Some(&served), Some("thread-3")).unwrap();
        let ids = resolve_ids(Some(&ctx), &state, Some("thread-3")).unwrap();
        assert_eq!(
            (ids.user_id.as_str(), ids.session_id.as_str()),
            ("carol", "thread-3")
        );
        assert_eq!(
            trusted_context(None, Some(&json!({"user_id": "mallory"})), None),
            None
        );
    }
}
