//! Following a run's events: from this process's broker while the run executes here, from
//! the database for a resumable run executing elsewhere, or just its end for one that is
//! not resumable. The HTTP edge writes the [`Frame`]s as server-sent events.

use super::{settled_body, wait_outcome};
use crate::broker::{Next, Reader, RunEventRecord};
use crate::models::{cancel_reason, CancelAction, Run, RunStatus};
use crate::state::AppRef;
use futures::Stream;
use serde_json::Value;
use std::time::Duration;

/// How long a follower waits for news before a keep-alive.
pub(crate) const KEEPALIVE: Duration = Duration::from_secs(5);

/// What a follower of a run gets next.
pub(crate) enum Frame {
    /// Events of the run, in order, with their ids.
    Events(Vec<RunEventRecord>),
    /// Nothing for a while: a keep-alive.
    KeepAlive,
    /// Nothing yet; the follower polls again soon.
    Pending,
    /// The run ended here with this status (the last frame before the stream's end;
    /// a run followed through the database ends without it).
    Ended(RunStatus),
    /// The run ended elsewhere: one last event without id (`values` or `error`).
    Last {
        /// The event name.
        event: &'static str,
        /// Its data.
        data: Value,
    },
}

/// Where a follower starts reading a run's events.
pub(crate) struct Follow {
    /// The first event id to send.
    pub cursor: u64,
    /// Whether the run keeps its events for replay (its frames then carry ids).
    pub resumable: bool,
    /// A reader taken before the run could start (else one is taken now).
    pub reader: Option<Reader>,
    /// Cancel the run when the follower goes away before it ends.
    pub cancel_on_disconnect: bool,
}

/// What joining a run's event stream gives.
pub(crate) enum Joined {
    /// The run ended and cannot be replayed: its final values, once.
    Settled(Value),
    /// Follow it from here.
    Follow(Follow),
}

/// Join run `run`'s events after event `last_event_id` (`Last-Event-ID`), or from the
/// start of a resumable run, or from now.
pub(crate) async fn join(
    state: &AppRef,
    owner: &str,
    run: &Run,
    last_event_id: Option<u64>,
    cancel_on_disconnect: bool,
) -> Joined {
    let resumable = super::is_resumable(run);
    let cursor = match last_event_id {
        Some(id) => id.saturating_add(1),
        None if resumable => 0,
        None => state.broker.len(&run.run_id),
    };
    // Ended and not replayable: its final values (its events are gone once read).
    if run.status.is_final() && !resumable {
        return Joined::Settled(settled_body(state, owner, run).await);
    }
    Joined::Follow(Follow {
        cursor,
        resumable,
        reader: None,
        cancel_on_disconnect,
    })
}

/// Cancels the run if the follower goes away before it ends (`on_disconnect: cancel`).
struct DisconnectGuard {
    state: AppRef,
    owner: String,
    run: Run,
    cancel: bool,
    done: bool,
}

impl Drop for DisconnectGuard {
    fn drop(&mut self) {
        if self.cancel && !self.done {
            let (state, owner, run) = (self.state.clone(), self.owner.clone(), self.run.clone());
            tokio::spawn(async move {
                let _ = state
                    .db
                    .cancel_run(
                        &owner,
                        Some(&run.thread_id),
                        &run.run_id,
                        CancelAction::Interrupt,
                        cancel_reason::CLIENT_DISCONNECTED,
                    )
                    .await;
                state.cancel_local(&run.run_id, CancelAction::Interrupt);
            });
        }
    }
}

/// How often a follower of a run whose log here is only opened (queued here, executed
/// by nobody here yet) asks the database whether another process executes it.
const CROSS_CHECK: Duration = Duration::from_millis(250);

struct Follower {
    guard: DisconnectGuard,
    cursor: u64,
    resumable: bool,
    /// Keeps the run's events here while this follower reads them.
    reader: Option<Reader>,
    /// The run executes (or ended) in another process: follow it through the database,
    /// whatever this process's log of it says.
    elsewhere: bool,
    /// How long the follower has waited without news (for keep-alives while it cross
    /// checks).
    quiet: Duration,
}

/// The frames of run `run` from `from.cursor` on, until its end.
pub(crate) fn follow(
    state: AppRef,
    owner: String,
    run: Run,
    from: Follow,
) -> impl Stream<Item = Frame> + Send {
    let reader = from.reader.or_else(|| state.broker.reader(&run.run_id));
    let init = Follower {
        reader,
        elsewhere: false,
        quiet: Duration::ZERO,
        guard: DisconnectGuard {
            state,
            owner,
            run,
            cancel: from.cancel_on_disconnect,
            done: false,
        },
        cursor: from.cursor,
        resumable: from.resumable,
    };
    futures::stream::unfold(init, |mut f| async move {
        if f.guard.done {
            return None;
        }
        let frame = f.next().await?;
        Some((frame, f))
    })
}

impl Follower {
    /// The next frame; `None` at the end.
    async fn next(&mut self) -> Option<Frame> {
        if self.elsewhere {
            return self.read_elsewhere().await;
        }
        let state = self.guard.state.clone();
        let run_id = self.guard.run.run_id.clone();
        // A log only opened here (the run was queued here) may never get an event: another
        // process may execute the run. Wait on it briefly, then ask the database.
        let here = state.broker.executes_here(&run_id);
        let wait = if here { KEEPALIVE } else { CROSS_CHECK };
        match state.broker.next(&run_id, self.cursor, wait).await {
            Some(Next::Events(evs)) if evs.is_empty() => {
                if here {
                    self.quiet = Duration::ZERO;
                    return Some(Frame::KeepAlive);
                }
                if self.runs_elsewhere().await {
                    self.elsewhere = true;
                    // The log here is not needed any more (it goes when it expires).
                    self.reader = None;
                    return self.read_elsewhere().await;
                }
                self.quiet += wait;
                if self.quiet >= KEEPALIVE {
                    self.quiet = Duration::ZERO;
                    return Some(Frame::KeepAlive);
                }
                Some(Frame::Pending)
            }
            Some(Next::Events(evs)) => {
                self.quiet = Duration::ZERO;
                Some(self.advance(evs))
            }
            Some(Next::End(status)) => {
                self.guard.done = true;
                Some(Frame::Ended(status))
            }
            None if self.resumable => self.read_stored().await,
            None => Some(self.await_end().await),
        }
    }

    /// The next frame of a run followed through the database.
    async fn read_elsewhere(&mut self) -> Option<Frame> {
        if self.resumable {
            self.read_stored().await
        } else {
            Some(self.await_end().await)
        }
    }

    /// Whether the run, whose log here is only opened, executes (or ended) in another
    /// process: it ended without this process executing it, or (a resumable run) the
    /// database has events this process's log does not.
    async fn runs_elsewhere(&self) -> bool {
        let state = &self.guard.state;
        let (run, owner) = (&self.guard.run, &self.guard.owner);
        if state.broker.executes_here(&run.run_id) {
            return false;
        }
        let elsewhere = match state.db.get_run(owner, Some(&run.thread_id), &run.run_id).await {
            Ok(Some(r)) if r.status.is_final() => true,
            Ok(None) => true,
            Ok(Some(_)) if self.resumable => state
                .db
                .run_events(&run.run_id, self.cursor, 1)
                .await
                .is_ok_and(|evs| !evs.is_empty()),
            Ok(Some(_)) | Err(_) => false,
        };
        // Claimed here meanwhile: this process's log has it all.
        elsewhere && !state.broker.executes_here(&run.run_id)
    }

    fn advance(&mut self, evs: Vec<RunEventRecord>) -> Frame {
        self.cursor = evs.last().map_or(self.cursor, |e| e.id + 1);
        Frame::Events(evs)
    }

    /// A resumable run executing elsewhere (or before a restart): its events from the
    /// database.
    async fn read_stored(&mut self) -> Option<Frame> {
        let state = self.guard.state.clone();
        let (run, owner) = (&self.guard.run, &self.guard.owner);
        let ended = match state.db.get_run(owner, Some(&run.thread_id), &run.run_id).await {
            Ok(Some(r)) => r.status.is_final(),
            Ok(None) => true,
            Err(_) => false,
        };
        // Read after the status: a run is marked ended only once its events are stored.
        let evs = state
            .db
            .run_events(&run.run_id, self.cursor, 256)
            .await
            .unwrap_or_default();
        if !evs.is_empty() {
            return Some(self.advance(evs));
        }
        if ended {
            self.guard.done = true;
            if self.cursor == 0 {
                // Nothing was stored (an older run): its final values.
                let data = settled_body(&state, owner, run).await;
                return Some(Frame::Last {
                    event: "values",
                    data,
                });
            }
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        Some(Frame::Pending)
    }

    /// Not executing here and not resumable: wait for its end through the database, then
    /// its final values (or error).
    async fn await_end(&mut self) -> Frame {
        let state = self.guard.state.clone();
        let (run, owner) = (&self.guard.run, &self.guard.owner);
        match tokio::time::timeout(KEEPALIVE, wait_outcome(&state, owner, run)).await {
            Ok(mut body) => {
                self.guard.done = true;
                match body.get_mut("__error__").map(Value::take) {
                    Some(err) => Frame::Last {
                        event: "error",
                        data: err,
                    },
                    None => Frame::Last {
                        event: "values",
                        data: body,
                    },
                }
            }
            Err(_) => Frame::KeepAlive,
        }
    }
}
