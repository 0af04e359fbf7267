//! The options of `graphloom serve` for operations beside runs: crons, webhooks and
//! retention (see `graphloom_server::{CronConfig, WebhookConfig, RetentionConfig}`).

use anyhow::bail;
use clap::{Args, ValueEnum};
use graphloom_server::db::{DefaultTtl, TtlStrategy};
use graphloom_server::ServerConfig;
use std::time::Duration;

/// What happens to a thread whose `--thread-ttl-minutes` passed.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub(crate) enum TtlStrategyArg {
    /// Delete the thread, its runs and its checkpoints.
    Delete,
    /// Keep the thread and its state, drop its older checkpoints.
    KeepLatest,
}

/// Crons, webhooks, retention.
#[derive(Args, Debug, Clone)]
pub(crate) struct OpsArgs {
    /// Do not fire crons in this process (the cron routes are served either way).
    #[arg(long)]
    no_crons: bool,
    /// Secret of the `x-graphloom-signature` header of webhook deliveries (HMAC-SHA256 of
    /// the body). Default: the GRAPHLOOM_WEBHOOK_SECRET variable (which keeps it out of the
    /// process list); none: deliveries are not signed.
    #[arg(long, value_name = "SECRET")]
    webhook_secret: Option<String>,
    /// Allow `http://` webhook URLs (default: https only).
    #[arg(long)]
    webhook_allow_http: bool,
    /// A webhook host exempt from the guard against loopback, private and link-local
    /// addresses (repeatable), e.g. `127.0.0.1` or `hooks.internal`.
    #[arg(long = "webhook-allow-host", value_name = "HOST")]
    webhook_allow_hosts: Vec<String>,
    /// Time limit of one webhook attempt, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    webhook_timeout_secs: f64,
    /// Time to live of threads created without one, in minutes (default: none).
    #[arg(long, value_name = "MINUTES")]
    thread_ttl_minutes: Option<f64>,
    /// What `--thread-ttl-minutes` does when it passes.
    #[arg(long, value_enum, default_value_t = TtlStrategyArg::Delete)]
    thread_ttl_strategy: TtlStrategyArg,
    /// Time to live of store items put without one, in minutes (default: none).
    #[arg(long, value_name = "MINUTES")]
    store_ttl_minutes: Option<f64>,
    /// How often expired threads and store items are swept, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    sweep_interval_secs: f64,
    /// At SIGTERM or Ctrl-C the server drains: it claims no new run, and each running run
    /// stops at its next step boundary with its checkpoint saved and goes back to the
    /// queue, where another replica (or this server, restarted) continues it. A run whose
    /// step is still running after this many seconds is stopped then, keeping the writes
    /// of its finished nodes.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    shutdown_grace_secs: f64,
}

/// A positive duration from a number of `unit`s, or an error naming the flag.
fn positive(flag: &str, value: f64, unit: f64) -> anyhow::Result<Duration> {
    match Duration::try_from_secs_f64(value * unit) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => bail!("--{flag} must be a number above zero, not {value}"),
    }
}

impl OpsArgs {
    /// Put these options into `cfg`.
    pub(crate) fn apply(self, cfg: &mut ServerConfig) -> anyhow::Result<()> {
        cfg.crons.enabled = !self.no_crons;
        cfg.webhooks.secret = self
            .webhook_secret
            .or_else(|| std::env::var("GRAPHLOOM_WEBHOOK_SECRET").ok())
            .filter(|s| !s.is_empty());
        cfg.webhooks.allow_http = self.webhook_allow_http;
        cfg.webhooks.allowed_hosts = self.webhook_allow_hosts;
        cfg.webhooks.timeout = positive("webhook-timeout-secs", self.webhook_timeout_secs, 1.0)?;
        cfg.retention.sweep_interval = positive("sweep-interval-secs", self.sweep_interval_secs, 1.0)?;
        cfg.shutdown_grace = positive("shutdown-grace-secs", self.shutdown_grace_secs, 1.0)?;
        if let Some(m) = self.thread_ttl_minutes {
            cfg.retention.thread_ttl = Some(DefaultTtl {
                strategy: match self.thread_ttl_strategy {
                    TtlStrategyArg::Delete => TtlStrategy::Delete,
                    TtlStrategyArg::KeepLatest => TtlStrategy::KeepLatest,
                },
                ttl: positive("thread-ttl-minutes", m, 60.0)?,
            });
        }
        if let Some(m) = self.store_ttl_minutes {
            cfg.retention.store_ttl.default_ttl = Some(positive("store-ttl-minutes", m, 60.0)?);
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        ops: OpsArgs,
    }

    #[test]
    fn flags_become_settings() {
        let cli = Cli::try_parse_from([
            "x",
            "--webhook-secret",
            "k",
            "--webhook-allow-http",
            "--webhook-allow-host",
            "127.0.0.1",
            "--thread-ttl-minutes",
            "2",
            "--thread-ttl-strategy",
            "keep-latest",
            "--store-ttl-minutes",
            "0.5",
            "--no-crons",
        ])
        .unwrap();
        let mut cfg = ServerConfig::sqlite("x.db");
        cli.ops.apply(&mut cfg).unwrap();
        assert!(!cfg.crons.enabled);
        assert_eq!(cfg.webhooks.secret.as_deref(), Some("k"));
        assert!(cfg.webhooks.allow_http);
        assert_eq!(cfg.webhooks.allowed_hosts, vec!["127.0.0.1".to_owned()]);
        assert_eq!(
            cfg.retention.thread_ttl,
            Some(DefaultTtl {
                strategy: TtlStrategy::KeepLatest,
                ttl: Duration::from_secs(120)
            })
        );
        assert_eq!(cfg.retention.store_ttl.default_ttl, Some(Duration::from_secs(30)));
        let bad = Cli::try_parse_from(["x", "--thread-ttl-minutes=-1"]).unwrap();
        assert!(bad.ops.apply(&mut cfg).is_err());
    }
}
