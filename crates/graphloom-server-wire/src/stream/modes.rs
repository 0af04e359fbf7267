//! The stream modes a client asks for ([`WireMode`]), and the core stream modes a run
//! produces for them ([`WireModes::core_modes`]).

use graphloom_core::StreamMode;

/// The wire stream modes a client asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WireModes {
    /// `values`: the whole state after each step.
    pub values: bool,
    /// `updates`: each node's update, and interrupts.
    pub updates: bool,
    /// `messages`: accumulated messages (`messages/metadata|partial|complete`).
    pub messages: bool,
    /// `messages-tuple`: raw `[chunk, metadata]` pairs as event `messages`.
    pub messages_tuple: bool,
    /// `custom`: what nodes write with the stream writer.
    pub custom: bool,
    /// `events`: LangChain's `astream_events` (v2) events.
    pub events: bool,
    /// `debug`: checkpoints and tasks wrapped with step and type.
    pub debug: bool,
    /// `tasks`: task starts and results.
    pub tasks: bool,
    /// `checkpoints`: each checkpoint as it is created.
    pub checkpoints: bool,
}

/// One stream mode a client may ask for (`stream_mode`), by its wire name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WireMode {
    /// `values`: the whole state after each step.
    Values,
    /// `updates`: each node's update, and interrupts.
    Updates,
    /// `messages`: accumulated messages (`messages/metadata|partial|complete`).
    Messages,
    /// `messages-tuple`: raw `[chunk, metadata]` pairs as event `messages`.
    MessagesTuple,
    /// `custom`: what nodes write with the stream writer.
    Custom,
    /// `events`: LangChain's `astream_events` (v2) events.
    Events,
    /// `debug`: checkpoints and tasks wrapped with step and type.
    Debug,
    /// `tasks`: task starts and results.
    Tasks,
    /// `checkpoints`: each checkpoint as it is created.
    Checkpoints,
}

/// Parse a request's `stream_mode` list. No modes means `["values"]` (LangGraph's
/// default). An unknown mode is an error carrying its name.
pub fn parse_stream_modes(modes: &[String]) -> Result<WireModes, String> {
    let parsed = modes
        .iter()
        .map(|m| {
            let name = serde::de::value::StrDeserializer::<serde::de::value::Error>::new(m);
            serde::Deserialize::deserialize(name).map_err(|_| m.clone())
        })
        .collect::<Result<Vec<WireMode>, String>>()?;
    Ok(WireModes::from_modes(&parsed))
}

impl WireModes {
    /// The set of `modes`; none means `values` (LangGraph's default).
    #[must_use]
    pub fn from_modes(modes: &[WireMode]) -> Self {
        let mut m = Self::default();
        if modes.is_empty() {
            m.values = true;
        }
        for mode in modes {
            let flag = match mode {
                WireMode::Values => &mut m.values,
                WireMode::Updates => &mut m.updates,
                WireMode::Messages => &mut m.messages,
                WireMode::MessagesTuple => &mut m.messages_tuple,
                WireMode::Custom => &mut m.custom,
                WireMode::Events => &mut m.events,
                WireMode::Debug => &mut m.debug,
                WireMode::Tasks => &mut m.tasks,
                WireMode::Checkpoints => &mut m.checkpoints,
            };
            *flag = true;
        }
        m
    }

    /// The core stream modes a run must produce for these wire modes: `messages` and
    /// `messages-tuple` need [`StreamMode::Messages`]; `events` needs
    /// [`StreamMode::Events`]; [`StreamMode::Updates`] is always included because
    /// interrupts arrive through it.
    #[must_use]
    pub fn core_modes(&self) -> Vec<StreamMode> {
        let mut out = Vec::new();
        let mut add = |on: bool, m: StreamMode| {
            if on && !out.contains(&m) {
                out.push(m);
            }
        };
        add(self.values, StreamMode::Values);
        add(true, StreamMode::Updates);
        add(self.messages || self.messages_tuple, StreamMode::Messages);
        add(self.custom, StreamMode::Custom);
        add(self.tasks, StreamMode::Tasks);
        add(self.checkpoints, StreamMode::Checkpoints);
        add(self.debug, StreamMode::Debug);
        add(self.events, StreamMode::Events);
        out
    }
}
