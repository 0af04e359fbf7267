//! `graphloom-mcp-test-server`: the MCP server the crate's tests run as a real process.
//!
//! Built only with the `test-server` feature (the crate's tests turn it on). Modes, from the
//! first argument:
//!
//! - `stdio` (default): serve over stdin/stdout.
//! - `http [addr]`: serve streamable HTTP on `addr` (default `127.0.0.1:0`) under `/mcp`,
//!   and print `listening <url>` on stdout once bound.
//! - `stubborn`: like `stdio`, but keeps running after stdin closes (until a signal).
//! - `exit`: exit with status 3 before reading anything (a server that dies at start).
//! - `garbage`: answer every line of stdin with a line that is not JSON (a handshake that
//!   never completes).
//! - `garbled`: a hand-written JSON-RPC loop that completes the handshake and lists one tool,
//!   `garbled`, but answers every `tools/call` with a result of the wrong shape.
//! - `bad-schema`: like `stdio`, plus a tool `broken` whose input schema is not a schema.
//!
//! Tools (stdio, http, bad-schema): `echo`, `add` (structured), `fail` (an `isError`
//! result), `rpc_error` (a JSON-RPC error), `hang` (never answers), `sleep`, `big`, `image`,
//! `resources`, `pid`, `cancellations`, `env`, `cwd`, `header` (HTTP only: a request header),
//! and `ghost` (listed, but calling it is "method not found", as for a removed tool).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam, ContentBlock,
    ErrorCode, ErrorData, Implementation, JsonObject, ListToolsResult, PaginatedRequestParams,
    ResourceContents, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A 1x1 transparent PNG.
const PNG_1X1: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

#[derive(Clone, Default)]
struct TestServer {
    cancellations: Arc<AtomicUsize>,
    bad_schema: bool,
}

fn schema(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(JsonObject::new()),
    }
}

fn no_args() -> Arc<JsonObject> {
    schema(json!({"type": "object", "properties": {}}))
}

fn tools(bad_schema: bool) -> Vec<Tool> {
    let mut tools = vec![
        Tool::new(
            "echo",
            "Echo the text back",
            schema(json!({
                "type": "object",
                "properties": {"text": {"type": "string", "description": "What to echo"}},
                "required": ["text"]
            })),
        ),
        Tool::new(
            "add",
            "Add two integers",
            schema(json!({
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
                "additionalProperties": false
            })),
        ),
        Tool::new(
            "fail",
            "Fail with the given message",
            schema(json!({
                "type": "object",
                "properties": {"message": {"type": "string"}},
                "required": ["message"]
            })),
        ),
        Tool::new("rpc_error", "Answer with a JSON-RPC error", no_args()),
        Tool::new("hang", "Never answer", no_args()),
        Tool::new(
            "sleep",
            "Sleep, then answer",
            schema(
                json!({"type": "object", "properties": {"ms": {"type": "integer", "minimum": 0}}, "required": ["ms"]}),
            ),
        ),
        Tool::new(
            "big",
            "Answer with this many bytes of text",
            schema(
                json!({"type": "object", "properties": {"bytes": {"type": "integer", "minimum": 0}}, "required": ["bytes"]}),
            ),
        ),
        Tool::new("image", "Answer with a caption and an image", no_args()),
        Tool::new(
            "resources",
            "Answer with embedded resources and a link",
            no_args(),
        ),
        Tool::new("pid", "This process's id", no_args()),
        Tool::new("cancellations", "How many cancellations arrived", no_args()),
        Tool::new(
            "env",
            "The value of an environment variable",
            schema(
                json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
            ),
        ),
        Tool::new("cwd", "The working directory", no_args()),
        Tool::new(
            "header",
            "The value of an HTTP request header",
            schema(
                json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
            ),
        ),
    ];
    // Listed, but unknown to `call_tool` (as a tool removed after the listing).
    tools.push(Tool::new("ghost", "Listed but gone", no_args()));
    if bad_schema {
        tools.push(Tool::new(
            "broken",
            "A tool whose input schema is not a JSON Schema",
            schema(json!({"type": 12, "properties": "none"})),
        ));
    }
    tools
}

fn text(s: impl Into<String>) -> Result<CallToolResponse, ErrorData> {
    Ok(CallToolResult::success(vec![ContentBlock::text(s)]).into())
}

fn arg<'a>(args: &'a JsonObject, key: &str) -> &'a Value {
    args.get(key).unwrap_or(&Value::Null)
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("graphloom-mcp-test-server", "0.1.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools(self.bad_schema)))
    }

    async fn on_cancelled(
        &self,
        _notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        self.cancellations.fetch_add(1, Ordering::SeqCst);
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        match request.name.as_ref() {
            "echo" => text(arg(&args, "text").as_str().unwrap_or_default()),
            "add" => {
                let (Some(a), Some(b)) = (arg(&args, "a").as_i64(), arg(&args, "b").as_i64()) else {
                    return Err(ErrorData::invalid_params("a and b must be integers", None));
                };
                Ok(CallToolResult::structured(json!({"sum": a + b})).into())
            }
            "fail" => Ok(CallToolResult::error(vec![ContentBlock::text(
                arg(&args, "message").as_str().unwrap_or("failed"),
            )])
            .into()),
            "rpc_error" => Err(ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                "the database is on fire",
                None,
            )),
            "hang" => {
                // Answer only once the client cancels (then the answer is dropped anyway).
                context.ct.cancelled().await;
                Err(ErrorData::internal_error("cancelled", None))
            }
            "sleep" => {
                let ms = arg(&args, "ms").as_u64().unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                text(format!("slept {ms} ms"))
            }
            "big" => {
                let n = usize::try_from(arg(&args, "bytes").as_u64().unwrap_or(0)).unwrap_or(0);
                text("x".repeat(n))
            }
            "image" => Ok(CallToolResult::success(vec![
                ContentBlock::text("a tiny picture"),
                ContentBlock::image(PNG_1X1, "image/png"),
            ])
            .into()),
            "resources" => {
                let link = rmcp::model::Resource::new("file:///reports/q3.pdf", "q3.pdf")
                    .with_mime_type("application/pdf");
                Ok(CallToolResult::success(vec![
                    ContentBlock::embedded_text("file:///notes.txt", "remember the milk"),
                    ContentBlock::resource(ResourceContents::BlobResourceContents {
                        uri: "file:///logo.png".into(),
                        mime_type: Some("image/png".into()),
                        blob: PNG_1X1.into(),
                        meta: None,
                    }),
                    ContentBlock::resource_link(link),
                ])
                .into())
            }
            "pid" => text(std::process::id().to_string()),
            "cancellations" => text(self.cancellations.load(Ordering::SeqCst).to_string()),
            "env" => {
                let name = arg(&args, "name").as_str().unwrap_or_default();
                text(std::env::var(name).unwrap_or_else(|_| "<unset>".into()))
            }
            "cwd" => text(
                std::env::current_dir()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default(),
            ),
            "header" => {
                let name = arg(&args, "name").as_str().unwrap_or_default();
                let value = context
                    .extensions
                    .get::<http::request::Parts>()
                    .and_then(|p| p.headers.get(name))
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("<unset>")
                    .to_owned();
                text(value)
            }
            other => Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("no tool `{other}`"),
                None,
            )),
        }
    }
}

async fn serve_stdio(server: TestServer, stubborn: bool) {
    let running = server.serve(rmcp::transport::stdio()).await.expect("handshake");
    let _ = running.waiting().await;
    if stubborn {
        std::future::pending::<()>().await;
    }
}

async fn serve_http(addr: &str) {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    let server = TestServer::default();
    let service: StreamableHttpService<TestServer, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::default(),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
    let addr = listener.local_addr().expect("address");
    println!("listening http://{addr}/mcp");
    std::io::stdout().flush().expect("flush");
    axum::serve(listener, router).await.expect("serve");
}

/// Answer every line with something that is not JSON.
fn garbage() {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    for line in stdin.lock().lines() {
        if line.is_err() {
            return;
        }
        let _ = writeln!(out, "<html>this is not JSON-RPC</html>");
        let _ = out.flush();
    }
}

/// A JSON-RPC loop by hand: a proper handshake and tool list, then `tools/call` results of
/// the wrong shape.
fn garbled() {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = msg.get("id").cloned() else {
            continue;
        };
        let method = msg.get("method").and_then(Value::as_str).unwrap_or_default();
        let reply = match method {
            "initialize" => json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "garbled", "version": "0"}
            }}),
            "tools/list" => json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [
                {"name": "garbled", "description": "Answers nonsense", "inputSchema": {"type": "object"}}
            ]}}),
            "tools/call" => {
                json!({"jsonrpc": "2.0", "id": id, "result": {"content": "not a list", "isError": "perhaps"}})
            }
            _ => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
        };
        let _ = writeln!(out, "{reply}");
        let _ = out.flush();
    }
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "stdio".into());
    match mode.as_str() {
        "exit" => std::process::exit(3),
        "garbage" => garbage(),
        "garbled" => garbled(),
        _ => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                match mode.as_str() {
                    "http" => {
                        let addr = std::env::args().nth(2).unwrap_or_else(|| "127.0.0.1:0".into());
                        serve_http(&addr).await;
                    }
                    "bad-schema" => {
                        let server = TestServer {
                            bad_schema: true,
                            ..TestServer::default()
                        };
                        serve_stdio(server, false).await;
                    }
                    "stubborn" => serve_stdio(TestServer::default(), true).await,
                    _ => serve_stdio(TestServer::default(), false).await,
                }
            });
        }
    }
}
