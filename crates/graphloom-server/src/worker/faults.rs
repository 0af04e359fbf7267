//! Runs that meet a transient database fault (a restarted server, a killed session, a
//! connection a proxy reset, a pool that timed out) are taken up again from their last
//! checkpoint after a pause, instead of ending `error`: what they checkpointed is kept,
//! their pending writes are applied, and only the step that was under way runs again, as
//! when a killed server's run is taken over. A fault that outlasts the retries, or any other
//! error, ends the run as before, with its message.

use graphloom_core::{BackendError, BackendErrorKind};
use std::time::Duration;

/// How many times in a row a run is taken up again after transient faults: with the
/// pauses below, about a minute and a half of a database that stays away.
const TRIES: u32 = 20;

/// Whether `e` is a fault of the database's connection that a later try may not meet: a
/// checkpointer's or store's `Connection` error, as the run's error or as the cause of a
/// node's failure (a node whose store write failed).
pub(super) fn transient(e: &graphloom_core::Error) -> bool {
    let connection = |b: &BackendError| b.kind() == BackendErrorKind::Connection;
    match e {
        graphloom_core::Error::Backend(b) => connection(b),
        graphloom_core::Error::Node { .. } => e.find_source::<BackendError>().is_some_and(connection),
        _ => false,
    }
}

/// The pauses between tries of one run.
#[derive(Debug, Default)]
pub(super) struct Backoff {
    faults: u32,
}

impl Backoff {
    /// The pause before the next try after one more fault; `None` when the tries are spent.
    pub(super) fn next_pause(&mut self) -> Option<Duration> {
        self.faults += 1;
        if self.faults > TRIES {
            return None;
        }
        // 0.25 s, 0.5 s, 1 s, 2 s, then 5 s.
        let ms = 250u64.saturating_mul(1 << (self.faults - 1).min(5));
        Some(Duration::from_millis(ms.min(5_000)))
    }

    /// Whether the run met a fault before (it is being taken up again).
    pub(super) fn retrying(&self) -> bool {
        self.faults > 0
    }

    /// Faults met so far.
    pub(super) fn faults(&self) -> u32 {
        self.faults
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphloom_core::{Error, ErrorSource};

    #[test]
    fn connection_faults_are_transient_and_others_are_not() {
        let lost = BackendError::new(BackendErrorKind::Connection, "connection reset by peer");
        assert!(transient(&Error::Backend(lost)));
        let bad = BackendError::new(BackendErrorKind::InvalidInput, "nul byte");
        assert!(!transient(&Error::Backend(bad)));
        assert!(!transient(&Error::Cancelled));
        assert!(!transient(&Error::RunTimeout { after_ms: 5 }));
        // A node whose store write lost its connection.
        let cause = Error::Backend(BackendError::new(BackendErrorKind::Connection, "pool timed out"));
        let node = Error::Node {
            node: "charge".into(),
            message: cause.to_string(),
            kind: graphloom_core::NodeErrorKind::Terminal,
            source: Some(ErrorSource::from(cause)),
        };
        assert!(transient(&node));
        let node = Error::Node {
            node: "charge".into(),
            message: "card declined".into(),
            kind: graphloom_core::NodeErrorKind::Terminal,
            source: None,
        };
        assert!(!transient(&node));
    }

    #[test]
    fn the_pauses_grow_to_five_seconds_and_end() {
        let mut b = Backoff::default();
        assert!(!b.retrying());
        let pauses: Vec<u64> = std::iter::from_fn(|| b.next_pause())
            .map(|d| d.as_millis() as u64)
            .collect();
        assert_eq!(pauses[..6], [250, 500, 1_000, 2_000, 4_000, 5_000]);
        assert_eq!(pauses.len(), TRIES as usize);
        assert!(pauses[6..].iter().all(|&p| p == 5_000));
        assert!(b.retrying());
    }
}
