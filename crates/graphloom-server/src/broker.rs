//! Run event logs in memory: what a run has emitted so far, so that a client can subscribe
//! before the run starts, join it later, or reconnect with `Last-Event-ID`.

use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// One SSE event of a run: `id` counts from 0 within the run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunEventRecord {
    /// Position in the run's log.
    pub id: u64,
    /// Event name (`values`, `updates|ns`, `messages`, ...).
    pub event: String,
    /// Payload.
    pub data: Value,
}

#[derive(Default)]
struct Log {
    events: Vec<RunEventRecord>,
    /// The body of `runs/wait`, set when the run ends.
    outcome: Option<Value>,
    ended_at: Option<Instant>,
}

#[derive(Default)]
struct Entry {
    log: Mutex<Log>,
    notify: Notify,
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
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        if sweep {
            runs.retain(|_, e| {
                e.log
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .ended_at
                    .is_none_or(|t| now.duration_since(t) < KEEP_AFTER_END)
            });
        }
        runs.entry(run_id.to_owned()).or_default();
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
            let id = log.events.len() as u64;
            log.events.push(RunEventRecord { id, event, data });
        }
        e.notify.notify_waiters();
    }

    /// Mark the run ended with its `runs/wait` body. A new attempt of the same run (after a
    /// takeover) may `open` and push again: `reset` clears the end first.
    pub fn finish(&self, run_id: &str, outcome: Value) {
        let Some(e) = self.entry(run_id) else { return };
        {
            let mut log = e.log.lock().unwrap_or_else(PoisonError::into_inner);
            log.outcome = Some(outcome);
            log.ended_at = Some(Instant::now());
        }
        e.notify.notify_waiters();
    }

    /// Forget a run's end (it is being executed again).
    pub fn reset(&self, run_id: &str) {
        if let Some(e) = self.entry(run_id) {
            let mut log = e.log.lock().unwrap_or_else(PoisonError::into_inner);
            log.outcome = None;
            log.ended_at = None;
        }
    }

    /// Number of events so far (a cursor for "from now on").
    #[must_use]
    pub fn len(&self, run_id: &str) -> u64 {
        self.entry(run_id).map_or(0, |e| {
            e.log.lock().unwrap_or_else(PoisonError::into_inner).events.len() as u64
        })
    }

    /// Wait for events at or after `cursor`, or the end, or `timeout` (then an empty batch).
    /// `None` when the run is unknown here.
    pub async fn next(&self, run_id: &str, cursor: u64, timeout: Duration) -> Option<Next> {
        let e = self.entry(run_id)?;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = e.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let log = e.log.lock().unwrap_or_else(PoisonError::into_inner);
                let from = usize::try_from(cursor)
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

    /// The `runs/wait` body once the run has ended here.
    pub async fn outcome(&self, run_id: &str) -> Option<Value> {
        let e = self.entry(run_id)?;
        loop {
            let notified = e.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(out) = &e.log.lock().unwrap_or_else(PoisonError::into_inner).outcome {
                return Some(out.clone());
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
