//! `graphloom-server`: the LangGraph Server HTTP API on graphloom.
//!
//! Hosts compiled graphs as assistants and serves `/assistants`, `/threads`, `/runs` and
//! `/store` in the shapes the official `langgraph-sdk` clients expect, with runs going
//! through a durable queue in the same database as the checkpoints.
//!
//! # Traces (OpenTelemetry)
//!
//! [`telemetry::init_tracing`] installs structured logs and, when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (or
//! [`telemetry::TelemetryConfig::with_otlp_endpoint`], `graphloom serve --otlp-endpoint`),
//! exports traces over OTLP/HTTP (protobuf): one trace per run, `run` > `node` >
//! `chat <model>` / `execute_tool <name>`, with the OpenTelemetry GenAI attributes.
//! `OTEL_SERVICE_NAME` defaults to `graphloom`. Exporting needs the `otel` feature; without
//! an endpoint nothing is exported and no exporter thread runs.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod api;
pub mod app;
pub mod auth;
pub mod broker;
pub mod config;
mod custom;
pub mod db;
pub mod error;
pub mod host;
mod http;
pub mod metrics;
pub mod models;
mod outage;
mod owner_store;
pub mod retention;
pub mod scheduler;
mod service;
mod signals;
mod start_error;
mod state;
pub mod telemetry;
mod ui;
pub mod webhook;
#[cfg(test)]
mod wire_tests;
mod worker;

// The wire format lives in `graphloom-server-wire`; the server reads it under these names.
use graphloom_server_wire::stream as wire;
use graphloom_server_wire::{protocol, run};

pub use app::{Server, ServerBuilder, StartError};
pub use config::{ConfigError, Database, ServerConfig};
/// The hosted graph under its former path (`graphloom_server::hosted::HostedGraph`).
pub use host::graph as hosted;
pub use host::{factory, hosted, GraphDeps, GraphFactory, GraphMetrics, HostedGraph, SharedRegistry};
pub use host::{Hosting, RunEnd, RunEndHook, RunOutcome, ThreadCheckpoints};
pub use retention::RetentionConfig;
pub use scheduler::CronConfig;
pub use service::assistants::system_assistant_id;
pub use webhook::WebhookConfig;
