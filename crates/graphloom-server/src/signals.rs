//! [`ThreadSignals`]: the threads followed by thread-protocol streams in this process.
//! A run queued on such a thread wakes its followers at once (runs queued elsewhere are
//! found by their next poll of the database), and this process's log of the run is held
//! from its creation on, so a follower that gets to it after it ended (a quick run that
//! keeps no events for replay) still reads it from its start.

use crate::broker::Reader;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use tokio::sync::Notify;

/// Runs of one thread whose logs are held for its followers (the latest ones).
const HELD_RUNS: usize = 16;

/// What the followers of one thread share.
#[derive(Default)]
pub struct Followed {
    notify: Notify,
    /// How many times a run was queued on the thread here (or its followers were woken).
    queued: AtomicU64,
    held: Mutex<VecDeque<(String, Reader)>>,
}

impl std::fmt::Debug for Followed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Followed").finish_non_exhaustive()
    }
}

impl Followed {
    /// A count that moves whenever a run is queued on the thread here: a follower that saw
    /// it unchanged since it listed the thread's runs knows of every run queued here.
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.queued.load(Ordering::Acquire)
    }

    /// Wait until a run is queued on the thread (or `timeout`); true when woken, at once
    /// when one was queued after [`generation`](Self::generation) was `seen`.
    pub async fn wait(&self, seen: u64, timeout: std::time::Duration) -> bool {
        let notified = self.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.generation() != seen {
            return true;
        }
        tokio::time::timeout(timeout, notified).await.is_ok()
    }

    fn wake(&self) {
        self.queued.fetch_add(1, Ordering::AcqRel);
        self.notify.notify_waiters();
    }

    /// Whether this process's log of run `run_id` is held from its start.
    #[must_use]
    pub fn holds(&self, run_id: &str) -> bool {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|(id, _)| id == run_id)
    }
}

/// The threads followed in this process.
#[derive(Default, Debug)]
pub struct ThreadSignals {
    threads: Mutex<HashMap<String, Weak<Followed>>>,
}

impl ThreadSignals {
    fn get(&self, thread_id: &str) -> Option<Arc<Followed>> {
        self.threads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(thread_id)
            .and_then(Weak::upgrade)
    }

    /// Follow `thread_id` for as long as the handle is kept.
    pub fn watch(&self, thread_id: &str) -> Arc<Followed> {
        let mut map = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
        // Forget the threads nobody follows any more (the map holds only followed ones).
        if map.len() > 64 {
            map.retain(|_, w| w.strong_count() > 0);
        }
        if let Some(n) = map.get(thread_id).and_then(Weak::upgrade) {
            return n;
        }
        let n = Arc::new(Followed::default());
        map.insert(thread_id.to_owned(), Arc::downgrade(&n));
        n
    }

    /// Whether a stream of this process follows `thread_id`.
    #[must_use]
    pub fn is_followed(&self, thread_id: &str) -> bool {
        self.get(thread_id).is_some()
    }

    /// Hold run `run_id`'s log (`reader`, taken before the run can start) for the
    /// followers of `thread_id`, and wake them.
    pub fn run_queued(&self, thread_id: &str, run_id: &str, reader: Option<Reader>) {
        let Some(f) = self.get(thread_id) else {
            return;
        };
        if let Some(r) = reader {
            let mut held = f.held.lock().unwrap_or_else(PoisonError::into_inner);
            held.push_back((run_id.to_owned(), r));
            while held.len() > HELD_RUNS {
                held.pop_front();
            }
        }
        f.wake();
    }

    /// Wake the followers of `thread_id`.
    pub fn notify(&self, thread_id: &str) {
        if let Some(f) = self.get(thread_id) {
            f.wake();
        }
    }

    /// Threads followed now.
    #[must_use]
    pub fn followed(&self) -> usize {
        self.threads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|w| w.strong_count() > 0)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_follower_is_woken_holds_runs_and_is_forgotten_when_it_goes() {
        let s = ThreadSignals::default();
        let broker = crate::broker::Broker::default();
        let f = s.watch("t");
        let waiting = {
            let f = Arc::clone(&f);
            tokio::spawn(async move { f.wait(0, Duration::from_secs(5)).await })
        };
        tokio::task::yield_now().await;
        broker.open("r");
        s.run_queued("t", "r", broker.reader("r"));
        assert!(waiting.await.unwrap());
        assert!(f.holds("r") && s.is_followed("t") && s.followed() == 1);
        drop(f);
        assert_eq!(s.followed(), 0);
        // Nobody follows: nothing is held.
        s.run_queued("t", "r2", broker.reader("r"));
        assert!(!s.is_followed("t"));
    }

    #[tokio::test]
    async fn a_run_queued_after_a_listing_is_not_missed_by_a_later_wait() {
        let s = ThreadSignals::default();
        let f = s.watch("t");
        let seen = f.generation();
        // Queued while nobody waited (the follower was listing or reading a run).
        s.run_queued("t", "r", None);
        assert_ne!(f.generation(), seen);
        // A wait from the listing's generation returns at once; from the new one it
        // times out (nothing queued since).
        let now = tokio::time::Instant::now();
        assert!(f.wait(seen, Duration::from_secs(60)).await);
        assert!(now.elapsed() < Duration::from_secs(30));
        assert!(!f.wait(f.generation(), Duration::from_millis(10)).await);
        s.notify("t");
        assert_eq!(f.generation(), seen + 2);
    }
}
