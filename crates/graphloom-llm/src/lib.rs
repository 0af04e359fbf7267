//! graphloom-llm: everything a graph needs to call language models.
//!
//! - [`ChatModel`] (and its object-safe twin [`DynChatModel`]): `invoke` returns an AI
//!   [`Message`] with tool calls, `usage_metadata` and `response_metadata`; `stream` returns
//!   [`ChatChunk`]s (text deltas, tool-call argument deltas joined by index, usage).
//! - Tools and tool choice ([`ToolSpec`], [`ToolChoice`], [`ChatModelExt::bind_tools`]),
//!   structured output validated against the type's JSON Schema
//!   ([`ChatModelExt::invoke_structured`]), per-call [`ChatOptions`].
//! - Providers over real HTTP: [`OpenAiModel`] (Chat Completions: OpenAI, Ollama, vLLM,
//!   LiteLLM, OpenRouter, Groq, ...) and [`AnthropicModel`] (Messages), with retries
//!   ([`RetryConfig`]) honouring `Retry-After`; chosen from a string with
//!   [`init_chat_model`] (`openai:gpt-4o-mini`, `anthropic:...`, `ollama:llama3.2`,
//!   `openai-compatible:<model>`).
//! - Usage and cost: [`Usage`], [`PriceTable`], a per-run [`UsageTracker`] with a
//!   [`UsageEvent`] per call; budgets ([`Budget`], [`BudgetedModel`]) checked before each call.
//! - Graph integration: [`stream_into`] forwards chunks to `messages` stream mode;
//!   [`NodeResultExt::node`] keeps budget errors typed for the run.
//! - [`prompt_hash`]: a canonical SHA-256 of a call, the one place it is computed.
//! - [`ScriptedModel`]: replies from a list, for tests and offline examples.
//! - [`telemetry`]: every call runs in a `chat` `tracing` span with the OpenTelemetry GenAI
//!   attributes (provider, model, token usage, finish reason), a no-op without a subscriber.
//!
//! Messages are core's [`Message`] (LangChain's JSON shape), re-exported here; what models
//! add to them is read with [`MessageExt`].
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `openai` | yes | [`OpenAiModel`], the Chat Completions provider |
//! | `anthropic` | yes | [`AnthropicModel`], the Messages provider |
//! | `http` | with either | the shared HTTP layer (`reqwest` + rustls, SSE, retries) |
//! | `testing` | no | [`testing::OpenAiWireServer`], a local Chat Completions server for tests |
//!
//! Without both provider features the crate has no HTTP dependencies at all: the trait,
//! the scripted model, usage, budgets and the prompt hash remain.
//!
//! # Example
//!
//! ```
//! use graphloom_llm::{
//!     Budget, BudgetedModel, ChatModel, ChatModelExt, ChatOptions, Message, MessageExt, Reply,
//!     ScriptedModel, ToolChoice, ToolSpec, UsageTracker,
//! };
//! use serde_json::json;
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Verdict {
//!     /// Whether the claim holds.
//!     valid: bool,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> graphloom_llm::Result<()> {
//! let script = ScriptedModel::new([
//!     Reply::tool_call("search", json!({"q": "rust"})),
//!     Reply::json(json!({"valid": true})),
//!     Reply::text("never reached"),
//! ]);
//! let tracker = UsageTracker::shared();
//! let model = BudgetedModel::new(script.clone(), tracker.clone(), Budget::unlimited().calls(2))
//!     .bind_tools([ToolSpec::new("search", "Search the web", json!({"type": "object"}))])
//!     .tool_choice(ToolChoice::Auto);
//!
//! let first = model.invoke(&[Message::human("find rust")], &ChatOptions::new()).await?;
//! assert!(first.has_tool_calls());
//! assert_eq!(first.tool_calls[0].args["q"], "rust");
//!
//! let verdict: Verdict = model.invoke_structured(&[Message::human("valid?")], &ChatOptions::new()).await?;
//! assert!(verdict.valid);
//!
//! // The budget allows two calls: the third is refused before it reaches the model.
//! let third = model.invoke(&[Message::human("again")], &ChatOptions::new()).await;
//! assert!(matches!(third, Err(graphloom_llm::Error::BudgetExceeded { .. })));
//! assert_eq!(script.calls(), 2);
//! assert_eq!(tracker.totals().calls, 2);
//! assert!(script.requests()[1].options.response_format.is_some());
//! # Ok(()) }
//! ```
//!
//! # In a graph
//!
//! Call models from nodes with [`stream_into`] (so `messages` stream mode sees the tokens)
//! or plain `invoke`, and turn errors into node errors with [`NodeResultExt::node`]: a
//! budget refusal then ends the run with `graphloom_core::Error::BudgetExceeded` and a
//! resumable checkpoint, transient provider errors stay retryable for the node's
//! `RetryPolicy`. Share one [`UsageTracker`] per run between its [`BudgetedModel`]s; raise
//! the limit with [`BudgetedModel::set_budget`] and continue the run with
//! `RunInput::Continue`.
//!
//! # Against a real endpoint
//!
//! Tests never need the network: they run the providers against a local server speaking
//! each wire format. To check a real endpoint, run the example
//! `cargo run -p graphloom-llm --example live_openai` with `OPENAI_API_KEY` (OpenAI) or
//! `OPENAI_BASE_URL` (any compatible server, e.g. `http://127.0.0.1:11434/v1` for Ollama)
//! set, and `LIVE_MODEL` to pick the model.
//!
//! # Choices
//!
//! - **Hand-written wire types, not `async-openai`.** The Chat Completions types here hold
//!   only the fields graphloom reads, every one optional or defaulted, because the servers
//!   this one protocol must serve (Ollama, vLLM, LiteLLM, OpenRouter, Groq) each leave out or
//!   reshape something (missing tool-call indices, arguments as objects, `null` usage) that
//!   strict generated types reject. `async-openai` would also bring its own HTTP client and
//!   retry loop, and a large type surface for endpoints graphloom does not call. The
//!   requests are built as JSON, so nothing is sent that we did not decide to send.
//! - **`reqwest` 0.12 with `rustls-tls`** (ring), no default features: no OpenSSL, and no
//!   `aws-lc-rs` C build (reqwest 0.13's rustls default).
//! - **`eventsource-stream`** parses SSE (the parser reqwest-eventsource and async-openai
//!   build on); truncation and provider end markers are checked on top of it.
//! - **`jsonschema`** (default features off: no remote `$ref` fetching) validates structured
//!   output against the `schemars` schema before `serde` sees it, so a wrong answer names
//!   the violated rule instead of a serde position.
//! - **`sha2`** for the prompt hash; **`httpdate`** for `Retry-After` dates.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod budget;
mod budgeted;
mod chunk;
mod dyn_model;
#[cfg(feature = "http")]
mod embeddings;
mod error;
mod message;
mod model;
mod options;
mod pricing;
mod prompt_hash;
mod scripted;
#[cfg(feature = "http")]
mod serde_util;
mod spec;
mod stream_into;
mod structured;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;
mod tracker;
mod usage;

#[cfg(feature = "anthropic")]
pub mod anthropic;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "openai")]
pub mod openai;

pub use budget::{Budget, UnpricedModels};
pub use budgeted::BudgetedModel;
pub use chunk::{ChatChunk, ChunkAssembler, ToolCallChunk};
pub use dyn_model::DynChatModel;
#[cfg(feature = "http")]
pub use embeddings::{
    index_from_env, index_from_spec, index_from_spec_with, OpenAiEmbeddings, EMBEDDINGS_DIMS_ENV,
    EMBEDDINGS_ENV, HASH_DIMS,
};
pub use error::{truncate_raw, Error, ErrorKind, NodeResultExt, Result, RAW_EXCERPT_LIMIT};
pub use graphloom_core::{Message, MessageKind, ToolCall};
pub use message::{new_call_id, new_message_id, InvalidToolCall, MessageExt};
pub use model::{collect_stream, ChatModel, ChatModelExt, ChunkStream, WithOptions};
pub use options::{provider_schema, ChatOptions, ResponseFormat, ToolChoice, ToolSpec, NOSTREAM};
pub use pricing::{ModelPrice, PriceTable, PRICES_ENV};
pub use prompt_hash::{canonical_json, prompt_hash, prompt_hash_payload, PROMPT_HASH_VERSION};
pub use scripted::{RecordedRequest, Reply, ScriptedModel, DEFAULT_KEPT_REQUESTS};
pub use spec::{
    init_chat_model, model_from_env, ModelChoice, ModelSpec, ProviderKind, MODEL_ENV,
    OLLAMA_DEFAULT_BASE_URL, SCRIPTED_MODEL,
};
pub use stream_into::stream_into;
pub use structured::{
    parse_message as parse_structured, parse_text as parse_structured_text, prepare as prepare_structured,
    StructuredValidator,
};
pub use tracker::{UsageEvent, UsageTracker};
pub use usage::{estimate_tokens, Usage, UsageTotals};

#[cfg(feature = "anthropic")]
pub use anthropic::AnthropicModel;
#[cfg(feature = "http")]
pub use http::RetryConfig;
#[cfg(feature = "openai")]
pub use openai::OpenAiModel;
