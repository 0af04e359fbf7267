//! The static headers of webhook deliveries ([`WebhookConfig::headers`]): checked once,
//! then sent with every attempt.

use super::WebhookConfig;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

/// Headers a delivery sets itself, or that only the HTTP client may set.
const RESERVED: [&str; 7] = [
    "content-type",
    "content-length",
    "host",
    "transfer-encoding",
    "connection",
    "x-graphloom-webhook-id",
    "x-graphloom-signature",
];

/// Why a configured webhook header cannot be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// Not a valid HTTP header name.
    #[error("webhook header name {0:?} is not a valid HTTP header name")]
    Name(String),
    /// The value of the named header holds characters a header cannot carry.
    #[error("the value of webhook header {0:?} is not a valid HTTP header value")]
    Value(String),
    /// A header the delivery or the HTTP client sets itself.
    #[error("webhook header {0:?} is set by graphloom itself and cannot be configured")]
    Reserved(String),
}

/// [`WebhookConfig::headers`] as the delivery client sends them.
///
/// # Errors
/// [`HeaderError`] naming the first header that cannot be sent.
pub fn header_map(config: &WebhookConfig) -> Result<HeaderMap, HeaderError> {
    let mut map = HeaderMap::new();
    for (name, value) in &config.headers {
        let key =
            HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| HeaderError::Name(name.clone()))?;
        if RESERVED.contains(&key.as_str()) {
            return Err(HeaderError::Reserved(name.clone()));
        }
        let mut value = HeaderValue::from_str(value.trim()).map_err(|_| HeaderError::Value(name.clone()))?;
        value.set_sensitive(true);
        map.append(key, value);
    }
    Ok(map)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn with(headers: &[(&str, &str)]) -> Result<HeaderMap, HeaderError> {
        header_map(&WebhookConfig {
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..WebhookConfig::default()
        })
    }

    #[test]
    fn headers_are_checked_once() {
        let map = with(&[("Authorization", "Bearer t"), ("x-team", "a")]).unwrap();
        assert_eq!(map["authorization"], "Bearer t");
        assert_eq!(map["x-team"], "a");
        assert_eq!(
            with(&[("bad name", "v")]).unwrap_err(),
            HeaderError::Name("bad name".into())
        );
        assert_eq!(
            with(&[("x-a", "line\nbreak")]).unwrap_err(),
            HeaderError::Value("x-a".into())
        );
        assert_eq!(
            with(&[("Content-Type", "text/plain")]).unwrap_err(),
            HeaderError::Reserved("Content-Type".into())
        );
    }
}
