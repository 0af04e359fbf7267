//! Run event logs in memory: what a run has emitted so far, so that a client can subscribe
//! before the run starts, join it later, or reconnect with `Last-Event-ID`.

use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

use crate::models::RunStatus;
pub use graphloom_server_db::RunEventRecord;

struct Log {
    /// Events from id `base` on (those before were dropped).
    events: Vec<RunEventRecord>,
    base: u64,
    /// The run's final status and the body of `runs/wait`, set when the run ends.
    outcome: Option<(RunStatus, Value)>,
    ended_at: Option<Instant>,
    /// Not replayable (executed with `reset(.., false)` or ended with
    /// [`Broker::finish_unreplayable`]): events nobody reads are not kept, and the log
    /// goes once the run has ended and nobody holds it.
    unreplayable: bool,
    /// Ended with every event stored in the database ([`Broker::finish_stored`]): the
    /// events stay while a [`Reader`] holds the run, then the log goes; later readers
    /// replay the run from the database.
    stored: bool,
    /// When the log was opened.
    opened_at: Instant,
    /// Being executed by this process (set by [`Broker::reset`], cleared at the end).
    executing: bool,
    /// Handed off ([`Broker::abandon`]): the run goes on in another process; readers and
    /// waiters follow it through the database.
    handed_off: bool,
}

impl Log {
    fn new(now: Instant) -> Self {
        Self {
            events: Vec::new(),
            base: 0,
            outcome: None,
            ended_at: None,
            unreplayable: false,
            stored: false,
            opened_at: now,
            executing: false,
            handed_off: false,
        }
    }

    fn len(&self) -> u64 {
        self.base + self.events.len() as u64
    }

    /// Drop the events of an ended run that is unreplayable or whose events are stored.
    fn drop_events(&mut self) {
        if self.goes_at_end() && self.ended_at.is_some() {
            self.forget_events();
        }
    }

    /// Drop the events held (their ids stay counted).
    fn forget_events(&mut self) {
        self.base = self.len();
        self.events = Vec::new();
    }

    /// Whether the log goes as soon as its run ended and nobody holds it: the run is
    /// unreplayable, or its events are stored.
    fn goes_at_end(&self) -> bool {
        self.unreplayable || self.stored
    }

    /// Whether an unread log can go at `now`: an unreplayable run's once it ended (its
    /// outcome is in the database, where later joiners read it, as on another replica), and
    /// so a replayable run's whose events are stored; another replayable run's
    /// [`KEEP_AFTER_END`] after its end; one never executed here (another
    /// process runs it, or its creation failed) [`KEEP_AFTER_END`] after it was opened
    /// (an execution here opens it again).
    fn expired(&self, now: Instant) -> bool {
        match self.ended_at {
            Some(_) if self.goes_at_end() => true,
            Some(t) => now.duration_since(t) >= KEEP_AFTER_END,
            None => !self.executing && now.duration_since(self.opened_at) >= KEEP_AFTER_END,
        }
    }
}

struct Entry {
    log: Mutex<Log>,
    notify: Notify,
    /// Open [`Reader`]s of the events ([`Broker::reader`]). Changed only under the map's
    /// lock, as `waiters`, so a log is never dropped while a holder is being taken.
    readers: AtomicUsize,
    /// Open [`Reader`]s of the outcome only ([`Broker::waiter`], [`Broker::outcome`]).
    waiters: AtomicUsize,
}

impl Entry {
    fn held(&self) -> bool {
        self.readers.load(SeqCst) > 0 || self.waiters.load(SeqCst) > 0
    }
}

/// All run logs of this process.
///
/// Memory: a log lives while its run is queued or executing here, or while a [`Reader`]
/// holds it. An unreplayable run's log (the default: not `stream_resumable`) keeps only
/// events somebody reads, and goes as soon as the run has ended and nobody holds it, so
/// the memory held is that of the runs in flight and of what their readers have not read
/// yet, not of the runs per second times a retention period. So does a replayable run's
/// whose events the worker stored ([`Broker::finish_stored`]): replays read the database.
/// Any other replayable run's log stays [`KEEP_AFTER_END`] for reconnects. Requests that
/// want a run's events or outcome take a reader or a waiter before the run can start
/// ([`Broker::reader`], [`Broker::waiter`]).
#[derive(Default, Clone)]
pub struct Broker {
    runs: Arc<Mutex<HashMap<String, Arc<Entry>>>>,
    /// When ended logs were last dropped (the sweep runs at most every few seconds, not on
    /// every new run).
    swept: Arc<Mutex<Option<Instant>>>,
}

/// How long a finished replayable run's log stays for late joiners and reconnects (and
/// how long a log opened for a run not executed here waits for it).
const KEEP_AFTER_END: Duration = Duration::from_secs(120);
/// How often expired logs are looked for when runs are opened.
const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// How a run's log ends (see [`Broker::finish`] and its variants).
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    /// Kept [`KEEP_AFTER_END`] for replay.
    Kept,
    /// Not replayable: goes once nobody holds it.
    Unreplayable,
    /// Replayable from the database: goes once nobody holds it.
    Stored,
}

/// What a subscriber gets next.
#[derive(Debug)]
pub enum Next {
    /// Events after the cursor.
    Events(Vec<RunEventRecord>),
    /// The run ended and every event was read; its final status.
    End(RunStatus),
}

impl Broker {
    fn lock_runs(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Entry>>> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn entry(&self, run_id: &str) -> Option<Arc<Entry>> {
        self.lock_runs().get(run_id).cloned()
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
        self.lock_runs().entry(run_id.to_owned()).or_insert_with(|| {
            Arc::new(Entry {
                log: Mutex::new(Log::new(now)),
                notify: Notify::new(),
                readers: AtomicUsize::new(0),
                waiters: AtomicUsize::new(0),
            })
        });
    }

    /// Forget the logs nobody reads that expired (see [`Log::expired`]). The server's
    /// sweeper calls it periodically, so an idle server lets them go too.
    pub fn sweep_now(&self) {
        self.sweep(Instant::now());
    }

    fn sweep(&self, now: Instant) {
        self.lock_runs()
            .retain(|_, e| e.held() || !e.log.lock().unwrap_or_else(PoisonError::into_inner).expired(now));
    }

    /// Drop `entry`'s log now if it is still the run's, unread and expired.
    fn drop_if_expired(&self, run_id: &str, entry: &Arc<Entry>) {
        let mut runs = self.lock_runs();
        let gone = runs.get(run_id).is_some_and(|e| {
            Arc::ptr_eq(e, entry)
                && !e.held()
                && e.log
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .expired(Instant::now())
        });
        if gone {
            runs.remove(run_id);
        }
    }

    /// Whether a reader or a waiter of this process holds the run's log.
    #[must_use]
    pub fn is_held(&self, run_id: &str) -> bool {
        self.entry(run_id).is_some_and(|e| e.held())
    }

    /// Number of logs held (runs queued or executing here, read, or kept for replay).
    #[must_use]
    pub fn held(&self) -> usize {
        self.lock_runs().len()
    }

    /// A reader of a run's events, for as long as it is held: while one is, the events
    /// and the log of an unreplayable run stay. None when the run is unknown here.
    #[must_use]
    pub fn reader(&self, run_id: &str) -> Option<Reader> {
        self.hold(run_id, true)
    }

    /// A waiter for a run's outcome ([`Reader::outcome`]): while one is held, the log
    /// stays, but not the events of an unreplayable run. None when the run is unknown here.
    #[must_use]
    pub fn waiter(&self, run_id: &str) -> Option<Reader> {
        self.hold(run_id, false)
    }

    fn hold(&self, run_id: &str, events: bool) -> Option<Reader> {
        let runs = self.lock_runs();
        let entry = Arc::clone(runs.get(run_id)?);
        let count = if events { &entry.readers } else { &entry.waiters };
        count.fetch_add(1, SeqCst);
        drop(runs);
        Some(Reader {
            entry,
            broker: self.clone(),
            run_id: run_id.to_owned(),
            events,
        })
    }

    /// Whether this process has a log of the run.
    #[must_use]
    pub fn knows(&self, run_id: &str) -> bool {
        self.entry(run_id).is_some()
    }

    /// Append an event. An unreplayable run's event that no [`Reader`] holds the run for
    /// is counted but not kept (nobody could read it: joiners of such a run read from the
    /// moment they join).
    pub fn push(&self, run_id: &str, event: String, data: impl Into<Arc<Value>>) {
        let Some(e) = self.entry(run_id) else { return };
        let data = data.into();
        {
            let mut log = e.log.lock().unwrap_or_else(PoisonError::into_inner);
            if log.unreplayable && e.readers.load(SeqCst) == 0 {
                log.forget_events();
                log.base += 1;
            } else {
                let id = log.len();
                log.events.push(RunEventRecord { id, event, data });
            }
        }
        e.notify.notify_waiters();
    }

    /// Mark the run ended with its final status and its `runs/wait` body. A new attempt of
    /// the same run (after a takeover) may `open` and push again: `reset` clears the end
    /// first.
    pub fn finish(&self, run_id: &str, status: RunStatus, outcome: Value) {
        self.end(run_id, (status, outcome), End::Kept);
    }

    /// [`finish`](Self::finish) a run whose events nobody may replay (not
    /// `stream_resumable`): its log goes as soon as no [`Reader`] holds the run (readers
    /// that hold it still get the outcome; later joiners read it from the database).
    pub fn finish_unreplayable(&self, run_id: &str, status: RunStatus, outcome: Value) {
        self.end(run_id, (status, outcome), End::Unreplayable);
    }

    /// [`finish`](Self::finish) a replayable run whose every event is stored in the
    /// database: its log goes as soon as no [`Reader`] holds the run, as an unreplayable
    /// run's does; later joiners and reconnects replay it from the database ([`Broker::next`]
    /// answers `None` for events no longer here). So the memory held is that of the runs
    /// in flight and of their readers, not of the runs per second times [`KEEP_AFTER_END`].
    pub fn finish_stored(&self, run_id: &str, status: RunStatus, outcome: Value) {
        self.end(run_id, (status, outcome), End::Stored);
    }

    fn end(&self, run_id: &str, outcome: (RunStatus, Value), how: End) {
        let Some(e) = self.entry(run_id) else { return };
        let goes = {
            let mut log = e.log.lock().unwrap_or_else(PoisonError::into_inner);
            log.outcome = Some(outcome);
            log.ended_at = Some(Instant::now());
            log.unreplayable = how == End::Unreplayable;
            log.stored = how == End::Stored;
            log.executing = false;
            if e.readers.load(SeqCst) == 0 {
                log.drop_events();
            }
            log.goes_at_end()
        };
        e.notify.notify_waiters();
        if goes {
            self.drop_if_expired(run_id, &e);
        }
    }

    /// The run is being executed here (again): forget its end. `replayable`: its events
    /// may be replayed later (`stream_resumable`); otherwise only those a [`Reader`] holds
    /// the run for are kept.
    pub fn reset(&self, run_id: &str, replayable: bool) {
        if let Some(e) = self.entry(run_id) {
            let mut log = e.log.lock().unwrap_or_else(PoisonError::into_inner);
            log.outcome = None;
            log.ended_at = None;
            log.unreplayable = !replayable;
            log.stored = false;
            log.executing = true;
        }
    }

    /// This process no longer executes the run (its lease went to another process): the
    /// log is forgotten here, and readers and waiters holding it are woken and told the run
    /// is unknown here ([`Broker::next`] and [`Reader::outcome`] answer `None`), so they
    /// follow it through the database as they would on another replica.
    pub fn abandon(&self, run_id: &str) {
        let removed = self.lock_runs().remove(run_id);
        if let Some(e) = removed {
            {
                let mut log = e.log.lock().unwrap_or_else(PoisonError::into_inner);
                log.executing = false;
                log.handed_off = true;
            }
            e.notify.notify_waiters();
        }
    }

    /// Whether this process executes the run or executed it to its end: its log then gets
    /// every event and the outcome. A log only opened here (a run queued here, not claimed
    /// here yet, maybe never: another replica may take it) says false.
    #[must_use]
    pub fn executes_here(&self, run_id: &str) -> bool {
        self.entry(run_id).is_some_and(|e| {
            let log = e.log.lock().unwrap_or_else(PoisonError::into_inner);
            !log.handed_off && (log.executing || log.outcome.is_some())
        })
    }

    /// Number of events so far (a cursor for "from now on").
    #[must_use]
    pub fn len(&self, run_id: &str) -> u64 {
        self.entry(run_id)
            .map_or(0, |e| e.log.lock().unwrap_or_else(PoisonError::into_inner).len())
    }

    /// Wait for events at or after `cursor`, or the end, or `timeout` (then an empty batch).
    /// `None` when the run is unknown here, was handed off ([`Broker::abandon`]), or ended
    /// with its events stored and those from `cursor` are no longer here
    /// ([`Broker::finish_stored`]): the database has them then.
    pub async fn next(&self, run_id: &str, cursor: u64, timeout: Duration) -> Option<Next> {
        let e = self.entry(run_id)?;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = e.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let log = e.log.lock().unwrap_or_else(PoisonError::into_inner);
                if log.handed_off || (log.stored && cursor < log.base) {
                    return None;
                }
                // Events before `base` were dropped: a cursor there reads what is left.
                let from = usize::try_from(cursor.saturating_sub(log.base))
                    .unwrap_or(usize::MAX)
                    .min(log.events.len());
                if from < log.events.len() {
                    return Some(Next::Events(log.events[from..].to_vec()));
                }
                if let Some((status, _)) = &log.outcome {
                    return Some(Next::End(*status));
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Some(Next::Events(Vec::new()));
            }
        }
    }

    /// The `runs/wait` body once the run has ended here (`None` when the run is unknown
    /// here or was handed off while waiting). It holds the log as a [`Broker::waiter`] does
    /// while it waits.
    pub async fn outcome(&self, run_id: &str) -> Option<Value> {
        self.waiter(run_id)?.outcome().await
    }
}

/// Holds a run's log for a reader of its events or a waiter for its outcome (see
/// [`Broker::reader`], [`Broker::waiter`]).
pub struct Reader {
    entry: Arc<Entry>,
    broker: Broker,
    run_id: String,
    /// A reader of the events (else a waiter for the outcome).
    events: bool,
}

impl Reader {
    /// The run's `runs/wait` body once it has ended; `None` when the run was handed off to
    /// another process ([`Broker::abandon`]): follow it through the database then.
    pub async fn outcome(&self) -> Option<Value> {
        let e = &self.entry;
        loop {
            let notified = e.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let log = e.log.lock().unwrap_or_else(PoisonError::into_inner);
                if log.handed_off {
                    return None;
                }
                if let Some((_, out)) = &log.outcome {
                    return Some(out.clone());
                }
            }
            notified.await;
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        let (last_reader, held) = {
            let _runs = self.broker.lock_runs();
            let count = if self.events {
                &self.entry.readers
            } else {
                &self.entry.waiters
            };
            let last = count.fetch_sub(1, SeqCst) == 1;
            (last && self.events, self.entry.held())
        };
        let goes_at_end = {
            let mut log = self.entry.log.lock().unwrap_or_else(PoisonError::into_inner);
            if last_reader {
                log.drop_events();
            }
            log.goes_at_end()
        };
        if !held && goes_at_end {
            self.broker.drop_if_expired(&self.run_id, &self.entry);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn a_handed_off_run_wakes_its_readers_and_waiters_and_is_unknown_here() {
        let b = Broker::default();
        b.open("r");
        b.reset("r", false);
        b.push("r", "values".into(), json!({"n": 1}));
        let held = b.waiter("r").unwrap();
        let (b1, b2) = (b.clone(), b.clone());
        let next = tokio::spawn(async move { b1.next("r", 1, Duration::from_secs(30)).await });
        let outcome = tokio::spawn(async move { b2.outcome("r").await });
        tokio::task::yield_now().await;
        b.abandon("r");
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
        let out = tokio::time::timeout(Duration::from_secs(5), held.outcome())
            .await
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
        b.finish("r", RunStatus::Interrupted, json!({"a": 2}));
        match b.next("r", 2, Duration::from_secs(1)).await {
            Some(Next::End(s)) => assert_eq!(s, RunStatus::Interrupted),
            other => panic!("{other:?}"),
        }
        assert_eq!(b.outcome("r").await, Some(json!({"a": 2})));
        assert!(b.next("unknown", 0, Duration::from_millis(1)).await.is_none());
    }

    /// A replayable run whose events are stored: its log goes when it ends unread, or when
    /// its last reader goes; a reader keeps every event until then, and a cursor into the
    /// events no longer here answers `None` (the database has them), never a later event.
    #[tokio::test]
    async fn stored_logs_go_once_nobody_reads_them_and_send_readers_to_the_database() {
        let b = Broker::default();
        b.open("quiet");
        b.reset("quiet", true);
        b.push("quiet", "values".into(), json!({"a": 1}));
        b.finish_stored("quiet", RunStatus::Success, json!({"a": 1}));
        assert!(!b.knows("quiet") && b.held() == 0);
        assert!(b.next("quiet", 0, Duration::from_millis(10)).await.is_none());

        b.open("read");
        b.reset("read", true);
        let reader = b.reader("read").unwrap();
        b.push("read", "values".into(), json!({"a": 1}));
        b.push("read", "values".into(), json!({"a": 2}));
        b.finish_stored("read", RunStatus::Success, json!({"a": 2}));
        // The reader replays from the start while it holds the run.
        match b.next("read", 0, Duration::from_millis(10)).await {
            Some(Next::Events(ev)) => assert_eq!(ev.iter().map(|e| e.id).collect::<Vec<_>>(), [0, 1]),
            other => panic!("{other:?}"),
        }
        // A waiter keeps the log, not the events: once the reader goes, a cursor before
        // the end is sent to the database, one at the end gets the end.
        let waiter = b.waiter("read").unwrap();
        drop(reader);
        assert!(b.knows("read"));
        assert!(b.next("read", 0, Duration::from_millis(10)).await.is_none());
        assert!(matches!(
            b.next("read", 2, Duration::from_millis(10)).await,
            Some(Next::End(_))
        ));
        drop(waiter);
        assert!(!b.knows("read") && b.held() == 0);

        // Executed again (a takeover): kept as any running log until its new end.
        b.open("again");
        b.reset("again", true);
        b.finish_stored("again", RunStatus::Success, json!({}));
        b.open("again");
        b.reset("again", true);
        b.push("again", "values".into(), json!({"a": 1}));
        assert!(matches!(
            b.next("again", 0, Duration::from_millis(10)).await,
            Some(Next::Events(ev)) if ev.len() == 1
        ));
    }

    /// An unreplayable run's log goes when it ends unread, or when its last reader goes;
    /// readers still get the outcome, and ids go on counting.
    #[tokio::test]
    async fn unreplayable_logs_go_once_nobody_reads_them() {
        let b = Broker::default();
        // Ended with nobody reading: nothing is left (the database answers joiners).
        b.open("quiet");
        b.reset("quiet", false);
        b.push("quiet", "values".into(), json!({"a": 1}));
        b.finish_unreplayable("quiet", RunStatus::Success, json!({"a": 1}));
        assert!(!b.knows("quiet"));
        assert!(b.next("quiet", 0, Duration::from_millis(10)).await.is_none());
        assert_eq!(b.outcome("quiet").await, None);

        // A reader keeps the events until it is dropped, then the log goes.
        b.open("read");
        let reader = b.reader("read").unwrap();
        b.push("read", "values".into(), json!({"a": 1}));
        b.push("read", "values".into(), json!({"a": 2}));
        b.finish_unreplayable("read", RunStatus::Success, json!({"a": 2}));
        match b.next("read", 1, Duration::from_millis(10)).await {
            Some(Next::Events(ev)) => assert_eq!((ev.len(), ev[0].id), (1, 1)),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            b.next("read", 2, Duration::from_millis(10)).await,
            Some(Next::End(_))
        ));
        assert_eq!(reader.outcome().await, Some(json!({"a": 2})));
        drop(reader);
        assert!(!b.knows("read"));

        // A replayable run keeps its events after its end, until the sweep.
        b.open("kept");
        b.push("kept", "values".into(), json!({"a": 1}));
        b.finish("kept", RunStatus::Success, json!({"a": 1}));
        assert!(matches!(
            b.next("kept", 0, Duration::from_millis(10)).await,
            Some(Next::Events(_))
        ));
        b.sweep(Instant::now() + KEEP_AFTER_END + Duration::from_secs(1));
        assert!(!b.knows("kept"));
    }

    /// A waiter for the outcome (a join) holds the log as a reader does: the run's end
    /// reaches it even though nobody else reads the run.
    #[tokio::test]
    async fn a_waiting_joiner_gets_the_outcome() {
        let b = Broker::default();
        b.open("r");
        b.reset("r", false);
        let b2 = b.clone();
        let waiter = tokio::spawn(async move { b2.outcome("r").await });
        tokio::time::timeout(Duration::from_secs(5), async {
            while !b.entry("r").unwrap().held() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap();
        b.finish_unreplayable("r", RunStatus::Success, json!({"done": true}));
        let got = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, Some(json!({"done": true})));
        assert!(!b.knows("r"), "the last waiter gone, the log went");
    }

    /// An unreplayable run keeps only the events a reader holds it for: a waiter for the
    /// outcome (`runs/wait`) keeps none, and ids count on either way.
    #[tokio::test]
    async fn unread_events_of_an_unreplayable_run_are_not_kept() {
        let b = Broker::default();
        b.open("r");
        let waiter = b.waiter("r").unwrap();
        b.reset("r", false);
        b.push("r", "values".into(), json!({"a": 1}));
        b.push("r", "values".into(), json!({"a": 2}));
        assert_eq!(b.len("r"), 2);
        assert!(b.entry("r").unwrap().log.lock().unwrap().events.is_empty());
        let reader = b.reader("r").unwrap();
        b.push("r", "values".into(), json!({"a": 3}));
        match b.next("r", 0, Duration::from_millis(10)).await {
            Some(Next::Events(ev)) => assert_eq!((ev.len(), ev[0].id), (1, 2)),
            other => panic!("{other:?}"),
        }
        b.finish_unreplayable("r", RunStatus::Success, json!({"a": 3}));
        drop(reader);
        assert!(b.knows("r"), "the waiter still holds it");
        assert_eq!(waiter.outcome().await, Some(json!({"a": 3})));
        drop(waiter);
        assert!(!b.knows("r"));

        // A replayable run keeps its events with nobody reading.
        b.open("k");
        b.reset("k", true);
        b.push("k", "values".into(), json!({"a": 1}));
        assert!(matches!(
            b.next("k", 0, Duration::from_millis(10)).await,
            Some(Next::Events(ev)) if ev.len() == 1
        ));
    }

    /// Logs of runs not executed here (another replica runs them, or their creation
    /// failed) go after a while unless read; a run executing here keeps its log however
    /// long it takes; the map holds only what is in flight.
    #[tokio::test]
    async fn logs_never_executed_here_are_swept() {
        let b = Broker::default();
        b.open("elsewhere");
        b.open("running");
        b.reset("running", false);
        b.open("read");
        let reader = b.reader("read").unwrap();
        let later = Instant::now() + KEEP_AFTER_END + Duration::from_secs(1);
        b.sweep(later);
        assert!(!b.knows("elsewhere"));
        assert!(b.knows("running") && b.knows("read"));
        drop(reader);
        b.sweep(later);
        assert!(!b.knows("read"));
        assert_eq!(b.held(), 1);
        // Many runs, each ended unread: nothing accumulates.
        for i in 0..1_000 {
            let id = format!("run-{i}");
            b.open(&id);
            b.reset(&id, false);
            b.push(&id, "values".into(), json!({"i": i}));
            b.finish_unreplayable(&id, RunStatus::Success, json!({"i": i}));
        }
        assert_eq!(b.held(), 1);
    }

    /// Only a log executed here (or ended here) says the run executes here: one merely
    /// opened when the run was queued here does not, nor one handed off.
    #[tokio::test]
    async fn a_log_only_opened_here_is_not_executed_here() {
        let b = Broker::default();
        b.open("r");
        assert!(b.knows("r") && !b.executes_here("r"));
        b.reset("r", true);
        assert!(b.executes_here("r"));
        b.finish("r", RunStatus::Success, json!({}));
        assert!(b.executes_here("r"));
        b.open("h");
        b.reset("h", true);
        b.abandon("h");
        assert!(!b.executes_here("h") && !b.executes_here("unknown"));
    }
}
