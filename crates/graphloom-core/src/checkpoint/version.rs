//! Channel versions.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A channel version: a counter that grows along one line of history, plus a salt that
/// differs between runs, so that two forks of one thread writing "version 5" of a channel
/// never share a stored blob. Ordered by counter, then salt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Version {
    /// Grows by one each time the channel is written.
    pub n: u64,
    /// Distinguishes versions written by different runs.
    pub salt: u64,
}

impl Version {
    /// The version after this one, tagged with `salt`.
    #[must_use]
    pub fn next(self, salt: u64) -> Self {
        Self { n: self.n + 1, salt }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Zero-padded so that string order is version order (backends compare the text).
        write!(f, "{:012}.{:08x}", self.n, self.salt)
    }
}

/// A string that is not a [`Version`] (`<counter>.<salt in hex>`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad version `{0}`")]
pub struct ParseVersionError(String);

impl std::str::FromStr for Version {
    type Err = ParseVersionError;
    fn from_str(s: &str) -> Result<Self, ParseVersionError> {
        let bad = || ParseVersionError(s.to_owned());
        let (n, salt) = s.split_once('.').ok_or_else(bad)?;
        Ok(Self {
            n: n.parse().map_err(|_| bad())?,
            salt: u64::from_str_radix(salt, 16).map_err(|_| bad())?,
        })
    }
}

impl Serialize for Version {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_form_round_trips_and_sorts() {
        let a = Version { n: 5, salt: 0xabc };
        let b = a.next(1);
        assert_eq!(a.to_string().parse::<Version>(), Ok(a));
        assert!(a < b && a.to_string() < b.to_string());
        assert_eq!(Version { n: 12, salt: 0xab }.to_string(), "000000000012.000000ab");
        assert!(
            Version {
                n: 9,
                salt: 0xffff_ffff
            }
            .to_string()
                < Version { n: 10, salt: 0 }.to_string()
        );
        assert!("x".parse::<Version>().is_err());
    }
}
