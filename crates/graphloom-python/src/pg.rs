//! The PostgreSQL pool of a Python saver or store: opened with an `application_name` of
//! its own, so closing it can make sure that none of its sessions outlives it.
//!
//! sqlx 0.8's `Pool::close` can leave a session open (a connection on its way back to the
//! pool while the pool closes), and a database with a session left cannot be dropped
//! without `WITH (FORCE)`. So `close` closes the pool, then ends whatever session of this
//! pool the server still has (`pg_terminate_backend`, allowed on one's own sessions) and
//! waits, up to a bound, until the server reports none.

use graphloom_core::{BackendError, BackendErrorKind, Error, Result};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, Connection};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long `close` waits for the server to end a pool's sessions.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

fn connection_error(during: &str, e: &sqlx::Error) -> Error {
    Error::Backend(BackendError::new(
        BackendErrorKind::Connection,
        format!("{during}: {e}"),
    ))
}

/// A pool on `url` whose sessions carry an `application_name` no other pool has
/// (`graphloom-python-<pid>-<n>`, after the URL's own name if it sets one).
pub(crate) async fn connect(url: &str) -> Result<PgPool> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let opts = PgConnectOptions::from_str(url).map_err(|e| {
        Error::Backend(BackendError::new(
            BackendErrorKind::InvalidInput,
            format!("bad PostgreSQL URL: {e}"),
        ))
    })?;
    let tag = format!(
        "graphloom-python-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let name = match opts.get_application_name() {
        Some(own) => format!("{own} ({tag})"),
        None => tag,
    };
    PgPoolOptions::new()
        .connect_with(opts.application_name(&name))
        .await
        .map_err(|e| connection_error("connect", &e))
}

/// Close `pool` and wait until the server has no session of it left.
pub(crate) async fn close(pool: &PgPool) {
    pool.close().await;
    let opts = (*pool.connect_options()).clone();
    let Some(name) = opts.get_application_name().map(str::to_owned) else {
        return;
    };
    // Best effort: a server that cannot be reached has no session of ours to end either.
    let Ok(mut conn) = opts.application_name("graphloom-python-close").connect().await else {
        return;
    };
    let deadline = Instant::now() + CLOSE_WAIT;
    loop {
        let left: std::result::Result<i64, sqlx::Error> = sqlx::query_scalar(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE application_name = $1 AND pid <> pg_backend_pid()",
        )
        .bind(&name)
        .fetch_one(&mut conn)
        .await;
        if !matches!(left, Ok(n) if n > 0) || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = conn.close().await;
}
