//! Structured output of an agent: [`StructuredOutput`] (LangChain's `ToolStrategy` and
//! `ProviderStrategy`), and what the model node does with an answer.

use crate::middleware::ModelResponse;
use graphloom_core::{Message, ToolCall};
use graphloom_llm::{MessageExt, ResponseFormat, ToolSpec};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::Arc;

/// The text a retry message carries (LangChain's `STRUCTURED_OUTPUT_ERROR_TEMPLATE`).
fn retry_text(error: &str) -> String {
    format!("Error: {error}\n Please fix your mistakes.")
}

/// How the model gives its structured answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// The model calls a tool whose arguments are the answer (works with any model that
    /// calls tools); a bad answer is sent back with the validation error and the model
    /// tries again.
    Tool,
    /// The provider's own structured output (OpenAI `response_format: json_schema`,
    /// Anthropic a forced tool call); a bad answer fails the run.
    Provider,
}

type Check = Arc<dyn Fn(&Value) -> Result<(), String> + Send + Sync>;

/// An agent's `response_format`: the JSON Schema of a Rust type, how the model is asked
/// for it, and how a bad answer is handled. The answer lands in the state's
/// `structured_response` (read it typed with
/// [`AgentGraphState::structured`](crate::AgentGraphState::structured)).
///
/// ```
/// use graphloom_prebuilt::StructuredOutput;
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Weather {
///     /// Degrees Celsius.
///     temperature: f64,
/// }
/// let format = StructuredOutput::tool::<Weather>();
/// assert_eq!(format.name(), "Weather");
/// ```
#[derive(Clone)]
pub struct StructuredOutput {
    name: String,
    description: String,
    schema: Value,
    strategy: Strategy,
    check: Check,
    retry: bool,
    tool_message: Option<String>,
}

impl std::fmt::Debug for StructuredOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StructuredOutput")
            .field("name", &self.name)
            .field("strategy", &self.strategy)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl StructuredOutput {
    fn of<T: DeserializeOwned + schemars::JsonSchema + 'static>(strategy: Strategy) -> Self {
        let (format, validator) = graphloom_llm::prepare_structured::<T>();
        let validator = validator.map(Arc::new).map_err(|e| e.to_string());
        let check: Check = Arc::new(move |v: &Value| {
            let validator = validator.as_ref().map_err(Clone::clone)?;
            graphloom_llm::parse_structured_text::<T>(&v.to_string(), validator)
                .map(|_| ())
                .map_err(|e| match e {
                    graphloom_llm::Error::StructuredOutput { reason, .. } => reason,
                    other => other.to_string(),
                })
        });
        let description = format
            .schema
            .get("description")
            .and_then(Value::as_str)
            .map_or_else(
                || format!("Return the final answer as a `{}`.", format.name),
                str::to_owned,
            );
        Self {
            name: format.name,
            description,
            schema: format.schema,
            strategy,
            check,
            retry: true,
            tool_message: None,
        }
    }
    /// Ask for a `T` through a tool call (LangChain's `ToolStrategy`).
    #[must_use]
    pub fn tool<T: DeserializeOwned + schemars::JsonSchema + 'static>() -> Self {
        Self::of::<T>(Strategy::Tool)
    }
    /// Ask for a `T` through the provider's structured output (LangChain's
    /// `ProviderStrategy`).
    #[must_use]
    pub fn provider<T: DeserializeOwned + schemars::JsonSchema + 'static>() -> Self {
        Self::of::<T>(Strategy::Provider)
    }
    /// With the tool strategy: `true` (default) sends a bad answer back to the model with
    /// the error, `false` fails the run.
    #[must_use]
    pub fn retry_on_error(mut self, on: bool) -> Self {
        self.retry = on;
        self
    }
    /// With the tool strategy: the content of the tool message answering the schema
    /// tool call (default `Returning structured response: <answer>`).
    #[must_use]
    pub fn tool_message(mut self, text: impl Into<String>) -> Self {
        self.tool_message = Some(text.into());
        self
    }
    /// The schema's name (the tool's name with the tool strategy).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The strategy.
    #[must_use]
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }
    /// The JSON Schema.
    #[must_use]
    pub fn schema(&self) -> &Value {
        &self.schema
    }
    /// The tool the model calls to answer, with the tool strategy.
    #[must_use]
    pub fn tool_spec(&self) -> Option<ToolSpec> {
        (self.strategy == Strategy::Tool)
            .then(|| ToolSpec::new(&self.name, &self.description, self.schema.clone()))
    }
    /// The provider response format, with the provider strategy.
    #[must_use]
    pub fn response_format(&self) -> Option<ResponseFormat> {
        (self.strategy == Strategy::Provider).then(|| ResponseFormat {
            name: self.name.clone(),
            schema: self.schema.clone(),
            strict: false,
        })
    }

    /// Turn the model's answer into the response: the structured answer found (or the
    /// retry messages), per strategy.
    ///
    /// # Errors
    /// A bad answer that is not retried: `Error::StructuredOutput` of graphloom-llm as a
    /// node error.
    pub(crate) fn handle(&self, answer: Message) -> Result<ModelResponse, graphloom_core::NodeError> {
        match self.strategy {
            Strategy::Provider => self.handle_provider(answer),
            Strategy::Tool => self.handle_tool(answer),
        }
    }

    fn fail(&self, reason: String, raw: &str) -> graphloom_core::NodeError {
        graphloom_llm::Error::StructuredOutput {
            type_name: self.name.clone(),
            reason,
            raw: graphloom_llm::truncate_raw(raw),
        }
        .into_node_error()
    }

    fn handle_provider(&self, answer: Message) -> Result<ModelResponse, graphloom_core::NodeError> {
        if answer.has_tool_calls() {
            return Ok(ModelResponse::of(answer));
        }
        let text = answer.text();
        let value: Value = serde_json::from_str(strip_fence(&text))
            .map_err(|e| self.fail(format!("not valid JSON: {e}"), &text))?;
        (self.check)(&value).map_err(|reason| self.fail(reason, &text))?;
        let mut response = ModelResponse::of(answer);
        response.structured_response = Some(value);
        Ok(response)
    }

    fn handle_tool(&self, answer: Message) -> Result<ModelResponse, graphloom_core::NodeError> {
        let mine: Vec<ToolCall> = answer
            .tool_calls
            .iter()
            .filter(|c| c.name == self.name)
            .cloned()
            .collect();
        if mine.is_empty() {
            return Ok(ModelResponse::of(answer));
        }
        if mine.len() > 1 {
            let names: Vec<&str> = mine.iter().map(|c| c.name.as_str()).collect();
            let error = format!(
                "Model incorrectly returned multiple structured responses ({}) when only one is expected.",
                names.join(", ")
            );
            if !self.retry {
                return Err(self.fail(error, &answer.text()));
            }
            let mut response = ModelResponse::of(answer);
            for call in &mine {
                response.messages.push(tool_message(&retry_text(&error), call));
            }
            return Ok(response);
        }
        let call = &mine[0];
        let args = match &call.args {
            Value::String(s) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
            other => other.clone(),
        };
        match (self.check)(&args) {
            Ok(()) => {
                let content = self
                    .tool_message
                    .clone()
                    .unwrap_or_else(|| format!("Returning structured response: {args}"));
                let msg = tool_message(&content, call);
                let mut response = ModelResponse::of(answer);
                response.messages.push(msg);
                response.structured_response = Some(args);
                Ok(response)
            }
            Err(reason) => {
                let error = format!(
                    "Failed to parse structured output for tool '{}': {reason}.",
                    call.name
                );
                if !self.retry {
                    return Err(self.fail(error, &args.to_string()));
                }
                let mut response = ModelResponse::of(answer);
                response.messages.push(tool_message(&retry_text(&error), call));
                Ok(response)
            }
        }
    }
}

/// The tool message answering a schema tool call (no `status`, as LangChain writes it).
fn tool_message(content: &str, call: &ToolCall) -> Message {
    let mut m = Message::tool(content, &call.id);
    m.name = Some(call.name.clone());
    m
}

fn strip_fence(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    rest.strip_suffix("```").unwrap_or(rest).trim()
}
