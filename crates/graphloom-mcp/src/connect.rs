//! Opening one MCP session: spawn the child process or set up the HTTP client, then the
//! handshake, within the server's connect timeout.

use crate::config::{HttpServer, ServerConfig, Stderr, StdioServer, Transport, DEFAULT_INHERITED_ENV};
use crate::error::{BoxError, Error, Result};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;

/// A live MCP session with one server.
pub(crate) type Session = RunningService<RoleClient, ClientConfig>;

/// Most same-origin redirects followed for one request.
const MAX_REDIRECTS: usize = 10;

/// What this client tells servers about itself.
fn client_info() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("graphloom", env!("CARGO_PKG_VERSION")),
    )
}

/// Open a session with `server` as `cfg` says, handshake included, within its connect
/// timeout.
pub(crate) async fn open(server: &str, cfg: &ServerConfig) -> Result<Session> {
    let handshake = async {
        match &cfg.transport {
            Transport::Stdio(s) => {
                let child = spawn(server, s)?;
                client_info()
                    .serve(child)
                    .await
                    .map_err(|e| handshake_error(server, e))
            }
            Transport::StreamableHttp(h) => {
                let transport = http_transport(server, h)?;
                client_info()
                    .serve(transport)
                    .await
                    .map_err(|e| handshake_error(server, e))
            }
        }
    };
    // Dropping the unfinished handshake drops the transport, which kills the child.
    tokio::time::timeout(cfg.connect_timeout, handshake)
        .await
        .map_err(|_| Error::Timeout {
            server: server.to_owned(),
            phase: "connecting",
            timeout: cfg.connect_timeout,
        })?
}

fn handshake_error(server: &str, e: rmcp::service::ClientInitializeError) -> Error {
    // A transport error's own cause (connection refused, ...) is not its `source`: keep it
    // as ours, so the chain ends at what actually happened.
    let source: BoxError = match e {
        rmcp::service::ClientInitializeError::TransportError { error, .. } => error.error,
        other => Box::new(other),
    };
    Error::Handshake {
        server: server.to_owned(),
        source,
    }
}

/// Start the server's process in its own process group, killed when dropped.
fn spawn(server: &str, s: &StdioServer) -> Result<TokioChildProcess> {
    if s.command.trim().is_empty() {
        return Err(Error::Config {
            server: server.to_owned(),
            message: "the command is empty".to_owned(),
        });
    }
    let mut cmd = tokio::process::Command::new(&s.command);
    cmd.args(&s.args);
    if !s.inherit_env {
        cmd.env_clear();
        for key in DEFAULT_INHERITED_ENV {
            if let Some(v) = std::env::var_os(key) {
                cmd.env(key, v);
            }
        }
    }
    cmd.envs(&s.env);
    if let Some(dir) = &s.cwd {
        cmd.current_dir(dir);
    }
    let stderr = match &s.stderr {
        Stderr::Inherit => Stdio::inherit(),
        Stderr::Null => Stdio::null(),
        Stderr::File(path) => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map(Stdio::from)
            .map_err(|e| Error::Config {
                server: server.to_owned(),
                message: format!("cannot open the stderr file {}: {e}", path.display()),
            })?,
    };
    let mut wrap = process_wrap::tokio::CommandWrap::from(cmd);
    // The group: a server started through a shell or `npx` dies with its children.
    #[cfg(unix)]
    wrap.wrap(process_wrap::tokio::ProcessGroup::leader());
    // If the transport is dropped where its own cleanup cannot run, tokio still kills it.
    wrap.wrap(process_wrap::tokio::KillOnDrop);
    let (child, _stderr) = TokioChildProcess::builder(wrap)
        .stderr(stderr)
        .spawn()
        .map_err(|source| Error::Spawn {
            server: server.to_owned(),
            command: s.command.clone(),
            source,
        })?;
    Ok(child)
}

fn config_error(server: &str, message: String) -> Error {
    Error::Config {
        server: server.to_owned(),
        message,
    }
}

/// The streamable HTTP transport for `h`: URL and headers checked, our own HTTP client.
fn http_transport(
    server: &str,
    h: &HttpServer,
) -> Result<StreamableHttpClientTransport<reqwest_mcp::Client>> {
    let url = reqwest_mcp::Url::parse(&h.url)
        .map_err(|e| config_error(server, format!("`{}` is not a URL: {e}", h.url)))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(config_error(
            server,
            format!("`{}` is not an http or https URL", h.url),
        ));
    }
    let mut headers = HashMap::with_capacity(h.headers.len());
    for (name, value) in &h.headers {
        let n = reqwest_mcp::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| config_error(server, format!("header name `{name}`: {e}")))?;
        let v = reqwest_mcp::header::HeaderValue::from_str(value)
            .map_err(|e| config_error(server, format!("the value of header `{name}`: {e}")))?;
        headers.insert(n, v);
    }
    let client = http_client().map_err(|e| config_error(server, format!("the HTTP client: {e}")))?;
    let mut config = StreamableHttpClientTransportConfig::with_uri(h.url.as_str()).custom_headers(headers);
    config.retry_config = Arc::new(ResumeBriefly);
    Ok(StreamableHttpClientTransport::with_client(client, config))
}

/// How often a broken response stream is resumed: three times, 250 ms, 500 ms and 1 s
/// apart, which rides out a blip; rmcp's default (forever, doubling) would keep a call to a
/// dead server waiting for its whole timeout.
#[derive(Debug)]
struct ResumeBriefly;

impl rmcp::transport::common::client_side_sse::SseRetryPolicy for ResumeBriefly {
    fn retry(&self, attempt: usize) -> Option<std::time::Duration> {
        (attempt < 3).then(|| std::time::Duration::from_millis(250 << attempt))
    }
}

/// An HTTP client with rustls over ring and the platform's certificate verifier, following
/// only same-origin 307/308 redirects (which keep the method and body; any other would
/// lose the JSON-RPC message or replay headers to another host).
fn http_client() -> Result<reqwest_mcp::Client, BoxError> {
    use rustls_platform_verifier::BuilderVerifierExt;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_platform_verifier()?
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let redirects = reqwest_mcp::redirect::Policy::custom(|attempt| {
        let keeps_body = matches!(
            attempt.status(),
            reqwest_mcp::StatusCode::TEMPORARY_REDIRECT | reqwest_mcp::StatusCode::PERMANENT_REDIRECT
        );
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if !keeps_body || !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    });
    Ok(reqwest_mcp::Client::builder()
        .tls_backend_preconfigured(tls)
        // A pooled connection whose last body was not read to the end stalls the next
        // request on delayed ACKs; MCP sessions reuse little anyway.
        .pool_max_idle_per_host(0)
        .redirect(redirects)
        .build()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_http_client_builds_without_a_process_wide_crypto_provider() {
        assert!(rustls::crypto::CryptoProvider::get_default().is_none());
        http_client().unwrap();
        assert!(rustls::crypto::CryptoProvider::get_default().is_none());
    }
}
