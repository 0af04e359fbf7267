//! What the HTTP providers share: connection settings, retries, error bodies, SSE streams.

mod retry;
mod sse;

pub use retry::{parse_retry_after, retry_after, RetryConfig};
pub(crate) use sse::{sse_stream, SseDecoder};

use crate::error::{truncate_raw, Error, Result};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use std::future::Future;
use std::time::Duration;

/// Default time limit of one attempt.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Default limit of a response body (a larger one is an invalid response).
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// Connection settings of an HTTP provider.
#[derive(Clone)]
pub(crate) struct HttpSettings {
    pub client: reqwest::Client,
    pub base_url: String,
    pub headers: HeaderMap,
    pub retry: RetryConfig,
    pub timeout: Duration,
    pub max_response_bytes: usize,
}

impl std::fmt::Debug for HttpSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Header values hold API keys: only their names are shown.
        f.debug_struct("HttpSettings")
            .field("base_url", &self.base_url)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("retry", &self.retry)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl HttpSettings {
    pub fn new(base_url: &str) -> Self {
        Self {
            client: reqwest::Client::new(),
            base_url: base_url.trim_end_matches('/').to_owned(),
            headers: HeaderMap::new(),
            retry: RetryConfig::default(),
            timeout: DEFAULT_TIMEOUT,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// Set a header; values that are not valid header text are a configuration error.
    pub fn set_header(&mut self, name: &str, value: &str, secret: bool) -> Result<()> {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| Error::Config(format!("invalid header name `{name}`: {e}")))?;
        let mut value = HeaderValue::from_str(value)
            .map_err(|_| Error::Config(format!("invalid value for header `{name}`")))?;
        value.set_sensitive(secret);
        self.headers.insert(name, value);
        Ok(())
    }

    /// `base_url` joined with `path`; a base that already ends with `/v1` is not given a
    /// second one.
    pub fn url(&self, path: &str) -> String {
        let path = if self.base_url.ends_with("/v1") {
            path.strip_prefix("/v1").unwrap_or(path)
        } else {
            path
        };
        format!("{}{}", self.base_url, path)
    }

    fn request(&self, url: &str, body: &Value) -> reqwest::RequestBuilder {
        self.client.post(url).headers(self.headers.clone()).json(body)
    }

    /// POST `body` and return the response body, retrying what may pass later.
    pub async fn post_json(
        &self,
        provider: &str,
        url: &str,
        body: &Value,
        timeout: Option<Duration>,
    ) -> Result<Vec<u8>> {
        let timeout = timeout.unwrap_or(self.timeout);
        with_retries(provider, &self.retry, |attempt| async move {
            let sent = self.request(url, body).timeout(timeout).send().await;
            let resp = match sent {
                Ok(r) => r,
                Err(e) => return transport_failure(provider, &e, timeout, attempt),
            };
            let status = resp.status();
            let wait = retry_after(resp.headers());
            let body = match read_body(resp, self.max_response_bytes, provider).await {
                Ok(b) => b,
                Err(BodyError::Transport(e)) => return transport_failure(provider, &e, timeout, attempt),
                Err(BodyError::Fatal(e)) => return Attempt::Fail(e),
            };
            if status.is_success() {
                Attempt::Done(body)
            } else {
                status_failure(provider, status.as_u16(), &body, wait, attempt)
            }
        })
        .await
    }

    /// POST `body` for a streamed answer: the response once its status is a success
    /// (retrying before any byte of the stream was read).
    pub fn open_stream(
        &self,
        provider: String,
        url: String,
        body: Value,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<reqwest::Response>> + Send + 'static {
        let this = self.clone();
        let timeout = timeout.unwrap_or(self.timeout);
        async move {
            let provider = provider.as_str();
            let (url, body, this) = (&url, &body, &this);
            with_retries(provider, &this.retry, |attempt| async move {
                let resp = match tokio::time::timeout(timeout, this.request(url, body).send()).await {
                    Err(_) => return timed_out(provider, timeout, attempt),
                    Ok(Err(e)) => return transport_failure(provider, &e, timeout, attempt),
                    Ok(Ok(r)) => r,
                };
                let status = resp.status();
                if status.is_success() {
                    return Attempt::Done(resp);
                }
                let wait = retry_after(resp.headers());
                let read = tokio::time::timeout(timeout, read_body(resp, this.max_response_bytes, provider));
                match read.await {
                    Err(_) => timed_out(provider, timeout, attempt),
                    Ok(Err(BodyError::Transport(e))) => transport_failure(provider, &e, timeout, attempt),
                    Ok(Err(BodyError::Fatal(e))) => Attempt::Fail(e),
                    Ok(Ok(b)) => status_failure(provider, status.as_u16(), &b, wait, attempt),
                }
            })
            .await
        }
    }
}

enum BodyError {
    Transport(reqwest::Error),
    Fatal(Error),
}

async fn read_body(mut resp: reqwest::Response, limit: usize, provider: &str) -> Result<Vec<u8>, BodyError> {
    let too_big = || {
        BodyError::Fatal(Error::invalid_response(
            provider,
            format!("response body larger than {limit} bytes"),
            "",
        ))
    };
    if resp
        .content_length()
        .is_some_and(|n| usize::try_from(n).map_or(true, |n| n > limit))
    {
        return Err(too_big());
    }
    let mut out = Vec::with_capacity(
        resp.content_length()
            .map_or(8192, |n| usize::try_from(n).unwrap_or(limit).min(limit)),
    );
    while let Some(chunk) = resp.chunk().await.map_err(BodyError::Transport)? {
        if out.len() + chunk.len() > limit {
            return Err(too_big());
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// The outcome of one attempt.
pub(crate) enum Attempt<T> {
    /// It worked.
    Done(T),
    /// It failed in a way that may pass later; wait as the server asked, if it did.
    Retry(Error, Option<Duration>),
    /// It failed for good.
    Fail(Error),
}

/// Run `attempt` until it is done, fails for good, or the attempts run out.
pub(crate) async fn with_retries<T, F, Fut>(provider: &str, retry: &RetryConfig, mut attempt: F) -> Result<T>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Attempt<T>>,
{
    let max = retry.max_attempts.max(1);
    let mut n = 1;
    loop {
        match attempt(n).await {
            Attempt::Done(t) => return Ok(t),
            Attempt::Fail(e) => return Err(e),
            Attempt::Retry(e, asked) => {
                if n >= max {
                    return Err(e);
                }
                let wait = match asked {
                    Some(d) if d > retry.max_retry_after => return Err(e),
                    Some(d) => d,
                    None => retry.backoff(n),
                };
                tracing::warn!(provider, attempt = n, wait_ms = wait.as_millis() as u64, error = %e, "model call failed; retrying");
                tokio::time::sleep(wait).await;
                n += 1;
            }
        }
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn timed_out<T>(provider: &str, timeout: Duration, attempt: u32) -> Attempt<T> {
    Attempt::Retry(
        Error::Timeout {
            provider: provider.to_owned(),
            after_ms: ms(timeout),
            attempts: attempt,
        },
        None,
    )
}

fn transport_failure<T>(provider: &str, e: &reqwest::Error, timeout: Duration, attempt: u32) -> Attempt<T> {
    if e.is_timeout() {
        return timed_out(provider, timeout, attempt);
    }
    if e.is_builder() {
        return Attempt::Fail(Error::Config(format!(
            "{provider}: cannot build the request: {e}"
        )));
    }
    let mut message = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        message.push_str(": ");
        message.push_str(&s.to_string());
        src = s.source();
    }
    Attempt::Retry(
        Error::Connection {
            provider: provider.to_owned(),
            message,
            attempts: attempt,
        },
        None,
    )
}

fn status_failure<T>(
    provider: &str,
    status: u16,
    body: &[u8],
    wait: Option<Duration>,
    attempt: u32,
) -> Attempt<T> {
    let err = Error::Http {
        provider: provider.to_owned(),
        status,
        message: error_message(body),
        attempts: attempt,
    };
    if status == 429 || status == 408 || status >= 500 {
        Attempt::Retry(err, wait)
    } else {
        Attempt::Fail(err)
    }
}

/// The provider's error message out of an error body: `{"error":{"message":..}}` (OpenAI,
/// Anthropic), `{"error":".."}` (Ollama), `{"message":..}`, `{"detail":..}` (vLLM), else an
/// excerpt of the body.
#[must_use]
pub fn error_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return truncate_raw(text.trim());
    };
    let pick = |v: &Value| -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            other => other
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| Some(other.to_string())),
        }
    };
    let found = v
        .get("error")
        .and_then(pick)
        .or_else(|| v.get("message").and_then(pick))
        .or_else(|| v.get("detail").and_then(pick));
    truncate_raw(&found.unwrap_or_else(|| text.trim().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_of_known_shapes() {
        assert_eq!(
            error_message(br#"{"error":{"message":"bad key","type":"x"}}"#),
            "bad key"
        );
        assert_eq!(
            error_message(br#"{"type":"error","error":{"type":"invalid_request_error","message":"no"}}"#),
            "no"
        );
        assert_eq!(
            error_message(br#"{"error":"model not found"}"#),
            "model not found"
        );
        assert_eq!(error_message(br#"{"detail":"oops"}"#), "oops");
        assert_eq!(
            error_message(b"<html>bad gateway</html>"),
            "<html>bad gateway</html>"
        );
    }

    #[test]
    fn urls_do_not_double_v1() {
        assert_eq!(
            HttpSettings::new("http://h:1/v1/").url("/v1/messages"),
            "http://h:1/v1/messages"
        );
        assert_eq!(
            HttpSettings::new("http://h:1").url("/v1/messages"),
            "http://h:1/v1/messages"
        );
        assert_eq!(
            HttpSettings::new("http://h:1/v1").url("/chat/completions"),
            "http://h:1/v1/chat/completions"
        );
    }
}
