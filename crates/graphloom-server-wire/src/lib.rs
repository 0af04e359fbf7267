//! `graphloom-server-wire`: the LangGraph Agent Server's wire format, without a server.
//!
//! What a client and the server exchange, as types and encoders with no HTTP stack in them,
//! so a Rust client, a benchmark or a test can speak the protocol without `graphloom-server`:
//!
//! | module | what |
//! |---|---|
//! | [`run`] | a run-creating request ([`run::RunRequest`]), its typed options, and the [`run::RunKwargs`] a run row keeps |
//! | [`json`] | a run in JSON terms: the request a hosted graph runs and the events it answers |
//! | [`stream`] | stream modes and the encoder that turns a run's events into server-sent events |
//! | [`protocol`] | the thread-centric protocol: commands, events, filters, and the translation of a run's event log into events |

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod json;
pub mod protocol;
pub mod run;
pub mod stream;
