//! [`ThreadSignals`]: wakes the followers of a thread in this process when a command
//! queues a run on it, so a stream that waits for the thread's next run does not wait
//! for its next poll of the database (runs queued elsewhere are found by that poll).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use tokio::sync::Notify;

/// The wake-ups of the threads followed in this process.
#[derive(Default, Debug)]
pub struct ThreadSignals {
    threads: Mutex<HashMap<String, Weak<Notify>>>,
}

impl ThreadSignals {
    /// The wake-up of `thread_id`, held by a follower for as long as it follows it.
    pub fn watch(&self, thread_id: &str) -> Arc<Notify> {
        let mut map = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
        // Forget the threads nobody follows any more (the map holds only followed ones).
        if map.len() > 64 {
            map.retain(|_, w| w.strong_count() > 0);
        }
        if let Some(n) = map.get(thread_id).and_then(Weak::upgrade) {
            return n;
        }
        let n = Arc::new(Notify::new());
        map.insert(thread_id.to_owned(), Arc::downgrade(&n));
        n
    }

    /// Wake the followers of `thread_id`.
    pub fn notify(&self, thread_id: &str) {
        let n = self
            .threads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(thread_id)
            .and_then(Weak::upgrade);
        if let Some(n) = n {
            n.notify_waiters();
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
    async fn a_follower_is_woken_and_forgotten_when_it_goes() {
        let s = ThreadSignals::default();
        let n = s.watch("t");
        let wait = n.notified();
        tokio::pin!(wait);
        wait.as_mut().enable();
        s.notify("t");
        tokio::time::timeout(Duration::from_secs(5), wait).await.unwrap();
        assert_eq!(s.followed(), 1);
        drop(n);
        assert_eq!(s.followed(), 0);
        s.notify("t");
    }
}
