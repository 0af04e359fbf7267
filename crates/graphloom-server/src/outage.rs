//! One log line when a background loop's calls start failing and one when they work again,
//! instead of a line per try: a database away for a minute made every worker log each
//! second that claiming failed, and every running run each heartbeat that it failed.

use std::fmt::Display;
use std::sync::atomic::{AtomicBool, Ordering};

/// The state of one kind of background call (claiming runs, heartbeats, ...), shared by
/// every loop making it.
pub(crate) struct Outage {
    /// What the calls do, for the log lines ("claiming runs").
    what: &'static str,
    down: AtomicBool,
}

impl Outage {
    pub(crate) const fn new(what: &'static str) -> Self {
        Self {
            what,
            down: AtomicBool::new(false),
        }
    }

    /// A call failed: logged if the calls were working until now; whether it was.
    pub(crate) fn failed(&self, error: &dyn Display) -> bool {
        let first = !self.down.swap(true, Ordering::SeqCst);
        if first {
            tracing::warn!(what = self.what, error = %error, "{} failed; said again when it works", self.what);
        }
        first
    }

    /// A call worked: logged if the calls were failing until now; whether they were.
    pub(crate) fn worked(&self) -> bool {
        let back = self.down.swap(false, Ordering::SeqCst);
        if back {
            tracing::info!(what = self.what, "{} works again", self.what);
        }
        back
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_said_once_when_it_starts_and_once_when_it_ends() {
        let o = Outage::new("claiming runs");
        assert!(!o.worked());
        assert!(o.failed(&"connection reset"));
        assert!(!o.failed(&"connection reset"));
        assert!(!o.failed(&"pool timed out"));
        assert!(o.worked());
        assert!(!o.worked());
        assert!(o.failed(&"again"));
    }
}
