//! The graphs a `graphloom` binary hosts: what [`crate::main`] serves, runs and draws.

use graphloom_server::GraphFactory;
use serde_json::Value;

/// One graph the command knows.
#[derive(Clone)]
pub struct Entry {
    /// Graph id (also its assistant name in the server).
    pub id: &'static str,
    /// One line about it, for `graphloom graphs`.
    pub about: &'static str,
    /// Compiles it against a checkpointer and store.
    pub factory: GraphFactory,
    /// An input that runs its happy path (the default of `graphloom run`).
    pub sample: fn() -> Value,
}

/// The graphs of a binary, by id.
#[derive(Clone, Default)]
pub struct Graphs {
    entries: Vec<Entry>,
    own_models: bool,
    store_index: Option<graphloom_core::store::IndexConfig>,
    mirror: Option<std::sync::Arc<dyn graphloom_server::ThreadCheckpoints>>,
    server_hooks: Vec<ServerHook>,
}

/// A change to the server `serve` builds, made after the command line's options (see
/// [`Graphs::with_server`]).
pub type ServerHook =
    std::sync::Arc<dyn Fn(graphloom_server::ServerBuilder) -> graphloom_server::ServerBuilder + Send + Sync>;

impl Graphs {
    /// These graphs.
    #[must_use]
    pub fn new(entries: Vec<Entry>) -> Self {
        Self {
            entries,
            own_models: false,
            store_index: None,
            mirror: None,
            server_hooks: Vec::new(),
        }
    }

    /// Graphs that choose their own models (Python graphs built with LangChain's chat
    /// models): `serve` then neither asks for `GRAPHLOOM_MODEL` nor names a model for them.
    #[must_use]
    pub fn with_own_models(mut self) -> Self {
        self.own_models = true;
        self
    }

    /// The store's vector index for `serve` (instead of `GRAPHLOOM_EMBEDDINGS`'s): the
    /// index the graphs' own store embeds with, so the server's store routes search alike.
    #[must_use]
    pub fn with_store_index(mut self, index: graphloom_core::store::IndexConfig) -> Self {
        self.store_index = Some(index);
        self
    }

    /// Checkpoints of the same threads the graphs keep in a saver of their own: `serve`
    /// deletes, copies and prunes them with the server's (see
    /// [`graphloom_server::ThreadCheckpoints`]).
    #[must_use]
    pub fn with_thread_checkpoints(
        mut self,
        mirror: std::sync::Arc<dyn graphloom_server::ThreadCheckpoints>,
    ) -> Self {
        self.mirror = Some(mirror);
        self
    }

    /// Change the server `serve` builds (its auth, its routes), after the command line's
    /// options are applied: what a host with its own auth or routes (the Python package's
    /// `auth.path`) adds.
    #[must_use]
    pub fn with_server(mut self, hook: ServerHook) -> Self {
        self.server_hooks.push(hook);
        self
    }

    /// The hooks given by [`Self::with_server`], in order.
    #[must_use]
    pub fn server_hooks(&self) -> &[ServerHook] {
        &self.server_hooks
    }

    /// The mirror given by [`Self::with_thread_checkpoints`].
    #[must_use]
    pub fn thread_checkpoints(&self) -> Option<&std::sync::Arc<dyn graphloom_server::ThreadCheckpoints>> {
        self.mirror.as_ref()
    }

    /// The index given by [`Self::with_store_index`].
    #[must_use]
    pub fn store_index(&self) -> Option<&graphloom_core::store::IndexConfig> {
        self.store_index.as_ref()
    }

    /// Whether the graphs choose their own models ([`Self::with_own_models`]).
    #[must_use]
    pub fn own_models(&self) -> bool {
        self.own_models
    }

    /// Every graph, in the order given.
    #[must_use]
    pub fn all(&self) -> &[Entry] {
        &self.entries
    }

    /// The graph named `id` (`-` and `_` alike), or an error listing the known ones.
    ///
    /// # Errors
    /// When no graph has that id.
    pub fn find(&self, id: &str) -> anyhow::Result<&Entry> {
        let wanted = id.replace('-', "_");
        self.entries.iter().find(|e| e.id == wanted).ok_or_else(|| {
            let known: Vec<&str> = self.entries.iter().map(|e| e.id).collect();
            if known.is_empty() {
                anyhow::anyhow!("unknown graph `{id}`: this binary hosts no graphs")
            } else {
                anyhow::anyhow!("unknown graph `{id}`; known graphs: {}", known.join(", "))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn entry(id: &'static str) -> Entry {
        Entry {
            id,
            about: "",
            factory: Arc::new(|_| Err(graphloom_core::Error::InvalidGraph("not built in tests".into()))),
            sample: || Value::Null,
        }
    }

    #[test]
    fn finds_by_id_with_dashes_or_underscores_and_names_the_known_ones() {
        let g = Graphs::new(vec![entry("permit_filing"), entry("chat_runtime")]);
        assert_eq!(g.find("permit-filing").map(|e| e.id).ok(), Some("permit_filing"));
        let err = g.find("nope").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            err.contains("unknown graph `nope`") && err.contains("permit_filing, chat_runtime"),
            "{err}"
        );
        let none = Graphs::default()
            .find("x")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(none.contains("hosts no graphs"), "{none}");
    }
}
