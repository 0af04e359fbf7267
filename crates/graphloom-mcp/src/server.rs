//! One configured server and its current session: tool listing at load time, calls with
//! their timeout, and reconnection after the server died.

use crate::config::ServerConfig;
use crate::connect::{self, Session};
use crate::error::{Error, Result};
use graphloom_prebuilt::ToolError;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::ServiceError;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// How long [`Server::close`] waits for a server to shut down before killing it.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

struct Conn {
    /// The session, while there is one.
    session: Option<Arc<Session>>,
    /// Set when a call found the connection broken: the next call reconnects.
    broken: bool,
    /// Set by [`Server::close`]: no call reconnects until [`Server::reconnect`].
    closed: bool,
}

/// A configured server and its live session, shared by its tools.
pub(crate) struct Server {
    name: String,
    config: ServerConfig,
    conn: Mutex<Conn>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Connect to `name` as `config` says.
    pub(crate) async fn connect(name: &str, config: ServerConfig) -> Result<Self> {
        let session = connect::open(name, &config).await?;
        Ok(Self {
            name: name.to_owned(),
            config,
            conn: Mutex::new(Conn {
                session: Some(Arc::new(session)),
                broken: false,
                closed: false,
            }),
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// Every tool the server lists (all pages), within the connect timeout.
    pub(crate) async fn list_tools(&self) -> Result<Vec<rmcp::model::Tool>> {
        let session = self.conn.lock().await.session.clone();
        let Some(session) = session else {
            return Err(Error::ListTools {
                server: self.name.clone(),
                source: "the server is closed".into(),
            });
        };
        tokio::time::timeout(self.config.connect_timeout, session.peer().list_all_tools())
            .await
            .map_err(|_| Error::Timeout {
                server: self.name.clone(),
                phase: "listing tools",
                timeout: self.config.connect_timeout,
            })?
            .map_err(|e| Error::ListTools {
                server: self.name.clone(),
                source: Box::new(e),
            })
    }

    /// Replace the session with a new one (the old one closes once its calls end).
    pub(crate) async fn reconnect(&self) -> Result<()> {
        let mut conn = self.conn.lock().await;
        let session = connect::open(&self.name, &self.config).await?;
        conn.session = Some(Arc::new(session));
        conn.broken = false;
        conn.closed = false;
        Ok(())
    }

    /// Close the session: end the process (stdin closed, then SIGTERM, then SIGKILL) or
    /// the HTTP session. Calls after this fail until [`Server::reconnect`].
    pub(crate) async fn close(&self) {
        let session = {
            let mut conn = self.conn.lock().await;
            conn.closed = true;
            conn.session.take()
        };
        if let Some(session) = session {
            match Arc::try_unwrap(session) {
                Ok(mut session) => {
                    let _ = session.close_with_timeout(CLOSE_GRACE).await;
                }
                // Calls are still running: the session closes when the last one ends.
                Err(shared) => drop(shared),
            }
        }
    }

    /// The session to call on: the current one, or a new one when it is gone or broken and
    /// auto-reconnect is on.
    async fn session(&self) -> Result<Arc<Session>, ToolError> {
        let mut conn = self.conn.lock().await;
        let usable = conn
            .session
            .as_ref()
            .filter(|s| !conn.broken && !s.is_closed() && !s.peer().is_transport_closed())
            .cloned();
        if let Some(s) = usable {
            return Ok(s);
        }
        if conn.closed {
            return Err(ToolError::unavailable(format!(
                "the connection to the MCP server `{}` was closed",
                self.name
            )));
        }
        if !self.config.auto_reconnect {
            return Err(ToolError::unavailable(format!(
                "the MCP server `{}` is not connected (it exited or its connection broke)",
                self.name
            )));
        }
        match connect::open(&self.name, &self.config).await {
            Ok(session) => {
                let session = Arc::new(session);
                conn.session = Some(Arc::clone(&session));
                conn.broken = false;
                tracing::info!(server = %self.name, "reconnected to the MCP server");
                Ok(session)
            }
            Err(e) => {
                tracing::warn!(server = %self.name, error = %e, "reconnecting to the MCP server failed");
                Err(ToolError::unavailable(format!(
                    "the MCP server `{}` is not connected and reconnecting failed: {e} ({})",
                    self.name,
                    root_cause(&e)
                )))
            }
        }
    }

    /// Remember that `session` is broken, unless it was replaced meanwhile.
    async fn mark_broken(&self, session: &Arc<Session>) {
        let mut conn = self.conn.lock().await;
        if conn.session.as_ref().is_some_and(|s| Arc::ptr_eq(s, session)) {
            conn.broken = true;
        }
    }

    /// Call the server's tool `tool` with `args`, bounded by `timeout`. Failures of any kind
    /// come back as a [`ToolError`] for the model.
    pub(crate) async fn call(
        &self,
        tool: &str,
        args: JsonObject,
        timeout: Duration,
    ) -> Result<CallToolResult, ToolError> {
        let session = self.session().await?;
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
        // Dropping the unfinished call (on timeout, or when the caller gives up) tells the
        // server with `notifications/cancelled`.
        let outcome = tokio::time::timeout(timeout, session.peer().call_tool(params)).await;
        match outcome {
            Ok(Ok(result)) => Ok(result),
            Err(_elapsed) => Err(ToolError::timeout(format!(
                "`{tool}` on the MCP server `{}` did not finish within {} ms; it was cancelled",
                self.name,
                timeout.as_millis()
            ))),
            Ok(Err(e)) => {
                if matches!(e, ServiceError::TransportClosed | ServiceError::TransportSend(_)) {
                    self.mark_broken(&session).await;
                }
                Err(call_error(&self.name, tool, &e))
            }
        }
    }
}

/// A failed call as the model should read it.
fn call_error(server: &str, tool: &str, e: &ServiceError) -> ToolError {
    match e {
        ServiceError::McpError(data) => {
            let text = format!(
                "the MCP server `{server}` refused the call to `{tool}`: {} (JSON-RPC error {})",
                data.message, data.code.0
            );
            if data.code == rmcp::model::ErrorCode::INVALID_PARAMS {
                ToolError::validation(text)
            } else {
                ToolError::execution(text)
            }
        }
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => ToolError::unavailable(format!(
            "the connection to the MCP server `{server}` broke during the call to `{tool}` (the server may have exited); the call may or may not have taken effect"
        )),
        ServiceError::Timeout { timeout } => ToolError::timeout(format!(
            "`{tool}` on the MCP server `{server}` did not finish within {} ms",
            timeout.as_millis()
        )),
        ServiceError::UnexpectedResponse => ToolError::execution(format!(
            "the MCP server `{server}` answered the call to `{tool}` with something that is not a tool result"
        )),
        other => ToolError::execution(format!(
            "the call to `{tool}` on the MCP server `{server}` failed: {other}"
        )),
    }
}

/// The innermost cause of `e` (the one that says what actually happened, like "connection
/// refused"), as text.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    cause.to_string()
}
