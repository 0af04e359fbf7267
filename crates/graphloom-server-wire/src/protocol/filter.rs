//! What a stream or a subscription asks for: channels, namespace prefixes and a depth
//! ([`Filter`]), matched against [`Event`]s as the client matches them.

use super::{Event, Method, ProtocolError};
use serde_json::Value;

/// Most channels, namespaces or namespace segments one filter may name.
const MAX_ITEMS: usize = 256;

/// A channel a client subscribes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Channel {
    /// `values`.
    Values,
    /// `updates`.
    Updates,
    /// `messages`.
    Messages,
    /// `tools`.
    Tools,
    /// `lifecycle`.
    Lifecycle,
    /// `input` (`input.requested`).
    Input,
    /// `checkpoints`.
    Checkpoints,
    /// `tasks`.
    Tasks,
    /// `custom`: every custom event, named or not.
    Custom,
    /// `custom:<name>`: custom events of one name.
    CustomNamed(String),
}

impl Channel {
    /// Read a channel name.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "values" => Self::Values,
            "updates" => Self::Updates,
            "messages" => Self::Messages,
            "tools" => Self::Tools,
            "lifecycle" => Self::Lifecycle,
            "input" => Self::Input,
            "checkpoints" => Self::Checkpoints,
            "tasks" => Self::Tasks,
            "custom" => Self::Custom,
            other => Self::CustomNamed(other.strip_prefix("custom:")?.to_owned()),
        })
    }
}

/// Channels, namespace prefixes and depth: the events a stream or subscription delivers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    /// The channels.
    pub channels: Vec<Channel>,
    /// Namespace prefixes (`None`: every namespace).
    pub namespaces: Option<Vec<Vec<String>>>,
    /// How deep below a prefix (`None`: any depth).
    pub depth: Option<usize>,
}

impl Filter {
    /// A filter for these channels, every namespace, any depth.
    #[must_use]
    pub fn channels(channels: Vec<Channel>) -> Self {
        Self {
            channels,
            namespaces: None,
            depth: None,
        }
    }

    /// Read `{"channels": [..], "namespaces"?: [[..]], "depth"?: n}`.
    ///
    /// # Errors
    /// `channels` missing, empty or naming an unknown channel; `namespaces` not a list of
    /// lists of strings; `depth` not a non-negative integer; more than 256 of anything.
    pub fn parse(v: &Value) -> Result<Self, ProtocolError> {
        let list = v
            .get("channels")
            .and_then(Value::as_array)
            .filter(|l| !l.is_empty())
            .ok_or_else(|| ProtocolError::invalid("channels must be a non-empty list of channel names."))?;
        if list.len() > MAX_ITEMS {
            return Err(ProtocolError::invalid(format!("at most {MAX_ITEMS} channels")));
        }
        let mut channels = Vec::with_capacity(list.len());
        let mut unknown = Vec::new();
        for c in list {
            match c.as_str().and_then(Channel::parse) {
                Some(ch) => channels.push(ch),
                None => unknown.push(c.to_string()),
            }
        }
        if !unknown.is_empty() {
            return Err(ProtocolError::invalid(format!(
                "channels contains unsupported entries: {}. Allowed: values, updates, messages, tools, custom, lifecycle, input, checkpoints, tasks, or any `custom:<name>`.",
                unknown.join(", ")
            )));
        }
        let namespaces = match v.get("namespaces") {
            None | Some(Value::Null) => None,
            Some(Value::Array(list)) if list.len() <= MAX_ITEMS => {
                let mut out = Vec::with_capacity(list.len());
                for ns in list {
                    out.push(namespace(ns).ok_or_else(|| {
                        ProtocolError::invalid("namespaces must be a list of namespaces (lists of strings).")
                    })?);
                }
                Some(out)
            }
            Some(_) => {
                return Err(ProtocolError::invalid(
                    "namespaces must be a list of at most 256 namespaces (lists of strings).",
                ))
            }
        };
        let depth = match v.get("depth") {
            None | Some(Value::Null) => None,
            Some(d) => Some(
                d.as_u64()
                    .and_then(|d| usize::try_from(d).ok())
                    .ok_or_else(|| ProtocolError::invalid("depth must be a non-negative integer."))?,
            ),
        };
        Ok(Self {
            channels,
            namespaces,
            depth,
        })
    }

    /// Whether the filter delivers `ev`, by the client's rules: its channel is asked for
    /// (`custom` takes every custom event, `custom:<name>` those named so), and its
    /// namespace starts with one of the prefixes (a prefix segment without `:` also
    /// matches a segment that adds `:<id>` to it), at most `depth` below it.
    #[must_use]
    pub fn matches(&self, ev: &Event) -> bool {
        self.wants_channel(ev) && self.wants_namespace(&ev.namespace)
    }

    fn wants_channel(&self, ev: &Event) -> bool {
        let want = |c: &Channel| self.channels.contains(c);
        match ev.method {
            Method::Values => want(&Channel::Values),
            Method::Updates => want(&Channel::Updates),
            Method::Messages => want(&Channel::Messages),
            Method::Tools => want(&Channel::Tools),
            Method::Lifecycle => want(&Channel::Lifecycle),
            Method::InputRequested => want(&Channel::Input),
            Method::Checkpoints => want(&Channel::Checkpoints),
            Method::Tasks => want(&Channel::Tasks),
            Method::Custom => {
                want(&Channel::Custom)
                    || ev
                        .data
                        .get("name")
                        .and_then(Value::as_str)
                        .is_some_and(|n| want(&Channel::CustomNamed(n.to_owned())))
            }
        }
    }

    fn wants_namespace(&self, ns: &[String]) -> bool {
        match &self.namespaces {
            None => self.depth.is_none_or(|d| ns.len() <= d),
            Some(prefixes) if prefixes.is_empty() => self.depth.is_none_or(|d| ns.len() <= d),
            Some(prefixes) => prefixes
                .iter()
                .any(|p| is_prefix(p, ns) && self.depth.is_none_or(|d| ns.len() - p.len() <= d)),
        }
    }
}

/// A namespace: a list of strings.
fn namespace(v: &Value) -> Option<Vec<String>> {
    let list = v.as_array().filter(|l| l.len() <= MAX_ITEMS)?;
    list.iter().map(|s| s.as_str().map(str::to_owned)).collect()
}

/// Whether `prefix` starts `ns`: segments equal, or a prefix segment without `:` equal to
/// the part of the namespace's segment before its `:`.
fn is_prefix(prefix: &[String], ns: &[String]) -> bool {
    prefix.len() <= ns.len()
        && prefix.iter().zip(ns).all(|(p, s)| {
            p == s || (!p.contains(':') && s.split_once(':').is_some_and(|(name, _)| name == p))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(method: Method, ns: &[&str], data: Value) -> Event {
        Event {
            seq: 0,
            event_id: String::new(),
            method,
            namespace: ns.iter().map(|s| (*s).to_owned()).collect(),
            node: None,
            timestamp: 0,
            data: data.into(),
        }
    }

    #[test]
    fn channels_namespaces_and_depth_select_events() {
        let f = Filter::parse(&json!({"channels": ["values", "input"]})).unwrap();
        assert!(f.matches(&ev(Method::Values, &["sub:1"], json!({}))));
        assert!(f.matches(&ev(Method::InputRequested, &[], json!({}))));
        assert!(!f.matches(&ev(Method::Messages, &[], json!({}))));

        let f = Filter::parse(&json!({"channels": ["values"], "namespaces": [["sub"]], "depth": 1})).unwrap();
        assert!(f.matches(&ev(Method::Values, &["sub:1"], json!({}))));
        assert!(f.matches(&ev(Method::Values, &["sub:1", "inner:2"], json!({}))));
        assert!(!f.matches(&ev(Method::Values, &["sub:1", "inner:2", "x:3"], json!({}))));
        assert!(!f.matches(&ev(Method::Values, &[], json!({}))));
        assert!(!f.matches(&ev(Method::Values, &["other:1"], json!({}))));

        let f = Filter::parse(&json!({"channels": ["messages"], "depth": 1})).unwrap();
        assert!(f.matches(&ev(Method::Messages, &["a:1"], json!({}))));
        assert!(!f.matches(&ev(Method::Messages, &["a:1", "b:2"], json!({}))));

        let f = Filter::parse(&json!({"channels": ["custom:progress"]})).unwrap();
        assert!(f.matches(&ev(
            Method::Custom,
            &[],
            json!({"name": "progress", "payload": 1})
        )));
        assert!(!f.matches(&ev(Method::Custom, &[], json!({"payload": 1}))));
        let f = Filter::parse(&json!({"channels": ["custom"]})).unwrap();
        assert!(f.matches(&ev(
            Method::Custom,
            &[],
            json!({"name": "progress", "payload": 1})
        )));
    }

    #[test]
    fn bad_filters_say_what_is_wrong() {
        for bad in [
            json!({}),
            json!({"channels": []}),
            json!({"channels": ["values", "bogus"]}),
            json!({"channels": ["values"], "namespaces": "x"}),
            json!({"channels": ["values"], "namespaces": [[1]]}),
            json!({"channels": ["values"], "depth": -1}),
        ] {
            let e = Filter::parse(&bad).unwrap_err();
            assert_eq!(e.code, super::super::ErrorCode::InvalidArgument, "{bad}");
        }
        let e = Filter::parse(&json!({"channels": ["bogus"]})).unwrap_err();
        assert!(e.message.contains("bogus"), "{}", e.message);
    }
}
