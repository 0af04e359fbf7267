//! Resolving delta-encoded channel values.

use super::{ChannelValue, Version};
use serde_json::Value;

/// A stored channel blob as a backend keeps it.
pub type StoredBlob = ChannelValue;

/// Why a channel's stored value could not be resolved: the stored chain is broken (a backend
/// reports it as a corrupt checkpoint).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// A version of the chain has no stored blob.
    #[error("channel `{channel}`: no stored value for version {version}")]
    Missing {
        /// The channel.
        channel: String,
        /// The version without a blob.
        version: Version,
    },
    /// An append links to a version that is not older than itself.
    #[error("channel `{channel}`: version {at} links forward to {base}")]
    LinksForward {
        /// The channel.
        channel: String,
        /// The appending version.
        at: Version,
        /// The version it names as its base.
        base: Version,
    },
    /// The chain does not end (a loop, or a million appends).
    #[error("channel `{channel}`: append chain too long")]
    TooLong {
        /// The channel.
        channel: String,
    },
    /// Items were appended to a value that is not a list.
    #[error("channel `{channel}`: appended to a value that is not a list")]
    NotAList {
        /// The channel.
        channel: String,
    },
}

/// Resolve the value of `channel` at `version` by following [`ChannelValue::Append`] links
/// back to a [`ChannelValue::Full`] blob. `lookup` returns the stored blob of a version.
///
/// # Errors
/// A [`ResolveError`] (for a corruption error) if a link is missing, loops, or the base is
/// not an array.
pub fn resolve_channel(
    channel: &str,
    version: &Version,
    mut lookup: impl FnMut(&Version) -> Option<StoredBlob>,
) -> Result<Value, ResolveError> {
    let mut tails: Vec<Vec<Value>> = Vec::new();
    let mut at = *version;
    let mut hops = 0usize;
    let base = loop {
        let blob = lookup(&at).ok_or_else(|| ResolveError::Missing {
            channel: channel.to_owned(),
            version: at,
        })?;
        match blob {
            ChannelValue::Full(v) => break v,
            ChannelValue::Items(items) => break super::items_to_json(&items),
            ChannelValue::Append { base, items } => {
                if base >= at {
                    return Err(ResolveError::LinksForward {
                        channel: channel.to_owned(),
                        at,
                        base,
                    });
                }
                tails.push(items);
                at = base;
            }
        }
        hops += 1;
        if hops > 1_000_000 {
            return Err(ResolveError::TooLong {
                channel: channel.to_owned(),
            });
        }
    };
    if tails.is_empty() {
        return Ok(base);
    }
    let Value::Array(mut items) = base else {
        return Err(ResolveError::NotAList {
            channel: channel.to_owned(),
        });
    };
    for tail in tails.into_iter().rev() {
        items.extend(tail);
    }
    Ok(Value::Array(items))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;

    fn v(n: u64) -> Version {
        Version { n, salt: 0 }
    }

    #[test]
    fn follows_append_chain() {
        let mut blobs = HashMap::new();
        blobs.insert(v(1), ChannelValue::Full(json!([1])));
        blobs.insert(
            v(2),
            ChannelValue::Append {
                base: v(1),
                items: vec![json!(2)],
            },
        );
        blobs.insert(
            v(3),
            ChannelValue::Append {
                base: v(2),
                items: vec![json!(3), json!(4)],
            },
        );
        let got = resolve_channel("c", &v(3), |ver| blobs.get(ver).cloned());
        assert_eq!(got, Ok(json!([1, 2, 3, 4])));
    }

    #[test]
    fn missing_or_bad_links_are_errors() {
        let mut blobs = HashMap::new();
        blobs.insert(
            v(2),
            ChannelValue::Append {
                base: v(1),
                items: vec![],
            },
        );
        assert!(resolve_channel("c", &v(2), |ver| blobs.get(ver).cloned()).is_err());
        blobs.insert(v(1), ChannelValue::Full(json!("s")));
        assert!(resolve_channel("c", &v(2), |ver| blobs.get(ver).cloned()).is_err());
        blobs.insert(
            v(3),
            ChannelValue::Append {
                base: v(3),
                items: vec![],
            },
        );
        assert!(resolve_channel("c", &v(3), |ver| blobs.get(ver).cloned()).is_err());
    }
}
