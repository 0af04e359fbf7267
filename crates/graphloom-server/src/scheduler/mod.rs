//! The cron scheduler: each replica looks for due crons every
//! [`CronConfig::poll`] and fires their ticks through the runs service. A tick is fired
//! by exactly one replica (see [`crate::db::Db`]'s `fire_cron`: the run and the cron's
//! next date commit together, only if the date is still the tick). A cron whose ticks
//! were missed while no server ran fires once, then moves to its next time after now.

pub mod schedule;

use crate::service::crons;
use crate::state::AppState;
use std::sync::Arc;
use std::time::Duration;

/// Settings of the cron scheduler.
#[derive(Clone, Debug)]
pub struct CronConfig {
    /// Whether this process fires crons (default `true`; the API serves them either way).
    pub enabled: bool,
    /// How often the scheduler looks for due crons (default 1 s).
    pub poll: Duration,
    /// At most this many crons fired per look (default 100).
    pub batch: usize,
}

impl Default for CronConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            poll: Duration::from_secs(1),
            batch: 100,
        }
    }
}

/// Cron ticks: one log line when firing them starts failing, one when it works again.
static TICKS: crate::outage::Outage = crate::outage::Outage::new("firing due crons");

/// The scheduler's loop: fire what is due, wait, until shutdown.
pub(crate) async fn run(state: Arc<AppState>) {
    let mut shutdown = state.shutdown.subscribe();
    if !state.config.crons.enabled {
        return;
    }
    loop {
        if *shutdown.borrow() {
            return;
        }
        match crons::fire_due(&state).await {
            Ok(n) => {
                TICKS.worked();
                if n >= state.config.crons.batch {
                    continue;
                }
            }
            Err(e) => {
                TICKS.failed(&e.detail);
            }
        }
        tokio::select! {
            () = tokio::time::sleep(state.config.crons.poll) => {}
            _ = shutdown.changed() => return,
        }
    }
}
