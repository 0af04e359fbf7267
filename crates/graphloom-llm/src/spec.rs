//! Choosing a provider and model from a string: `openai:gpt-4o-mini`,
//! `anthropic:claude-sonnet-4-5`, `ollama:llama3.2`, `openai-compatible:<model>`.

use crate::dyn_model::DynChatModel;
use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// Ollama's OpenAI-compatible endpoint on this machine.
pub const OLLAMA_DEFAULT_BASE_URL: &str = "http://127.0.0.1:11434/v1";

/// The providers a model string can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProviderKind {
    /// `openai:` — OpenAI (`OPENAI_API_KEY`; `OPENAI_BASE_URL` optional).
    OpenAi,
    /// `anthropic:` — Anthropic (`ANTHROPIC_API_KEY`; `ANTHROPIC_BASE_URL` optional).
    Anthropic,
    /// `ollama:` — a local Ollama (`OLLAMA_BASE_URL`, default [`OLLAMA_DEFAULT_BASE_URL`]).
    Ollama,
    /// `openai-compatible:` — any Chat Completions server (`OPENAI_BASE_URL` required,
    /// `OPENAI_API_KEY` optional): vLLM, LiteLLM, OpenRouter, Groq, ...
    OpenAiCompatible,
}

impl ProviderKind {
    /// The prefix used in model strings.
    #[must_use]
    pub fn prefix(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Ollama => "ollama",
            ProviderKind::OpenAiCompatible => "openai-compatible",
        }
    }
}

/// A parsed model string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSpec {
    /// The provider.
    pub provider: ProviderKind,
    /// The model name (may itself contain `:`, as in `ollama:llama3.2:3b`).
    pub model: String,
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.provider.prefix(), self.model)
    }
}

impl FromStr for ModelSpec {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let invalid = |reason: &str| Error::InvalidModelSpec {
            spec: s.to_owned(),
            reason: reason.to_owned(),
        };
        let (provider, model) = s
            .trim()
            .split_once(':')
            .ok_or_else(|| invalid("expected `provider:model`, for example `openai:gpt-4o-mini`"))?;
        let provider = match provider.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "openai" => ProviderKind::OpenAi,
            "anthropic" => ProviderKind::Anthropic,
            "ollama" => ProviderKind::Ollama,
            "openai-compatible" => ProviderKind::OpenAiCompatible,
            _ => {
                return Err(invalid(
                    "unknown provider; use one of openai, anthropic, ollama, openai-compatible",
                ))
            }
        };
        let model = model.trim();
        if model.is_empty() {
            return Err(invalid("the model name is empty"));
        }
        Ok(Self {
            provider,
            model: model.to_owned(),
        })
    }
}

impl ModelSpec {
    /// Parse a model string.
    pub fn parse(s: &str) -> Result<Self> {
        s.parse()
    }

    /// Build the model, reading keys and base URLs from the process environment.
    pub fn build(&self) -> Result<Arc<dyn DynChatModel>> {
        self.build_with(|k| std::env::var(k).ok())
    }

    /// Build the model, reading keys and base URLs through `env` (empty values count as
    /// unset). A missing required variable is [`Error::MissingEnv`], naming it.
    pub fn build_with(&self, env: impl Fn(&str) -> Option<String>) -> Result<Arc<dyn DynChatModel>> {
        let get = |k: &str| env(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let need = |var: &str, what: &str| {
            get(var).ok_or_else(|| Error::MissingEnv {
                provider: self.provider.prefix().to_owned(),
                what: what.to_owned(),
                var: var.to_owned(),
            })
        };
        match self.provider {
            ProviderKind::OpenAi | ProviderKind::Ollama | ProviderKind::OpenAiCompatible => {
                self.build_openai(&get, &need)
            }
            ProviderKind::Anthropic => self.build_anthropic(&get, &need),
        }
    }

    #[cfg(feature = "openai")]
    fn build_openai(
        &self,
        get: &dyn Fn(&str) -> Option<String>,
        need: &dyn Fn(&str, &str) -> Result<String>,
    ) -> Result<Arc<dyn DynChatModel>> {
        use crate::openai::OpenAiModel;
        let m = OpenAiModel::new(&self.model).provider_name(self.provider.prefix());
        let m = match self.provider {
            ProviderKind::OpenAi => {
                let key = need("OPENAI_API_KEY", "an API key")?;
                let m = match get("OPENAI_BASE_URL") {
                    Some(base) => m.base_url(base),
                    None => m,
                };
                m.api_key(key)?
            }
            ProviderKind::Ollama => {
                let base = get("OLLAMA_BASE_URL").unwrap_or_else(|| OLLAMA_DEFAULT_BASE_URL.to_owned());
                m.base_url(base)
            }
            _ => {
                let base = need("OPENAI_BASE_URL", "a base URL")?;
                let m = m.base_url(base);
                match get("OPENAI_API_KEY") {
                    Some(key) => m.api_key(key)?,
                    None => m,
                }
            }
        };
        Ok(Arc::new(m))
    }

    #[cfg(not(feature = "openai"))]
    fn build_openai(
        &self,
        _get: &dyn Fn(&str) -> Option<String>,
        _need: &dyn Fn(&str, &str) -> Result<String>,
    ) -> Result<Arc<dyn DynChatModel>> {
        Err(Error::Config(format!(
            "`{self}` needs graphloom-llm's `openai` feature"
        )))
    }

    #[cfg(feature = "anthropic")]
    fn build_anthropic(
        &self,
        get: &dyn Fn(&str) -> Option<String>,
        need: &dyn Fn(&str, &str) -> Result<String>,
    ) -> Result<Arc<dyn DynChatModel>> {
        let key = need("ANTHROPIC_API_KEY", "an API key")?;
        let m = crate::anthropic::AnthropicModel::new(&self.model);
        let m = match get("ANTHROPIC_BASE_URL") {
            Some(base) => m.base_url(base),
            None => m,
        };
        Ok(Arc::new(m.api_key(key)?))
    }

    #[cfg(not(feature = "anthropic"))]
    fn build_anthropic(
        &self,
        _get: &dyn Fn(&str) -> Option<String>,
        _need: &dyn Fn(&str, &str) -> Result<String>,
    ) -> Result<Arc<dyn DynChatModel>> {
        Err(Error::Config(format!(
            "`{self}` needs graphloom-llm's `anthropic` feature"
        )))
    }
}

/// The model a string names, configured from the environment (LangChain's
/// `init_chat_model`).
///
/// ```
/// let err = graphloom_llm::ModelSpec::parse("anthropic:claude-sonnet-4-5")
///     .and_then(|s| s.build_with(|_| None))
///     .err()
///     .map(|e| e.to_string());
/// assert_eq!(
///     err.as_deref(),
///     Some("provider `anthropic` needs an API key: set the environment variable ANTHROPIC_API_KEY")
/// );
/// ```
pub fn init_chat_model(spec: &str) -> Result<Arc<dyn DynChatModel>> {
    ModelSpec::parse(spec)?.build()
}

/// The environment variable naming the model of a program (`graphloom run`, `graphloom
/// serve`, the examples): a model string, or [`SCRIPTED_MODEL`].
pub const MODEL_ENV: &str = "GRAPHLOOM_MODEL";

/// The value of [`MODEL_ENV`] that picks a program's scripted demo model: canned answers,
/// offline.
pub const SCRIPTED_MODEL: &str = "scripted";

/// What [`MODEL_ENV`] asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelChoice {
    /// Unset (or empty): the program decides (the examples and `graphloom run` use their
    /// scripted model; a deployed `graphloom serve` refuses to guess).
    Unset,
    /// `scripted`: the program's scripted demo model.
    Scripted,
    /// A model string such as `openai:gpt-4o-mini`, not yet checked.
    Spec(String),
}

impl ModelChoice {
    /// What [`MODEL_ENV`] holds in this process's environment.
    #[must_use]
    pub fn from_env() -> Self {
        Self::from_value(std::env::var(MODEL_ENV).ok().as_deref())
    }

    /// What a value of [`MODEL_ENV`] asks for.
    #[must_use]
    pub fn from_value(value: Option<&str>) -> Self {
        match value.map(str::trim) {
            None | Some("") => Self::Unset,
            Some(v) if v.eq_ignore_ascii_case(SCRIPTED_MODEL) => Self::Scripted,
            Some(v) => Self::Spec(v.to_owned()),
        }
    }

    /// The model's name as `/info` and the assistants show it: `scripted` for the demo
    /// model (unset included), else the model string.
    #[must_use]
    pub fn label(&self) -> String {
        match self {
            Self::Unset | Self::Scripted => SCRIPTED_MODEL.to_owned(),
            Self::Spec(s) => s.clone(),
        }
    }

    /// Build the model: `scripted()` when unset or `scripted`, else the model string
    /// through [`init_chat_model`].
    ///
    /// # Errors
    /// [`Error::ModelEnv`] when the model string does not parse or its provider's
    /// variables are missing: a misconfigured model never silently becomes the script.
    pub fn build(&self, scripted: impl FnOnce() -> Arc<dyn DynChatModel>) -> Result<Arc<dyn DynChatModel>> {
        match self {
            Self::Unset | Self::Scripted => Ok(scripted()),
            Self::Spec(spec) => init_chat_model(spec).map_err(|e| Error::ModelEnv {
                var: MODEL_ENV.to_owned(),
                spec: spec.clone(),
                source: Box::new(e),
            }),
        }
    }
}

/// The model [`MODEL_ENV`] names: `scripted()` when it is unset or `scripted`, else the
/// provider's model configured from the environment. What the examples' `default_model()`
/// returns.
///
/// ```
/// use graphloom_llm::{DynChatModel, ModelChoice, Reply, ScriptedModel};
/// use std::sync::Arc;
/// let demo = || Arc::new(ScriptedModel::new([Reply::text("canned")])) as Arc<dyn DynChatModel>;
/// let m = ModelChoice::from_value(Some("scripted")).build(demo).map(|m| m.dyn_provider().to_owned());
/// assert_eq!(m.ok().as_deref(), Some("scripted"));
/// // A model that cannot be built is an error, never the script.
/// let err = ModelChoice::from_value(Some("nope:x")).build(demo).err().map(|e| e.to_string());
/// assert!(err.is_some_and(|e| e.starts_with("GRAPHLOOM_MODEL=nope:x cannot be used")));
/// ```
///
/// # Errors
/// [`Error::ModelEnv`] when the variable names a model that cannot be built.
pub fn model_from_env(scripted: impl FnOnce() -> Arc<dyn DynChatModel>) -> Result<Arc<dyn DynChatModel>> {
    ModelChoice::from_env().build(scripted)
}
