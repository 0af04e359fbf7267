//! Following a thread in the thread-centric protocol: its runs in creation order, each
//! read from the run event log (this process's broker, or the database for a resumable
//! run executing elsewhere, as the run-centric streams read it) and turned into protocol
//! events by a [`RunTranslator`]; then the thread's next runs, as they are queued.

use super::commands::TranslatedRun;
use super::{all_runs, latest_run, resumable_and_graph, runs_after, runs_from, stored_status};
use crate::broker::RunEventRecord;
use crate::models::{Run, RunStatus};
use crate::protocol::translate::{Methods, RunTranslator};
use crate::protocol::Event;
use crate::service::runs::events::{self, Follow, Frame, KEEPALIVE};
use crate::service::runs::is_resumable;
use crate::signals::Followed;
use crate::state::AppRef;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use std::sync::Arc;
use std::time::Duration;

/// How often a follower waiting for a thread's next run asks the database (a command of
/// this process wakes it at once).
const POLL: Duration = Duration::from_millis(500);

/// Where a follower starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Start {
    /// The thread's whole history (its replayable runs), then what comes; with
    /// `since`, only the events after that sequence number (SSE).
    History {
        /// Replay only events with a larger sequence number.
        since: Option<u64>,
    },
    /// The thread's latest run from its start, then what comes (WebSocket).
    LatestRun,
}

/// What a follower gets next.
#[derive(Debug)]
pub(crate) enum Item {
    /// Events, in order.
    Events(Vec<Event>),
    /// Nothing for a while (an SSE keep-alive).
    KeepAlive,
    /// A run (the one given) began: events of the runs before it will not come again.
    RunStarted,
}

struct Current {
    run: Run,
    translator: RunTranslator,
    frames: BoxStream<'static, Frame>,
    cursor: u64,
}

struct ThreadFollower {
    state: AppRef,
    owner: String,
    thread_id: String,
    wake: Arc<Followed>,
    start: Start,
    since: Option<u64>,
    /// The key (creation time, id) of the last run the stream reached: the next ones
    /// come after it in the thread's listing.
    after: Option<(String, String)>,
    current: Option<Current>,
    /// The thread's [`generation`](Followed::generation) when its runs were last listed.
    seen: u64,
    /// The runs are to be listed before waiting (a run may have been queued since the
    /// last listing, here or elsewhere).
    list: bool,
    idle_for: Duration,
    /// The methods whose events the stream reads (the translators build only those).
    builds: Methods,
}

/// The protocol events of thread `thread_id` of `owner` after `from` (a run translated so
/// far): the rest of that run, then the runs after it.
pub(crate) fn follow_thread_from(
    state: AppRef,
    owner: String,
    thread_id: String,
    from: TranslatedRun,
) -> impl Stream<Item = Item> + Send {
    let wake = state.thread_signals.watch(&thread_id);
    let after = key_of(&from.run);
    let current = (!from.ended).then(|| {
        let resumable = is_resumable(&from.run);
        let reader = state.broker.reader(&from.run.run_id);
        let follow = Follow {
            cursor: from.cursor,
            resumable,
            reader,
            cancel_on_disconnect: false,
        };
        let frames = events::follow(state.clone(), owner.clone(), from.run.clone(), follow).boxed();
        Current {
            run: from.run,
            translator: from.translator,
            frames,
            cursor: from.cursor,
        }
    });
    let init = ThreadFollower {
        state,
        owner,
        thread_id,
        wake,
        start: Start::LatestRun,
        since: None,
        after: Some(after),
        current,
        seen: 0,
        list: true,
        idle_for: Duration::ZERO,
        builds: Methods::ALL,
    };
    futures::stream::unfold(init, |mut f| async move {
        let item = f.next_item().await;
        Some((item, f))
    })
}

/// The protocol events of thread `thread_id` of `owner` from `start` on, for as long as
/// the stream is read; of `builds`' methods only (the others are not made). A thread
/// that does not exist (yet) yields keep-alives until a run is queued on it.
pub(crate) fn follow_thread(
    state: AppRef,
    owner: String,
    thread_id: String,
    start: Start,
    builds: Methods,
) -> impl Stream<Item = Item> + Send {
    let wake = state.thread_signals.watch(&thread_id);
    let since = match start {
        Start::History { since } => since,
        Start::LatestRun => None,
    };
    let init = ThreadFollower {
        state,
        owner,
        thread_id,
        wake,
        start,
        since,
        after: None,
        current: None,
        seen: 0,
        list: true,
        idle_for: Duration::ZERO,
        builds,
    };
    futures::stream::unfold(init, |mut f| async move {
        let item = f.next_item().await;
        Some((item, f))
    })
}

/// The ordinal of the run a `since` sequence number reached: a sequence number carries
/// its run's ordinal, which no other run of the thread has.
fn since_ordinal(since: u64) -> i64 {
    i64::try_from(since.saturating_add(1) >> 32).unwrap_or(i64::MAX)
}

/// A run's place in its thread's listing: creation time, then id.
fn key_of(run: &Run) -> (String, String) {
    (run.created_at.clone(), run.run_id.clone())
}

impl ThreadFollower {
    async fn next_item(&mut self) -> Item {
        loop {
            if self.current.is_some() {
                if let Some(item) = self.read_current().await {
                    return item;
                }
                continue;
            }
            // After a run, the runs are listed again only when one was queued here since
            // the last listing; runs queued elsewhere are found by the next poll.
            if self.list || self.wake.generation() != self.seen {
                self.seen = self.wake.generation();
                if self.open_next().await.is_some() {
                    return Item::RunStarted;
                }
            }
            self.list = true;
            if let Some(item) = self.wait().await {
                return item;
            }
        }
    }

    /// The next item of the run being followed; `None` to go on (nothing to say yet).
    async fn read_current(&mut self) -> Option<Item> {
        let cur = self.current.as_mut()?;
        let frame = cur.frames.next().await;
        let mut out = Vec::new();
        match frame {
            Some(Frame::Events(recs)) => {
                for r in &recs {
                    out.extend(cur.translator.push(r));
                    cur.cursor = r.id + 1;
                }
            }
            Some(Frame::KeepAlive) => return Some(Item::KeepAlive),
            Some(Frame::Pending) => return None,
            Some(Frame::Last { event, data }) => {
                let r = RunEventRecord {
                    id: cur.cursor,
                    event: event.to_owned(),
                    data: data.into(),
                };
                out.extend(cur.translator.push(&r));
                cur.cursor += 1;
            }
            // Ended here: the log has the status the run's end recorded. A rolled-back run
            // ends `interrupted`, its row gone: it ends without a last event, as on the
            // reference server (the run that rolled it back follows, and a replay does not
            // show it at all).
            Some(Frame::Ended(status)) => {
                let gone = status == RunStatus::Interrupted && self.status_now().await.is_none();
                if !gone {
                    let cur = self.current.as_mut()?;
                    out.extend(cur.translator.finish(cur.cursor, status));
                }
                self.current = None;
            }
            None => {
                if let Some(status) = self.status_now().await {
                    let cur = self.current.as_mut()?;
                    out.extend(cur.translator.finish(cur.cursor, status));
                }
                self.current = None;
            }
        }
        let since = self.since;
        out.retain(|e| since.is_none_or(|s| e.seq > s));
        (!out.is_empty()).then_some(Item::Events(out))
    }

    /// The followed run's status as the database has it now; `None` when it is gone.
    fn status_now(&self) -> impl std::future::Future<Output = Option<RunStatus>> + Send + 'static {
        let state = self.state.clone();
        let owner = self.owner.clone();
        let run = self.current.as_ref().map(|c| c.run.clone());
        async move {
            let run = run?;
            stored_status(&state, &owner, &run).await
        }
    }

    /// Start following the thread's next run, if it has one; its id.
    async fn open_next(&mut self) -> Option<String> {
        // After the last run this stream reached (found by its key: a rollback deletes
        // the rolled-back run's row), the runs queued since; else where the stream starts.
        let (state, owner, thread) = (&self.state, self.owner.as_str(), self.thread_id.as_str());
        let runs = match (&self.after, self.start) {
            (Some((created, id)), _) => runs_after(state, owner, thread, (created, id)).await,
            (None, Start::LatestRun) => latest_run(state, owner, thread).await.into_iter().collect(),
            // From the run the last sequence number reached.
            (None, Start::History { since: Some(s) }) => {
                let runs = runs_from(state, owner, thread, since_ordinal(s)).await;
                if runs.is_empty() {
                    // No run from there on: the client's `since` is beyond the thread's
                    // runs (its history comes from a copy the thread no longer matches, a
                    // restored backup, say). The stream replays the thread's whole history
                    // instead of waiting for a run with that number: a client drops the
                    // events it already has by their ids (and lists the thread as such a
                    // stream does from now on).
                    self.since = None;
                    self.start = Start::History { since: None };
                    all_runs(state, owner, thread).await
                } else {
                    runs
                }
            }
            (None, Start::History { since: None }) => all_runs(state, owner, thread).await,
        };
        let mut runs = runs.into_iter();
        while let Some(run) = runs.next() {
            self.after = Some(key_of(&run));
            let (resumable, graph) = resumable_and_graph(&run);
            // This process's log of a run queued while the thread was followed is held
            // from its start.
            let held = self.wake.holds(&run.run_id);
            // An ended run whose events were not kept has nothing to replay.
            if run.status.is_final() && !resumable && !held {
                continue;
            }
            let cursor = if resumable || held {
                0
            } else {
                self.state.broker.len(&run.run_id)
            };
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
            let ordinal = u64::try_from(run.ordinal).unwrap_or(0);
            let translator = RunTranslator::new(run.run_id.clone(), ordinal, graph).building(self.builds);
            let run_id = run.run_id.clone();
            self.current = Some(Current {
                run,
                translator,
                frames,
                cursor,
            });
            self.idle_for = Duration::ZERO;
            // When this run ends the runs are listed again for the runs after it, else
            // only if one was queued here meanwhile.
            self.list = runs.len() > 0;
            return Some(run_id);
        }
        None
    }

    /// Wait for a run to be queued on the thread; a keep-alive every few seconds.
    async fn wait(&mut self) -> Option<Item> {
        if self.wake.wait(self.seen, POLL).await {
            return None;
        }
        self.idle_for += POLL;
        if self.idle_for >= KEEPALIVE {
            self.idle_for = Duration::ZERO;
            return Some(Item::KeepAlive);
        }
        None
    }
}
