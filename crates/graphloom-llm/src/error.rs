//! The error type of graphloom-llm.

use graphloom_core::NodeError;

/// Longest excerpt of a model's raw output or a provider's body kept in an error.
pub const RAW_EXCERPT_LIMIT: usize = 512;

/// Cut `text` to at most [`RAW_EXCERPT_LIMIT`] bytes (on a char boundary), marking the cut.
#[must_use]
pub fn truncate_raw(text: &str) -> String {
    if text.len() <= RAW_EXCERPT_LIMIT {
        return text.to_owned();
    }
    let mut end = RAW_EXCERPT_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes in all)", &text[..end], text.len())
}

/// Classes of failure, for callers that branch on what went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Missing or invalid configuration (model string, API key, base URL).
    Config,
    /// The provider refused the request (4xx other than 429).
    Rejected,
    /// Rate limited (429) on every attempt.
    RateLimited,
    /// The provider failed (5xx) on every attempt.
    Server,
    /// The connection failed on every attempt.
    Connection,
    /// A call ran past its timeout.
    Timeout,
    /// The provider answered something that is not its wire format.
    InvalidResponse,
    /// A stream ended before its end marker.
    Truncated,
    /// Structured output did not parse or did not match the schema.
    StructuredOutput,
    /// A run budget would be exceeded; the call was not made.
    Budget,
    /// Anything else (scripted failures, provider error events).
    Other,
}

/// Every error graphloom-llm returns.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A model string could not be parsed or names an unknown provider.
    #[error("invalid model spec `{spec}`: {reason}")]
    InvalidModelSpec {
        /// The string given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A provider needs an environment variable that is not set.
    #[error("provider `{provider}` needs {what}: set the environment variable {var}")]
    MissingEnv {
        /// The provider.
        provider: String,
        /// What the variable holds ("an API key", "a base URL").
        what: String,
        /// The variable to set.
        var: String,
    },
    /// Other invalid configuration.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The model an environment variable names (`GRAPHLOOM_MODEL`) cannot be built.
    #[error(
        "{var}={spec} cannot be used: {source}; set the provider's variables (OPENAI_API_KEY, \
         ANTHROPIC_API_KEY; OPENAI_BASE_URL for an OpenAI-compatible server), or {var}=scripted \
         for the offline demo model"
    )]
    ModelEnv {
        /// The variable.
        var: String,
        /// Its value.
        spec: String,
        /// Why the model cannot be built.
        source: Box<Error>,
    },
    /// The provider answered with an HTTP error status (after retries, for 429 and 5xx).
    #[error("{provider} returned HTTP {status} after {attempts} attempt(s): {message}")]
    Http {
        /// The provider.
        provider: String,
        /// HTTP status.
        status: u16,
        /// The provider's error message (or an excerpt of the body).
        message: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The connection failed (after retries).
    #[error("{provider}: connection failed after {attempts} attempt(s): {message}")]
    Connection {
        /// The provider.
        provider: String,
        /// The transport's message.
        message: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The call ran past its timeout (after retries).
    #[error("{provider}: timed out after {after_ms} ms ({attempts} attempt(s))")]
    Timeout {
        /// The provider.
        provider: String,
        /// The timeout of one attempt.
        after_ms: u64,
        /// Attempts made.
        attempts: u32,
    },
    /// The provider's answer is not its wire format (malformed JSON, missing fields).
    #[error("{provider} sent an invalid response: {message}; raw: {raw}")]
    InvalidResponse {
        /// The provider.
        provider: String,
        /// What is wrong.
        message: String,
        /// Excerpt of what was received.
        raw: String,
    },
    /// A stream ended (or broke) before the provider's end marker.
    #[error("{provider}: stream truncated: {message}")]
    StreamTruncated {
        /// The provider.
        provider: String,
        /// What was missing or how it broke.
        message: String,
    },
    /// The provider reported an error inside a stream or a 200 response.
    #[error("{provider} reported an error: {message}")]
    Provider {
        /// The provider.
        provider: String,
        /// Its message.
        message: String,
    },
    /// Structured output did not parse as JSON, violated the schema, or did not fit the type.
    #[error("structured output for `{type_name}` rejected: {reason}; raw: {raw}")]
    StructuredOutput {
        /// The Rust type asked for.
        type_name: String,
        /// Why (JSON error, schema violations, serde error).
        reason: String,
        /// Excerpt of the model's raw answer.
        raw: String,
    },
    /// A run budget would be exceeded: the call was not made.
    #[error("{budget} budget exceeded: {message}")]
    BudgetExceeded {
        /// Which budget (`model_calls`, `input_tokens`, `output_tokens`, `total_tokens`,
        /// `cost_usd`, `wall_time`).
        budget: String,
        /// Limit and usage.
        message: String,
    },
    /// A scripted failure or a script that ran out of replies.
    #[error("scripted model: {0}")]
    Scripted(String),
}

/// `Result` with [`Error`] as default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The class of this error.
    #[must_use]
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidModelSpec { .. }
            | Error::MissingEnv { .. }
            | Error::Config(_)
            | Error::ModelEnv { .. } => ErrorKind::Config,
            Error::Http { status: 429, .. } => ErrorKind::RateLimited,
            Error::Http { status, .. } if *status >= 500 => ErrorKind::Server,
            Error::Http { .. } => ErrorKind::Rejected,
            Error::Connection { .. } => ErrorKind::Connection,
            Error::Timeout { .. } => ErrorKind::Timeout,
            Error::InvalidResponse { .. } => ErrorKind::InvalidResponse,
            Error::StreamTruncated { .. } => ErrorKind::Truncated,
            Error::StructuredOutput { .. } => ErrorKind::StructuredOutput,
            Error::BudgetExceeded { .. } => ErrorKind::Budget,
            Error::Provider { .. } | Error::Scripted(_) => ErrorKind::Other,
        }
    }

    /// True for failures that may pass when tried again later (rate limits, server errors,
    /// connection failures, timeouts, truncated streams). A graph's `RetryPolicy` retries
    /// these when the error reaches it through [`Error::into_node_error`].
    #[must_use]
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind(),
            ErrorKind::RateLimited
                | ErrorKind::Server
                | ErrorKind::Connection
                | ErrorKind::Timeout
                | ErrorKind::Truncated
        )
    }

    /// The error as a node error: a budget error becomes [`NodeError::BudgetExceeded`] (the
    /// run ends with `Error::BudgetExceeded` and a resumable checkpoint), transient errors
    /// become retryable failures, everything else a terminal failure. Failures keep this
    /// error as their source, so a retry predicate can match on it
    /// (`RetryPolicy::retry_when(|e: &graphloom_llm::Error| e.kind() == ErrorKind::RateLimited)`)
    /// and the run's caller finds it with `graphloom_core::Error::find_source`.
    ///
    /// Core's blanket `From<E: std::error::Error> for NodeError` would make every error a
    /// retryable failure, so use this (or [`NodeResultExt::node`]) in nodes:
    /// `model.invoke(&msgs, &opts).await.node()?`.
    #[must_use]
    pub fn into_node_error(self) -> NodeError {
        match self {
            Error::BudgetExceeded { budget, message } => NodeError::BudgetExceeded { budget, message },
            e if e.is_transient() => NodeError::from(e),
            e => NodeError::terminal(e),
        }
    }

    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn invalid_response(provider: &str, message: impl Into<String>, raw: &str) -> Self {
        Error::InvalidResponse {
            provider: provider.to_owned(),
            message: message.into(),
            raw: truncate_raw(raw),
        }
    }

    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn truncated(provider: &str, message: impl Into<String>) -> Self {
        Error::StreamTruncated {
            provider: provider.to_owned(),
            message: message.into(),
        }
    }
}

/// Turn a `Result<T, Error>` into a node's `Result<T, NodeError>` keeping budget errors typed.
pub trait NodeResultExt<T> {
    /// See [`Error::into_node_error`].
    fn node(self) -> Result<T, NodeError>;
}

impl<T> NodeResultExt<T> for Result<T, Error> {
    fn node(self) -> Result<T, NodeError> {
        self.map_err(Error::into_node_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_char_boundaries_and_says_how_long() {
        let s = "é".repeat(400);
        let t = truncate_raw(&s);
        assert!(t.len() < s.len());
        assert!(t.ends_with("(800 bytes in all)"));
        assert_eq!(truncate_raw("short"), "short");
    }

    #[test]
    fn kinds_and_node_errors() {
        let e = Error::Http {
            provider: "openai".into(),
            status: 429,
            message: "slow down".into(),
            attempts: 3,
        };
        assert_eq!(e.kind(), ErrorKind::RateLimited);
        assert!(e.clone().into_node_error().is_retryable());
        let e = Error::Http {
            provider: "openai".into(),
            status: 400,
            message: "bad".into(),
            attempts: 1,
        };
        assert_eq!(e.kind(), ErrorKind::Rejected);
        assert!(!e.into_node_error().is_retryable());
        let b = Error::BudgetExceeded {
            budget: "model_calls".into(),
            message: "limit 1".into(),
        };
        assert!(matches!(b.into_node_error(), NodeError::BudgetExceeded { .. }));
    }

    #[test]
    fn node_errors_keep_the_llm_error_as_their_source() {
        let limited = Error::Http {
            provider: "openai".into(),
            status: 429,
            message: "slow down".into(),
            attempts: 3,
        };
        let n = limited.clone().into_node_error();
        assert_eq!(n.kind(), graphloom_core::NodeErrorKind::Retryable);
        assert_eq!(n.to_string(), limited.to_string());
        let kept = n.downcast_ref::<Error>().map(Error::kind);
        assert_eq!(kept, Some(ErrorKind::RateLimited));
        let rejected = Error::Http {
            provider: "openai".into(),
            status: 400,
            message: "bad".into(),
            attempts: 1,
        };
        let n = rejected.into_node_error();
        assert_eq!(n.kind(), graphloom_core::NodeErrorKind::Terminal);
        assert_eq!(
            n.downcast_ref::<Error>().map(Error::kind),
            Some(ErrorKind::Rejected)
        );
        // A retry predicate that matches on the llm error's kind.
        let policy = graphloom_core::RetryPolicy::attempts(3)
            .retry_when(|e: &Error| e.kind() == ErrorKind::RateLimited);
        assert!((policy.retry_on)(&limited.into_node_error()));
        let server = Error::Http {
            provider: "openai".into(),
            status: 503,
            message: "busy".into(),
            attempts: 3,
        };
        assert!(!(policy.retry_on)(&server.into_node_error()));
    }
}
