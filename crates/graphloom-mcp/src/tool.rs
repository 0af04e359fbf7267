//! [`McpTool`]: one tool of an MCP server as a graphloom [`Tool`].

use crate::content;
use crate::error::{Error, Result};
use crate::server::Server;
use futures::future::BoxFuture;
use graphloom_prebuilt::{Tool, ToolError, ToolOutput, ToolRuntime};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// How much longer than its own call bound a `ToolNode` gives an MCP tool, so that the
/// tool's timeout (which names the server and cancels the call there) answers first.
const NODE_TIMEOUT_GRACE: Duration = Duration::from_millis(250);

/// Most schema violations listed in one validation message.
const MAX_VIOLATIONS: usize = 5;

/// A tool of an MCP server, usable wherever a [`Tool`] is (`ToolNode`,
/// `create_react_agent`, any agent).
///
/// Its name, description and input schema are the server's (the name prefixed with
/// `<server>_` when prefixing is on). Arguments are checked against the schema before they
/// are sent, so the server never sees a call the schema forbids. Calls share the server's
/// session; see the crate docs for how failures become tool errors.
#[derive(Clone)]
pub struct McpTool {
    server: Arc<Server>,
    name: String,
    remote_name: String,
    description: String,
    schema: Value,
    validator: Arc<jsonschema::Validator>,
    timeout: Duration,
    mutating: bool,
    annotations: Option<Value>,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("server", &self.server.name())
            .field("name", &self.name)
            .field("remote_name", &self.remote_name)
            .field("timeout", &self.timeout)
            .field("mutating", &self.mutating)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    /// The tool `listed` by `server`, offered as `name`.
    pub(crate) fn new(server: Arc<Server>, listed: rmcp::model::Tool, name: String) -> Result<Self> {
        let remote_name = listed.name.to_string();
        let schema = Value::Object((*listed.input_schema).clone());
        let validator = jsonschema::validator_for(&schema).map_err(|e| Error::InvalidSchema {
            server: server.name().to_owned(),
            tool: remote_name.clone(),
            message: e.to_string(),
        })?;
        let description = listed
            .description
            .map(|d| d.to_string())
            .or_else(|| listed.title.clone())
            .unwrap_or_default();
        let annotations = listed
            .annotations
            .as_ref()
            .and_then(|a| serde_json::to_value(a).ok());
        let config = server.config();
        Ok(Self {
            timeout: config.timeout_of(&remote_name),
            mutating: config.mutating.contains(&remote_name),
            server,
            name,
            remote_name,
            description,
            schema,
            validator: Arc::new(validator),
            annotations,
        })
    }

    /// The name of the server the tool comes from (its key in the client).
    #[must_use]
    pub fn server_name(&self) -> &str {
        self.server.name()
    }
    /// The tool's name at the server (without any prefix).
    #[must_use]
    pub fn remote_name(&self) -> &str {
        &self.remote_name
    }
    /// The server's annotations of the tool (`readOnlyHint`, `destructiveHint`, ...), as
    /// JSON. They are hints from the server, not guarantees.
    #[must_use]
    pub fn annotations(&self) -> Option<&Value> {
        self.annotations.as_ref()
    }
    /// The bound on one call of this tool.
    #[must_use]
    pub fn call_timeout(&self) -> Duration {
        self.timeout
    }
    /// As a shared trait object.
    #[must_use]
    pub fn arc(self) -> Arc<dyn Tool> {
        Arc::new(self)
    }

    fn check(&self, args: Value) -> Result<serde_json::Map<String, Value>, ToolError> {
        let args = match args {
            Value::Null => Value::Object(serde_json::Map::new()),
            Value::String(s) => serde_json::from_str(&s).map_err(|e| {
                ToolError::validation(format!(
                    "the arguments for `{}` are not valid JSON: {e}",
                    self.name
                ))
            })?,
            other => other,
        };
        let violations: Vec<String> = self
            .validator
            .iter_errors(&args)
            .take(MAX_VIOLATIONS)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("at {at}: {e}")
                }
            })
            .collect();
        if !violations.is_empty() {
            return Err(ToolError::validation(format!(
                "invalid arguments for `{}`: {}",
                self.name,
                violations.join("; ")
            )));
        }
        match args {
            Value::Object(m) => Ok(m),
            _ => Err(ToolError::validation(format!(
                "the arguments for `{}` must be a JSON object",
                self.name
            ))),
        }
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn schema(&self) -> &Value {
        &self.schema
    }
    fn mutating(&self) -> bool {
        self.mutating
    }
    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout.saturating_add(NODE_TIMEOUT_GRACE))
    }
    fn call(&self, args: Value, _rt: ToolRuntime) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        let checked = self.check(args);
        let server = Arc::clone(&self.server);
        let remote = self.remote_name.clone();
        let timeout = self.timeout;
        Box::pin(async move {
            let result = server.call(&remote, checked?, timeout).await?;
            content::to_output(result)
        })
    }
}
