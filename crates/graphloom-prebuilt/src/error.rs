//! The error type of graphloom-prebuilt: what can go wrong while building an agent.

/// Errors building an agent ([`create_agent`](crate::create_agent)) or a middleware.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A middleware refused the agent or its options (an unpriced model with a cost
    /// budget, a limit of zero, a tool that does not exist, ...).
    #[error("middleware `{middleware}`: {message}")]
    Middleware {
        /// The middleware's name.
        middleware: String,
        /// What is wrong.
        message: String,
    },
    /// Two middleware share a name, or two tools or state fields do.
    #[error("duplicate {what} `{name}`: names must be unique in an agent")]
    Duplicate {
        /// `middleware`, `tool` or `state field`.
        what: &'static str,
        /// The name used twice.
        name: String,
    },
    /// A regular expression did not compile.
    #[error("pattern `{pattern}` does not compile")]
    Pattern {
        /// The pattern.
        pattern: String,
        /// Why.
        #[source]
        source: regex::Error,
    },
    /// A JSON Schema (a structured-output type's) does not compile.
    #[error("the JSON Schema of `{name}` does not compile: {message}")]
    Schema {
        /// The type or tool.
        name: String,
        /// The compiler's message.
        message: String,
    },
    /// A call limit or budget was reached while the run went on (a middleware set to
    /// fail the run rather than end it).
    #[error("{limit} limit exceeded: {message}")]
    LimitExceeded {
        /// Which limit (`model_calls`, `tool_calls`, ...).
        limit: String,
        /// Counts and limits.
        message: String,
    },
    /// A reviewer's answer to a human-in-the-loop request was refused (the run stays
    /// paused).
    #[error("decision refused: {message}")]
    Decision {
        /// What is wrong with it.
        message: String,
    },
    /// Personal data was found where the PII middleware blocks it.
    #[error("Detected {count} instance(s) of {kind} in text content")]
    PiiDetected {
        /// The kind (`email`, `credit_card`, ...).
        kind: String,
        /// How many.
        count: usize,
    },
    /// The graph does not compile.
    #[error(transparent)]
    Graph(#[from] graphloom_core::Error),
}

impl Error {
    /// A middleware error.
    pub fn middleware(middleware: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Middleware {
            middleware: middleware.into(),
            message: message.into(),
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An agent that does not build, as the graph error a graph factory returns (the
/// server's `factory` takes functions returning `graphloom_core::Result`).
impl From<Error> for graphloom_core::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Graph(g) => g,
            other => graphloom_core::Error::InvalidGraph(other.to_string()),
        }
    }
}
