//! The address guard of webhook URLs: which schemes, hosts and IP ranges a delivery may
//! reach. Checked when a run (or cron) names a URL, and again when the delivery resolves
//! the host (a name that resolves to a blocked address is refused then, and the connection
//! goes only to the addresses checked).

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
        Some("loopback IP range")
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
        Some("loopback IP range")
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
            (name == "localhost" || name.ends_with(".localhost")).then_some("localhost address")
        }
    };
    match blocked {
        Some(why) if !allowed(config, &text) => Err(Refused::Blocked(why)),
        _ if !https && !config.allow_http => Err(Refused::Http),
        _ => Ok(parsed),
    }
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
                .filter(|a| open || blocked_range(a.ip()).is_none())
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
