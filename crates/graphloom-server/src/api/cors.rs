//! CORS for browser clients on other origins (LangGraph Studio hosted at
//! `https://smith.langchain.com`, Agent Chat UI and other frontends on localhost), with
//! Chrome's Private Network Access: a preflight that asks
//! `Access-Control-Request-Private-Network: true` (a public page calling a server on the
//! user's machine) is answered `Access-Control-Allow-Private-Network: true`.
//!
//! Origins are exact (`https://smith.langchain.com`), `*` for any, or an origin whose port
//! is `*` (`http://localhost:*`: that host on any port).

use axum::http::HeaderValue;
use tower_http::cors::{AllowOrigin, Any, CorsLayer};

/// The layer for `origins` (`None` when the list is empty: no CORS headers).
pub(super) fn layer(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        let patterns = origins.to_vec();
        AllowOrigin::predicate(move |origin: &HeaderValue, _| {
            origin
                .to_str()
                .is_ok_and(|o| patterns.iter().any(|p| origin_matches(p, o)))
        })
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods(Any)
            .allow_headers(Any)
            .expose_headers(Any)
            .allow_private_network(true),
    )
}

/// Whether `origin` fits `pattern` (exact, or any port for a pattern ending in `:*`).
fn origin_matches(pattern: &str, origin: &str) -> bool {
    match pattern.strip_suffix(":*") {
        Some(host) => {
            origin == host
                || origin
                    .strip_prefix(host)
                    .and_then(|rest| rest.strip_prefix(':'))
                    .is_some_and(|port| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
        }
        None => pattern == origin,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_match_exactly_or_on_any_port() {
        assert!(origin_matches(
            "https://smith.langchain.com",
            "https://smith.langchain.com"
        ));
        assert!(!origin_matches(
            "https://smith.langchain.com",
            "https://smith.langchain.com.evil"
        ));
        assert!(origin_matches("http://localhost:*", "http://localhost:3000"));
        assert!(origin_matches("http://localhost:*", "http://localhost"));
        assert!(!origin_matches(
            "http://localhost:*",
            "http://localhost.evil:3000"
        ));
        assert!(!origin_matches("http://localhost:*", "http://localhost:30x0"));
        assert!(!origin_matches("http://localhost:*", "https://localhost:3000"));
    }
}
