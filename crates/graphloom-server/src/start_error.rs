//! Why a server did not start: [`StartError`], with its cause as the error's source.

use crate::config::ConfigError;
use graphloom_server_db::DbError;
use std::path::PathBuf;

/// Start-up failure, with its cause as the error's source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// Settings that do not agree with each other.
    #[error("server start: {0}")]
    Config(#[from] ConfigError),
    /// The SQLite file's directory could not be created.
    #[error("server start: cannot create {}: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Another server holds the SQLite file, or its lock file cannot be used (the message
    /// names the file and what to do).
    #[error("server start: {0}")]
    Locked(String),
    /// The checkpointer or the store could not be opened.
    #[error("server start: opening the {what}: {source}")]
    Storage {
        /// What was being opened.
        what: &'static str,
        /// Why it failed.
        #[source]
        source: graphloom_core::Error,
    },
    /// The server's own tables could not be opened or written.
    #[error("server start: {what}: {source}")]
    Database {
        /// What was being done.
        what: &'static str,
        /// Why it failed.
        #[source]
        source: DbError,
    },
    /// This build lacks the database's backend (cargo features `sqlite`, `postgres`).
    #[error("server start: this build of graphloom-server has no {0} support (cargo feature `{1}`)")]
    Unsupported(&'static str, &'static str),
    /// A graph's factory failed.
    #[error("server start: graph `{graph_id}`: {source}")]
    Graph {
        /// The graph.
        graph_id: String,
        /// Why it did not compile.
        #[source]
        source: graphloom_core::Error,
    },
}

impl StartError {
    pub(crate) fn storage(what: &'static str) -> impl FnOnce(graphloom_core::Error) -> Self {
        move |source| Self::Storage { what, source }
    }

    pub(crate) fn database(what: &'static str) -> impl FnOnce(DbError) -> Self {
        move |source| Self::Database { what, source }
    }
}
