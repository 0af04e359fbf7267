//! Ingress rules: input validation and the safety policy.

use crate::SupportConfig;

/// Phrases that make a message unsafe to act on: attempts to override the agent's
/// instructions, to reach other customers' data, or to get harmful help.
pub const DEFAULT_BLOCKED: &[&str] = &[
    "ignore previous instructions",
    "ignore all previous instructions",
    "reveal your system prompt",
    "disregard your rules",
    "another customer's",
    "other customers' data",
    "dump the database",
    "build a weapon",
    "make a bomb",
];

/// A deterministic safety policy (checked in code, before any model sees the message).
#[derive(Debug, Clone)]
pub struct SafetyPolicy {
    blocked: Vec<String>,
}

impl Default for SafetyPolicy {
    fn default() -> Self {
        Self::new(DEFAULT_BLOCKED.iter().copied())
    }
}

impl SafetyPolicy {
    /// A policy blocking messages that contain any of `phrases` (case-insensitive).
    pub fn new<'a>(phrases: impl IntoIterator<Item = &'a str>) -> Self {
        Self {
            blocked: phrases.into_iter().map(str::to_lowercase).collect(),
        }
    }

    /// `Err(reason)` when the message is unsafe.
    ///
    /// # Errors
    /// The blocked phrase found.
    pub fn check(&self, text: &str) -> Result<(), String> {
        let lower = text.to_lowercase();
        match self.blocked.iter().find(|p| lower.contains(p.as_str())) {
            Some(p) => Err(format!("blocked by safety policy: \"{p}\"")),
            None => Ok(()),
        }
    }
}

/// The refusal sent for an unsafe message.
pub const REFUSAL: &str =
    "I can't help with that request. I can help with your own account, orders, refunds and shipping.";

/// Validate a turn's input.
///
/// # Errors
/// Why it is invalid: no user id (or a malformed one), no message, the last message not
/// from the user, an empty or too long message.
pub fn validate(user_id: &str, last_human: Option<&str>, config: &SupportConfig) -> Result<(), String> {
    if user_id.trim().is_empty() {
        return Err("user_id is required".into());
    }
    if user_id.len() > 64
        || !user_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err("user_id must be 1-64 letters, digits, '-' or '_'".into());
    }
    let Some(text) = last_human else {
        return Err("the last message must be the user's".into());
    };
    if text.trim().is_empty() {
        return Err("the message is empty".into());
    }
    let n = text.chars().count();
    if n > config.max_input_chars {
        return Err(format!(
            "the message has {n} characters; the limit is {}",
            config.max_input_chars
        ));
    }
    Ok(())
}
