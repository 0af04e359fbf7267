//! Logs and traces: structured log lines on standard error, and OpenTelemetry traces sent
//! over OTLP/HTTP (protobuf) when an endpoint is configured.
//!
//! The spans come from `tracing` where the work happens: `run` (the server's worker: run,
//! thread, assistant and graph ids, attempt), `node` (graphloom-core's executor: node name,
//! task id, step, attempt), `chat <model>` (graphloom-llm's providers, with the GenAI
//! attributes: provider, model, token usage, finish reason) and `execute_tool <name>`
//! (graphloom-prebuilt's tool node: tool name, call id, error status). They nest in that
//! order in one trace per run.
//!
//! Configuration is the standard one:
//!
//! | variable | meaning |
//! |---|---|
//! | `OTEL_EXPORTER_OTLP_ENDPOINT` | base URL of a collector (`http://127.0.0.1:4318`); traces go to `<base>/v1/traces` |
//! | `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` | full URL for traces, used as is; wins over the base URL |
//! | `OTEL_SERVICE_NAME` | the `service.name` resource attribute, default `graphloom` |
//! | `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT`, `OTEL_BSP_*`, `OTEL_TRACES_SAMPLER`, `OTEL_RESOURCE_ATTRIBUTES` | read by the OpenTelemetry SDK and exporter themselves |
//! | `RUST_LOG` | filter of the log lines (default `info`) |
//! | `GRAPHLOOM_LOG_FORMAT=json` | log lines as JSON |
//!
//! `graphloom serve --otlp-endpoint URL` sets the base URL and wins over both variables.
//! Without an endpoint nothing is exported: no exporter, no background thread. Exporting
//! needs the `otel` feature of this crate (on in the `graphloom` command); configuring an
//! endpoint in a build without it is an error, not a silent no-op.
//!
//! Spans are batched and sent from the SDK's own thread, so a slow or unreachable collector
//! never slows or fails a run: the batch queue drops what does not fit and the exporter
//! logs its failures.

use std::fmt;

/// The `service.name` when `OTEL_SERVICE_NAME` is not set.
pub const DEFAULT_SERVICE_NAME: &str = "graphloom";

/// How log lines look.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// One compact human-readable line per event.
    #[default]
    Compact,
    /// One JSON object per event.
    Json,
}

/// What [`init_tracing`] sets up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetryConfig {
    /// Base OTLP/HTTP URL: traces go to `<base>/v1/traces`.
    pub otlp_endpoint: Option<String>,
    /// Full URL for traces, used as is; wins over [`Self::otlp_endpoint`].
    pub otlp_traces_endpoint: Option<String>,
    /// The `service.name` resource attribute.
    pub service_name: String,
    /// Log line format.
    pub log_format: LogFormat,
    /// Filter of the log lines, in `RUST_LOG` syntax.
    pub log_filter: String,
    /// Write log lines to standard error at all.
    pub logs: bool,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            otlp_endpoint: None,
            otlp_traces_endpoint: None,
            service_name: DEFAULT_SERVICE_NAME.to_owned(),
            log_format: LogFormat::Compact,
            log_filter: "info".to_owned(),
            logs: true,
        }
    }
}

impl TelemetryConfig {
    /// From the process environment (see the [module docs](self)).
    #[must_use]
    pub fn from_env() -> Self {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// From `get`, which answers like `std::env::var(..).ok()`; empty values count as unset.
    #[must_use]
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Self {
        let get = |key: &str| get(key).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let defaults = Self::default();
        Self {
            otlp_endpoint: get("OTEL_EXPORTER_OTLP_ENDPOINT"),
            otlp_traces_endpoint: get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            service_name: get("OTEL_SERVICE_NAME").unwrap_or(defaults.service_name),
            log_format: match get("GRAPHLOOM_LOG_FORMAT").as_deref() {
                Some("json") => LogFormat::Json,
                _ => LogFormat::Compact,
            },
            log_filter: get("RUST_LOG").unwrap_or(defaults.log_filter),
            logs: true,
        }
    }

    /// Export to this base URL, whatever the environment says (`--otlp-endpoint`).
    #[must_use]
    pub fn with_otlp_endpoint(mut self, base: impl Into<String>) -> Self {
        self.otlp_endpoint = Some(base.into());
        self.otlp_traces_endpoint = None;
        self
    }

    /// Where traces are sent, or `None` when exporting is off.
    #[must_use]
    pub fn traces_url(&self) -> Option<String> {
        match (&self.otlp_traces_endpoint, &self.otlp_endpoint) {
            (Some(full), _) => Some(full.clone()),
            (None, Some(base)) => Some(format!("{}/v1/traces", base.trim_end_matches('/'))),
            (None, None) => None,
        }
    }
}

/// Why telemetry could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// An endpoint is configured but this build cannot export.
    #[error(
        "OTLP export to {0} is configured, but this build of graphloom-server has no `otel` \
         feature; rebuild with it, or unset OTEL_EXPORTER_OTLP_ENDPOINT / \
         OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    )]
    NotBuilt(String),
    /// The endpoint is not an `http://` or `https://` URL.
    #[error("the OTLP endpoint `{0}` is not an http:// or https:// URL (for example http://127.0.0.1:4318)")]
    BadEndpoint(String),
    /// `RUST_LOG` (or the configured filter) does not parse.
    #[error("the log filter `{filter}` is invalid: {reason}")]
    BadFilter {
        /// The filter text.
        filter: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The exporter could not be built.
    #[error("cannot set up the OTLP exporter for {url}: {reason}")]
    Exporter {
        /// Where traces were to go.
        url: String,
        /// The exporter's error.
        reason: String,
    },
    /// Another global `tracing` subscriber is installed already.
    #[error("a global tracing subscriber is already installed")]
    AlreadyInstalled,
    /// Flushing the pending spans failed.
    #[error("flushing traces failed: {0}")]
    Flush(String),
}

/// Keeps the exporter alive; dropping it sends what is pending and stops the exporter
/// (waiting at most a few seconds).
#[must_use = "dropping the guard stops exporting traces"]
pub struct TelemetryGuard {
    #[cfg(feature = "otel")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl fmt::Debug for TelemetryGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelemetryGuard")
            .field("exporting", &self.is_exporting())
            .finish()
    }
}

impl TelemetryGuard {
    /// Whether spans are exported.
    #[must_use]
    pub fn is_exporting(&self) -> bool {
        #[cfg(feature = "otel")]
        return self.provider.is_some();
        #[cfg(not(feature = "otel"))]
        false
    }

    /// Send every finished span now. Blocks until the exporter answers (or times out):
    /// call it from a blocking context.
    ///
    /// # Errors
    /// When the exporter fails.
    pub fn flush(&self) -> Result<(), TelemetryError> {
        #[cfg(feature = "otel")]
        if let Some(p) = &self.provider {
            p.force_flush()
                .map_err(|e| TelemetryError::Flush(e.to_string()))?;
        }
        Ok(())
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        #[cfg(feature = "otel")]
        if let Some(p) = self.provider.take() {
            if let Err(e) = p.shutdown() {
                eprintln!("graphloom: stopping the trace exporter: {e}");
            }
        }
    }
}

/// The subscriber [`init_tracing`] installs, for callers that install it themselves (or
/// only for a scope, with `tracing::dispatcher::with_default`).
///
/// # Errors
/// See [`TelemetryError`]; never [`TelemetryError::AlreadyInstalled`].
pub fn subscriber(cfg: &TelemetryConfig) -> Result<(tracing::Dispatch, TelemetryGuard), TelemetryError> {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::Layer as _;

    let url = cfg.traces_url();
    if let Some(u) = &url {
        if !(u.starts_with("http://") || u.starts_with("https://")) {
            return Err(TelemetryError::BadEndpoint(u.clone()));
        }
    }
    let filter =
        tracing_subscriber::EnvFilter::try_new(&cfg.log_filter).map_err(|e| TelemetryError::BadFilter {
            filter: cfg.log_filter.clone(),
            reason: e.to_string(),
        })?;
    let logs = cfg.logs.then(|| {
        let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
        match cfg.log_format {
            LogFormat::Json => fmt.json().with_filter(filter).boxed(),
            LogFormat::Compact => fmt.compact().with_filter(filter).boxed(),
        }
    });
    let registry = tracing_subscriber::registry().with(logs);
    match url {
        None => Ok((tracing::Dispatch::new(registry), TelemetryGuard::off())),
        Some(url) => otlp(registry, cfg, url),
    }
}

impl TelemetryGuard {
    fn off() -> Self {
        Self {
            #[cfg(feature = "otel")]
            provider: None,
        }
    }
}

#[cfg(not(feature = "otel"))]
fn otlp<S>(
    _registry: S,
    _cfg: &TelemetryConfig,
    url: String,
) -> Result<(tracing::Dispatch, TelemetryGuard), TelemetryError> {
    Err(TelemetryError::NotBuilt(url))
}

#[cfg(feature = "otel")]
fn otlp<S>(
    registry: S,
    cfg: &TelemetryConfig,
    url: String,
) -> Result<(tracing::Dispatch, TelemetryGuard), TelemetryError>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a> + Send + Sync + 'static,
{
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::WithExportConfig as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::Layer as _;

    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(url.clone())
        .build()
        .map_err(|e| TelemetryError::Exporter {
            url: url.clone(),
            reason: e.to_string(),
        })?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(cfg.service_name.clone())
        .build();
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("graphloom");
    // Spans at `info` and above whatever `RUST_LOG` says about log lines: the trace of a
    // run stays whole when logs are quiet.
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(tracing_subscriber::filter::LevelFilter::INFO);
    let dispatch = tracing::Dispatch::new(registry.with(layer));
    Ok((
        dispatch,
        TelemetryGuard {
            provider: Some(provider),
        },
    ))
}

/// Install the logs (and, with an endpoint, the trace exporter) as the global `tracing`
/// subscriber. Keep the guard for as long as spans should be exported.
///
/// # Errors
/// See [`TelemetryError`]: a bad endpoint or filter, an endpoint without the `otel`
/// feature, a global subscriber already installed.
pub fn init_tracing(cfg: &TelemetryConfig) -> Result<TelemetryGuard, TelemetryError> {
    use tracing_subscriber::util::SubscriberInitExt as _;
    let (dispatch, guard) = subscriber(cfg)?;
    // Also routes `log` records (from dependencies that use `log`) into the subscriber.
    dispatch
        .try_init()
        .map_err(|_| TelemetryError::AlreadyInstalled)?;
    Ok(guard)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::time::{Duration, Instant};

    fn env(pairs: &[(&str, &str)]) -> TelemetryConfig {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        TelemetryConfig::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn endpoints_and_names_come_from_the_standard_variables() {
        let none = env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "  ")]);
        assert_eq!(none.traces_url(), None, "empty means unset");
        assert_eq!(none.service_name, "graphloom");
        assert_eq!(none.log_filter, "info");

        let base = env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
            ("OTEL_SERVICE_NAME", "checkout"),
            ("GRAPHLOOM_LOG_FORMAT", "json"),
            ("RUST_LOG", "warn"),
        ]);
        assert_eq!(
            base.traces_url().as_deref(),
            Some("http://collector:4318/v1/traces")
        );
        assert_eq!(base.service_name, "checkout");
        assert_eq!(base.log_format, LogFormat::Json);
        assert_eq!(base.log_filter, "warn");

        let both = env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "https://traces.example/custom",
            ),
        ]);
        assert_eq!(
            both.traces_url().as_deref(),
            Some("https://traces.example/custom"),
            "the traces variable is used as is and wins"
        );
        let flag = both.with_otlp_endpoint("http://127.0.0.1:4318");
        assert_eq!(
            flag.traces_url().as_deref(),
            Some("http://127.0.0.1:4318/v1/traces"),
            "the flag wins over both variables"
        );
    }

    #[test]
    fn bad_endpoints_and_filters_are_refused_with_the_reason() {
        let cfg = TelemetryConfig::default().with_otlp_endpoint("127.0.0.1:4318");
        let err = subscriber(&cfg).map(|_| ()).unwrap_err();
        assert!(matches!(err, TelemetryError::BadEndpoint(_)), "{err}");
        assert!(err.to_string().contains("http://"), "{err}");

        let cfg = TelemetryConfig {
            log_filter: "graphloom=loud".into(),
            ..TelemetryConfig::default()
        };
        let err = subscriber(&cfg).map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("graphloom=loud"), "{err}");
    }

    /// Threads of this process whose name starts like the SDK's batch exporter thread, once
    /// the count is `expected` or after two seconds (a new thread names itself when it
    /// starts running).
    #[cfg(target_os = "linux")]
    fn exporter_threads(expected: usize) -> usize {
        let count = || {
            std::fs::read_dir("/proc/self/task")
                .map(|dir| {
                    dir.filter_map(Result::ok)
                        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                        .filter(|name| name.starts_with("OpenTelemetry"))
                        .count()
                })
                .unwrap_or(0)
        };
        let t0 = Instant::now();
        loop {
            let n = count();
            if n == expected || t0.elapsed() > Duration::from_secs(2) {
                return n;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn some_spans(dispatch: &tracing::Dispatch, n: usize) {
        tracing::dispatcher::with_default(dispatch, || {
            let run = tracing::info_span!("run", run_id = "r");
            let _in_run = run.enter();
            for step in 0..n {
                let node = tracing::info_span!("node", graphloom.node = "n", graphloom.step = step);
                node.in_scope(|| tracing::info!("inside"));
            }
        });
    }

    // One test, in order: the thread count is process-wide.
    #[test]
    fn off_without_an_endpoint_and_harmless_when_the_collector_is_down() {
        // No endpoint: no exporter, no thread; spans and logs work as before.
        let (dispatch, guard) = subscriber(&TelemetryConfig {
            logs: false,
            ..TelemetryConfig::default()
        })
        .unwrap();
        assert!(!guard.is_exporting());
        some_spans(&dispatch, 10);
        guard.flush().unwrap();
        #[cfg(target_os = "linux")]
        assert_eq!(exporter_threads(0), 0);
        drop(guard);

        // A collector that is not there: building works, spans cost no waiting, and
        // flushing and stopping end within the exporter's timeout.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let cfg = TelemetryConfig {
            logs: false,
            ..TelemetryConfig::default()
        }
        .with_otlp_endpoint(format!("http://127.0.0.1:{port}"));
        let (dispatch, guard) = subscriber(&cfg).unwrap();
        assert!(guard.is_exporting());
        #[cfg(target_os = "linux")]
        assert_eq!(exporter_threads(1), 1);
        let t0 = Instant::now();
        some_spans(&dispatch, 5000);
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        let t0 = Instant::now();
        let _ = guard.flush();
        drop(guard);
        assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
        #[cfg(target_os = "linux")]
        assert_eq!(exporter_threads(0), 0, "stopping ends the exporter thread");
    }
}
