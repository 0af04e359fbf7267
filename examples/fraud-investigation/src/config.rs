//! Settings (TDD-002 §9): limits of the graph, the planner model, feature flags.
//!
//! Read from the environment with the seed's prefixes (`LANGGRAPH_`, `PLANNER_`) by
//! [`Settings::from_env`]; tests build them directly. Durations are [`Duration`]s so that
//! tests can use milliseconds; the environment gives seconds.

use crate::state::{create_initial_state, InvestigationState};
use crate::tools::FALLBACK_SEQUENCE;
use serde_json::{json, Map};
use std::collections::BTreeMap;
use std::time::Duration;

/// Graph runtime limits (`LANGGRAPH_*`).
#[derive(Debug, Clone, PartialEq)]
pub struct LangGraphConfig {
    /// Most tool decisions per investigation (`LANGGRAPH_MAX_STEPS`, default 20).
    pub max_steps: u32,
    /// Wall-clock limit of one run (`LANGGRAPH_INVESTIGATION_TIMEOUT_SECONDS`, alias
    /// `LANGGRAPH_MAX_RUNTIME_SECONDS`; default 120 s). Past it the investigation is
    /// `TIMED_OUT`.
    pub investigation_timeout: Duration,
    /// Limit of one tool call (`LANGGRAPH_TOOL_TIMEOUT_SECONDS`, default 30 s). Past it the
    /// tool's execution is `TIMED_OUT` and the run goes on.
    pub tool_timeout: Duration,
    /// Fall back to the deterministic sequence when the planner model fails
    /// (`LANGGRAPH_ENABLE_PLANNER_FALLBACK`, default true). Off: a model failure fails the
    /// investigation.
    pub enable_planner_fallback: bool,
}

impl Default for LangGraphConfig {
    fn default() -> Self {
        Self {
            max_steps: crate::state::DEFAULT_MAX_STEPS,
            investigation_timeout: Duration::from_secs(120),
            tool_timeout: Duration::from_secs(30),
            enable_planner_fallback: true,
        }
    }
}

/// Planner model settings (`PLANNER_*`).
#[derive(Debug, Clone, PartialEq)]
pub struct PlannerConfig {
    /// Ask the model at all (`PLANNER_LLM_ENABLED`); false means the deterministic sequence.
    pub llm_enabled: bool,
    /// Model string for `graphloom_llm::init_chat_model` (`PLANNER_MODEL_NAME`).
    pub model_name: String,
    /// Sampling temperature (`PLANNER_TEMPERATURE`).
    pub temperature: f64,
    /// Answer length limit (`PLANNER_MAX_TOKENS`).
    pub max_tokens: u32,
    /// Limit of one planner call (`PLANNER_TIMEOUT_SECONDS`, default 10 s).
    pub timeout: Duration,
    /// Sanitise untrusted text (merchant names, ...) before it reaches the prompt
    /// (`PLANNER_PROMPT_GUARD_ENABLED`).
    pub prompt_guard_enabled: bool,
    /// The deterministic order used when the model fails.
    pub fallback_sequence: Vec<String>,
}

impl Default for PlannerConfig {
    fn default() -> Self {
        Self {
            llm_enabled: true,
            model_name: "ollama:llama3.2".to_owned(),
            temperature: 0.1,
            max_tokens: 256,
            timeout: Duration::from_secs(10),
            prompt_guard_enabled: true,
            fallback_sequence: FALLBACK_SEQUENCE.iter().map(|s| (*s).to_owned()).collect(),
        }
    }
}

/// All settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Graph limits.
    pub langgraph: LangGraphConfig,
    /// Planner model.
    pub planner: PlannerConfig,
    /// Let reasoning_tool ask the model for its narrative (`REASONING_LLM_ENABLED`, default
    /// false: the rule-based summary).
    pub reasoning_llm_enabled: bool,
    /// similarity_tool ranks closed cases by vector similarity of their risk signals
    /// (`VECTOR_SEARCH_ENABLED`, default true); off: exact category and channel matches.
    pub vector_search_enabled: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            langgraph: LangGraphConfig::default(),
            planner: PlannerConfig::default(),
            reasoning_llm_enabled: false,
            vector_search_enabled: true,
        }
    }
}

fn env_parse<T: std::str::FromStr>(env: &impl Fn(&str) -> Option<String>, key: &str) -> Option<T> {
    env(key).and_then(|v| v.trim().parse().ok())
}

fn env_bool(env: &impl Fn(&str) -> Option<String>, key: &str) -> Option<bool> {
    env(key).map(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

impl Settings {
    /// Settings from the process environment (unset or unparsable values keep defaults).
    #[must_use]
    pub fn from_env() -> Self {
        Self::from_env_with(|k| std::env::var(k).ok())
    }

    /// Settings read through `env`.
    #[must_use]
    pub fn from_env_with(env: impl Fn(&str) -> Option<String>) -> Self {
        let mut s = Self::default();
        let lg = &mut s.langgraph;
        if let Some(v) = env_parse(&env, "LANGGRAPH_MAX_STEPS") {
            lg.max_steps = v;
        }
        if let Some(v) = env_parse::<u64>(&env, "LANGGRAPH_INVESTIGATION_TIMEOUT_SECONDS")
            .or_else(|| env_parse(&env, "LANGGRAPH_MAX_RUNTIME_SECONDS"))
        {
            lg.investigation_timeout = Duration::from_secs(v);
        }
        if let Some(v) = env_parse(&env, "LANGGRAPH_TOOL_TIMEOUT_SECONDS") {
            lg.tool_timeout = Duration::from_secs(v);
        }
        if let Some(v) = env_bool(&env, "LANGGRAPH_ENABLE_PLANNER_FALLBACK") {
            lg.enable_planner_fallback = v;
        }
        let p = &mut s.planner;
        if let Some(v) = env_bool(&env, "PLANNER_LLM_ENABLED") {
            p.llm_enabled = v;
        }
        if let Some(v) = env("PLANNER_MODEL_NAME") {
            p.model_name = v;
        }
        if let Some(v) = env_parse(&env, "PLANNER_TEMPERATURE") {
            p.temperature = v;
        }
        if let Some(v) = env_parse(&env, "PLANNER_MAX_TOKENS") {
            p.max_tokens = v;
        }
        if let Some(v) = env_parse(&env, "PLANNER_TIMEOUT_SECONDS") {
            p.timeout = Duration::from_secs(v);
        }
        if let Some(v) = env_bool(&env, "PLANNER_PROMPT_GUARD_ENABLED") {
            p.prompt_guard_enabled = v;
        }
        if let Some(v) = env_bool(&env, "REASONING_LLM_ENABLED") {
            s.reasoning_llm_enabled = v;
        }
        if let Some(v) = env_bool(&env, "VECTOR_SEARCH_ENABLED") {
            s.vector_search_enabled = v;
        }
        s
    }

    /// The feature flags as the state records them.
    #[must_use]
    pub fn feature_flags(&self, planner_model_present: bool) -> BTreeMap<String, bool> {
        BTreeMap::from([
            (
                "planner_llm_enabled".to_owned(),
                self.planner.llm_enabled && planner_model_present,
            ),
            ("reasoning_llm_enabled".to_owned(), self.reasoning_llm_enabled),
            ("vector_search_enabled".to_owned(), self.vector_search_enabled),
            (
                "prompt_guard_enabled".to_owned(),
                self.planner.prompt_guard_enabled,
            ),
        ])
    }

    /// The safeguards as the state records them.
    #[must_use]
    pub fn safeguards(&self) -> Map<String, serde_json::Value> {
        let secs = |d: Duration| json!(d.as_secs_f64());
        let mut m = Map::new();
        m.insert("max_steps".into(), json!(self.langgraph.max_steps));
        m.insert(
            "investigation_timeout_seconds".into(),
            secs(self.langgraph.investigation_timeout),
        );
        m.insert("tool_timeout_seconds".into(), secs(self.langgraph.tool_timeout));
        m
    }

    /// A fresh state for a run under these settings.
    #[must_use]
    pub fn initial_state(
        &self,
        investigation_id: &str,
        transaction_id: &str,
        planner_model_present: bool,
    ) -> InvestigationState {
        let mut s = create_initial_state(investigation_id, transaction_id, self.langgraph.max_steps);
        s.feature_flags = self.feature_flags(planner_model_present);
        s.safeguards = self.safeguards();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_overrides_defaults() {
        let env = |k: &str| match k {
            "LANGGRAPH_MAX_STEPS" => Some("7".to_owned()),
            "LANGGRAPH_MAX_RUNTIME_SECONDS" => Some("30".to_owned()),
            "LANGGRAPH_TOOL_TIMEOUT_SECONDS" => Some("10".to_owned()),
            "PLANNER_LLM_ENABLED" => Some("false".to_owned()),
            "VECTOR_SEARCH_ENABLED" => Some("0".to_owned()),
            _ => None,
        };
        let s = Settings::from_env_with(env);
        assert_eq!(s.langgraph.max_steps, 7);
        assert_eq!(s.langgraph.investigation_timeout, Duration::from_secs(30));
        assert_eq!(s.langgraph.tool_timeout, Duration::from_secs(10));
        assert!(!s.planner.llm_enabled);
        assert!(!s.vector_search_enabled);
        assert_eq!(s.planner.fallback_sequence.len(), 6);
        let st = s.initial_state("i", "t", true);
        assert_eq!(st.max_steps, 7);
        assert!(!st.feature_flags["planner_llm_enabled"]);
        assert_eq!(st.safeguards["max_steps"], 7);
    }
}
