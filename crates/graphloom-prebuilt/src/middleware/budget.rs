//! [`TokenBudget`]: token and cost budgets of a run, checked before every model call
//! (seed 004's `check_budget`).
//!
//! Each model call's usage (the provider's `usage_metadata`) and cost (the provider's
//! reported cost when the answer carries one in `response_metadata.cost`, else the
//! [`PriceTable`]) are added to the state field `usage` (`{"input_tokens",
//! "output_tokens", "total_tokens", "cost_usd", "calls"}`, reset when a run starts from new
//! input, kept when a stopped or paused run is continued or resumed) and `thread_usage`
//! (the same, never reset). Before a call, a budget already used up
//! ends the run: by default with `graphloom_core::Error::BudgetExceeded` and a resumable
//! checkpoint (raise the budget with [`TokenBudget::shared`]'s handle and continue the
//! run), or with an AI message saying so ([`BudgetExit::End`]).
//!
//! A cost budget on a model the price table does not know is refused when the agent is
//! built: it would run for free, not within budget.

use super::{Hook, HookFuture, HookResult, Hooks, Jump, Middleware, ModelNext, ModelRequest, ModelResponse};
use crate::create_agent::{AgentGraphState, AgentGraphUpdate, StateField};
use futures::future::BoxFuture;
use graphloom_core::{JsonReducer, Message, NodeError, Runtime};
use graphloom_llm::{Budget, MessageExt, PriceTable, Usage};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::{Arc, PoisonError, RwLock};

/// Usage counted in the state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UsageCount {
    /// Model calls.
    #[serde(default)]
    pub calls: u64,
    /// Input tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Both.
    #[serde(default)]
    pub total_tokens: u64,
    /// Cost in USD.
    #[serde(default)]
    pub cost_usd: f64,
}

impl UsageCount {
    fn add(&mut self, usage: &Usage, cost: f64) {
        self.calls += 1;
        self.input_tokens = self.input_tokens.saturating_add(usage.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(usage.output_tokens);
        self.total_tokens = self.input_tokens.saturating_add(self.output_tokens);
        self.cost_usd += cost;
    }
    fn totals(&self) -> graphloom_llm::UsageTotals {
        graphloom_llm::UsageTotals {
            calls: self.calls,
            failed_calls: 0,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cost_usd: self.cost_usd,
        }
    }
}

/// What happens when the budget is used up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BudgetExit {
    /// The run ends with `Error::BudgetExceeded` and a resumable checkpoint.
    #[default]
    Error,
    /// The run ends normally with an AI message saying which budget ran out.
    End,
}

/// Token and cost budgets of a run; see the [module docs](self).
#[derive(Debug, Clone)]
#[must_use]
pub struct TokenBudget {
    budget: Arc<RwLock<Budget>>,
    prices: PriceTable,
    exit: BudgetExit,
}

impl TokenBudget {
    /// Enforce `budget` (its call, token and cost limits; its wall time is not checked
    /// here) per run.
    pub fn new(budget: Budget) -> Self {
        Self {
            budget: Arc::new(RwLock::new(budget)),
            prices: with_env(PriceTable::builtin()),
            exit: BudgetExit::Error,
        }
    }
    /// Prices for the cost.
    pub fn prices(mut self, prices: PriceTable) -> Self {
        self.prices = with_env(prices);
        self
    }
    /// What happens when the budget is used up.
    pub fn exit_behavior(mut self, exit: BudgetExit) -> Self {
        self.exit = exit;
        self
    }
    /// A handle on the budget, shared with the agent: raise it, then continue a run that
    /// stopped on it.
    #[must_use]
    pub fn shared(&self) -> Arc<RwLock<Budget>> {
        Arc::clone(&self.budget)
    }

    fn budget(&self) -> Budget {
        self.budget.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn run_usage(state: &AgentGraphState) -> UsageCount {
        state.get::<UsageCount>("usage").unwrap_or_default()
    }

    fn cost_of(&self, model: &str, message: &Message) -> f64 {
        let reported = message
            .response_metadata()
            .and_then(|m| m.get("cost").or_else(|| m.get("cost_usd")))
            .and_then(Value::as_f64);
        if let Some(c) = reported {
            return c;
        }
        let usage = message.usage().unwrap_or_default();
        self.prices.cost(model, &usage).unwrap_or(0.0)
    }
}

/// `prices` and those `GRAPHLOOM_MODEL_PRICES` gives (when it is well formed; `check`
/// refuses it otherwise).
fn with_env(prices: PriceTable) -> PriceTable {
    prices.clone().with_env_prices().unwrap_or(prices)
}

impl Middleware for TokenBudget {
    fn name(&self) -> &str {
        "TokenBudgetMiddleware"
    }
    fn hooks(&self) -> Hooks {
        Hooks::of(&[Hook::BeforeAgent, Hook::BeforeModel, Hook::WrapModelCall])
    }
    fn can_jump_to(&self, hook: Hook) -> Vec<Jump> {
        if hook == Hook::BeforeModel {
            vec![Jump::End]
        } else {
            Vec::new()
        }
    }
    fn state_fields(&self) -> Vec<StateField> {
        vec![
            StateField::new::<UsageCount>("usage", JsonReducer::LastValue),
            StateField::new::<UsageCount>("thread_usage", JsonReducer::LastValue),
        ]
    }
    fn check(&self, agent: &super::AgentInfo<'_>) -> Result<(), crate::Error> {
        // A malformed price variable is refused here (the table kept the prices without it).
        PriceTable::empty()
            .with_env_prices()
            .map_err(|e| crate::Error::middleware(self.name(), e.to_string()))?;
        self.prices
            .check_budget(agent.model_name, &self.budget())
            .map_err(|e| {
                crate::Error::middleware(
                    self.name(),
                    format!("{e} (or `.prices(PriceTable::builtin().with_price(..))`)"),
                )
            })
    }
    fn before_agent<'a>(&'a self, _state: &'a AgentGraphState, _rt: &'a Runtime) -> HookFuture<'a> {
        // A run from new input starts its count again.
        Box::pin(async move {
            Ok(HookResult::update(
                AgentGraphUpdate::new().set_typed("usage", &UsageCount::default()),
            ))
        })
    }
    fn before_model<'a>(&'a self, state: &'a AgentGraphState, _rt: &'a Runtime) -> HookFuture<'a> {
        Box::pin(async move {
            let used = Self::run_usage(state);
            let Err(e) = self.budget().check(&used.totals(), std::time::Duration::ZERO) else {
                return Ok(HookResult::none());
            };
            match self.exit {
                BudgetExit::Error => Err(e.into_node_error()),
                BudgetExit::End => Ok(HookResult::jump(Jump::End).with_update(
                    AgentGraphUpdate::new().messages(vec![Message::ai(format!("Stopped: {e}."))]),
                )),
            }
        })
    }
    fn wrap_model_call<'a>(
        &'a self,
        request: ModelRequest,
        next: ModelNext,
    ) -> BoxFuture<'a, Result<ModelResponse, NodeError>> {
        Box::pin(async move {
            let state = Arc::clone(&request.state);
            let model = request.model.dyn_model_name().to_owned();
            let mut response = next.call(request).await?;
            let Some(ai) = response.ai_message() else {
                return Ok(response);
            };
            let usage = ai.usage().unwrap_or_default();
            let cost = self.cost_of(&model, ai);
            let mut run = Self::run_usage(&state);
            run.add(&usage, cost);
            let mut thread: UsageCount = state.get("thread_usage").unwrap_or_default();
            thread.add(&usage, cost);
            response.update = std::mem::take(&mut response.update)
                .set_typed("usage", &run)
                .set_typed("thread_usage", &thread);
            Ok(response)
        })
    }
}
