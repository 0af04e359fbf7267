//! What a run is asked to do, typed from the HTTP edge to the worker.
//!
//! A run-creating request is parsed once, at the edge, into a [`RunRequest`]: its options
//! are enums and typed shapes, so a misspelt strategy or stream mode answers 422 naming the
//! field. The runs service resolves it against its assistant and thread into
//! [`RunKwargs`], which the run row keeps as its `kwargs` JSON (what `GET /runs/{id}`
//! shows), and which the worker reads back, typed, to execute the run.

mod kwargs;
mod options;
mod request;

pub use kwargs::{KwargsError, RunConfig, RunKwargs, StreamFacts};
pub use options::{
    CheckpointRef, Command, Durability, GotoTarget, IfNotExists, NodeSelection, OnCompletion, OnDisconnect,
    OneOrMany,
};
pub use request::RunRequest;
