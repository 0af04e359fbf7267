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
    /// Let webhooks reach loopback addresses (127.0.0.0/8, ::1) and `localhost` names
    /// (default: refused unless named by `--webhook-allow-host`).
    #[arg(long)]
    webhook_allow_loopback: bool,
    /// When given (repeatable), the only hosts webhook URLs may name: an exact host
    /// (`hooks.example.com`, `127.0.0.1`) or `*.example.com` for its subdomains (not
    /// `example.com` itself). The address guard still applies to them.
    #[arg(long = "webhook-allow-domain", value_name = "DOMAIN")]
    webhook_allow_domains: Vec<String>,
    /// When given (repeatable), the only ports webhook URLs may use (443 for an https URL
    /// without one, 80 for http).
    #[arg(long = "webhook-allow-port", value_name = "PORT")]
    webhook_allow_ports: Vec<u16>,
    /// Longest webhook URL accepted, in characters (default: no limit).
    #[arg(long, value_name = "CHARS")]
    webhook_max_url_length: Option<usize>,
    /// A header sent with every webhook delivery, `NAME: VALUE` (repeatable). The value may
    /// hold `${{ env.VAR }}`, replaced at start by the variable VAR, which must be set and
    /// start with `--webhook-env-prefix` (this keeps secrets out of the process list).
    #[arg(long = "webhook-header", value_name = "NAME: VALUE")]
    webhook_headers: Vec<String>,
    /// The prefix of the variables `--webhook-header` values may name.
    #[arg(long, value_name = "PREFIX", default_value = "LG_WEBHOOK_")]
    webhook_env_prefix: String,
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

/// A `--webhook-header NAME: VALUE` as `(name, value)`, its `${{ env.VAR }}` templates
/// replaced by `env(VAR)`; VAR must start with `prefix` and be set.
fn webhook_header(
    arg: &str,
    prefix: &str,
    env: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<(String, String)> {
    let Some((name, template)) = arg.split_once(':') else {
        bail!("--webhook-header {arg:?}: expected NAME: VALUE");
    };
    let name = name.trim();
    let mut value = String::new();
    let mut rest = template.trim();
    while let Some(start) = rest.find("${{") {
        value.push_str(&rest[..start]);
        let after = &rest[start + 3..];
        let Some(end) = after.find("}}") else {
            bail!("--webhook-header {name}: unclosed `${{{{` in its value");
        };
        let inner = after[..end].trim();
        let Some(var) = inner.strip_prefix("env.").map(str::trim) else {
            bail!("--webhook-header {name}: `${{{{ {inner} }}}}` is not `${{{{ env.VAR }}}}`");
        };
        if !var.starts_with(prefix) {
            bail!(
                "--webhook-header {name}: variable {var} does not start with {prefix} \
                 (only variables with --webhook-env-prefix may be sent)"
            );
        }
        match env(var) {
            Some(v) => value.push_str(&v),
            None => bail!("--webhook-header {name}: variable {var} is not set"),
        }
        rest = &after[end + 2..];
    }
    value.push_str(rest);
    Ok((name.to_owned(), value))
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
        cfg.webhooks.allow_loopback = self.webhook_allow_loopback;
        cfg.webhooks.allowed_domains = self.webhook_allow_domains;
        cfg.webhooks.allowed_ports = self.webhook_allow_ports;
        cfg.webhooks.max_url_length = self.webhook_max_url_length;
        cfg.webhooks.headers = self
            .webhook_headers
            .iter()
            .map(|h| webhook_header(h, &self.webhook_env_prefix, |v| std::env::var(v).ok()))
            .collect::<anyhow::Result<_>>()?;
        graphloom_server::webhook::header_map(&cfg.webhooks)
            .map_err(|e| anyhow::anyhow!("--webhook-header: {e}"))?;
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

    #[test]
    fn webhook_policy_flags_become_settings() {
        let cli = Cli::try_parse_from([
            "x",
            "--webhook-allow-domain",
            "*.example.com",
            "--webhook-allow-domain=hooks.internal",
            "--webhook-allow-port",
            "8443",
            "--webhook-max-url-length",
            "512",
            "--webhook-header",
            "x-team: agents",
            "--webhook-allow-loopback",
        ])
        .unwrap();
        let mut cfg = ServerConfig::sqlite("x.db");
        cli.ops.apply(&mut cfg).unwrap();
        let w = &cfg.webhooks;
        assert_eq!(w.allowed_domains, ["*.example.com", "hooks.internal"]);
        assert_eq!(w.allowed_ports, [8443]);
        assert_eq!(w.max_url_length, Some(512));
        assert_eq!(w.headers, [("x-team".to_owned(), "agents".to_owned())]);
        assert!(w.allow_loopback);
        assert!(!w.allow_http, "https only stays the default");
        let bad = Cli::try_parse_from(["x", "--webhook-header", "bad name: v"]).unwrap();
        assert!(bad.ops.apply(&mut cfg).is_err());
    }

    #[test]
    fn header_templates_read_prefixed_variables_only() {
        let env = |v: &str| (v == "LG_WEBHOOK_TOKEN").then(|| "t0k".to_owned());
        let h = |arg: &str| webhook_header(arg, "LG_WEBHOOK_", env);
        assert_eq!(
            h("Authorization: Bearer ${{ env.LG_WEBHOOK_TOKEN }}").unwrap(),
            ("Authorization".to_owned(), "Bearer t0k".to_owned())
        );
        assert_eq!(h("a: ${{env.LG_WEBHOOK_TOKEN}}!").unwrap().1, "t0k!");
        assert_eq!(h("a: plain").unwrap().1, "plain");
        let err = |arg: &str| h(arg).unwrap_err().to_string();
        assert!(err("a: ${{ env.HOME }}").contains("does not start with LG_WEBHOOK_"));
        assert!(err("a: ${{ env.LG_WEBHOOK_MISSING }}").contains("LG_WEBHOOK_MISSING is not set"));
        assert!(err("a: ${{ env.LG_WEBHOOK_TOKEN").contains("unclosed"));
        assert!(err("no colon").contains("NAME: VALUE"));
    }
}
