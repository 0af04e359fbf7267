//! graphloom-mcp: tools from [MCP](https://modelcontextprotocol.io) servers, for any
//! graphloom agent.
//!
//! An [`McpClient`] is a map of server name to [`ServerConfig`] (as `langchain-mcp-adapters`'
//! `MultiServerMCPClient`): a child process speaking MCP over stdio ([`StdioServer`]: command,
//! arguments, environment, working directory) or a streamable HTTP endpoint ([`HttpServer`]:
//! URL, headers). [`McpClient::load_tools`] connects to all of them at once and returns their
//! tools as `Arc<dyn Tool>`, ready for `ToolNode`, `create_react_agent` or any agent: the name,
//! description and input JSON Schema are the server's, and arguments are validated against
//! the schema before a call is sent. The client speaks MCP through the official Rust SDK,
//! [`rmcp`](https://docs.rs/rmcp).
//!
//! | per server | |
//! |---|---|
//! | [`ServerConfig::allow`] / [`ServerConfig::deny`] | which tools to offer (an allow-listed tool the server lacks is an error) |
//! | [`ServerConfig::prefix_tool_names`], [`McpClient::prefix_tool_names`] | offer `add` of server `math` as `math_add` |
//! | [`ServerConfig::connect_timeout`] | bound on start, handshake and tool listing (30 s) |
//! | [`ServerConfig::call_timeout`], [`ServerConfig::tool_timeout`] | bound on each call (60 s), per tool |
//! | [`ServerConfig::mutating`] | tools that pause for approval in a `ToolNode` |
//! | [`ServerConfig::auto_reconnect`] | reconnect on the next call after the server died (on) |
//!
//! # Failures
//!
//! - **At load time** a server that cannot be started, refuses the connection, exits or
//!   answers something that is not MCP during the handshake, or does not finish within its
//!   connect timeout, is an [`Error`] naming the server (and the servers already started are
//!   stopped). So are an allow list naming a missing tool, a tool whose input schema is not a
//!   JSON Schema, and two tools offered under one name.
//! - **At call time** nothing is an `Err` of the run: the model reads a tool message with
//!   `status: "error"`. A result with `isError: true` becomes an `execution` error with the
//!   server's text; a JSON-RPC error an `execution` error (`validation` for "invalid
//!   params"); a call past its timeout a `timeout` error, and the call is cancelled at the
//!   server (`notifications/cancelled`); a server that dies mid-call an `unavailable`
//!   error. The next call then starts a new session (a new process for stdio), unless
//!   [`ServerConfig::auto_reconnect`] is off; [`McpConnections::reconnect`] does it on
//!   demand. A call that was in flight is never retried: it may have taken effect.
//! - **Processes never leak**: a stdio server runs in its own process group, which is ended
//!   when its session is dropped or closed (stdin closed, then SIGTERM, then SIGKILL), and
//!   killed by tokio if the session is dropped where that cleanup cannot run.
//! - A stdio server inherits only `HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM` and `USER` from
//!   this process unless [`StdioServer::inherit_env`] is set: API keys in your environment do
//!   not reach third-party servers.
//!
//! # Results
//!
//! A tool message is text, so a result becomes text this way:
//!
//! - Text blocks: their text, one block per line.
//! - `structuredContent`: the JSON value when the text blocks only repeat it (or there are
//!   none), so a `ToolNode`'s stream allowlist can pick its fields; else the text.
//! - Embedded text resources: `[resource <uri> (<mime>)]` and the text.
//! - Images, audio, binary resources: `[image: image/png, 70 bytes]`; resource links:
//!   `[resource link: <uri> (<name>, <mime>)]`.
//!
//! # Example
//!
//! A ReAct agent whose model (scripted here) calls the `add` tool of an MCP server reached
//! over streamable HTTP (an in-process one here; a stdio server is
//! `ServerConfig::stdio(StdioServer::new("python3").arg("math_server.py"))`):
//!
//! ```
//! # use rmcp::model::*;
//! # use rmcp::service::RequestContext;
//! # use rmcp::{ErrorData, RoleServer, ServerHandler};
//! # #[derive(Clone)]
//! # struct Math;
//! # impl ServerHandler for Math {
//! #     fn get_info(&self) -> InitializeResult {
//! #         InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
//! #     }
//! #     async fn list_tools(&self, _: Option<PaginatedRequestParams>, _: RequestContext<RoleServer>)
//! #         -> Result<ListToolsResult, ErrorData> {
//! #         let schema = serde_json::json!({"type": "object", "required": ["a", "b"],
//! #             "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}});
//! #         let serde_json::Value::Object(schema) = schema else { unreachable!() };
//! #         Ok(ListToolsResult::with_all_items(vec![Tool::new("add", "Add two integers", schema)]))
//! #     }
//! #     async fn call_tool(&self, req: CallToolRequestParams, _: RequestContext<RoleServer>)
//! #         -> Result<CallToolResponse, ErrorData> {
//! #         let args = req.arguments.unwrap_or_default();
//! #         let sum = args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0);
//! #         Ok(CallToolResult::success(vec![ContentBlock::text(sum.to_string())]).into())
//! #     }
//! # }
//! # async fn start_math_server() -> String {
//! #     use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
//! #     use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
//! #     use std::future::IntoFuture;
//! #     let service: StreamableHttpService<Math, LocalSessionManager> = StreamableHttpService::new(
//! #         || Ok(Math), Default::default(), StreamableHttpServerConfig::default());
//! #     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
//! #     let url = format!("http://{}/mcp", listener.local_addr().unwrap());
//! #     tokio::spawn(axum::serve(listener, axum::Router::new().nest_service("/mcp", service)).into_future());
//! #     url
//! # }
//! use graphloom_core::{Message, RunConfig, ToolCall};
//! use graphloom_llm::{Reply, ScriptedModel};
//! use graphloom_mcp::{HttpServer, McpClient, ServerConfig};
//! use graphloom_prebuilt::{create_react_agent, AgentOptions, AgentStateUpdate};
//! use serde_json::json;
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let url = start_math_server().await; // e.g. "http://127.0.0.1:8000/mcp"
//! let tools = McpClient::new()
//!     .server(
//!         "math",
//!         ServerConfig::http(HttpServer::new(url).header("X-Api-Key", "secret"))
//!             .call_timeout(Duration::from_secs(10)),
//!     )
//!     .load_tools()
//!     .await?;
//! assert_eq!(tools[0].name(), "add");
//!
//! let model = ScriptedModel::new([
//!     Reply::tool_calls("", vec![ToolCall { id: "c1".into(), name: "add".into(), args: json!({"a": 2, "b": 3}) }]),
//!     Reply::text("2 + 3 = 5"),
//! ]);
//! let agent = create_react_agent(Arc::new(model), tools, AgentOptions::new())?;
//! let out = agent
//!     .invoke(AgentStateUpdate::new().messages(vec![Message::human("2 + 3?")]), RunConfig::default())
//!     .await?;
//! let texts: Vec<String> = out.values.messages.iter().map(Message::text).collect();
//! assert_eq!(texts, ["2 + 3?", "", "5", "2 + 3 = 5"]); // the tool message is "5"
//! # Ok(()) }
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod client;
mod config;
mod connect;
mod content;
mod error;
mod server;
mod tool;

pub use client::{McpClient, McpConnections};
pub use config::{
    HttpServer, ServerConfig, Stderr, StdioServer, Transport, DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_INHERITED_ENV,
};
pub use error::{BoxError, Error, Result};
pub use tool::McpTool;
