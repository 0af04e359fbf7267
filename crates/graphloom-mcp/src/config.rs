//! How to reach one MCP server ([`StdioServer`], [`HttpServer`]) and what to take from it
//! ([`ServerConfig`]: tool filters, name prefix, timeouts, approval).

use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

/// Default bound on connecting to a server: the process start or HTTP connection, the MCP
/// handshake and the tool listing together.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Default bound on one tool call.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The environment variables a stdio server inherits from this process unless
/// [`StdioServer::inherit_env`] says otherwise (the MCP reference clients' set): secrets in
/// the parent's environment (API keys, database URLs) do not reach third-party servers.
pub const DEFAULT_INHERITED_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// Where a stdio server's standard error goes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Stderr {
    /// To this process's standard error (the default).
    #[default]
    Inherit,
    /// Nowhere.
    Null,
    /// Appended to this file (created if missing).
    File(PathBuf),
}

/// An MCP server run as a child process, speaking MCP over its stdin and stdout.
///
/// The child runs in its own process group; the whole group is killed when the connection
/// is dropped or closed (after closing its stdin and a grace period), so servers started
/// through a shell or `npx` do not outlive it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StdioServer {
    /// The program to run (looked up in `PATH` when it has no slash).
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables set for it (on top of the inherited ones).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Pass this process's whole environment (default: only [`DEFAULT_INHERITED_ENV`]).
    #[serde(default)]
    pub inherit_env: bool,
    /// Its working directory (default: this process's).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Where its standard error goes.
    #[serde(default)]
    pub stderr: Stderr,
}

impl StdioServer {
    /// Run `command`.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            inherit_env: false,
            cwd: None,
            stderr: Stderr::Inherit,
        }
    }
    /// Add an argument.
    #[must_use]
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }
    /// Add arguments.
    #[must_use]
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }
    /// Set an environment variable for the server.
    #[must_use]
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }
    /// Pass this process's whole environment, not only [`DEFAULT_INHERITED_ENV`].
    #[must_use]
    pub fn inherit_env(mut self, on: bool) -> Self {
        self.inherit_env = on;
        self
    }
    /// Run the server in `dir`.
    #[must_use]
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }
    /// Send the server's standard error to `stderr`.
    #[must_use]
    pub fn stderr(mut self, stderr: Stderr) -> Self {
        self.stderr = stderr;
        self
    }
}

/// An MCP server reached over streamable HTTP.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpServer {
    /// The MCP endpoint, e.g. `http://127.0.0.1:8000/mcp`.
    pub url: String,
    /// Headers sent with every request (`Authorization`, API keys, ...).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

impl HttpServer {
    /// The server at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: BTreeMap::new(),
        }
    }
    /// Send `name: value` with every request. Names and values are checked when connecting.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }
    /// Send `Authorization: Bearer <token>` with every request.
    #[must_use]
    pub fn bearer(self, token: impl AsRef<str>) -> Self {
        let value = format!("Bearer {}", token.as_ref());
        self.header("Authorization", value)
    }
}

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "transport", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Transport {
    /// A child process speaking MCP over stdio.
    Stdio(StdioServer),
    /// Streamable HTTP (`"transport": "streamable_http"`, or `"http"`).
    #[serde(alias = "http", alias = "streamable-http")]
    StreamableHttp(HttpServer),
}

impl From<StdioServer> for Transport {
    fn from(s: StdioServer) -> Self {
        Transport::Stdio(s)
    }
}

impl From<HttpServer> for Transport {
    fn from(s: HttpServer) -> Self {
        Transport::StreamableHttp(s)
    }
}

/// One server of an [`McpClient`](crate::McpClient): how to reach it and which of its tools
/// to offer, how.
///
/// Deserialises from the shape of `langchain-mcp-adapters`' connection dicts, plus this
/// crate's options (durations in milliseconds):
///
/// ```
/// use graphloom_mcp::ServerConfig;
/// let cfg: ServerConfig = serde_json::from_value(serde_json::json!({
///     "transport": "stdio",
///     "command": "python3",
///     "args": ["math_server.py"],
///     "env": {"LOG_LEVEL": "debug"},
///     "allow": ["add", "multiply"],
///     "call_timeout_ms": 5000
/// }))?;
/// assert_eq!(cfg.call_timeout.as_millis(), 5000);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "wire::ServerConfigWire")]
pub struct ServerConfig {
    /// How to reach the server.
    pub transport: Transport,
    /// Only these tools (by the server's names); `None`: all of them. Naming a tool the
    /// server does not have is an error when connecting.
    pub allow: Option<BTreeSet<String>>,
    /// Never these tools (by the server's names).
    pub deny: BTreeSet<String>,
    /// Bound on connecting: starting the process or reaching the URL, the handshake and the
    /// tool listing.
    pub connect_timeout: Duration,
    /// Bound on each tool call (a call past it is cancelled at the server and answered with
    /// a timeout error). It is the tool's own timeout, so it replaces a `ToolNode`'s default
    /// timeout for this server's tools.
    pub call_timeout: Duration,
    /// Per-tool call bounds (by the server's names), over `call_timeout`.
    pub tool_timeouts: BTreeMap<String, Duration>,
    /// Tools that change the world: they pause for approval in a `ToolNode` first.
    pub mutating: BTreeSet<String>,
    /// Reconnect on the next call after the server died or its connection broke
    /// (default `true`). The call that was in flight is never retried.
    pub auto_reconnect: bool,
    /// Prefix this server's tool names with `<server name>_` (overrides the client's
    /// setting).
    pub prefix_tool_names: Option<bool>,
}

impl ServerConfig {
    /// A server reached by `transport`, with every tool and the default timeouts.
    pub fn new(transport: impl Into<Transport>) -> Self {
        Self {
            transport: transport.into(),
            allow: None,
            deny: BTreeSet::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            tool_timeouts: BTreeMap::new(),
            mutating: BTreeSet::new(),
            auto_reconnect: true,
            prefix_tool_names: None,
        }
    }
    /// A child process running `server`.
    #[must_use]
    pub fn stdio(server: StdioServer) -> Self {
        Self::new(server)
    }
    /// The streamable HTTP server `server`.
    #[must_use]
    pub fn http(server: HttpServer) -> Self {
        Self::new(server)
    }
    /// Offer only these tools (by the server's names).
    #[must_use]
    pub fn allow<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.allow = Some(names.into_iter().map(Into::into).collect());
        self
    }
    /// Never offer these tools (by the server's names).
    #[must_use]
    pub fn deny<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.deny.extend(names.into_iter().map(Into::into));
        self
    }
    /// Bound connecting (process start or connection, handshake, tool listing) by `d`.
    #[must_use]
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = d;
        self
    }
    /// Bound each tool call by `d`.
    #[must_use]
    pub fn call_timeout(mut self, d: Duration) -> Self {
        self.call_timeout = d;
        self
    }
    /// Bound each call of `tool` (the server's name) by `d`.
    #[must_use]
    pub fn tool_timeout(mut self, tool: impl Into<String>, d: Duration) -> Self {
        self.tool_timeouts.insert(tool.into(), d);
        self
    }
    /// Mark these tools (the server's names) as mutating: calls pause for approval.
    #[must_use]
    pub fn mutating<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.mutating.extend(names.into_iter().map(Into::into));
        self
    }
    /// Reconnect on the next call after the server died (default `true`).
    #[must_use]
    pub fn auto_reconnect(mut self, on: bool) -> Self {
        self.auto_reconnect = on;
        self
    }
    /// Prefix this server's tool names with `<server name>_`, whatever the client says.
    #[must_use]
    pub fn prefix_tool_names(mut self, on: bool) -> Self {
        self.prefix_tool_names = Some(on);
        self
    }

    /// Whether the server's tool `name` passes the filters.
    pub(crate) fn offers(&self, name: &str) -> bool {
        !self.deny.contains(name) && self.allow.as_ref().is_none_or(|a| a.contains(name))
    }
    /// The call bound of the server's tool `name`.
    pub(crate) fn timeout_of(&self, name: &str) -> Duration {
        self.tool_timeouts.get(name).copied().unwrap_or(self.call_timeout)
    }
}

impl From<StdioServer> for ServerConfig {
    fn from(s: StdioServer) -> Self {
        Self::new(s)
    }
}

impl From<HttpServer> for ServerConfig {
    fn from(s: HttpServer) -> Self {
        Self::new(s)
    }
}

/// The JSON shape of [`ServerConfig`]: the transport's fields flattened beside the options.
mod wire {
    use super::{ServerConfig, Transport};
    use serde::Deserialize;
    use std::collections::{BTreeMap, BTreeSet};
    use std::time::Duration;

    #[derive(Deserialize)]
    pub(super) struct ServerConfigWire {
        #[serde(flatten)]
        transport: Transport,
        #[serde(default)]
        allow: Option<BTreeSet<String>>,
        #[serde(default)]
        deny: BTreeSet<String>,
        #[serde(default)]
        connect_timeout_ms: Option<u64>,
        #[serde(default)]
        call_timeout_ms: Option<u64>,
        #[serde(default)]
        tool_timeouts_ms: BTreeMap<String, u64>,
        #[serde(default)]
        mutating: BTreeSet<String>,
        #[serde(default)]
        auto_reconnect: Option<bool>,
        #[serde(default)]
        prefix_tool_names: Option<bool>,
    }

    impl From<ServerConfigWire> for ServerConfig {
        fn from(w: ServerConfigWire) -> Self {
            let mut cfg = ServerConfig::new(w.transport);
            cfg.allow = w.allow;
            cfg.deny = w.deny;
            if let Some(ms) = w.connect_timeout_ms {
                cfg.connect_timeout = Duration::from_millis(ms);
            }
            if let Some(ms) = w.call_timeout_ms {
                cfg.call_timeout = Duration::from_millis(ms);
            }
            cfg.tool_timeouts = w
                .tool_timeouts_ms
                .into_iter()
                .map(|(k, ms)| (k, Duration::from_millis(ms)))
                .collect();
            cfg.mutating = w.mutating;
            cfg.auto_reconnect = w.auto_reconnect.unwrap_or(true);
            cfg.prefix_tool_names = w.prefix_tool_names;
            cfg
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_http_server_from_json() {
        let cfg: ServerConfig = serde_json::from_value(json!({
            "transport": "http",
            "url": "https://mcp.example.com/mcp",
            "headers": {"Authorization": "Bearer t"},
            "deny": ["delete_everything"],
            "mutating": ["create_ticket"],
            "auto_reconnect": false,
            "prefix_tool_names": true
        }))
        .unwrap();
        assert_eq!(
            cfg.transport,
            Transport::StreamableHttp(HttpServer::new("https://mcp.example.com/mcp").bearer("t"))
        );
        assert!(!cfg.offers("delete_everything") && cfg.offers("search"));
        assert!(cfg.mutating.contains("create_ticket"));
        assert!(!cfg.auto_reconnect);
        assert_eq!(cfg.prefix_tool_names, Some(true));
        assert_eq!(cfg.call_timeout, DEFAULT_CALL_TIMEOUT);
    }

    #[test]
    fn a_stdio_server_from_json_with_its_defaults() {
        let cfg: ServerConfig = serde_json::from_value(json!({
            "transport": "stdio",
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-everything"],
            "stderr": {"file": "/tmp/mcp.log"}
        }))
        .unwrap();
        let Transport::Stdio(s) = &cfg.transport else {
            panic!("{cfg:?}")
        };
        assert_eq!(s.args.len(), 2);
        assert_eq!(s.stderr, Stderr::File("/tmp/mcp.log".into()));
        assert!(!s.inherit_env);
        assert!(cfg.auto_reconnect);
        assert_eq!(cfg.connect_timeout, DEFAULT_CONNECT_TIMEOUT);
    }

    #[test]
    fn a_misspelt_field_is_an_error() {
        let err = serde_json::from_value::<ServerConfig>(json!({
            "transport": "stdio",
            "command": "x",
            "agrs": ["--typo"]
        }))
        .unwrap_err();
        assert!(err.to_string().contains("agrs"), "{err}");
    }

    #[test]
    fn filters_and_per_tool_timeouts() {
        let cfg = ServerConfig::new(StdioServer::new("x"))
            .allow(["a", "b"])
            .deny(["b"])
            .call_timeout(Duration::from_secs(5))
            .tool_timeout("a", Duration::from_secs(9));
        assert!(cfg.offers("a") && !cfg.offers("b") && !cfg.offers("c"));
        assert_eq!(cfg.timeout_of("a"), Duration::from_secs(9));
        assert_eq!(cfg.timeout_of("c"), Duration::from_secs(5));
    }
}
