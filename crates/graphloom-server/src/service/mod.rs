//! The server's operations, between the HTTP edge ([`crate::api`], which only translates
//! HTTP) and storage, graphs and workers: what a request asks for, checked against the
//! resources it names and carried out.
//!
//! | module | owns |
//! |---|---|
//! | [`a2a`] | assistants as A2A agents: a message as a run on its context's thread, the run as a task |
//! | [`agents`] | assistants offered to other protocols (MCP tools, A2A agents): which ones an identity may use, their input, a run to its end |
//! | [`assistants`] | resolving an assistant id (or a graph id), assistant CRUD, versions, schemas |
//! | [`threads`] | loading a thread of an owner, thread CRUD, copy, prune, state and history |
//! | [`runs`] | enqueueing a run (claimed at creation when a worker slot is free), finding, listing, cancelling, waiting for a run's end and following its events |
//! | [`store`] | the store as an owner sees it (under the owner's hidden label) |
//! | [`crons`] | crons: creating, changing, searching them, and firing their due ticks |
//! | [`schedule`] | cron expressions: parsing them, their next times in a time zone |
//! | [`url_guard`] | which webhook URLs the server may call: the check of a request's URL and the resolver that refuses private addresses |
//! | [`system`] | the graphs served, the metrics |
//!
//! Services take the shared [`AppState`](crate::state::AppState) and the owner the request
//! acts for, and answer [`ServiceError`](crate::error::ServiceError)s (a kind and a
//! detail, no HTTP status: the edge picks the status; internal causes are logged, never
//! answered).

pub(crate) mod a2a;
pub(crate) mod agents;
pub(crate) mod assistants;
pub(crate) mod crons;
pub(crate) mod runs;
pub mod schedule;
pub(crate) mod store;
pub(crate) mod system;
pub(crate) mod thread_stream;
pub(crate) mod threads;
pub mod url_guard;
pub(crate) mod xray;

use crate::error::{ServiceError, ServiceResult};

/// Largest page a search or list returns.
pub(crate) const MAX_PAGE: i64 = 1000;

/// A page of a search: `limit` (1 to [`MAX_PAGE`], default 10) and `offset` (0 or more).
pub(crate) fn page(limit: Option<i64>, offset: Option<i64>) -> ServiceResult<(i64, i64)> {
    let limit = limit.unwrap_or(10);
    let offset = offset.unwrap_or(0);
    if !(1..=MAX_PAGE).contains(&limit) || offset < 0 {
        return Err(ServiceError::invalid("limit must be 1..=1000 and offset >= 0"));
    }
    Ok((limit, offset))
}
