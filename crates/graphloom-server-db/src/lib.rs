//! graphloom-server-db: the storage contract of graphloom's server.
//!
//! The server keeps its own resources (assistants and their versions, threads, runs, which
//! are the durable queue, and the stored events of resumable runs) in the database that
//! holds its checkpoints. This crate is what the server and the database backends agree
//! on, below both of them:
//!
//! - [`models`]: the resources, in the JSON shapes of the LangGraph API (with their
//!   OpenAPI schemas);
//! - [`Db`]: the storage trait, with its arguments and answers ([`NewRun`], [`Lease`],
//!   [`ThreadOutcome`], ...) and its error, [`DbError`];
//! - [`CronDb`], [`WebhookDb`], [`RetentionDb`]: the parts of [`Db`] for crons (firing a
//!   tick and creating its run in one transaction), the webhook delivery queue, and the
//!   threads whose time to live has passed;
//! - [`kit`]: the pieces every implementation shares (clock, ttl arithmetic, PostgreSQL's
//!   JSON containment evaluated in Rust, sort columns, paging, enum text forms).
//!
//! The implementations live with the tables they use: `graphloom_sqlite::server::SqliteDb`
//! and `graphloom_postgres::server::PgDb`, each behind its crate's `server` feature.
//! `graphloom-server` re-exports all of this as its `db` and `models` modules.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod crons;
mod db;
mod error;
mod events;
pub mod kit;
pub mod models;
mod retention;
mod webhooks;

pub use crons::{CronDb, CronPatch, CronQuery, CronTick, DueCron, Fired, NewCron};
pub use db::{
    AssistantPatch, AssistantQuery, Db, DbResult, Lease, NewRun, SortOrder, ThreadOutcome, ThreadQuery,
};
pub use error::DbError;
pub use events::RunEventRecord;
pub use retention::{DefaultTtl, ExpiredThread, RetentionDb, TtlStrategy};
pub use webhooks::{NewWebhook, WebhookDb, WebhookDelivery, WebhookStatus};
