//! `/mcp`: the assistants as MCP tools, over the streamable HTTP transport (`rmcp`).
//!
//! Stateless: every request stands alone (no session to keep, any replica answers), and
//! answers are plain JSON. `tools/list` offers each assistant the caller may use as a
//! tool named after it, whose input schema is its graph's (a `messages` field offered as
//! one string, the user's message); `tools/call` runs the assistant as a stateless run and
//! answers its final state as JSON text (and as `structuredContent`). Arguments that fail
//! the schema, and runs that fail, are tool errors (`isError`) saying why; no run is
//! created for arguments that fail.

use crate::api::error::ApiError;
use crate::auth::Identity;
use crate::service::agents;
use crate::state::AppRef;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::sync::Arc;

/// The `/mcp` route.
pub(crate) fn routes(state: &AppRef) -> axum::Router<AppRef> {
    let s = Arc::clone(state);
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        // Requests are checked by the server's auth; the Host of a deployment is its own.
        .disable_allowed_hosts()
        .with_max_request_body_bytes(state.config.body_limit)
        .with_sse_keep_alive(None);
    let service = StreamableHttpService::new(
        move || {
            Ok(Tools {
                state: Arc::clone(&s),
            })
        },
        Arc::new(NeverSessionManager::default()),
        config,
    );
    axum::Router::new().route_service("/mcp", service)
}

/// The MCP server of one request.
struct Tools {
    state: AppRef,
}

/// A tool: an assistant under a tool name.
struct Offered {
    name: String,
    assistant: crate::models::Assistant,
}

/// `name` as a tool name: letters, digits, `_`, `-` and `.`, at most 128 characters.
fn tool_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(128)
        .collect();
    if out.is_empty() {
        out.push('_');
    }
    out
}

/// The identity the auth gate found for the request (anonymous when none: auth off).
fn identity_of(ctx: &RequestContext<RoleServer>) -> Arc<Identity> {
    let found = ctx
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.extensions.get::<Identity>())
        .cloned();
    Arc::new(found.unwrap_or_else(Identity::anonymous))
}

fn refused(e: impl Into<ApiError>) -> ErrorData {
    let e: ApiError = e.into();
    match e.status.as_u16() {
        401 | 403 | 404 | 422 => {
            ErrorData::invalid_params(e.detail.clone(), Some(json!({"status": e.status.as_u16()})))
        }
        _ => ErrorData::internal_error(e.detail.clone(), None),
    }
}

/// A tool error saying `detail`, with a typed body.
fn tool_error(kind: &str, detail: String, extra: Value) -> CallToolResult {
    let mut body = json!({"error": kind, "detail": detail});
    if let (Some(b), Value::Object(x)) = (body.as_object_mut(), extra) {
        b.extend(x);
    }
    let mut r = CallToolResult::error(vec![ContentBlock::text(detail)]);
    r.structured_content = Some(body);
    r
}

impl Tools {
    /// The tools of the caller, in a stable order (names made unique by the assistant id).
    async fn offered(&self, identity: &Identity) -> Result<Vec<Offered>, ErrorData> {
        let list = agents::visible(&self.state, identity).await.map_err(refused)?;
        let mut taken = HashSet::new();
        let mut out = Vec::with_capacity(list.len());
        for a in list {
            let mut name = tool_name(&a.name);
            if !taken.insert(name.clone()) {
                name = tool_name(&format!("{}_{}", a.name, a.assistant_id));
                taken.insert(name.clone());
            }
            out.push(Offered { name, assistant: a });
        }
        Ok(out)
    }

    /// Check `args` against the tool's schema, and turn them into the graph's input.
    // The error is the tool result the client gets, built once per call.
    #[allow(clippy::result_large_err)]
    fn input(&self, tool: &Offered, args: Map<String, Value>) -> Result<Value, CallToolResult> {
        let (schema, has_messages) = agents::text_input_schema(&self.state, &tool.assistant);
        let args = Value::Object(args);
        if let Ok(v) = jsonschema::validator_for(&Value::Object(schema)) {
            let errors: Vec<Value> = v
                .iter_errors(&args)
                .take(10)
                .map(|e| json!({"path": e.instance_path().to_string(), "message": e.to_string()}))
                .collect();
            if let Some(first) = errors.first() {
                let detail = format!(
                    "invalid arguments for {}: {} {}",
                    tool.name,
                    first["path"].as_str().unwrap_or_default(),
                    first["message"].as_str().unwrap_or_default()
                );
                return Err(tool_error("invalid_arguments", detail, json!({"errors": errors})));
            }
        }
        let mut input = args;
        if has_messages {
            if let Some(Value::String(text)) = input.get("messages").cloned() {
                input["messages"] = json!([agents::user_message(&text)]);
            }
        }
        Ok(input)
    }
}

impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new("graphloom", env!("CARGO_PKG_VERSION"))
                .with_description("The assistants of a graphloom server, as tools"),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let identity = identity_of(&ctx);
        let tools = self
            .offered(&identity)
            .await?
            .into_iter()
            .map(|t| {
                let (schema, _) = agents::text_input_schema(&self.state, &t.assistant);
                let description = t
                    .assistant
                    .description
                    .clone()
                    .unwrap_or_else(|| format!("Runs the {} assistant", t.assistant.name));
                Tool::new(t.name, description, Arc::new(schema))
                    .with_title(t.assistant.name.clone())
                    .with_annotations(
                        ToolAnnotations::new()
                            .read_only(false)
                            .destructive(false)
                            .idempotent(false)
                            .open_world(true),
                    )
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let identity = identity_of(&ctx);
        let tools = self.offered(&identity).await?;
        let Some(tool) = tools.iter().find(|t| t.name == request.name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {}", request.name),
                None,
            ));
        };
        let input = match self.input(tool, request.arguments.unwrap_or_default()) {
            Ok(i) => i,
            Err(r) => return Ok(r.into()),
        };
        let done = agents::run_to_end(&self.state, &identity, &tool.assistant, None, input, Map::new())
            .await
            .map_err(ApiError::from);
        let out = match done {
            Ok(o) => o,
            Err(e) if e.status.is_client_error() => {
                return Ok(tool_error(
                    "invalid_arguments",
                    e.detail,
                    json!({"status": e.status.as_u16()}),
                )
                .into())
            }
            Err(e) => return Err(refused(e)),
        };
        if let Some(err) = out.get("__error__") {
            let message = err
                .get("message")
                .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_owned))
                .unwrap_or_default();
            let detail = format!("the run failed: {message}");
            return Ok(tool_error("run_failed", detail, json!({"run_error": err})).into());
        }
        let text = serde_json::to_string(&out).unwrap_or_default();
        let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
        r.structured_content = Some(out);
        Ok(r.into())
    }
}
