//! How an agent becomes a graph: the `model` and `tools` nodes, a node per
//! `before_*`/`after_*` hook, and where each goes next.

use super::structured::StructuredOutput;
use super::{AgentGraphState, AgentGraphUpdate, SystemPrompt};
use crate::middleware::{last_ai, Hook, Jump, Middleware, ModelExec, ModelNext, ModelRequest, ModelResponse};
use crate::tool_node::{ToolAnswer, ToolNode};
use futures::future::BoxFuture;
use graphloom_core::state::TaskUpdate;
use graphloom_core::{
    Command, Message, MessageKind, NodeError, NodeOutput, Route, Runtime, State, ToolCall, END,
};
use graphloom_llm::{ChatOptions, DynChatModel, ToolChoice, ToolSpec};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashSet;
use std::sync::Arc;

/// Name of the model node.
pub const MODEL_NODE: &str = "model";
/// Name of the tools node.
pub const AGENT_TOOLS_NODE: &str = "tools";

/// The node names of an agent's loop, and where each hook node goes by default.
#[derive(Debug, Clone)]
pub(crate) struct Wiring {
    /// `before_agent` nodes, in run order.
    pub before_agent: Vec<String>,
    /// `before_model` nodes, in run order.
    pub before_model: Vec<String>,
    /// `after_model` nodes, in run order (the list reversed).
    pub after_model: Vec<String>,
    /// `after_agent` nodes, in run order (the list reversed).
    pub after_agent: Vec<String>,
    /// Whether there is a tools node.
    pub has_tools: bool,
}

impl Wiring {
    pub fn entry(&self) -> String {
        self.before_agent
            .first()
            .cloned()
            .unwrap_or_else(|| self.loop_entry())
    }
    /// Where every model turn starts (tools and `jump_to: model` go here).
    pub fn loop_entry(&self) -> String {
        self.before_model
            .first()
            .cloned()
            .unwrap_or_else(|| MODEL_NODE.to_owned())
    }
    /// Where the run ends (through the `after_agent` hooks).
    pub fn exit(&self) -> String {
        self.after_agent
            .first()
            .cloned()
            .unwrap_or_else(|| END.to_owned())
    }
    pub fn jump(&self, to: Jump) -> String {
        match to {
            Jump::Model => self.loop_entry(),
            Jump::End => self.exit(),
            Jump::Tools if self.has_tools => AGENT_TOOLS_NODE.to_owned(),
            Jump::Tools => self.exit(),
        }
    }
    /// The node after hook node `node` of `hook` when it does not jump; `None` for the
    /// last `after_model` node (whose route depends on the state).
    pub fn next_after(&self, hook: Hook, node: &str) -> Option<String> {
        let (list, last): (&Vec<String>, Option<String>) = match hook {
            Hook::BeforeAgent => (&self.before_agent, Some(self.loop_entry())),
            Hook::BeforeModel => (&self.before_model, Some(MODEL_NODE.to_owned())),
            Hook::AfterModel => (&self.after_model, None),
            Hook::AfterAgent => (&self.after_agent, Some(END.to_owned())),
            Hook::WrapModelCall | Hook::WrapToolCall => return None,
        };
        match list.iter().position(|n| n == node) {
            Some(i) if i + 1 < list.len() => Some(list[i + 1].clone()),
            _ => last,
        }
    }
    /// Every place a hook node may go, for drawing.
    pub fn destinations(&self, hook: Hook, node: &str, jumps: &[Jump]) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        match self.next_after(hook, node) {
            Some(n) => out.push(n),
            None => out.extend(self.loop_exit_destinations()),
        }
        for j in jumps {
            out.push(self.jump(*j));
        }
        let mut seen = HashSet::new();
        out.retain(|n| seen.insert(n.clone()));
        out
    }
    /// Where the end of a model turn may go.
    pub fn loop_exit_destinations(&self) -> Vec<String> {
        let mut out = vec![self.exit(), self.loop_entry()];
        if self.has_tools {
            out.insert(0, AGENT_TOOLS_NODE.to_owned());
        }
        out
    }
}

/// The route at the end of a model turn (after the model, or after the last
/// `after_model` hook), over the state with the turn's writes applied.
pub(crate) fn route_after_turn(
    state: &AgentGraphState,
    wiring: &Wiring,
    structured_name: Option<&str>,
) -> String {
    let Some((i, ai)) = last_ai(&state.messages) else {
        return wiring.exit();
    };
    let invalid = graphloom_llm::MessageExt::invalid_tool_calls(ai);
    if ai.tool_calls.is_empty() && invalid.is_empty() {
        return wiring.exit();
    }
    let answered = answered_ids(&state.messages, i);
    let pending = ai
        .tool_calls
        .iter()
        .any(|c| !answered.contains(c.id.as_str()) && Some(c.name.as_str()) != structured_name)
        || invalid
            .iter()
            .any(|c| c.id.as_deref().is_some_and(|id| !answered.contains(id)));
    if pending && wiring.has_tools {
        return AGENT_TOOLS_NODE.to_owned();
    }
    if state.structured_response.is_some() || !wiring.has_tools && pending {
        return wiring.exit();
    }
    wiring.loop_entry()
}

/// The routes at the end of a model turn: [`route_after_turn`], with the tools node as
/// one `Send` per pending call (each call its own task: its own `updates` entry, and on
/// resume the calls that finished are not run again).
pub(crate) fn turn_routes(
    state: &AgentGraphState,
    wiring: &Wiring,
    structured_name: Option<&str>,
) -> Vec<Route> {
    let to = route_after_turn(state, wiring, structured_name);
    if to != AGENT_TOOLS_NODE {
        return vec![Route::from(to)];
    }
    tool_sends(state, structured_name).unwrap_or_else(|| vec![Route::from(to)])
}

/// What a `Send` to the tools node carries: one call of the last AI message, and the
/// state the model turn ended on (what the tool reads as its state).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ToolCallTask {
    pub tool_call: ToolCall,
    pub state: Arc<Value>,
}

/// One `Send` per pending call of the last AI message; `None` when the message needs
/// the whole-message run (calls with invalid arguments, or call ids used twice, are
/// answered there, together).
fn tool_sends(state: &AgentGraphState, structured_name: Option<&str>) -> Option<Vec<Route>> {
    let (i, ai) = last_ai(&state.messages)?;
    let answered = answered_ids(&state.messages, i);
    let invalid = graphloom_llm::MessageExt::invalid_tool_calls(ai);
    if invalid
        .iter()
        .any(|c| c.id.as_deref().is_some_and(|id| !answered.contains(id)))
    {
        return None;
    }
    let mut ids = HashSet::new();
    if !ai.tool_calls.iter().all(|c| ids.insert(c.id.as_str())) {
        return None;
    }
    let pending: Vec<&ToolCall> = ai
        .tool_calls
        .iter()
        .filter(|c| !answered.contains(c.id.as_str()) && Some(c.name.as_str()) != structured_name)
        .collect();
    if pending.is_empty() {
        return None;
    }
    let snapshot = Arc::new(state.to_json().ok()?);
    Some(
        pending
            .into_iter()
            .map(|c| {
                let task = ToolCallTask {
                    tool_call: c.clone(),
                    state: Arc::clone(&snapshot),
                };
                Route::Send(graphloom_core::Send::new(AGENT_TOOLS_NODE, task))
            })
            .collect(),
    )
}

/// Ids of the tool messages after message `i`.
pub(crate) fn answered_ids(messages: &graphloom_core::Seq<Message>, i: usize) -> HashSet<&str> {
    messages
        .iter_from(i + 1)
        .filter(|m| m.kind == MessageKind::Tool)
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect()
}

/// `state` with `update` applied, as the next step will see it.
pub(crate) fn applied(
    state: &AgentGraphState,
    node: &str,
    update: &AgentGraphUpdate,
) -> Result<AgentGraphState, NodeError> {
    let mut next = state.clone();
    next.merge(
        vec![TaskUpdate {
            node,
            update: update.clone(),
        }],
        &mut Vec::new(),
    )
    .map_err(|e| {
        NodeError::fatal(format!("node `{node}` wrote an update that does not apply: {e}")).with_source(e)
    })?;
    Ok(next)
}

/// What the model node needs, shared by its runs.
pub(crate) struct ModelNode {
    pub model: Arc<dyn DynChatModel>,
    pub system_prompt: Option<SystemPrompt>,
    pub tools: Vec<ToolSpec>,
    pub options: ChatOptions,
    pub chain: Arc<[Arc<dyn Middleware>]>,
    pub exec: ModelExec,
    pub wiring: Arc<Wiring>,
    pub structured: Option<StructuredOutput>,
}

/// The innermost model call: prompt, tools and response format in, the answer (with
/// its structured response) out.
pub(crate) fn model_exec(structured: Option<StructuredOutput>, name: Option<String>) -> ModelExec {
    Arc::new(
        move |req: ModelRequest| -> BoxFuture<'static, Result<ModelResponse, NodeError>> {
            let structured = structured.clone();
            let name = name.clone();
            Box::pin(async move {
                let mut messages = Vec::with_capacity(req.messages.len() + 1);
                if let Some(p) = req.system_prompt {
                    messages.push(Message::system(p));
                }
                messages.extend(req.messages);
                let mut opts = req.options;
                let mut tools = req.tools;
                if let Some(s) = &structured {
                    if let Some(spec) = s.tool_spec() {
                        if !tools.iter().any(|t| t.name == spec.name) {
                            tools.push(spec);
                        }
                        if opts.tool_choice.is_none() {
                            opts.tool_choice = Some(ToolChoice::Required);
                        }
                    }
                    if let Some(f) = s.response_format() {
                        opts.response_format = Some(f);
                    }
                }
                opts.tools = tools;
                let mut answer = req
                    .model
                    .dyn_invoke(&messages, &opts)
                    .await
                    .map_err(graphloom_llm::Error::into_node_error)?;
                if let Some(n) = name {
                    answer.name = Some(n);
                }
                match &structured {
                    Some(s) => s.handle(answer),
                    None => Ok(ModelResponse::of(answer)),
                }
            })
        },
    )
}

impl ModelNode {
    pub async fn run(
        self: Arc<Self>,
        state: Arc<AgentGraphState>,
        rt: Runtime,
    ) -> Result<NodeOutput<AgentGraphState>, NodeError> {
        let system_prompt = match &self.system_prompt {
            None => None,
            Some(SystemPrompt::Static(s)) => Some(s.clone()),
            Some(SystemPrompt::Dynamic(f)) => f(&state, &rt),
        };
        let request = ModelRequest {
            model: Arc::clone(&self.model),
            system_prompt,
            messages: state.messages.to_vec(),
            tools: self.tools.clone(),
            options: self.options.clone(),
            state: Arc::clone(&state),
            runtime: rt.clone(),
        };
        let response = ModelNext::new(Arc::clone(&self.chain), Arc::clone(&self.exec))
            .call(request)
            .await?;
        let fresh = response.structured_response.is_some();
        let mut update = response.update.messages(response.messages);
        if fresh {
            update = update.structured_response(response.structured_response);
        } else if state.structured_response.is_some() {
            // A stale answer from an earlier turn must not end this one.
            update = update.structured_response(None);
        }
        if !self.wiring.after_model.is_empty() {
            // A static edge leads to the first `after_model` hook.
            return Ok(NodeOutput::Update(update));
        }
        let next = applied(&state, MODEL_NODE, &update)?;
        let goto = turn_routes(
            &next,
            &self.wiring,
            self.structured.as_ref().map(StructuredOutput::name),
        );
        Ok(NodeOutput::Command(Command::new().update(update).goto(goto)))
    }
}

/// What the tools node needs.
pub(crate) struct ToolsNode {
    pub node: ToolNode,
    pub structured_name: Option<String>,
    /// The graph's state shape (fields and reducers), for joining tool commands.
    pub shape: Arc<AgentGraphState>,
}

impl ToolsNode {
    pub async fn run(
        self: Arc<Self>,
        state: Arc<AgentGraphState>,
        rt: Runtime,
    ) -> Result<NodeOutput<AgentGraphState>, NodeError> {
        // A static edge leads back to the loop's entry; a tool's `goto` adds to it.
        let Some((i, ai)) = last_ai(&state.messages) else {
            return Ok(NodeOutput::None);
        };
        let answered = answered_ids(&state.messages, i);
        let mut message = ai.clone();
        message
            .tool_calls
            .retain(|c| !answered.contains(c.id.as_str()) && Some(&c.name) != self.structured_name.as_ref());
        if let Some(Value::Array(bad)) = message.extra.get_mut("invalid_tool_calls") {
            bad.retain(|b| {
                b.get("id")
                    .and_then(Value::as_str)
                    .is_some_and(|id| !answered.contains(id))
            });
        }
        // Built only if a tool reads it: a large conversation is not serialised per round.
        let snapshot = Arc::clone(&state);
        let lazy = crate::tool::ToolState::lazy(move || snapshot.to_json().unwrap_or(Value::Null));
        let answers = self.node.run_calls(&message, lazy, Some(&rt)).await?;
        Self::output(state.as_ref(), answers)
    }

    /// Run the one call a `Send` carries.
    pub async fn run_one(
        self: Arc<Self>,
        task: ToolCallTask,
        rt: Runtime,
    ) -> Result<NodeOutput<AgentGraphState>, NodeError> {
        let mut message = Message::ai("");
        message.tool_calls = vec![task.tool_call];
        let snapshot = task.state;
        let lazy = crate::tool::ToolState::lazy(move || (*snapshot).clone());
        let answers = self.node.run_calls(&message, lazy, Some(&rt)).await?;
        Self::output(self.shape.as_ref(), answers)
    }

    fn output(
        shape: &AgentGraphState,
        answers: Vec<ToolAnswer>,
    ) -> Result<NodeOutput<AgentGraphState>, NodeError> {
        if answers.iter().all(|a| matches!(a, ToolAnswer::Message(_))) {
            let msgs: Vec<Message> = answers
                .into_iter()
                .filter_map(|a| match a {
                    ToolAnswer::Message(m) => Some(m),
                    ToolAnswer::Command { .. } => None,
                })
                .collect();
            return Ok(NodeOutput::Update(AgentGraphUpdate::new().messages(msgs)));
        }
        crate::tool_command::join_answers(
            shape,
            answers,
            crate::tool_command::MessagesOut::Update(|m| AgentGraphUpdate::new().messages(m)),
        )
    }
}

/// A `before_*`/`after_*` hook as a node.
pub(crate) struct HookNode {
    pub middleware: Arc<dyn Middleware>,
    pub hook: Hook,
    pub name: String,
    pub wiring: Arc<Wiring>,
    pub structured_name: Option<String>,
}

impl HookNode {
    pub async fn run(
        self: Arc<Self>,
        state: Arc<AgentGraphState>,
        rt: Runtime,
    ) -> Result<NodeOutput<AgentGraphState>, NodeError> {
        let m = &self.middleware;
        let result = match self.hook {
            Hook::BeforeAgent => m.before_agent(&state, &rt).await?,
            Hook::BeforeModel => m.before_model(&state, &rt).await?,
            Hook::AfterModel => m.after_model(&state, &rt).await?,
            Hook::AfterAgent => m.after_agent(&state, &rt).await?,
            Hook::WrapModelCall | Hook::WrapToolCall => return Ok(NodeOutput::None),
        };
        let goto = match (result.jump_to, self.wiring.next_after(self.hook, &self.name)) {
            (Some(j), _) => vec![Route::from(self.wiring.jump(j))],
            (None, Some(next)) => vec![Route::from(next)],
            (None, None) => {
                let next = applied(&state, &self.name, &result.update)?;
                turn_routes(&next, &self.wiring, self.structured_name.as_deref())
            }
        };
        let mut cmd = Command::new().goto(goto);
        if !result.update.is_empty() {
            cmd = cmd.update(result.update);
        }
        Ok(NodeOutput::Command(cmd))
    }
}
