//! The [`Tool`] trait, what a tool receives ([`ToolRuntime`]) and returns ([`ToolOutput`],
//! [`ToolError`]), and [`FnTool`], a tool from an async closure over typed arguments.

use futures::future::BoxFuture;
use graphloom_core::store::DynStore;
use graphloom_core::{Runtime, State, StateError};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};
use std::any::Any;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Default cap on the size of a tool result (its JSON text): 256 KB.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 256 * 1024;

/// What kind of failure a [`ToolError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolErrorCode {
    /// The arguments are not valid JSON or do not match the tool's schema.
    Validation,
    /// The tool ran and failed (or its result is too large).
    Execution,
    /// The tool ran past its timeout.
    Timeout,
    /// No such tool, or the tool cannot be used (its schema does not compile, ...).
    Unavailable,
    /// The result could not be redacted for streams.
    Redaction,
}

impl ToolErrorCode {
    /// The code as a lowercase string.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ToolErrorCode::Validation => "validation",
            ToolErrorCode::Execution => "execution",
            ToolErrorCode::Timeout => "timeout",
            ToolErrorCode::Unavailable => "unavailable",
            ToolErrorCode::Redaction => "redaction",
        }
    }
}

impl fmt::Display for ToolErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tool failure: a code and a message that is safe to show the model.
///
/// Put internal details (stack traces, connection strings, ...) in neither: the message
/// becomes the content of the tool message the model reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    /// What kind of failure.
    pub code: ToolErrorCode,
    /// A message safe to show the model and the caller.
    pub message: String,
}

impl ToolError {
    /// A failure with `code`.
    pub fn new(code: ToolErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
    /// Bad arguments.
    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(ToolErrorCode::Validation, message)
    }
    /// The tool failed.
    pub fn execution(message: impl Into<String>) -> Self {
        Self::new(ToolErrorCode::Execution, message)
    }
    /// The tool timed out.
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(ToolErrorCode::Timeout, message)
    }
    /// The tool is unknown or unusable.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ToolErrorCode::Unavailable, message)
    }
    /// The result could not be redacted.
    pub fn redaction(message: impl Into<String>) -> Self {
        Self::new(ToolErrorCode::Redaction, message)
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} error: {}", self.code, self.message)
    }
}

impl std::error::Error for ToolError {}

/// What a tool returns: a string, or any JSON value (sent to the model as JSON text), or
/// a [`ToolCommand`] (or a list of them, [`ToolOutput::commands`]) for the graph.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The result.
    pub content: Value,
    /// A command for the graph instead of a plain result (see [`ToolOutput::command`]).
    pub command: Option<ToolCommand>,
    /// Commands returned after `command`, applied in order (a tool returning a list of
    /// commands, [`ToolOutput::commands`]).
    pub then: Vec<ToolCommand>,
}

/// A tool's instruction to the graph its [`ToolNode`](crate::ToolNode) runs in, as a
/// LangGraph tool returns `Command(update=..., goto=...)`: update state keys besides the
/// messages, and choose where to go next.
///
/// The update must answer the call: under the state's messages key it holds the tool
/// message with this call's id (`ToolRuntime::tool_call_id`), or the node fails with an
/// error saying so. `goto` adds to the tool node's own edges, as a node's `Command` does.
/// When several calls of one message return commands, the node applies them together:
/// the messages of every call in call order, the other keys through their reducers (an
/// append or `add_messages` key concatenated, `add` summed, `merge` merged; two tools
/// writing one last-value or custom key is an error naming both), every `goto`. A tool
/// may return several commands ([`ToolOutput::commands`]), applied the same way in order;
/// exactly one tool message in them answers the call.
///
/// ```
/// use graphloom_core::Message;
/// use graphloom_prebuilt::{ToolCommand, ToolOutput};
/// use serde_json::json;
/// let answer = Message::tool("switched to billing", "call-1");
/// let out = ToolOutput::command(
///     ToolCommand::new()
///         .update("messages", json!([answer]))
///         .update("team", json!("billing"))
///         .goto("billing_agent"),
/// );
/// assert!(out.command.is_some());
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolCommand {
    /// State keys to write, as JSON (the update's JSON form: a key per state field).
    pub update: Map<String, Value>,
    /// Nodes to go to next.
    pub goto: Vec<String>,
}

impl ToolCommand {
    /// A command that writes nothing and goes nowhere.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
    /// Write `value` to state key `key`.
    #[must_use]
    pub fn update(mut self, key: impl Into<String>, value: Value) -> Self {
        self.update.insert(key.into(), value);
        self
    }
    /// Go to `node` next (with the tool node's own edges).
    #[must_use]
    pub fn goto(mut self, node: impl Into<String>) -> Self {
        self.goto.push(node.into());
        self
    }
    /// A command whose update is the graph's own typed update (`SUpdate` of a
    /// `#[derive(State)] struct S`), so a key the state does not have fails at compile
    /// time instead of when the tool node applies the command. The same as writing each
    /// key with [`ToolCommand::update`]; `update` and `goto` may follow.
    ///
    /// ```
    /// use graphloom_core::{Message, Seq, State};
    /// use graphloom_prebuilt::ToolCommand;
    ///
    /// #[derive(State, Clone, Default, Debug)]
    /// struct Desk {
    ///     #[reducer(add_messages)]
    ///     messages: Seq<Message>,
    ///     team: String,
    /// }
    /// let answer = Message::tool("switched to billing", "call-1");
    /// let cmd = ToolCommand::from_update::<Desk>(
    ///     DeskUpdate::new().messages(vec![answer]).team("billing".into()),
    /// )?
    /// .goto("billing_agent");
    /// assert_eq!(cmd.update["team"], "billing");
    /// # Ok::<(), graphloom_core::StateError>(())
    /// ```
    ///
    /// A key the state does not have does not compile:
    ///
    /// ```compile_fail,E0599
    /// # use graphloom_core::State;
    /// # use graphloom_prebuilt::ToolCommand;
    /// # #[derive(State, Clone, Default, Debug)]
    /// # struct Desk { team: String }
    /// let cmd = ToolCommand::from_update::<Desk>(DeskUpdate::new().teem("billing".into()));
    /// ```
    ///
    /// # Errors
    /// When the update does not serialise to a JSON object (a field whose `Serialize`
    /// fails); in a tool, `?` makes it a [`ToolError`].
    pub fn from_update<S: State + Default>(update: S::Update) -> Result<Self, StateError> {
        match S::default().update_to_json(&update)? {
            Value::Object(update) => Ok(Self {
                update,
                goto: Vec::new(),
            }),
            other => Err(StateError::Decode {
                field: String::new(),
                message: format!("an update must serialise to a JSON object, not {other}"),
            }),
        }
    }
}

/// A typed update that does not serialise ([`ToolCommand::from_update`]), as an
/// execution error of the tool.
impl From<StateError> for ToolError {
    fn from(e: StateError) -> Self {
        ToolError::execution(format!("the command's update does not serialise: {e}"))
    }
}

impl ToolOutput {
    /// A text result.
    pub fn text(s: impl Into<String>) -> Self {
        Self {
            content: Value::String(s.into()),
            command: None,
            then: Vec::new(),
        }
    }
    /// A JSON result.
    #[must_use]
    pub fn json(v: Value) -> Self {
        Self {
            content: v,
            command: None,
            then: Vec::new(),
        }
    }
    /// A command for the graph (see [`ToolCommand`]); its `content` is `null`.
    #[must_use]
    pub fn command(command: ToolCommand) -> Self {
        Self {
            content: Value::Null,
            command: Some(command),
            then: Vec::new(),
        }
    }
    /// Several commands for the graph, applied in order (LangGraph's tool returning a list
    /// of `Command`s). Exactly one of them must carry the tool message answering the call;
    /// an empty list is a `null` result.
    #[must_use]
    pub fn commands(commands: impl IntoIterator<Item = ToolCommand>) -> Self {
        let mut commands = commands.into_iter();
        Self {
            content: Value::Null,
            command: commands.next(),
            then: commands.collect(),
        }
    }
    /// The content as the model sees it: strings as they are, anything else as JSON text.
    #[must_use]
    pub fn to_text(&self) -> String {
        match &self.content {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }
    /// [`ToolOutput::to_text`] without copying a text content.
    #[must_use]
    pub fn into_text(self) -> String {
        match self.content {
            Value::String(s) => s,
            other => other.to_string(),
        }
    }
    /// The length in bytes of [`ToolOutput::to_text`], without copying a text content.
    #[must_use]
    pub fn text_len(&self) -> usize {
        match &self.content {
            Value::String(s) => s.len(),
            other => other.to_string().len(),
        }
    }
}

impl From<String> for ToolOutput {
    fn from(s: String) -> Self {
        Self::text(s)
    }
}
impl From<&str> for ToolOutput {
    fn from(s: &str) -> Self {
        Self::text(s)
    }
}
impl From<ToolCommand> for ToolOutput {
    fn from(c: ToolCommand) -> Self {
        Self::command(c)
    }
}
impl From<Vec<ToolCommand>> for ToolOutput {
    fn from(c: Vec<ToolCommand>) -> Self {
        Self::commands(c)
    }
}
impl From<Value> for ToolOutput {
    fn from(v: Value) -> Self {
        Self::json(v)
    }
}

/// The graph state a tool sees, as JSON: a [`Value`] (it derefs to one:
/// `rt.state.get("messages")`, `&rt.state`, `rt.state["key"]`), built from the state the
/// first time a tool reads it, so a tool node whose tools never look pays nothing for a
/// large state.
#[derive(Clone)]
pub struct ToolState(Arc<ToolStateInner>);

struct ToolStateInner {
    value: std::sync::OnceLock<Value>,
    make: Option<Box<dyn Fn() -> Value + Send + Sync>>,
}

impl ToolState {
    /// The state built by `make` when first read.
    pub fn lazy(make: impl Fn() -> Value + Send + Sync + 'static) -> Self {
        Self(Arc::new(ToolStateInner {
            value: std::sync::OnceLock::new(),
            make: Some(Box::new(make)),
        }))
    }
    /// The JSON value.
    #[must_use]
    pub fn value(&self) -> &Value {
        self.0
            .value
            .get_or_init(|| self.0.make.as_ref().map_or(Value::Null, |f| f()))
    }
}

impl From<Value> for ToolState {
    fn from(v: Value) -> Self {
        let cell = std::sync::OnceLock::new();
        let _ = cell.set(v);
        Self(Arc::new(ToolStateInner {
            value: cell,
            make: None,
        }))
    }
}

impl std::ops::Deref for ToolState {
    type Target = Value;
    fn deref(&self) -> &Value {
        self.value()
    }
}

impl fmt::Debug for ToolState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.value.get() {
            Some(v) => write!(f, "ToolState({v})"),
            None => f.write_str("ToolState(<not built yet>)"),
        }
    }
}

/// What a tool gets besides its arguments. Never part of the schema the model sees.
#[derive(Clone)]
pub struct ToolRuntime {
    /// The graph state when the tool node ran, as JSON (built when first read).
    pub state: ToolState,
    /// The id of the tool call being answered.
    pub tool_call_id: String,
    /// An idempotency key for side effects of this call, stable across retries, resumes and
    /// crashes of the same task (from `Runtime::idempotency_key(tool_call_id)`); `None`
    /// outside a graph.
    pub idempotency_key: Option<String>,
    runtime: Option<Runtime>,
    injected: Map<String, Value>,
}

impl fmt::Debug for ToolRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolRuntime")
            .field("tool_call_id", &self.tool_call_id)
            .field("idempotency_key", &self.idempotency_key)
            .field("injected", &self.injected.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl ToolRuntime {
    /// A runtime outside a graph (for tests and direct calls).
    pub fn detached(state: impl Into<ToolState>, tool_call_id: impl Into<String>) -> Self {
        Self {
            state: state.into(),
            tool_call_id: tool_call_id.into(),
            idempotency_key: None,
            runtime: None,
            injected: Map::new(),
        }
    }
    /// A runtime inside a graph node.
    pub fn new(state: impl Into<ToolState>, tool_call_id: impl Into<String>, runtime: Runtime) -> Self {
        let tool_call_id = tool_call_id.into();
        Self {
            idempotency_key: Some(runtime.idempotency_key(&tool_call_id)),
            state: state.into(),
            tool_call_id,
            runtime: Some(runtime),
            injected: Map::new(),
        }
    }
    /// Set an injected value (what a tool reads with [`ToolRuntime::injected`]).
    #[must_use]
    pub fn with_injected(mut self, name: impl Into<String>, value: Value) -> Self {
        self.injected.insert(name.into(), value);
        self
    }
    /// The value of an injected name: set by the caller, else the state field of that name.
    /// Never what the model wrote.
    #[must_use]
    pub fn injected(&self, name: &str) -> Option<&Value> {
        self.injected.get(name).or_else(|| self.state.get(name))
    }
    /// The node's runtime, inside a graph.
    #[must_use]
    pub fn runtime(&self) -> Option<&Runtime> {
        self.runtime.as_ref()
    }
    /// The run's context value, if it is a `T`.
    #[must_use]
    pub fn context<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.runtime.as_ref()?.context::<T>()
    }
    /// The long-term store, if the graph has one.
    #[must_use]
    pub fn store(&self) -> Option<&Arc<dyn DynStore>> {
        self.runtime.as_ref()?.store()
    }
    /// Write a `custom` stream event (nothing happens outside a graph).
    pub fn write(&self, value: impl Serialize) {
        if let Some(rt) = &self.runtime {
            rt.write(value);
        }
    }
    /// The thread id, if any.
    #[must_use]
    pub fn thread_id(&self) -> Option<&str> {
        self.runtime.as_ref()?.thread_id()
    }
}

/// A tool the model can call. Object-safe: keep tools as `Arc<dyn Tool>`.
///
/// The [`crate::ToolNode`] validates arguments against [`Tool::schema`] before `call`, after
/// dropping keys named in [`Tool::injected`]; `call` can rely on valid arguments.
pub trait Tool: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &str;
    /// What it does (the model reads this).
    fn description(&self) -> &str;
    /// JSON Schema of the arguments the model supplies (never the injected ones).
    fn schema(&self) -> &Value;
    /// Names whose values come from the runtime, not the model; model-supplied values for
    /// them are dropped before validation.
    fn injected(&self) -> &[String] {
        &[]
    }
    /// Whether the tool changes the world: mutating tools pause for approval first.
    fn mutating(&self) -> bool {
        false
    }
    /// Top-level result fields that may reach streams; `None`: no result content does.
    fn stream_allowlist(&self) -> Option<&[String]> {
        None
    }
    /// This tool's result size cap in bytes (default: the node's).
    fn max_result_bytes(&self) -> Option<usize> {
        None
    }
    /// This tool's timeout (default: the node's).
    fn timeout(&self) -> Option<Duration> {
        None
    }
    /// Run the tool with validated arguments.
    fn call(&self, args: Value, rt: ToolRuntime) -> BoxFuture<'static, Result<ToolOutput, ToolError>>;

    /// The spec a model is offered.
    fn spec(&self) -> graphloom_llm::ToolSpec {
        graphloom_llm::ToolSpec::new(self.name(), self.description(), self.schema().clone())
    }
}

type ToolFn =
    Arc<dyn Fn(Value, ToolRuntime) -> BoxFuture<'static, Result<ToolOutput, ToolError>> + Send + Sync>;

/// A tool from an async closure over typed arguments `T` (schema from `schemars`; doc
/// comments become descriptions).
///
/// ```
/// use graphloom_prebuilt::{FnTool, Tool, ToolError};
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Add {
///     /// First term.
///     a: i64,
///     /// Second term.
///     b: i64,
/// }
///
/// let add = FnTool::new("add", "Add two integers", |args: Add, _rt| async move {
///     Ok::<_, ToolError>((args.a + args.b).to_string())
/// });
/// assert_eq!(add.name(), "add");
/// assert_eq!(add.schema()["required"], serde_json::json!(["a", "b"]));
/// ```
#[derive(Clone)]
pub struct FnTool {
    name: String,
    description: String,
    schema: Value,
    injected: Vec<String>,
    mutating: bool,
    allowlist: Option<Vec<String>>,
    max_result_bytes: Option<usize>,
    timeout: Option<Duration>,
    func: ToolFn,
}

impl fmt::Debug for FnTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnTool")
            .field("name", &self.name)
            .field("mutating", &self.mutating)
            .finish_non_exhaustive()
    }
}

impl FnTool {
    /// A tool named `name` running `f` with arguments decoded as `T`.
    pub fn new<T, F, Fut, O>(name: impl Into<String>, description: impl Into<String>, f: F) -> Self
    where
        T: schemars::JsonSchema + DeserializeOwned + Send + 'static,
        F: Fn(T, ToolRuntime) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
        O: Into<ToolOutput>,
    {
        let f = Arc::new(f);
        let func: ToolFn = Arc::new(move |args: Value, rt: ToolRuntime| {
            let f = Arc::clone(&f);
            Box::pin(async move {
                let typed: T = serde_json::from_value(args)
                    .map_err(|e| ToolError::validation(format!("arguments do not decode: {e}")))?;
                f(typed, rt).await.map(Into::into)
            })
        });
        Self {
            name: name.into(),
            description: description.into(),
            schema: graphloom_llm::provider_schema::<T>(),
            injected: Vec::new(),
            mutating: false,
            allowlist: None,
            max_result_bytes: None,
            timeout: None,
            func,
        }
    }
    /// Mark as mutating: calls pause for approval before they run.
    #[must_use]
    pub fn mark_mutating(mut self) -> Self {
        self.mutating = true;
        self
    }
    /// Names injected by the runtime (model-supplied values are dropped).
    #[must_use]
    pub fn inject<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.injected = names.into_iter().map(Into::into).collect();
        self
    }
    /// Result fields that may reach streams.
    #[must_use]
    pub fn stream_fields<I: IntoIterator<Item = S>, S: Into<String>>(mut self, fields: I) -> Self {
        self.allowlist = Some(fields.into_iter().map(Into::into).collect());
        self
    }
    /// Cap this tool's results at `bytes`.
    #[must_use]
    pub fn result_limit(mut self, bytes: usize) -> Self {
        self.max_result_bytes = Some(bytes);
        self
    }
    /// Time this tool out after `d`.
    #[must_use]
    pub fn with_timeout(mut self, d: Duration) -> Self {
        self.timeout = Some(d);
        self
    }
    /// As a shared trait object.
    #[must_use]
    pub fn arc(self) -> Arc<dyn Tool> {
        Arc::new(self)
    }
}

impl Tool for FnTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn schema(&self) -> &Value {
        &self.schema
    }
    fn injected(&self) -> &[String] {
        &self.injected
    }
    fn mutating(&self) -> bool {
        self.mutating
    }
    fn stream_allowlist(&self) -> Option<&[String]> {
        self.allowlist.as_deref()
    }
    fn max_result_bytes(&self) -> Option<usize> {
        self.max_result_bytes
    }
    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
    fn call(&self, args: Value, rt: ToolRuntime) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        (self.func)(args, rt)
    }
}
