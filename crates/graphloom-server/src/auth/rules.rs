//! Which [`Action`] on which [`Resource`] each route is, and how a grant's filter and
//! metadata apply to it.

use super::{Action, Resource};
use axum::http::Method;

/// How a route is authorised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rule {
    pub resource: Resource,
    pub action: Action,
    /// Where a grant's filter applies.
    pub check: Check,
    /// Where a grant's metadata is stamped.
    pub stamp: Stamp,
}

/// Where a grant's filter applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Check {
    /// Nowhere: the route creates, or reads nothing stored under a filter.
    Nothing,
    /// The thread of the path (`thread_id`) must match; for runs and crons on a thread too.
    Thread,
    /// The assistant of the path (`assistant_id`) must match.
    Assistant,
    /// The body's `metadata` search is narrowed to the filter; when nothing can match,
    /// this is the answer.
    Search(Empty),
    /// The body's `thread_ids` are narrowed to the threads that match.
    Prune,
    /// The route cannot apply a filter: a grant with one is refused (403).
    Refuse,
}

/// The answer of a search that nothing can match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Empty {
    /// `[]`.
    List,
    /// `0`.
    Count,
}

/// Where a grant's metadata is stamped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stamp {
    /// Nowhere.
    Nothing,
    /// The body's `metadata`.
    Body,
    /// The `metadata` of each element of the body (a list).
    Each,
    /// The `params.metadata` of a thread-protocol command that starts a run (`run.start`,
    /// `input.respond`, `state.fork`): the run's metadata, and the thread's when the run
    /// creates it.
    Command,
}

const fn rule(resource: Resource, action: Action, check: Check, stamp: Stamp) -> Option<Rule> {
    Some(Rule {
        resource,
        action,
        check,
        stamp,
    })
}

/// The rule of route `path` (as registered, with `{param}`s) for `method`; `None` for the
/// routes that act on no resource (`/info`, `/metrics`, a user's routes) and those that
/// authorise inside (`/mcp`, `/a2a`).
pub(crate) fn rule_of(method: &Method, path: &str) -> Option<Rule> {
    use Action::{Create, Delete, Read, Search, Update};
    use Check::{Assistant, Nothing, Prune, Refuse, Thread};
    use Resource::{Assistants, Crons, Runs, Store, Threads};
    let m = method.as_str();
    match (m, path) {
        ("POST", "/assistants") => rule(Assistants, Create, Nothing, Stamp::Body),
        ("POST", "/assistants/search") => {
            rule(Assistants, Search, Check::Search(Empty::List), Stamp::Nothing)
        }
        ("POST", "/assistants/count") => {
            rule(Assistants, Search, Check::Search(Empty::Count), Stamp::Nothing)
        }
        (
            "GET",
            "/assistants/{assistant_id}"
            | "/assistants/{assistant_id}/graph"
            | "/assistants/{assistant_id}/schemas"
            | "/assistants/{assistant_id}/subgraphs"
            | "/assistants/{assistant_id}/subgraphs/{namespace}",
        )
        | ("POST", "/assistants/{assistant_id}/versions") => {
            rule(Assistants, Read, Assistant, Stamp::Nothing)
        }
        ("PATCH", "/assistants/{assistant_id}") => rule(Assistants, Update, Assistant, Stamp::Body),
        ("POST", "/assistants/{assistant_id}/latest") => rule(Assistants, Update, Assistant, Stamp::Nothing),
        ("DELETE", "/assistants/{assistant_id}") => rule(Assistants, Delete, Assistant, Stamp::Nothing),

        ("POST", "/threads") => rule(Threads, Create, Nothing, Stamp::Body),
        ("POST", "/threads/search") => rule(Threads, Search, Check::Search(Empty::List), Stamp::Nothing),
        ("POST", "/threads/count") => rule(Threads, Search, Check::Search(Empty::Count), Stamp::Nothing),
        ("POST", "/threads/prune") => rule(Threads, Delete, Prune, Stamp::Nothing),
        (
            "GET",
            "/threads/{thread_id}"
            | "/threads/{thread_id}/state"
            | "/threads/{thread_id}/state/{checkpoint_id}"
            | "/threads/{thread_id}/history"
            | "/threads/{thread_id}/storage",
        )
        | ("POST", "/threads/{thread_id}/history" | "/threads/{thread_id}/state/checkpoint") => {
            rule(Threads, Read, Thread, Stamp::Nothing)
        }
        // The thread protocol: following a thread reads it; a command may start a run on
        // it (and creates the thread on its first `run.start`), so commands are authorised
        // as the most a command does, and the grant's metadata goes on the runs they start
        // (and on the thread a first `run.start` creates, so the filter finds it again).
        ("GET", "/threads/{thread_id}/stream" | "/threads/{thread_id}/stream/events")
        | ("POST", "/threads/{thread_id}/stream/events") => rule(Threads, Read, Thread, Stamp::Nothing),
        ("POST", "/threads/{thread_id}/commands") => rule(Runs, Create, Thread, Stamp::Command),
        ("PATCH", "/threads/{thread_id}") => rule(Threads, Update, Thread, Stamp::Body),
        ("POST", "/threads/{thread_id}/state") => rule(Threads, Update, Thread, Stamp::Nothing),
        // A copy is a new thread, made of one the filter must let the identity read.
        ("POST", "/threads/{thread_id}/copy") => rule(Threads, Create, Thread, Stamp::Nothing),
        ("DELETE", "/threads/{thread_id}") => rule(Threads, Delete, Thread, Stamp::Nothing),

        (
            "POST",
            "/threads/{thread_id}/runs"
            | "/threads/{thread_id}/runs/stream"
            | "/threads/{thread_id}/runs/wait",
        ) => rule(Runs, Create, Thread, Stamp::Body),
        ("POST", "/runs" | "/runs/stream" | "/runs/wait") => rule(Runs, Create, Nothing, Stamp::Body),
        ("POST", "/runs/batch") => rule(Runs, Create, Nothing, Stamp::Each),
        ("GET", "/threads/{thread_id}/runs") => rule(Runs, Search, Thread, Stamp::Nothing),
        (
            "GET",
            "/threads/{thread_id}/runs/{run_id}"
            | "/threads/{thread_id}/runs/{run_id}/join"
            | "/threads/{thread_id}/runs/{run_id}/stream",
        ) => rule(Runs, Read, Thread, Stamp::Nothing),
        ("POST", "/threads/{thread_id}/runs/{run_id}/cancel") => rule(Runs, Update, Thread, Stamp::Nothing),
        ("POST", "/runs/cancel") => rule(Runs, Update, Refuse, Stamp::Nothing),
        ("DELETE", "/threads/{thread_id}/runs/{run_id}") => rule(Runs, Delete, Thread, Stamp::Nothing),

        ("POST", "/threads/{thread_id}/runs/crons") => rule(Crons, Create, Thread, Stamp::Body),
        ("POST", "/runs/crons") => rule(Crons, Create, Nothing, Stamp::Body),
        ("POST", "/runs/crons/search") => rule(Crons, Search, Check::Search(Empty::List), Stamp::Nothing),
        ("POST", "/runs/crons/count") => rule(Crons, Search, Check::Search(Empty::Count), Stamp::Nothing),
        ("GET", "/runs/crons/{cron_id}") => rule(Crons, Read, Refuse, Stamp::Nothing),
        ("PATCH", "/runs/crons/{cron_id}") => rule(Crons, Update, Refuse, Stamp::Body),
        ("DELETE", "/runs/crons/{cron_id}") => rule(Crons, Delete, Refuse, Stamp::Nothing),

        ("PUT", "/store/items") => rule(Store, Update, Refuse, Stamp::Nothing),
        ("GET", "/store/items") => rule(Store, Read, Refuse, Stamp::Nothing),
        ("DELETE", "/store/items") => rule(Store, Delete, Refuse, Stamp::Nothing),
        ("POST", "/store/items/search" | "/store/namespaces") => rule(Store, Search, Refuse, Stamp::Nothing),
        _ => None,
    }
}
