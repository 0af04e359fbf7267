//! `GET /threads/{id}/stream` (the SDKs' `threads.joinStream`): a thread's current run
//! and the runs after it, in the run-centric stream format. Each run's events come as its
//! own stream gives them (`metadata` first), each with the id `"<run id>:<n>"` so a
//! client can reconnect with `Last-Event-ID`; `metadata` `{"status": "run_done",
//! "run_id"}` marks a run's end.

use super::{all_runs, runs_after};
use crate::models::Run;
use crate::service::runs::events::{self, Follow, Frame, KEEPALIVE};
use crate::service::runs::is_resumable;
use crate::signals::Followed;
use crate::state::AppRef;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

/// How often a join waiting for the thread's next run asks the database.
const POLL: Duration = Duration::from_millis(500);

/// One frame of the joined stream.
#[derive(Debug)]
pub(crate) enum JoinItem {
    /// An event: its id (when it can be resumed from), name and data.
    Event {
        /// `"<run id>:<n>"`.
        id: Option<String>,
        /// The event name (`values`, `updates|<ns>`, `metadata`, ...).
        event: String,
        /// Its data.
        data: Arc<Value>,
    },
    /// Nothing for a while.
    KeepAlive,
}

/// Where a join starts: after event `n` of run `run_id` (`Last-Event-ID`).
pub(crate) type After = Option<(String, u64)>;

/// Read a `Last-Event-ID` of this stream (`"<run id>:<n>"`).
pub(crate) fn parse_last_event_id(s: &str) -> After {
    let (run, n) = s.trim().rsplit_once(':')?;
    Some((run.to_owned(), n.parse().ok()?))
}

struct Joiner {
    state: AppRef,
    owner: String,
    thread_id: String,
    /// Event names asked for (`None`: all).
    modes: Option<Vec<String>>,
    wake: Arc<Followed>,
    after: After,
    /// The runs were listed once (where the join starts is known).
    started: bool,
    /// The key (creation time, id) of the last run the join reached or passed: the next
    /// one comes after it in the thread's listing.
    last: Option<(String, String)>,
    current: Option<(Run, BoxStream<'static, Frame>, bool)>,
    queue: VecDeque<JoinItem>,
    idle_for: Duration,
}

/// The joined stream of thread `thread_id` (see the module docs). `modes`: only events
/// whose name (before any `|`) is one of these, besides `metadata` and `error`.
pub(crate) fn join_thread(
    state: AppRef,
    owner: String,
    thread_id: String,
    modes: Option<Vec<String>>,
    after: After,
) -> impl Stream<Item = JoinItem> + Send {
    let wake = state.thread_signals.watch(&thread_id);
    let init = Joiner {
        state,
        owner,
        thread_id,
        modes,
        wake,
        after,
        started: false,
        last: None,
        current: None,
        queue: VecDeque::new(),
        idle_for: Duration::ZERO,
    };
    futures::stream::unfold(init, |mut j| async move {
        let item = j.next_item().await;
        Some((item, j))
    })
}

impl Joiner {
    async fn next_item(&mut self) -> JoinItem {
        loop {
            if let Some(item) = self.queue.pop_front() {
                return item;
            }
            if self.current.is_some() {
                self.read_current().await;
                continue;
            }
            let seen = self.wake.generation();
            if !self.open_next().await && !self.wake.wait(seen, POLL).await {
                self.idle_for += POLL;
                if self.idle_for >= KEEPALIVE {
                    self.idle_for = Duration::ZERO;
                    return JoinItem::KeepAlive;
                }
            }
        }
    }

    fn wanted(&self, event: &str) -> bool {
        let base = event.split('|').next().unwrap_or(event);
        base == "metadata"
            || base == "error"
            || self.modes.as_ref().is_none_or(|m| {
                m.iter().any(|x| {
                    x == base
                        || (x == "messages-tuple" && base == "messages")
                        || base.starts_with(&format!("{x}/"))
                })
            })
    }

    async fn read_current(&mut self) {
        let Some((run, frames, _)) = self.current.as_mut() else {
            return;
        };
        let run_id = run.run_id.clone();
        match frames.next().await {
            Some(Frame::Events(recs)) => {
                for r in recs {
                    if self.wanted(&r.event) {
                        self.queue.push_back(JoinItem::Event {
                            id: Some(format!("{run_id}:{}", r.id)),
                            event: r.event,
                            data: r.data,
                        });
                    }
                }
            }
            Some(Frame::KeepAlive) => self.queue.push_back(JoinItem::KeepAlive),
            Some(Frame::Pending | Frame::Ended(_)) => {}
            Some(Frame::Last { event, data }) => self.queue.push_back(JoinItem::Event {
                id: None,
                event: event.to_owned(),
                data: data.into(),
            }),
            None => {
                self.current = None;
                self.queue.push_back(JoinItem::Event {
                    id: None,
                    event: "metadata".into(),
                    data: json!({"status": "run_done", "run_id": run_id}).into(),
                });
            }
        }
    }

    /// Start following the next run; false when the thread has none yet.
    async fn open_next(&mut self) -> bool {
        let mut cursor_for = None;
        let (runs, at) = if self.started {
            // After the last run reached (by its key: a rollback deletes the rolled-back
            // run's row), the runs queued since.
            let runs = match &self.last {
                Some((created, id)) => {
                    runs_after(&self.state, &self.owner, &self.thread_id, (created, id)).await
                }
                None => all_runs(&self.state, &self.owner, &self.thread_id).await,
            };
            (runs, 0)
        } else {
            self.started = true;
            let runs = all_runs(&self.state, &self.owner, &self.thread_id).await;
            let found = self
                .after
                .take()
                .and_then(|(id, n)| runs.iter().position(|r| r.run_id == id).map(|i| (i, n)));
            let at = match found {
                Some((i, n)) => {
                    cursor_for = Some(n + 1);
                    i
                }
                // The current run: the first that has not ended (none: the next one).
                None => runs
                    .iter()
                    .position(|r| !r.status.is_final())
                    .unwrap_or(runs.len()),
            };
            // The runs before it are passed.
            if let Some(before) = at.checked_sub(1).and_then(|i| runs.get(i)) {
                self.last = Some((before.created_at.clone(), before.run_id.clone()));
            }
            (runs, at)
        };
        let Some(run) = runs.get(at).cloned() else {
            return false;
        };
        self.last = Some((run.created_at.clone(), run.run_id.clone()));
        let resumable = is_resumable(&run);
        let held = self.wake.holds(&run.run_id);
        let cursor = match cursor_for {
            Some(c) if resumable || held => c,
            _ if held || (resumable && !run.status.is_final()) => 0,
            _ => self.state.broker.len(&run.run_id),
        };
        if run.status.is_final() && !resumable && !held && cursor_for.is_none() {
            return true;
        }
        let reader = if held {
            self.state.broker.reader(&run.run_id)
        } else {
            None
        };
        let from = Follow {
            cursor,
            resumable,
            reader,
            cancel_on_disconnect: false,
        };
        let frames = events::follow(self.state.clone(), self.owner.clone(), run.clone(), from).boxed();
        self.current = Some((run, frames, resumable));
        self.idle_for = Duration::ZERO;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_event_ids_name_a_run_and_an_event() {
        assert_eq!(parse_last_event_id("r-1:7"), Some(("r-1".into(), 7)));
        assert_eq!(parse_last_event_id("7"), None);
        assert_eq!(parse_last_event_id("r:x"), None);
    }
}
