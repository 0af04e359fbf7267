//! Behaviour tests of the memory supervisor (ADR-007), all on PostgreSQL: one module per behaviour, in one test binary (one link, less disk).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod ciar_decay;
mod common;
mod long_term_memory;
mod parallel_tools;
mod postgres_checkpoints;
mod runtime_ids;
mod supervisor_routing;
mod tool_commands;
