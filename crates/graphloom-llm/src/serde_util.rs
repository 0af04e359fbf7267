//! Serde helpers for lenient wire types.

use serde::{Deserialize, Deserializer};

/// Deserialise `null` (or a missing field, with `#[serde(default)]`) as the type's default:
/// some compatible servers send `"choices": null` or `"prompt_tokens": null`.
pub(crate) fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}
