//! `graphloom-server`: the LangGraph Server HTTP API on graphloom.
//!
//! Hosts compiled graphs as assistants and serves `/assistants`, `/threads`, `/runs` and
//! `/store` in the shapes the official `langgraph-sdk` clients expect, with runs going
//! through a durable queue in the same database as the checkpoints.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod api;
pub mod app;
pub mod broker;
pub mod db;
pub mod error;
pub mod hosted;
pub mod metrics;
pub mod models;
pub mod wire;
mod worker;

pub use app::{system_assistant_id, Database, Server, ServerBuilder, ServerConfig, StartError};
pub use hosted::{factory, hosted, GraphDeps, GraphFactory, HostedGraph};
