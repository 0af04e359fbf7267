//! The address guard of webhook URLs: which schemes, hosts, ports and IP ranges a delivery
//! may reach. Checked when a run (or cron) names a URL, before each attempt, and again when
//! the delivery resolves the host (a name that resolves to a blocked address is refused
//! then, and the connection goes only to the addresses checked).
//!
//! The policy has two layers. The address guard refuses loopback, private, link-local and
//! other non-public addresses (and `localhost` names) unless
//! [`WebhookConfig::allowed_hosts`] exempts the host ([`WebhookConfig::allow_loopback`]
//! exempts the loopback range and `localhost` names only). The URL policy narrows further when
//! configured: [`WebhookConfig::allowed_domains`] (exact hosts or `*.example.com`),
//! [`WebhookConfig::allowed_ports`], [`WebhookConfig::max_url_length`], and https unless
//! [`WebhookConfig::allow_http`]. A host on the domain list is still subject to the address
//! guard. Relative URLs (which a LangGraph server may send to its own routes) are never
//! delivered: graphloom has no in-process route for them, whatever the configuration.

use crate::config::WebhookConfig;
use crate::error::{ServiceError, ServiceResult};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// Why a webhook URL is refused (the text is the client's 422 detail).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Not a URL.
    #[error("Invalid webhook URL {0:?}")]
    Url(String),
    /// No host (`file:///...`), or one that is not a name or an address.
    #[error("Invalid webhook hostname '{0}'")]
    Host(String),
    /// Neither http nor https.
    #[error("Invalid webhook scheme '{0}': use https")]
    Scheme(String),
    /// http where https is required.
    #[error("Webhook URL must use https (http is not allowed by the server's configuration)")]
    Http,
    /// The host is or resolves to a blocked address.
    #[error("Webhook host blocked: {0}")]
    Blocked(&'static str),
    /// Longer than [`WebhookConfig::max_url_length`] (which the field holds).
    #[error("Webhook URL too long: the server accepts at most {0} characters")]
    TooLong(usize),
    /// A path without scheme and host.
    #[error("Relative webhook URLs are not supported: give an absolute URL")]
    Relative,
    /// The host is not on [`WebhookConfig::allowed_domains`].
    #[error("Webhook host '{0}' is not in the server's allowed domains")]
    Domain(String),
    /// The port is not on [`WebhookConfig::allowed_ports`].
    #[error("Webhook port {0} is not in the server's allowed ports")]
    Port(u16),
}

/// The reason [`blocked_range`] gives for loopback addresses, and the one for `localhost`.
const LOOPBACK: &str = "loopback IP range";
const LOCALHOST: &str = "localhost address";

/// Whether the configuration lets `why` (a reason of [`blocked_range`]) through.
fn opened(config: &WebhookConfig, why: &str) -> bool {
    config.allow_loopback && (why == LOOPBACK || why == LOCALHOST)
}

/// The range an address belongs to when deliveries may not reach it.
#[must_use]
pub fn blocked_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => blocked_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => blocked_v4(v4),
            None => blocked_v6(v6),
        },
    }
}

fn blocked_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some(LOOPBACK)
    } else if ip.is_private() {
        Some("private IP range")
    } else if ip.is_link_local() {
        Some("link-local IP range")
    } else if ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        // Shared address space (carrier-grade NAT), 100.64.0.0/10.
        || (a == 100 && (64..128).contains(&b))
        // 0.0.0.0/8, reserved 240.0.0.0/4.
        || a == 0
        || a >= 240
    {
        Some("blocked IP range")
    } else {
        None
    }
}

fn blocked_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip.is_loopback() {
        Some(LOOPBACK)
    } else if first & 0xfe00 == 0xfc00 {
        Some("private IP range")
    } else if first & 0xffc0 == 0xfe80 {
        Some("link-local IP range")
    } else if ip.is_unspecified() || ip.is_multicast() {
        Some("blocked IP range")
    } else {
        None
    }
}

/// Whether `host` is exempt from the address guard by configuration.
fn allowed(config: &WebhookConfig, host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    config.allowed_hosts.iter().any(|h| {
        h.trim_start_matches('[')
            .trim_end_matches(']')
            .eq_ignore_ascii_case(bare)
    })
}

/// Whether `host` (as a URL writes it) is on the domain allowlist: an entry matches the
/// host exactly, or `*.example.com` matches any name that ends in `.example.com`.
fn domain_allowed(config: &WebhookConfig, host: &str) -> bool {
    let bare = |h: &str| {
        h.trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches('.')
            .to_ascii_lowercase()
    };
    let host = bare(host);
    config.allowed_domains.iter().any(|entry| {
        let entry = bare(entry);
        match entry.strip_prefix("*.") {
            Some(parent) => host
                .strip_suffix(parent)
                .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
            None => host == entry,
        }
    })
}

/// Check the `webhook` of a request (a run's or a cron's): a 422 naming what is wrong.
///
/// # Errors
/// 422 when the URL is refused by [`check`].
pub(crate) fn check_url(config: &WebhookConfig, url: Option<&str>) -> ServiceResult<()> {
    match url {
        None => Ok(()),
        Some(u) => check(config, u)
            .map(|_| ())
            .map_err(|e| ServiceError::invalid(e.to_string())),
    }
}

/// Check a webhook URL as far as can be done without resolving its host.
///
/// # Errors
/// [`Refused`] naming what is wrong.
pub fn check(config: &WebhookConfig, url: &str) -> Result<reqwest::Url, Refused> {
    if let Some(max) = config.max_url_length {
        if url.chars().count() > max {
            return Err(Refused::TooLong(max));
        }
    }
    if url.starts_with('/') {
        return Err(Refused::Relative);
    }
    let parsed = reqwest::Url::parse(url).map_err(|_| match url.split_once("://") {
        Some((_, rest)) => Refused::Host(rest.split('/').next().unwrap_or_default().to_owned()),
        None => Refused::Host(String::new()),
    })?;
    let host = match parsed.host() {
        Some(h) => h,
        None => return Err(Refused::Host(String::new())),
    };
    let https = match parsed.scheme() {
        "https" => true,
        "http" => false,
        other => return Err(Refused::Scheme(other.to_owned())),
    };
    // The address first (as the reference server answers), then the scheme.
    let text = host.to_string();
    let blocked = match host {
        url::Host::Ipv4(ip) => blocked_range(IpAddr::V4(ip)),
        url::Host::Ipv6(ip) => blocked_range(IpAddr::V6(ip)),
        url::Host::Domain(name) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            (name == "localhost" || name.ends_with(".localhost")).then_some(LOCALHOST)
        }
    };
    if let Some(why) = blocked.filter(|why| !opened(config, why) && !allowed(config, &text)) {
        return Err(Refused::Blocked(why));
    }
    if !config.allowed_domains.is_empty() && !domain_allowed(config, &text) {
        return Err(Refused::Domain(text));
    }
    let port = parsed
        .port_or_known_default()
        .unwrap_or(if https { 443 } else { 80 });
    if !config.allowed_ports.is_empty() && !config.allowed_ports.contains(&port) {
        return Err(Refused::Port(port));
    }
    if !https && !config.allow_http {
        return Err(Refused::Http);
    }
    Ok(parsed)
}

/// The resolver of the delivery client: resolves a host and keeps only addresses the guard
/// lets through (all of them for a host allowed by configuration); a host left with none
/// fails, so the request is never sent.
pub(crate) struct GuardedResolver {
    pub(crate) config: Arc<WebhookConfig>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let config = Arc::clone(&self.config);
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let open = allowed(&config, &host);
            let kept: Vec<SocketAddr> = found
                .into_iter()
                .filter(|a| open || blocked_range(a.ip()).is_none_or(|why| opened(&config, why)))
                .collect();
            if kept.is_empty() {
                return Err(
                    Box::new(Refused::Blocked("the host resolves only to blocked addresses"))
                        as Box<dyn std::error::Error + Send + Sync>,
                );
            }
            let addrs: Addrs = Box::new(kept.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strict() -> WebhookConfig {
        WebhookConfig::default()
    }

    #[test]
    fn blocked_ranges_are_refused_by_default() {
        let c = strict();
        let refused = |u: &str| check(&c, u).unwrap_err().to_string();
        assert_eq!(
            refused("https://127.0.0.1/x"),
            "Webhook host blocked: loopback IP range"
        );
        assert_eq!(
            refused("https://[::1]/x"),
            "Webhook host blocked: loopback IP range"
        );
        assert_eq!(
            refused("https://10.1.2.3/x"),
            "Webhook host blocked: private IP range"
        );
        assert_eq!(
            refused("https://192.168.0.9/x"),
            "Webhook host blocked: private IP range"
        );
        assert_eq!(
            refused("https://[fd00::1]/x"),
            "Webhook host blocked: private IP range"
        );
        assert_eq!(
            refused("https://169.254.169.254/latest"),
            "Webhook host blocked: link-local IP range"
        );
        assert_eq!(
            refused("https://[::ffff:127.0.0.1]/x"),
            "Webhook host blocked: loopback IP range"
        );
        assert_eq!(
            refused("https://0.0.0.0/x"),
            "Webhook host blocked: blocked IP range"
        );
        assert_eq!(
            refused("https://localhost/x"),
            "Webhook host blocked: localhost address"
        );
        assert_eq!(refused("http://example.com/x"), Refused::Http.to_string());
        assert_eq!(refused("file:///etc/passwd"), "Invalid webhook hostname ''");
        assert_eq!(refused("not a url"), "Invalid webhook hostname ''");
        assert_eq!(
            refused("ftp://example.com/x"),
            "Invalid webhook scheme 'ftp': use https"
        );
        assert!(check(&c, "https://example.com/hook").is_ok());
        assert!(check(&c, "https://8.8.8.8/hook").is_ok());
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_a_blocked_address_is_refused_at_delivery() {
        let resolve = |config: WebhookConfig| {
            let r = GuardedResolver {
                config: Arc::new(config),
            };
            r.resolve("localhost".parse().unwrap())
        };
        let refused = resolve(WebhookConfig::default()).await.err().unwrap();
        assert!(refused.to_string().contains("blocked"), "{refused}");
        let open = WebhookConfig {
            allowed_hosts: vec!["localhost".into()],
            ..WebhookConfig::default()
        };
        let addrs: Vec<SocketAddr> = resolve(open).await.unwrap().collect();
        assert!(
            !addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback()),
            "{addrs:?}"
        );
    }

    #[test]
    fn the_domain_allowlist_takes_exact_hosts_and_subdomain_wildcards() {
        let c = WebhookConfig {
            allowed_domains: vec!["hooks.example.com".into(), "*.corp.example".into()],
            ..WebhookConfig::default()
        };
        assert!(check(&c, "https://hooks.example.com/x").is_ok());
        assert!(check(&c, "https://HOOKS.example.com./x").is_ok());
        assert!(check(&c, "https://a.corp.example/x").is_ok());
        assert!(check(&c, "https://a.b.corp.example/x").is_ok());
        let refused = |u: &str| check(&c, u).unwrap_err();
        assert_eq!(
            refused("https://corp.example/x"),
            Refused::Domain("corp.example".into()),
            "a wildcard matches subdomains, not the apex"
        );
        assert_eq!(
            refused("https://evilcorp.example/x"),
            Refused::Domain("evilcorp.example".into())
        );
        assert_eq!(
            refused("https://example.com/x"),
            Refused::Domain("example.com".into())
        );
        assert_eq!(
            refused("https://other.example.com/x").to_string(),
            "Webhook host 'other.example.com' is not in the server's allowed domains"
        );
        // The allowlist narrows the address guard, it does not open it.
        let loopback = WebhookConfig {
            allowed_domains: vec!["127.0.0.1".into()],
            ..WebhookConfig::default()
        };
        assert_eq!(
            check(&loopback, "https://127.0.0.1/x").unwrap_err(),
            Refused::Blocked("loopback IP range")
        );
        let exempt = WebhookConfig {
            allowed_hosts: vec!["127.0.0.1".into()],
            ..loopback
        };
        assert!(check(&exempt, "https://127.0.0.1/x").is_ok());
        assert_eq!(
            check(&exempt, "https://8.8.8.8/x").unwrap_err(),
            Refused::Domain("8.8.8.8".into())
        );
    }

    #[test]
    fn ports_length_and_https_are_enforced_when_configured() {
        let c = WebhookConfig {
            allowed_ports: vec![443, 8443],
            max_url_length: Some(40),
            ..WebhookConfig::default()
        };
        assert!(check(&c, "https://example.com/x").is_ok(), "443 by default");
        assert!(check(&c, "https://example.com:8443/x").is_ok());
        assert_eq!(
            check(&c, "https://example.com:9000/x").unwrap_err(),
            Refused::Port(9000)
        );
        let long = format!("https://example.com/{}", "a".repeat(21));
        assert_eq!(long.len(), 41);
        assert_eq!(check(&c, &long).unwrap_err(), Refused::TooLong(40));
        assert!(check(&c, &long[..40]).is_ok());
        // http stays refused until allowed; its default port is 80.
        assert_eq!(check(&c, "http://example.com/x").unwrap_err(), Refused::Port(80));
        let http = WebhookConfig {
            allowed_ports: vec![80],
            ..WebhookConfig::default()
        };
        assert_eq!(check(&http, "http://example.com/x").unwrap_err(), Refused::Http);
        let http = WebhookConfig {
            allow_http: true,
            ..http
        };
        assert!(check(&http, "http://example.com/x").is_ok());
        assert_eq!(check(&http, "/runs/hook").unwrap_err(), Refused::Relative);
    }

    #[tokio::test]
    async fn allow_loopback_opens_the_loopback_range_only() {
        let c = WebhookConfig {
            allow_loopback: true,
            ..WebhookConfig::default()
        };
        assert!(check(&c, "https://127.0.0.1/x").is_ok());
        assert!(check(&c, "https://127.0.0.2/x").is_ok());
        assert!(check(&c, "https://[::1]/x").is_ok());
        assert!(check(&c, "https://localhost/x").is_ok());
        assert_eq!(
            check(&c, "https://10.0.0.1/x").unwrap_err(),
            Refused::Blocked("private IP range")
        );
        assert_eq!(check(&c, "/runs").unwrap_err(), Refused::Relative);
        let r = GuardedResolver { config: Arc::new(c) };
        let addrs: Vec<SocketAddr> = r.resolve("localhost".parse().unwrap()).await.unwrap().collect();
        assert!(!addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback()));
    }

    #[test]
    fn configuration_allows_http_and_named_hosts() {
        let c = WebhookConfig {
            allow_http: true,
            allowed_hosts: vec!["127.0.0.1".into(), "::1".into()],
            ..WebhookConfig::default()
        };
        assert!(check(&c, "http://127.0.0.1:9/x").is_ok());
        assert!(check(&c, "http://[::1]:9/x").is_ok());
        assert!(check(&c, "http://10.0.0.1/x").is_err());
    }
}
