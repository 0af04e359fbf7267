//! The cron scheduler: each replica looks for due crons every
//! [`CronConfig::poll`] and fires their ticks through the runs service. A tick is fired
//! by exactly one replica (see [`crate::db::Db`]'s `fire_cron`: the run and the cron's
//! next date commit together, only if the date is still the tick). A cron whose ticks
//! were missed while no server ran fires once, then moves to its next time after now.

/// Cron expressions and their time zones (kept with the crons service, which parses them).
pub use crate::service::schedule;

pub use crate::config::CronConfig;
use crate::service::crons;
use crate::state::AppState;
use std::sync::Arc;

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
