//! The associated data a stored value is sealed with (see
//! [`BlobCodec`](graphloom_core::checkpoint::BlobCodec)): the row's kind and key, so a value
//! moved to another row does not decode.

/// Associated data of `parts`, each part length-prefixed so that parts containing
/// separators cannot be confused.
pub(crate) fn aad(parts: &[&str]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 4).sum());
    for part in parts {
        let len = u32::try_from(part.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(part.as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aad_parts_are_unambiguous() {
        assert_ne!(aad(&["a|b", "c"]), aad(&["a", "b|c"]));
        assert_ne!(aad(&["ab", ""]), aad(&["a", "b"]));
        assert_eq!(aad(&["x"]), [1, 0, 0, 0, b'x']);
    }
}
