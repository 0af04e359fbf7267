//! Run event logs in memory: what a run has emitted so far, so that a client can subscribe
//! before the run starts, join it later, or reconnect with `Last-Event-ID`.

use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

pub use graphloom_server_db::RunEventRecord;

#[derive(Default)]
struct Log {
    /// Events from id `base` on (those before were dropped).
    events: Vec<RunEventRecord>,
    base: u64,
    /// The body of `runs/wait`, set when the run ends.
    outcome: Option<Value>,
    ended_at: Option<Instant>,
    /// Ended with [`Broker::finish_unreplayable`]: its events go once nobody reads them.
    unreplayable: bool,
    /// Handed off ([`Broker::forget`]): the run goes on in another process; readers follow
    /// it through the database.
    handed_off: bool,
}

impl Log {
    fn len(&self) -> u64 {
        self.base + self.events.len() as u64
    }

    /// Drop the events of an ended, unreplayable run.
    fn drop_events(&mut self) {
        if self.unreplayable && self.ended_at.is_some() {
            self.base = self.len();
            self.events = Vec::new();
        }
    }
}

#[derive(Default)]
struct Entry {
    log: Mutex<Log>,
    notify: Notify,
    /// Open [`Reader`]s.
    readers: std::sync::atomic::AtomicUsize,
}

/// All run logs of this process.
#[derive(Default, Clone)]
pub struct Broker {
    runs: Arc<Mutex<HashMap<String, Arc<Entry>>>>,
    /// When ended logs were last dropped (the sweep runs at most every few seconds, not on
    /// every new run).
    swept: Arc<Mutex<Option<Instant>>>,
}

/// How long a finished run's log stays for late joiners and reconnects.
const KEEP_AFTER_END: Duration = Duration::from_secs(120);
/// How long an unreplayable run's outcome stays once nobody reads its events (later
/// joiners are answered from the database).
const KEEP_UNREPLAYABLE: Duration = Duration::from_secs(10);
/// How often ended logs are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// What a subscriber gets next.
#[derive(Debug)]
pub enum Next {
    /// Events after the cursor.
    Events(Vec<RunEventRecord>),
    /// The run ended and every event was read; its `runs/wait` body.
    End(Value),
}

impl Broker {
    fn entry(&self, run_id: &str) -> Option<Arc<Entry>> {
        self.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(run_id)
            .cloned()
    }

    /// Start (or keep) the log of a run. Idempotent.
    pub fn open(&self, run_id: &str) {
        let now = Instant::now();
        let sweep = {
            let mut swept = self.swept.lock().unwrap_or_else(PoisonError::into_inner);
            let due = swept.is_none_or(|t| now.duration_since(t) >= SWEEP_EVERY);
            if due {
                *swept = Some(now);
            }
            due
        };
        if sweep {
            self.sweep(now);
        }
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        runs.entry(run_id.to_owned()).or_default();
    }

    /// Forget logs of runs that ended long enough before `now`: [`KEEP_AFTER_END`], or
    /// [`KEEP_UNREPLAYABLE`] for an unreplayable run nobody reads.
    fn sweep(&self, now: Instant) {
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        runs.retain(|_, e| {
            let log = e.log.lock().unwrap_or_else(PoisonError::into_inner);
            let read = e.readers.load(std::sync::atomic::Ordering::SeqCst) > 0;
            let keep = if log.unreplayable && !read {
                KEEP_UNREPLAYABLE
            } else {
                KEEP_AFTER_END
            };
            log.ended_at.is_none_or(|t| now.duration_since(t) < keep)
        });
    }

    /// A reader of a run's events, for as long as it is held: while one is, the events of
    /// an unreplayable run stay. None when the run is unknown here.
    #[must_use]
    pub fn reader(&self, run_id: &str) -> Option<Reader> {
        let entry = self.entry(run_id)?;
        entry.readers.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Some(Reader(entry))
    }

    /// Whether this process has a log of the run.
    #[must_use]
    pub fn knows(&self, run_id: &str) -> bool {
        self.entry(run_id).is_some()
    }

    /// Append an event.
    pub fn push(&self, run_id: &str, event: String, data: Value) {
        let Some(e) = self.entry(run_id) else { return };
        {
            let mut log = e.log.lock().unwrap_or_else(PoisonError::into_inner);
            let id = log.len();
            log.events.push(RunEventRecord { id, event, data });
        }
        e.notify.notify_waiters();
    }

    /// Mark the run ended with its `runs/wait` body. A new attempt of the same run (after a
    /// takeover) may `open` and push again: `reset` clears the end first.
    pub fn finish(&self, run_id: &str, outcome: Value) {
        self.end(run_id, outcome, false);
    }

    /// [`finish`](Self::finish) a run whose events nobody may replay (not
    /// `stream_resumable`): they are dropped as soon as no [`Reader`] holds the run, and
    /// the outcome after [`KEEP_UNREPLAYABLE`]. A busy server would otherwise keep every
    /// run's events for [`KEEP_AFTER_END`].
    pub fn finish_unreplayable(&self, run_id: &str, outcome: Value) {
        self.end(run_id, outcome, true);
    }

    fn end(&self, run_id: &str, outcome: Value, unreplayable: bool) {
        let Some(e) = self.entry(run_id) else { return };
        {
            let mut log = e.log.lock().unwrap_or_else(PoisonError::into_inner);
            log.outcome = Some(outcome);
            log.ended_at = Some(Instant::now());
            log.unreplayable = unreplayable;
            if e.readers.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                log.drop_events();
            }
        }
        e.notify.notify_waiters();
    }

    /// Forget a run's end (it is being executed again).
    pub fn reset(&self, run_id: &str) {
        if let Some(e) = self.entry(run_id) {
            let mut log = e.log.lock().unwrap_or_else(PoisonError::into_inner);
            log.outcome = None;
            log.ended_at = None;
            log.unreplayable = false;
        }
    }

    /// Forget a run this process no longer executes (its lease was lost: another worker
    /// has it). Readers waiting here are woken and told the run is unknown, so they follow
    /// it through the database as they would on another replica.
    pub fn forget(&self, run_id: &str) {
        let removed = self
            .runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(run_id);
        if let Some(e) = removed {
            e.log.lock().unwrap_or_else(PoisonError::into_inner).handed_off = true;
            e.notify.notify_waiters();
        }
    }

    /// Number of events so far (a cursor for "from now on").
    #[must_use]
    pub fn len(&self, run_id: &str) -> u64 {
        self.entry(run_id)
            .map_or(0, |e| e.log.lock().unwrap_or_else(PoisonError::into_inner).len())
    }

    /// Wait for events at or after `cursor`, or the end, or `timeout` (then an empty batch).
    /// `None` when the run is unknown here, or was handed off ([`Broker::forget`]).
    pub async fn next(&self, run_id: &str, cursor: u64, timeout: Duration) -> Option<Next> {
        let e = self.entry(run_id)?;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = e.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let log = e.log.lock().unwrap_or_else(PoisonError::into_inner);
                if log.handed_off {
                    return None;
                }
                // Events before `base` were dropped: a cursor there reads what is left.
                let from = usize::try_from(cursor.saturating_sub(log.base))
                    .unwrap_or(usize::MAX)
                    .min(log.events.len());
                if from < log.events.len() {
                    return Some(Next::Events(log.events[from..].to_vec()));
                }
                if let Some(out) = &log.outcome {
                    return Some(Next::End(out.clone()));
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Some(Next::Events(Vec::new()));
            }
        }
    }

    /// The `runs/wait` body once the run has ended here; `None` when the run is unknown
    /// here or was handed off ([`Broker::forget`]) while waiting.
    pub async fn outcome(&self, run_id: &str) -> Option<Value> {
        let e = self.entry(run_id)?;
        loop {
            let notified = e.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let log = e.log.lock().unwrap_or_else(PoisonError::into_inner);
                if log.handed_off {
                    return None;
                }
                if let Some(out) = &log.outcome {
                    return Some(out.clone());
                }
            }
            notified.await;
        }
    }
}

/// Holds a run's events for a reader (see [`Broker::reader`]).
pub struct Reader(Arc<Entry>);

impl Drop for Reader {
    fn drop(&mut self) {
        if self.0.readers.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
            self.0
                .log
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .drop_events();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn a_handed_off_run_wakes_its_readers_and_is_unknown_here() {
        let b = Broker::default();
        b.open("r");
        b.push("r", "values".into(), json!({"n": 1}));
        let (b1, b2) = (b.clone(), b.clone());
        let next = tokio::spawn(async move { b1.next("r", 1, Duration::from_secs(30)).await });
        let outcome = tokio::spawn(async move { b2.outcome("r").await });
        tokio::task::yield_now().await;
        b.forget("r");
        let next = tokio::time::timeout(Duration::from_secs(5), next)
            .await
            .unwrap()
            .unwrap();
        assert!(next.is_none(), "{next:?}");
        let out = tokio::time::timeout(Duration::from_secs(5), outcome)
            .await
            .unwrap()
            .unwrap();
        assert!(out.is_none(), "{out:?}");
        assert!(!b.knows("r"));
        assert!(b.next("r", 0, Duration::from_millis(1)).await.is_none());
    }

    #[tokio::test]
    async fn subscribers_replay_from_a_cursor_and_see_the_end() {
        let b = Broker::default();
        b.open("r");
        b.push("r", "values".into(), json!({"a": 1}));
        let Some(Next::Events(ev)) = b.next("r", 0, Duration::from_millis(10)).await else {
            panic!("expected events")
        };
        assert_eq!(ev.len(), 1);
        let b2 = b.clone();
        let waiter = tokio::spawn(async move { b2.next("r", 1, Duration::from_secs(5)).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        b.push("r", "updates".into(), json!({"n": {}}));
        match waiter.await.unwrap() {
            Some(Next::Events(ev)) => assert_eq!((ev[0].id, ev[0].event.as_str()), (1, "updates")),
            other => panic!("{other:?}"),
        }
        b.finish("r", json!({"a": 2}));
        match b.next("r", 2, Duration::from_secs(1)).await {
            Some(Next::End(v)) => assert_eq!(v, json!({"a": 2})),
            other => panic!("{other:?}"),
        }
        assert!(b.next("unknown", 0, Duration::from_millis(1)).await.is_none());
    }

    /// An unreplayable run's events go when it ends unread, or when its last reader
    /// goes; the outcome stays for late waiters until the sweep, and ids go on counting.
    #[tokio::test]
    async fn unreplayable_events_go_once_nobody_reads_them() {
        let b = Broker::default();
        // Ended with nobody reading: only the outcome is left.
        b.open("quiet");
        b.push("quiet", "values".into(), json!({"a": 1}));
        b.finish_unreplayable("quiet", json!({"a": 1}));
        assert_eq!(b.len("quiet"), 1);
        match b.next("quiet", 0, Duration::from_millis(10)).await {
            Some(Next::End(v)) => assert_eq!(v, json!({"a": 1})),
            other => panic!("{other:?}"),
        }
        assert_eq!(b.outcome("quiet").await, Some(json!({"a": 1})));

        // A reader keeps them until it is dropped.
        b.open("read");
        let reader = b.reader("read").unwrap();
        b.push("read", "values".into(), json!({"a": 1}));
        b.push("read", "values".into(), json!({"a": 2}));
        b.finish_unreplayable("read", json!({"a": 2}));
        match b.next("read", 1, Duration::from_millis(10)).await {
            Some(Next::Events(ev)) => assert_eq!((ev.len(), ev[0].id), (1, 1)),
            other => panic!("{other:?}"),
        }
        drop(reader);
        assert!(matches!(
            b.next("read", 1, Duration::from_millis(10)).await,
            Some(Next::End(_))
        ));

        // A replayable run keeps its events after its end.
        b.open("kept");
        b.push("kept", "values".into(), json!({"a": 1}));
        b.finish("kept", json!({"a": 1}));
        assert!(matches!(
            b.next("kept", 0, Duration::from_millis(10)).await,
            Some(Next::Events(_))
        ));

        // The sweep forgets unreplayable runs sooner, but not while they are read.
        b.open("held");
        let held = b.reader("held").unwrap();
        b.finish_unreplayable("held", json!({}));
        b.sweep(Instant::now() + KEEP_UNREPLAYABLE + Duration::from_secs(1));
        assert!(!b.knows("quiet") && !b.knows("read"));
        assert!(b.knows("kept") && b.knows("held"));
        drop(held);
        b.sweep(Instant::now() + KEEP_AFTER_END + Duration::from_secs(1));
        assert!(!b.knows("kept") && !b.knows("held"));
    }
}
