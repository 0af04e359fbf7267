//! [`create_supervisor`]: a router node that hands control to one of several named agents
//! (subgraphs or plain nodes), each of which hands control back when it is done.
//!
//! ```text
//!            ┌──────────────┐
//! START ───▶ │  supervisor  │ ───▶ END          (the router said FINISH)
//!            └──────────────┘
//!              │   ▲     │   ▲
//!              ▼   │     ▼   │
//!            agent_a     agent_b               (each hands control back)
//! ```
//!
//! The router is either a function of the state ([`SupervisorRouter::function`]) or a model
//! asked for a structured answer `{"next": "<agent>" | "FINISH", "reason": "..."}`
//! ([`SupervisorRouter::model`]). A model's answer is checked in code: an answer that does
//! not parse, or names an agent that does not exist, is never followed; the router's
//! [fallback](SupervisorRouter::fallback) is taken instead, or, without one, the supervisor
//! node fails with a retryable error (so a `RetryPolicy` on it asks again).
//!
//! Agents are added with [`SupervisorAgent::subgraph`] (a compiled graph sharing keys with
//! the supervisor's state: it starts from the parent's values of the fields it declares and
//! only what its nodes changed comes back, through the parent's reducers),
//! [`SupervisorAgent::mapped`] (explicit input and output mappings) or
//! [`SupervisorAgent::node`] (a plain node). Every agent's output goes back to the
//! supervisor, which decides again; with [`SupervisorOptions::one_shot`] agents go to
//! `END` instead. A router that never answers `FINISH` is stopped by the run's recursion
//! limit.
//!
//! ```
//! use graphloom_core::{Message, RunConfig, Seq, State, END};
//! use graphloom_prebuilt::supervisor::{create_supervisor, Handoff, SupervisorAgent, SupervisorOptions, SupervisorRouter};
//!
//! #[derive(State, Clone, Default, Debug)]
//! struct Desk {
//!     #[reducer(add_messages)]
//!     messages: Seq<Message>,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> graphloom_core::Result<()> {
//! // Route by the last message: questions to `research`, the rest to `writer`; an AI answer
//! // ends the run.
//! let router = SupervisorRouter::function(|s: &Desk| match s.messages.last() {
//!     Some(m) if m.kind == graphloom_core::MessageKind::Ai => Handoff::Finish,
//!     Some(m) if m.text().ends_with('?') => Handoff::to("research"),
//!     _ => Handoff::to("writer"),
//! });
//! let graph = create_supervisor(
//!     router,
//!     vec![
//!         SupervisorAgent::node("research", "Answers questions", |_s: std::sync::Arc<Desk>, _rt| async {
//!             Ok(DeskUpdate::new().messages(vec![Message::ai("42")]))
//!         }),
//!         SupervisorAgent::node("writer", "Writes prose", |_s: std::sync::Arc<Desk>, _rt| async {
//!             Ok(DeskUpdate::new().messages(vec![Message::ai("Once upon a time")]))
//!         }),
//!     ],
//!     SupervisorOptions::new(),
//! )?;
//! let out = graph
//!     .invoke(DeskUpdate::new().messages(vec![Message::human("meaning of life?")]), RunConfig::default())
//!     .await?;
//! assert_eq!(out.values.messages.last().map(Message::text).as_deref(), Some("42"));
//! # Ok(()) }
//! ```

use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::store::DynStore;
use graphloom_core::{
    Command, CompiledGraph, Message, NodeError, NodeOutput, Runtime, State, StateGraph, END, START,
};
use graphloom_llm::{parse_structured, prepare_structured, ChatOptions, DynChatModel};
use std::future::Future;
use std::sync::Arc;

/// Default name of the router node.
pub const SUPERVISOR_NODE: &str = "supervisor";
/// What the router answers to end the run.
pub const FINISH: &str = "FINISH";

/// Where the supervisor sends control next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handoff {
    /// To the agent of this name.
    To(String),
    /// End the run.
    Finish,
}

impl Handoff {
    /// To the agent `name`.
    pub fn to(name: impl Into<String>) -> Self {
        Handoff::To(name.into())
    }
    /// The agent's name, or [`FINISH`].
    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            Handoff::To(n) => n,
            Handoff::Finish => FINISH,
        }
    }
}

/// One routing decision, as handed to [`SupervisorOptions::on_route`].
#[derive(Debug, Clone, PartialEq)]
pub struct SupervisorDecision {
    /// Where control goes.
    pub handoff: Handoff,
    /// The model's reason, or why the fallback was taken; empty for routing functions.
    pub reason: String,
    /// Whether the router's fallback replaced an unusable model answer.
    pub used_fallback: bool,
}

/// The structured answer asked of a routing model.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, schemars::JsonSchema)]
pub struct RouteChoice {
    /// The agent to hand control to, or `FINISH`.
    pub next: String,
    /// Why.
    #[serde(default)]
    pub reason: String,
}

type RouteFn<S> = Arc<dyn Fn(&S) -> Handoff + Send + Sync>;
type MessagesFn<S> = Arc<dyn Fn(&S) -> Vec<Message> + Send + Sync>;
type OnRoute<S> = Arc<dyn Fn(&S, &SupervisorDecision) -> Option<<S as State>::Update> + Send + Sync>;

struct ModelRoute<S: State> {
    model: Arc<dyn DynChatModel>,
    messages: MessagesFn<S>,
    system_prompt: Option<String>,
    options: ChatOptions,
}

enum RouterKind<S: State> {
    Function(RouteFn<S>),
    Model(Box<ModelRoute<S>>),
}

/// How the supervisor chooses the next agent.
pub struct SupervisorRouter<S: State> {
    kind: RouterKind<S>,
    fallback: Option<RouteFn<S>>,
}

impl<S: State> std::fmt::Debug for SupervisorRouter<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.kind {
            RouterKind::Function(_) => "function".to_owned(),
            RouterKind::Model(m) => format!("model {}", m.model.dyn_model_name()),
        };
        f.debug_struct("SupervisorRouter")
            .field("kind", &kind)
            .field("fallback", &self.fallback.is_some())
            .finish()
    }
}

impl<S: State> SupervisorRouter<S> {
    /// Route with a function of the state.
    pub fn function(f: impl Fn(&S) -> Handoff + Send + Sync + 'static) -> Self {
        Self {
            kind: RouterKind::Function(Arc::new(f)),
            fallback: None,
        }
    }

    /// Route by asking `model` for a [`RouteChoice`] (structured output). `messages` gives
    /// the conversation the model sees after the routing instructions.
    pub fn model(
        model: Arc<dyn DynChatModel>,
        messages: impl Fn(&S) -> Vec<Message> + Send + Sync + 'static,
    ) -> Self {
        Self {
            kind: RouterKind::Model(Box::new(ModelRoute {
                model,
                messages: Arc::new(messages),
                system_prompt: None,
                options: ChatOptions::new(),
            })),
            fallback: None,
        }
    }

    /// Instructions put before the generated list of agents (model routers only).
    #[must_use]
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        if let RouterKind::Model(m) = &mut self.kind {
            m.system_prompt = Some(prompt.into());
        }
        self
    }

    /// Options of every routing call (model routers only; the response format is set by
    /// the router).
    #[must_use]
    pub fn chat_options(mut self, opts: ChatOptions) -> Self {
        if let RouterKind::Model(m) = &mut self.kind {
            m.options = opts;
        }
        self
    }

    /// Where to go when the model's answer is unusable (default: fail the node).
    #[must_use]
    pub fn fallback(self, handoff: Handoff) -> Self {
        self.fallback_with(move |_| handoff.clone())
    }

    /// Decide with `f` when the model's answer is unusable (say, keyword routing). Its
    /// answer is checked like the model's; an unknown agent from it fails the node.
    #[must_use]
    pub fn fallback_with(mut self, f: impl Fn(&S) -> Handoff + Send + Sync + 'static) -> Self {
        self.fallback = Some(Arc::new(f));
        self
    }
}

type AddFn<S> = Box<dyn FnOnce(StateGraph<S>, &str) -> StateGraph<S> + Send>;

/// An agent the supervisor can hand control to.
pub struct SupervisorAgent<S: State> {
    name: String,
    description: String,
    add: AddFn<S>,
}

impl<S: State> std::fmt::Debug for SupervisorAgent<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SupervisorAgent")
            .field("name", &self.name)
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

impl<S: State> SupervisorAgent<S> {
    /// A compiled graph sharing keys with the supervisor's state.
    pub fn subgraph<C: State>(
        name: impl Into<String>,
        description: impl Into<String>,
        graph: CompiledGraph<C>,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            add: Box::new(move |g, name| g.add_subgraph_shared(name, graph)),
        }
    }

    /// A compiled graph with explicit mappings from the supervisor's state to its input and
    /// from its final state to a supervisor update.
    pub fn mapped<C: State>(
        name: impl Into<String>,
        description: impl Into<String>,
        graph: CompiledGraph<C>,
        input: impl Fn(&S) -> C::Update + Send + Sync + 'static,
        output: impl Fn(&C) -> S::Update + Send + Sync + 'static,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            add: Box::new(move |g, name| g.add_subgraph(name, graph, input, output)),
        }
    }

    /// A plain node.
    pub fn node<F, Fut, O>(name: impl Into<String>, description: impl Into<String>, f: F) -> Self
    where
        F: Fn(Arc<S>, Runtime) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, NodeError>> + Send + 'static,
        O: Into<NodeOutput<S>>,
    {
        Self {
            name: name.into(),
            description: description.into(),
            add: Box::new(move |g, name| g.add_node(name, f)),
        }
    }

    /// The agent's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Options of [`create_supervisor`].
#[must_use]
pub struct SupervisorOptions<S: State> {
    name: String,
    node_name: String,
    one_shot: bool,
    checkpointer: Option<Arc<dyn DynCheckpointer>>,
    store: Option<Arc<dyn DynStore>>,
    on_route: Option<OnRoute<S>>,
}

impl<S: State> Default for SupervisorOptions<S> {
    fn default() -> Self {
        Self {
            name: "supervisor".to_owned(),
            node_name: SUPERVISOR_NODE.to_owned(),
            one_shot: false,
            checkpointer: None,
            store: None,
            on_route: None,
        }
    }
}

impl<S: State> std::fmt::Debug for SupervisorOptions<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SupervisorOptions")
            .field("name", &self.name)
            .field("node_name", &self.node_name)
            .field("one_shot", &self.one_shot)
            .field("checkpointer", &self.checkpointer.is_some())
            .field("store", &self.store.is_some())
            .finish_non_exhaustive()
    }
}

impl<S: State> SupervisorOptions<S> {
    /// Default options: node `supervisor`, agents hand control back, no persistence.
    pub fn new() -> Self {
        Self::default()
    }
    /// The graph's name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
    /// The router node's name (default [`SUPERVISOR_NODE`]).
    pub fn node_name(mut self, name: impl Into<String>) -> Self {
        self.node_name = name.into();
        self
    }
    /// Agents go to `END` instead of back to the supervisor: one routing per run.
    pub fn one_shot(mut self) -> Self {
        self.one_shot = true;
        self
    }
    /// Persist checkpoints with this saver.
    pub fn checkpointer(mut self, saver: Arc<dyn DynCheckpointer>) -> Self {
        self.checkpointer = Some(saver);
        self
    }
    /// Give every node (and subgraph) this long-term store.
    pub fn store(mut self, store: Arc<dyn DynStore>) -> Self {
        self.store = Some(store);
        self
    }
    /// Record a routing decision in the state: the update returned is applied with the
    /// handoff (for example an `active_agent` field or a handoff log).
    pub fn on_route(
        mut self,
        f: impl Fn(&S, &SupervisorDecision) -> Option<S::Update> + Send + Sync + 'static,
    ) -> Self {
        self.on_route = Some(Arc::new(f));
        self
    }
}

/// The routing instructions a model router sees.
fn routing_prompt(custom: Option<&str>, agents: &[(String, String)]) -> String {
    let mut p = custom
        .unwrap_or(
            "You are a supervisor routing a conversation to the agent best suited to handle its next step.",
        )
        .to_owned();
    p.push_str("\n\nAgents:\n");
    for (name, description) in agents {
        p.push_str(&format!("- {name}: {description}\n"));
    }
    p.push_str(&format!(
        "\nAnswer with a JSON object {{\"next\": \"<agent name or {FINISH}>\", \"reason\": \"<why>\"}}. \
         Answer {FINISH} when the request has been handled."
    ));
    p
}

async fn route<S: State>(
    router: &SupervisorRouter<S>,
    agents: &[(String, String)],
    state: &S,
) -> Result<SupervisorDecision, NodeError> {
    let (handoff, reason) = match &router.kind {
        RouterKind::Function(f) => (f(state), String::new()),
        RouterKind::Model(m) => {
            let ModelRoute {
                model,
                messages,
                system_prompt,
                options,
            } = m.as_ref();
            let (format, validator) = prepare_structured::<RouteChoice>();
            let validator = validator.map_err(NodeError::terminal)?;
            let mut history = vec![Message::system(routing_prompt(system_prompt.as_deref(), agents))];
            history.extend(messages(state));
            let opts = options.clone().response_format(format);
            let answer = match model.dyn_invoke(&history, &opts).await {
                Ok(msg) => parse_structured::<RouteChoice>(&msg, &validator),
                Err(e) => Err(e),
            };
            match answer {
                Ok(c) if c.next == FINISH => (Handoff::Finish, c.reason),
                Ok(c) => (Handoff::To(c.next), c.reason),
                Err(e) => {
                    let why = format!("the routing model failed: {e}");
                    return fallback(router, agents, state, why, Some(e));
                }
            }
        }
    };
    if let Some(unknown) = unknown_agent(agents, &handoff) {
        return fallback(router, agents, state, unknown, None);
    }
    Ok(SupervisorDecision {
        handoff,
        reason,
        used_fallback: false,
    })
}

/// Why `handoff` names no agent of `agents`, if it does not.
fn unknown_agent(agents: &[(String, String)], handoff: &Handoff) -> Option<String> {
    let Handoff::To(name) = handoff else { return None };
    if agents.iter().any(|(n, _)| n == name) {
        return None;
    }
    let known: Vec<&str> = agents.iter().map(|(n, _)| n.as_str()).collect();
    Some(format!(
        "the router chose `{name}`, which is not one of [{}]",
        known.join(", ")
    ))
}

fn fallback<S: State>(
    router: &SupervisorRouter<S>,
    agents: &[(String, String)],
    state: &S,
    why: String,
    cause: Option<graphloom_llm::Error>,
) -> Result<SupervisorDecision, NodeError> {
    // The routing model's error, when there was one, stays the failure's source.
    let failed = move |message: String| match cause {
        Some(e) => NodeError::new(message).with_source(e),
        None => NodeError::new(message),
    };
    let Some(f) = &router.fallback else {
        return Err(failed(why));
    };
    let handoff = f(state);
    if let Some(also) = unknown_agent(agents, &handoff) {
        return Err(failed(format!("{why}; the fallback failed too: {also}")));
    }
    Ok(SupervisorDecision {
        handoff,
        reason: why,
        used_fallback: true,
    })
}

/// Build a supervisor graph: a router node choosing among `agents` by `router`, each agent
/// handing control back to it (see the [module docs](self)).
///
/// # Errors
/// [`graphloom_core::Error::InvalidGraph`] for no agents, two agents with one name, an agent
/// named like the router node or [`FINISH`], or anything else the graph builder refuses.
pub fn create_supervisor<S: State + Default>(
    router: SupervisorRouter<S>,
    agents: Vec<SupervisorAgent<S>>,
    options: SupervisorOptions<S>,
) -> graphloom_core::Result<CompiledGraph<S>> {
    let invalid = |m: String| Err(graphloom_core::Error::InvalidGraph(m));
    if agents.is_empty() {
        return invalid("a supervisor needs at least one agent".into());
    }
    let roster: Vec<(String, String)> = agents
        .iter()
        .map(|a| (a.name.clone(), a.description.clone()))
        .collect();
    for (i, (name, _)) in roster.iter().enumerate() {
        if name == FINISH || *name == options.node_name {
            return invalid(format!("an agent cannot be named `{name}`"));
        }
        if roster[..i].iter().any(|(n, _)| n == name) {
            return invalid(format!("two agents are named `{name}`"));
        }
    }
    let node_name = options.node_name.clone();
    let router = Arc::new(router);
    let roster = Arc::new(roster);
    let on_route = options.on_route.clone();
    let supervisor = {
        let roster = Arc::clone(&roster);
        move |state: Arc<S>, _rt: Runtime| {
            let router = Arc::clone(&router);
            let roster = Arc::clone(&roster);
            let on_route = on_route.clone();
            async move {
                let decision = route(&router, &roster, &state).await?;
                let to = match &decision.handoff {
                    Handoff::To(n) => n.clone(),
                    Handoff::Finish => END.to_owned(),
                };
                let mut cmd = Command::<S>::new().goto(to);
                if let Some(update) = on_route.as_ref().and_then(|f| f(&state, &decision)) {
                    cmd = cmd.update(update);
                }
                Ok::<_, NodeError>(cmd)
            }
        }
    };
    let destinations: Vec<String> = roster
        .iter()
        .map(|(n, _)| n.clone())
        .chain([END.to_owned()])
        .collect();
    let mut g = StateGraph::<S>::new()
        .name(options.name)
        .add_node(node_name.clone(), supervisor)
        .add_edge(START, node_name.clone())
        .destinations(&node_name, destinations);
    for agent in agents {
        let name = agent.name.clone();
        g = (agent.add)(g, &name);
        g = if options.one_shot {
            g.add_edge(name, END)
        } else {
            g.add_edge(name, node_name.clone())
        };
    }
    if let Some(cp) = options.checkpointer {
        g = g.checkpointer_dyn(cp);
    }
    if let Some(store) = options.store {
        g = g.store_dyn(store);
    }
    g.compile()
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphloom_core::{MessageKind, RunConfig, Seq};
    use graphloom_llm::{Reply, ScriptedModel};
    use serde_json::json;

    #[derive(State, Clone, Default, Debug)]
    struct Desk {
        #[reducer(add_messages)]
        messages: Seq<Message>,
        #[reducer(append)]
        route_log: Seq<String>,
    }

    /// A one-node agent graph that shares `messages` with the desk.
    #[derive(State, Clone, Default, Debug)]
    struct AgentOnly {
        #[reducer(add_messages)]
        messages: Seq<Message>,
    }

    fn echo_agent(label: &'static str) -> CompiledGraph<AgentOnly> {
        StateGraph::<AgentOnly>::new()
            .add_node("answer", move |s: Arc<AgentOnly>, _rt| async move {
                let n = s.messages.len();
                Ok(AgentOnlyUpdate::new().messages(vec![Message::ai(format!("{label} saw {n} messages"))]))
            })
            .add_edge(START, "answer")
            .add_edge("answer", END)
            .compile()
            .unwrap()
    }

    fn log_route() -> impl Fn(&Desk, &SupervisorDecision) -> Option<DeskUpdate> + Send + Sync + 'static {
        |_s, d| Some(DeskUpdate::new().route_log(vec![d.handoff.as_str().to_owned()]))
    }

    #[tokio::test]
    async fn a_routing_function_hands_control_to_subgraphs_and_gets_it_back() {
        let router = SupervisorRouter::function(|s: &Desk| {
            let ai = s.messages.iter().filter(|m| m.kind == MessageKind::Ai).count();
            match ai {
                0 => Handoff::to("research"),
                1 => Handoff::to("writer"),
                _ => Handoff::Finish,
            }
        });
        let g = create_supervisor(
            router,
            vec![
                SupervisorAgent::subgraph("research", "finds facts", echo_agent("research")),
                SupervisorAgent::subgraph("writer", "writes", echo_agent("writer")),
            ],
            SupervisorOptions::new().on_route(log_route()),
        )
        .unwrap();
        let out = g
            .invoke(
                DeskUpdate::new().messages(vec![Message::human("go")]),
                RunConfig::default(),
            )
            .await
            .unwrap();
        let texts: Vec<String> = out.values.messages.iter().map(Message::text).collect();
        // Shared keys: each agent saw the whole conversation and only its new message came
        // back (no duplicates through add_messages).
        assert_eq!(texts, ["go", "research saw 1 messages", "writer saw 2 messages"]);
        assert_eq!(out.values.route_log.to_vec(), ["research", "writer", FINISH]);
        assert_eq!(g.node_names(), ["research", SUPERVISOR_NODE, "writer"]);
    }

    #[tokio::test]
    async fn a_model_router_is_checked_and_falls_back() {
        let model = ScriptedModel::new([
            Reply::json(json!({"next": "writer", "reason": "needs prose"})),
            Reply::json(json!({"next": "hacker", "reason": "let me in"})),
            Reply::text("no idea"),
            Reply::json(json!({"next": "FINISH", "reason": "done"})),
        ]);
        let router = SupervisorRouter::model(Arc::new(model.clone()), |s: &Desk| s.messages.to_vec())
            .fallback(Handoff::to("research"));
        let g = create_supervisor(
            router,
            vec![
                SupervisorAgent::subgraph("research", "finds facts", echo_agent("research")),
                SupervisorAgent::node("writer", "writes prose", |_s: Arc<Desk>, _rt| async {
                    Ok(DeskUpdate::new().messages(vec![Message::ai("prose")]))
                }),
            ],
            SupervisorOptions::new().on_route(|_s: &Desk, d: &SupervisorDecision| {
                Some(DeskUpdate::new().route_log(vec![format!(
                    "{}{}",
                    d.handoff.as_str(),
                    if d.used_fallback { "*" } else { "" }
                )]))
            }),
        )
        .unwrap();
        let out = g
            .invoke(
                DeskUpdate::new().messages(vec![Message::human("write")]),
                RunConfig::default(),
            )
            .await
            .unwrap();
        assert_eq!(
            out.values.route_log.to_vec(),
            ["writer", "research*", "research*", FINISH]
        );
        let reqs = model.requests();
        assert!(reqs[0].options.response_format.is_some());
        let prompt = reqs[0].messages[0].text();
        assert!(
            prompt.contains("- research: finds facts") && prompt.contains("FINISH"),
            "{prompt}"
        );
        assert_eq!(reqs[1].messages.len(), 3, "the router sees the conversation");
    }

    #[tokio::test]
    async fn without_a_fallback_an_unusable_answer_fails_the_run() {
        let model = ScriptedModel::new([Reply::json(json!({"next": "nobody"}))]);
        let router = SupervisorRouter::model(Arc::new(model), |s: &Desk| s.messages.to_vec());
        let g = create_supervisor(
            router,
            vec![SupervisorAgent::subgraph("research", "facts", echo_agent("r"))],
            SupervisorOptions::new().one_shot(),
        )
        .unwrap();
        let err = g
            .invoke(DeskUpdate::new(), RunConfig::default())
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("`nobody`, which is not one of [research]"),
            "{err}"
        );
    }

    #[test]
    fn bad_rosters_are_refused() {
        let f = || SupervisorRouter::function(|_s: &Desk| Handoff::Finish);
        let err = |r: graphloom_core::Result<CompiledGraph<Desk>>| {
            r.err().map(|e| e.to_string()).unwrap_or_default()
        };
        assert!(err(create_supervisor(f(), vec![], SupervisorOptions::new())).contains("at least one agent"));
        let twice = vec![
            SupervisorAgent::subgraph("a", "", echo_agent("a")),
            SupervisorAgent::subgraph("a", "", echo_agent("a")),
        ];
        assert!(err(create_supervisor(f(), twice, SupervisorOptions::new())).contains("two agents"));
        let finish = vec![SupervisorAgent::subgraph(FINISH, "", echo_agent("f"))];
        assert!(err(create_supervisor(f(), finish, SupervisorOptions::new())).contains("cannot be named"));
    }
}
