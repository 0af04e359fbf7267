//! [`Pii`]: find personal data (emails, card numbers passing the Luhn check, IP and MAC
//! addresses, URLs, or a pattern of yours) in the user's input, the model's output or
//! tool results, and block, redact, mask or hash it (LangChain's `PIIMiddleware`).
//!
//! | strategy | `alice@example.com` becomes |
//! |---|---|
//! | [`Redaction::Redact`] | `[REDACTED_EMAIL]` |
//! | [`Redaction::Mask`] | `alice@****.com` (cards `****-****-****-1111`, IPs `*.*.*.4`) |
//! | [`Redaction::Hash`] | `<email_hash:ff8d9819>` (first 8 hex digits of SHA-256) |
//! | [`Redaction::Block`] | the run fails with [`crate::Error::PiiDetected`] |
//!
//! The changed message replaces the original in the state (same id), so what the model
//! sees, what is stored and what streams carry afterwards are all redacted.

use super::{last_ai, Hook, HookFuture, HookResult, Hooks, Middleware};
use crate::create_agent::{AgentGraphState, AgentGraphUpdate};
use graphloom_core::{Message, MessageKind, NodeError, Runtime};
use regex::Regex;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::net::IpAddr;
use std::sync::Arc;

/// What to do with a match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Redaction {
    /// Fail the run.
    Block,
    /// Replace with `[REDACTED_<TYPE>]`.
    #[default]
    Redact,
    /// Keep the last characters only.
    Mask,
    /// Replace with `<type_hash:xxxxxxxx>`.
    Hash,
}

/// What to look for.
#[derive(Debug, Clone)]
pub enum PiiKind {
    /// Email addresses.
    Email,
    /// Card numbers (16 digits, optionally grouped by 4) that pass the Luhn check.
    CreditCard,
    /// IPv4 addresses.
    Ip,
    /// MAC addresses.
    MacAddress,
    /// URLs (with a scheme, or `www.`/with a path).
    Url,
    /// Anything matching a pattern of yours, reported under `name`.
    Custom {
        /// The type's name (`api_key`, ...).
        name: String,
        /// The pattern.
        pattern: Regex,
    },
}

impl PiiKind {
    /// A custom kind from a pattern.
    ///
    /// # Errors
    /// [`crate::Error::Pattern`] when the pattern does not compile.
    pub fn custom(name: impl Into<String>, pattern: &str) -> Result<Self, crate::Error> {
        let re = Regex::new(pattern).map_err(|source| crate::Error::Pattern {
            pattern: pattern.to_owned(),
            source,
        })?;
        Ok(Self::Custom {
            name: name.into(),
            pattern: re,
        })
    }
    /// The type's name (`email`, `credit_card`, `ip`, `mac_address`, `url`, or yours).
    #[must_use]
    pub fn name(&self) -> &str {
        match self {
            PiiKind::Email => "email",
            PiiKind::CreditCard => "credit_card",
            PiiKind::Ip => "ip",
            PiiKind::MacAddress => "mac_address",
            PiiKind::Url => "url",
            PiiKind::Custom { name, .. } => name,
        }
    }
}

/// A match: byte range and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PiiMatch {
    /// Start byte.
    pub start: usize,
    /// End byte.
    pub end: usize,
    /// The matched text.
    pub value: String,
}

struct Patterns {
    email: Regex,
    card: Regex,
    ip: Regex,
    mac: Regex,
    url_scheme: Regex,
    url_bare: Regex,
}

fn patterns() -> Result<Patterns, regex::Error> {
    Ok(Patterns {
        email: Regex::new(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z|]{2,}\b")?,
        card: Regex::new(r"\b\d{4}[\s-]?\d{4}[\s-]?\d{4}[\s-]?\d{4}\b")?,
        ip: Regex::new(r"\b(?:[0-9]{1,3}\.){3}[0-9]{1,3}\b")?,
        mac: Regex::new(r"\b(?:[0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}\b")?,
        url_scheme: Regex::new(r#"https?://[^\s<>"{}|\\^`\[\]]+"#)?,
        url_bare: Regex::new(
            r"\b(?:www\.)?[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)+(?:/[^\s]*)?",
        )?,
    })
}

/// The Luhn check of the digits of `s`.
#[must_use]
pub fn luhn(s: &str) -> bool {
    let digits: Vec<u32> = s.chars().filter_map(|c| c.to_digit(10)).collect();
    if digits.len() < 13 {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, d)| {
            if i % 2 == 1 {
                let x = d * 2;
                if x > 9 {
                    x - 9
                } else {
                    x
                }
            } else {
                *d
            }
        })
        .sum();
    sum % 10 == 0
}

/// Find, redact, mask or hash personal data; see the [module docs](self).
#[derive(Clone)]
#[must_use]
pub struct Pii {
    name: String,
    kind: PiiKind,
    strategy: Redaction,
    input: bool,
    output: bool,
    tool_results: bool,
    patterns: Option<Arc<Patterns>>,
}

impl std::fmt::Debug for Pii {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pii")
            .field("kind", &self.kind.name())
            .field("strategy", &self.strategy)
            .field("input", &self.input)
            .field("output", &self.output)
            .field("tool_results", &self.tool_results)
            .finish()
    }
}

impl Pii {
    /// Look for `kind` in the user's input, and `strategy` what is found.
    pub fn new(kind: PiiKind, strategy: Redaction) -> Self {
        Self {
            name: format!("PIIMiddleware[{}]", kind.name()),
            kind,
            strategy,
            input: true,
            output: false,
            tool_results: false,
            patterns: patterns().ok().map(Arc::new),
        }
    }
    /// Check the last user message before each model call (default on).
    pub fn on_input(mut self, on: bool) -> Self {
        self.input = on;
        self
    }
    /// Check the model's answer (default off).
    pub fn on_output(mut self, on: bool) -> Self {
        self.output = on;
        self
    }
    /// Check tool results before the model reads them (default off).
    pub fn on_tool_results(mut self, on: bool) -> Self {
        self.tool_results = on;
        self
    }

    /// The matches of this kind in `text`.
    #[must_use]
    pub fn detect(&self, text: &str) -> Vec<PiiMatch> {
        let Some(p) = &self.patterns else {
            return Vec::new();
        };
        let found = |re: &Regex| -> Vec<PiiMatch> {
            re.find_iter(text)
                .map(|m| PiiMatch {
                    start: m.start(),
                    end: m.end(),
                    value: m.as_str().to_owned(),
                })
                .collect()
        };
        match &self.kind {
            PiiKind::Email => found(&p.email),
            PiiKind::CreditCard => found(&p.card).into_iter().filter(|m| luhn(&m.value)).collect(),
            PiiKind::Ip => found(&p.ip)
                .into_iter()
                .filter(|m| m.value.parse::<IpAddr>().is_ok())
                .collect(),
            PiiKind::MacAddress => found(&p.mac),
            PiiKind::Url => {
                let mut out: Vec<PiiMatch> = found(&p.url_scheme);
                for m in found(&p.url_bare) {
                    let overlaps = out
                        .iter()
                        .any(|o| o.start <= m.start && m.start < o.end || o.start < m.end && m.end <= o.end);
                    if !overlaps && (m.value.contains('/') || m.value.starts_with("www.")) {
                        out.push(m);
                    }
                }
                out.sort_by_key(|m| m.start);
                out
            }
            PiiKind::Custom { pattern, .. } => found(pattern),
        }
    }

    fn replacement(&self, m: &PiiMatch) -> String {
        let ty = self.kind.name();
        match self.strategy {
            Redaction::Redact | Redaction::Block => format!("[REDACTED_{}]", ty.to_uppercase()),
            Redaction::Hash => {
                let digest = Sha256::digest(m.value.as_bytes());
                let hex: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
                format!("<{ty}_hash:{hex}>")
            }
            Redaction::Mask => mask(&self.kind, &m.value),
        }
    }

    /// `text` with every match replaced per the strategy (`Block` redacts).
    #[must_use]
    pub fn apply(&self, text: &str) -> String {
        let matches = self.detect(text);
        let mut out = text.to_owned();
        for m in matches.iter().rev() {
            out.replace_range(m.start..m.end, &self.replacement(m));
        }
        out
    }

    /// The message with its text content processed, or `None` when nothing matched.
    fn process(&self, m: &Message) -> Result<Option<Message>, NodeError> {
        let text = match &m.content {
            Value::String(s) => s.clone(),
            _ => m.text(),
        };
        let found = self.detect(&text);
        if found.is_empty() {
            return Ok(None);
        }
        if self.strategy == Redaction::Block {
            let message = format!(
                "Detected {} instance(s) of {} in text content",
                found.len(),
                self.kind.name()
            );
            return Err(
                NodeError::fatal(message.clone()).with_source(crate::Error::PiiDetected {
                    kind: self.kind.name().to_owned(),
                    count: found.len(),
                }),
            );
        }
        let mut out = m.clone();
        out.content = Value::String(self.apply(&text));
        Ok(Some(out))
    }
}

fn mask(kind: &PiiKind, value: &str) -> String {
    let last = |n: usize| -> String {
        let chars: Vec<char> = value.chars().collect();
        chars[chars.len().saturating_sub(n)..].iter().collect()
    };
    match kind {
        PiiKind::Email => match value.split_once('@') {
            Some((user, domain)) => match domain.rsplit_once('.') {
                Some((_, tld)) => format!("{user}@****.{tld}"),
                None => format!("{user}@****"),
            },
            None => "****".to_owned(),
        },
        PiiKind::CreditCard => {
            let digits: String = value.chars().filter(char::is_ascii_digit).collect();
            let tail: String = digits.chars().skip(digits.len().saturating_sub(4)).collect();
            let sep = if value.contains('-') {
                "-"
            } else if value.contains(' ') {
                " "
            } else {
                ""
            };
            if sep.is_empty() {
                format!("************{tail}")
            } else {
                format!("****{sep}****{sep}****{sep}{tail}")
            }
        }
        PiiKind::Ip => match value.rsplit('.').next() {
            Some(o) if value.split('.').count() == 4 => format!("*.*.*.{o}"),
            _ => "****".to_owned(),
        },
        PiiKind::MacAddress => {
            let s = if value.contains(':') { ":" } else { "-" };
            format!("**{s}**{s}**{s}**{s}**{s}{}", last(2))
        }
        PiiKind::Url => "[MASKED_URL]".to_owned(),
        PiiKind::Custom { .. } => {
            if value.chars().count() > 4 {
                format!("****{}", last(4))
            } else {
                "****".to_owned()
            }
        }
    }
}

impl Middleware for Pii {
    fn name(&self) -> &str {
        &self.name
    }
    fn hooks(&self) -> Hooks {
        let mut h = Hooks::none();
        if self.input || self.tool_results {
            h = h.with(Hook::BeforeModel);
        }
        if self.output {
            h = h.with(Hook::AfterModel);
        }
        h
    }
    fn check(&self, _agent: &super::AgentInfo<'_>) -> Result<(), crate::Error> {
        if self.patterns.is_none() {
            return Err(crate::Error::middleware(
                self.name(),
                "the built-in patterns do not compile",
            ));
        }
        Ok(())
    }
    fn before_model<'a>(&'a self, state: &'a AgentGraphState, _rt: &'a Runtime) -> HookFuture<'a> {
        Box::pin(async move {
            let mut changed = Vec::new();
            if self.input {
                let last_human = (0..state.messages.len())
                    .rev()
                    .filter_map(|i| state.messages.get(i))
                    .find(|m| m.kind == MessageKind::Human);
                if let Some(m) = last_human {
                    if let Some(new) = self.process(m)? {
                        changed.push(new);
                    }
                }
            }
            if self.tool_results {
                let from = last_ai(&state.messages).map_or(0, |(i, _)| i + 1);
                for m in state
                    .messages
                    .iter_from(from)
                    .filter(|m| m.kind == MessageKind::Tool)
                {
                    if let Some(new) = self.process(m)? {
                        changed.push(new);
                    }
                }
            }
            Ok(if changed.is_empty() {
                HookResult::none()
            } else {
                HookResult::update(AgentGraphUpdate::new().messages(changed))
            })
        })
    }
    fn after_model<'a>(&'a self, state: &'a AgentGraphState, _rt: &'a Runtime) -> HookFuture<'a> {
        Box::pin(async move {
            let Some((_, ai)) = last_ai(&state.messages) else {
                return Ok(HookResult::none());
            };
            Ok(match self.process(ai)? {
                Some(new) => HookResult::update(AgentGraphUpdate::new().messages(vec![new])),
                None => HookResult::none(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_and_rewrites_each_kind() {
        let email = Pii::new(PiiKind::Email, Redaction::Redact);
        assert_eq!(
            email.apply("mail alice@example.com now"),
            "mail [REDACTED_EMAIL] now"
        );
        let masked = Pii::new(PiiKind::Email, Redaction::Mask);
        assert_eq!(masked.apply("alice@example.com"), "alice@****.com");
        let hashed = Pii::new(PiiKind::Email, Redaction::Hash);
        let h = hashed.apply("alice@example.com");
        assert!(
            h.starts_with("<email_hash:") && h.len() == "<email_hash:12345678>".len(),
            "{h}"
        );
        assert_eq!(hashed.apply("alice@example.com"), h);

        let card = Pii::new(PiiKind::CreditCard, Redaction::Mask);
        assert_eq!(
            card.apply("card 4111-1111-1111-1111."),
            "card ****-****-****-1111."
        );
        // Fails the Luhn check: not a card.
        assert_eq!(
            card.apply("card 4111-1111-1111-1112."),
            "card 4111-1111-1111-1112."
        );
        assert_eq!(card.apply("4111111111111111"), "************1111");

        let ip = Pii::new(PiiKind::Ip, Redaction::Mask);
        assert_eq!(
            ip.apply("from 10.0.0.4 and 999.1.1.1"),
            "from *.*.*.4 and 999.1.1.1"
        );
        let mac = Pii::new(PiiKind::MacAddress, Redaction::Redact);
        assert_eq!(mac.apply("nic 00:1A:2b:3C:4d:5E"), "nic [REDACTED_MAC_ADDRESS]");
        let url = Pii::new(PiiKind::Url, Redaction::Mask);
        assert_eq!(
            url.apply("see https://x.io/a and www.y.com and example.com"),
            "see [MASKED_URL] and [MASKED_URL] and example.com"
        );
        let key = Pii::new(
            PiiKind::custom("api_key", r"sk-[a-z0-9]{8}").unwrap(),
            Redaction::Mask,
        );
        assert_eq!(key.apply("key sk-abcd1234"), "key ****1234");
        assert!(PiiKind::custom("bad", "(").is_err());
    }
}
