//! The crate's error type: what can go wrong while connecting to MCP servers and loading
//! their tools. (Failures of tool *calls* are `ToolError`s the model reads, never these.)

use std::time::Duration;

/// A boxed error cause.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What went wrong while connecting to a server or loading its tools.
///
/// Every variant names the server (see [`Error::server`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration cannot work (an empty command, a bad URL or header, ...).
    #[error("MCP server `{server}`: invalid configuration: {message}")]
    Config {
        /// The server.
        server: String,
        /// What is wrong.
        message: String,
    },
    /// The server's process could not be started.
    #[error("MCP server `{server}`: could not start `{command}`")]
    Spawn {
        /// The server.
        server: String,
        /// The program.
        command: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The MCP handshake failed: the process exited, the connection was refused or closed,
    /// the server answered with an error or with something that is not MCP.
    #[error("MCP server `{server}`: the handshake failed")]
    Handshake {
        /// The server.
        server: String,
        /// Why.
        #[source]
        source: BoxError,
    },
    /// The server did not finish connecting (handshake and tool listing) in time.
    #[error("MCP server `{server}`: no complete answer within {} ms while {phase}", timeout.as_millis())]
    Timeout {
        /// The server.
        server: String,
        /// What was under way (`"connecting"`, `"listing tools"`).
        phase: &'static str,
        /// The bound that ran out.
        timeout: Duration,
    },
    /// Listing the server's tools failed.
    #[error("MCP server `{server}`: listing its tools failed")]
    ListTools {
        /// The server.
        server: String,
        /// Why.
        #[source]
        source: BoxError,
    },
    /// The allow list names tools the server does not have.
    #[error("MCP server `{server}`: the allow list names tools it does not have: {}; it has: {}", missing.join(", "), available.join(", "))]
    MissingTools {
        /// The server.
        server: String,
        /// The names it lacks.
        missing: Vec<String>,
        /// The names it has.
        available: Vec<String>,
    },
    /// A tool's input schema is not a JSON Schema (a model provider would refuse it).
    #[error("MCP server `{server}`: the input schema of tool `{tool}` is not a valid JSON Schema ({message}); deny the tool to load the others")]
    InvalidSchema {
        /// The server.
        server: String,
        /// The tool (the server's name).
        tool: String,
        /// What is wrong with it.
        message: String,
    },
    /// Two tools would be offered under one name.
    #[error("MCP server `{server}`: tool name `{name}` is also used by `{other}`; prefix tool names or filter one out")]
    DuplicateTool {
        /// The server whose tool came second.
        server: String,
        /// The clashing name.
        name: String,
        /// The server whose tool came first.
        other: String,
    },
    /// No server of that name is configured.
    #[error("no MCP server named `{server}` is configured")]
    UnknownServer {
        /// The name asked for.
        server: String,
    },
}

impl Error {
    /// The server the error is about.
    #[must_use]
    pub fn server(&self) -> &str {
        match self {
            Error::Config { server, .. }
            | Error::Spawn { server, .. }
            | Error::Handshake { server, .. }
            | Error::Timeout { server, .. }
            | Error::ListTools { server, .. }
            | Error::MissingTools { server, .. }
            | Error::InvalidSchema { server, .. }
            | Error::DuplicateTool { server, .. }
            | Error::UnknownServer { server } => server,
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
