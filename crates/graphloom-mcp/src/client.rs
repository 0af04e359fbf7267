//! [`McpClient`]: several servers by name; [`McpConnections`]: them connected, their tools.

use crate::config::ServerConfig;
use crate::error::{Error, Result};
use crate::server::Server;
use crate::tool::McpTool;
use graphloom_prebuilt::Tool;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Tools from several MCP servers, each known by a name (as `langchain-mcp-adapters`'
/// `MultiServerMCPClient`): a map of server name to [`ServerConfig`].
///
/// [`McpClient::connect`] starts or reaches every server at once, runs the handshakes and
/// lists the tools; any server that cannot be reached is an [`Error`] naming it.
/// [`McpClient::load_tools`] does that and returns the tools, which keep their servers'
/// sessions alive. Unlike the Python adapters, calls share one session per server rather
/// than starting a process per call.
#[derive(Debug, Clone, Default)]
pub struct McpClient {
    servers: BTreeMap<String, ServerConfig>,
    prefix_tool_names: bool,
}

impl McpClient {
    /// A client with no servers.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
    /// Add (or replace) the server `name`.
    #[must_use]
    pub fn server(mut self, name: impl Into<String>, config: impl Into<ServerConfig>) -> Self {
        self.servers.insert(name.into(), config.into());
        self
    }
    /// Offer tools as `<server name>_<tool name>` (default `false`; a server's own
    /// [`ServerConfig::prefix_tool_names`] wins).
    #[must_use]
    pub fn prefix_tool_names(mut self, on: bool) -> Self {
        self.prefix_tool_names = on;
        self
    }
    /// The configured servers.
    #[must_use]
    pub fn servers(&self) -> &BTreeMap<String, ServerConfig> {
        &self.servers
    }

    /// A client from the JSON map of server name to connection, as `langchain-mcp-adapters`
    /// takes it (see [`ServerConfig`] for the shape).
    ///
    /// # Errors
    /// When the JSON does not have that shape.
    pub fn from_json(value: serde_json::Value) -> Result<Self, serde_json::Error> {
        let servers: BTreeMap<String, ServerConfig> = serde_json::from_value(value)?;
        Ok(Self {
            servers,
            prefix_tool_names: false,
        })
    }

    /// Connect to every server at once and load their tools.
    ///
    /// # Errors
    /// The first failure in server-name order: a server that cannot be started or reached,
    /// whose handshake or tool listing fails or times out, whose allow list names tools it
    /// lacks, or a tool with an invalid schema or a name already taken. The servers already
    /// connected are closed again.
    pub async fn connect(&self) -> Result<McpConnections> {
        let attempts = self
            .servers
            .iter()
            .map(|(name, cfg)| load_server(name, cfg.clone(), self.prefix_for(cfg)));
        let loaded = futures::future::join_all(attempts).await;
        let mut servers = BTreeMap::new();
        let mut tools: Vec<McpTool> = Vec::new();
        let mut first_error = None;
        for outcome in loaded {
            match outcome {
                Ok((server, server_tools)) => {
                    servers.insert(server.name().to_owned(), server);
                    tools.extend(server_tools);
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if first_error.is_none() {
            first_error = check_unique(&tools).err();
        }
        if let Some(e) = first_error {
            futures::future::join_all(servers.values().map(|s| s.close())).await;
            return Err(e);
        }
        Ok(McpConnections { servers, tools })
    }

    /// [`McpClient::connect`], then every tool as an `Arc<dyn Tool>`. The tools keep the
    /// sessions open; the servers shut down when the last tool is dropped.
    ///
    /// # Errors
    /// As [`McpClient::connect`].
    pub async fn load_tools(&self) -> Result<Vec<Arc<dyn Tool>>> {
        Ok(self.connect().await?.tools())
    }

    fn prefix_for(&self, cfg: &ServerConfig) -> bool {
        cfg.prefix_tool_names.unwrap_or(self.prefix_tool_names)
    }
}

/// Connect to one server and turn its listed tools into [`McpTool`]s.
async fn load_server(name: &str, cfg: ServerConfig, prefix: bool) -> Result<(Arc<Server>, Vec<McpTool>)> {
    let server = Arc::new(Server::connect(name, cfg).await?);
    match server_tools(&server, prefix).await {
        Ok(tools) => Ok((server, tools)),
        Err(e) => {
            server.close().await;
            Err(e)
        }
    }
}

async fn server_tools(server: &Arc<Server>, prefix: bool) -> Result<Vec<McpTool>> {
    let listed = server.list_tools().await?;
    let config = server.config();
    if let Some(allow) = &config.allow {
        let names: BTreeSet<&str> = listed.iter().map(|t| t.name.as_ref()).collect();
        let missing: Vec<String> = allow
            .iter()
            .filter(|a| !names.contains(a.as_str()))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(Error::MissingTools {
                server: server.name().to_owned(),
                missing,
                available: names.into_iter().map(str::to_owned).collect(),
            });
        }
    }
    listed
        .into_iter()
        .filter(|t| config.offers(&t.name))
        .map(|t| {
            let offered = if prefix {
                format!("{}_{}", server.name(), t.name)
            } else {
                t.name.to_string()
            };
            McpTool::new(Arc::clone(server), t, offered)
        })
        .collect()
}

/// Two tools under one name would shadow each other in a `ToolNode`: refuse.
fn check_unique(tools: &[McpTool]) -> Result<()> {
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for t in tools {
        if let Some(other) = seen.insert(t.name(), t.server_name()) {
            return Err(Error::DuplicateTool {
                server: t.server_name().to_owned(),
                name: t.name().to_owned(),
                other: other.to_owned(),
            });
        }
    }
    Ok(())
}

/// Connected servers and their tools (from [`McpClient::connect`]).
///
/// Dropping it keeps the sessions open for as long as any of its tools lives;
/// [`McpConnections::close`] ends them at once.
#[derive(Debug)]
pub struct McpConnections {
    servers: BTreeMap<String, Arc<Server>>,
    tools: Vec<McpTool>,
}

impl McpConnections {
    /// Every tool of every server, in server-name order, each server's in its listing order.
    #[must_use]
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools.iter().cloned().map(McpTool::arc).collect()
    }
    /// The tools as [`McpTool`]s (server name, remote name, annotations, timeout).
    #[must_use]
    pub fn mcp_tools(&self) -> &[McpTool] {
        &self.tools
    }
    /// The tools of the server `name`.
    ///
    /// # Errors
    /// [`Error::UnknownServer`] for a name not configured.
    pub fn server_tools(&self, name: &str) -> Result<Vec<Arc<dyn Tool>>> {
        if !self.servers.contains_key(name) {
            return Err(Error::UnknownServer {
                server: name.to_owned(),
            });
        }
        Ok(self
            .tools
            .iter()
            .filter(|t| t.server_name() == name)
            .cloned()
            .map(McpTool::arc)
            .collect())
    }
    /// The names of the connected servers.
    pub fn server_names(&self) -> impl Iterator<Item = &str> {
        self.servers.keys().map(String::as_str)
    }
    /// Open a new session with the server `name` (starting a new process for stdio), for
    /// when it died or was restarted; its tools use the new session from their next call.
    /// Calls still running on the old session finish there.
    ///
    /// # Errors
    /// [`Error::UnknownServer`], or why connecting failed.
    pub async fn reconnect(&self, name: &str) -> Result<()> {
        let server = self.servers.get(name).ok_or_else(|| Error::UnknownServer {
            server: name.to_owned(),
        })?;
        server.reconnect().await
    }
    /// End every session now: stdio servers get their stdin closed, then SIGTERM, then
    /// SIGKILL (a few seconds apart). Tools called afterwards answer with an error until
    /// [`McpConnections::reconnect`].
    pub async fn close(&self) {
        let closing = self.servers.values().map(|s| s.close());
        futures::future::join_all(closing).await;
    }
}
