//! How backends turn checkpoint parts into bytes and back: JSON, optionally sealed with
//! AES-256-GCM (feature `encryption`).
//!
//! Decoding never instantiates anything but the declared type, so a tampered row cannot run
//! code; it can only fail to decode, which backends report as a corruption error naming the
//! row. With encryption on, every row carries the `json+aes256gcm` tag and a plaintext row is
//! refused (no silent downgrade); the caller's `aad` (e.g. thread, namespace, channel,
//! version) is authenticated, so a sealed value moved to another row does not decode.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt;
#[cfg(feature = "encryption")]
use std::sync::Arc;

/// Tag of a plain JSON row.
pub const TAG_JSON: &str = "json";
/// Tag of an AES-256-GCM sealed JSON row (12-byte nonce, then ciphertext and tag).
pub const TAG_SEALED: &str = "json+aes256gcm";

/// Why a value could not be encoded, or a stored row decoded. Messages say what is wrong
/// without echoing the data.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The value does not serialise.
    #[error("cannot encode: {0}")]
    Encode(#[source] serde_json::Error),
    /// Sealing failed.
    #[error("cannot encrypt")]
    Encrypt,
    /// A plaintext row, while encryption is on (no silent downgrade).
    #[error("plaintext row refused: encryption is on")]
    PlaintextRefused,
    /// A tag this codec does not know.
    #[error("unknown encoding `{0}`")]
    UnknownEncoding(String),
    /// The bytes are not the JSON of the declared type.
    #[error("does not decode: {0}")]
    Decode(#[source] serde_json::Error),
    /// A sealed row, and no key to open it.
    #[error("row is encrypted; configure the key to read it")]
    NoKey,
    /// A sealed row, in a build without the `encryption` feature.
    #[error("row is encrypted; build with the `encryption` feature and configure the key")]
    EncryptionNotBuilt,
    /// A sealed row shorter than its nonce.
    #[error("sealed row too short")]
    TooShort,
    /// A sealed row that does not authenticate.
    #[error("sealed row does not authenticate (wrong key, tampered, or moved)")]
    NotAuthentic,
}

/// Encodes and decodes stored values.
#[derive(Clone, Default)]
pub struct BlobCodec {
    #[cfg(feature = "encryption")]
    cipher: Option<Arc<aes_gcm::Aes256Gcm>>,
}

impl fmt::Debug for BlobCodec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlobCodec")
            .field("encrypted", &self.is_encrypted())
            .finish()
    }
}

impl BlobCodec {
    /// Plain JSON.
    #[must_use]
    pub fn plain() -> Self {
        Self::default()
    }

    /// JSON sealed with AES-256-GCM under `key`. Rows written without encryption are refused.
    #[cfg(feature = "encryption")]
    #[must_use]
    pub fn encrypted(key: &[u8; 32]) -> Self {
        use aes_gcm::KeyInit;
        Self {
            cipher: Some(Arc::new(aes_gcm::Aes256Gcm::new(key.into()))),
        }
    }

    /// Whether values are sealed.
    #[must_use]
    pub fn is_encrypted(&self) -> bool {
        #[cfg(feature = "encryption")]
        {
            self.cipher.is_some()
        }
        #[cfg(not(feature = "encryption"))]
        {
            false
        }
    }

    /// Encode `value`; returns the tag to store with the bytes.
    ///
    /// # Errors
    /// When the value does not serialise or sealing fails.
    pub fn encode<T: Serialize + ?Sized>(
        &self,
        value: &T,
        aad: &[u8],
    ) -> Result<(&'static str, Vec<u8>), CodecError> {
        let json = serde_json::to_vec(value).map_err(CodecError::Encode)?;
        #[cfg(feature = "encryption")]
        if let Some(cipher) = &self.cipher {
            use aes_gcm::aead::{Aead, AeadCore, Payload};
            let nonce = aes_gcm::Aes256Gcm::generate_nonce(&mut aes_gcm::aead::OsRng);
            let sealed = cipher
                .encrypt(&nonce, Payload { msg: &json, aad })
                .map_err(|_| CodecError::Encrypt)?;
            let mut out = nonce.to_vec();
            out.extend(sealed);
            return Ok((TAG_SEALED, out));
        }
        let _ = aad;
        Ok((TAG_JSON, json))
    }

    /// Decode bytes stored with `tag`.
    ///
    /// # Errors
    /// What is wrong with the row, without echoing its data.
    pub fn decode<T: DeserializeOwned>(&self, tag: &str, bytes: &[u8], aad: &[u8]) -> Result<T, CodecError> {
        let json: std::borrow::Cow<'_, [u8]> = match tag {
            TAG_JSON => {
                if self.is_encrypted() {
                    return Err(CodecError::PlaintextRefused);
                }
                std::borrow::Cow::Borrowed(bytes)
            }
            TAG_SEALED => std::borrow::Cow::Owned(self.open(bytes, aad)?),
            other => return Err(CodecError::UnknownEncoding(other.to_owned())),
        };
        serde_json::from_slice(&json).map_err(CodecError::Decode)
    }

    #[cfg(feature = "encryption")]
    fn open(&self, bytes: &[u8], aad: &[u8]) -> Result<Vec<u8>, CodecError> {
        use aes_gcm::aead::{Aead, Payload};
        let cipher = self.cipher.as_ref().ok_or(CodecError::NoKey)?;
        if bytes.len() < 12 {
            return Err(CodecError::TooShort);
        }
        let (nonce, sealed) = bytes.split_at(12);
        cipher
            .decrypt(aes_gcm::Nonce::from_slice(nonce), Payload { msg: sealed, aad })
            .map_err(|_| CodecError::NotAuthentic)
    }

    #[cfg(not(feature = "encryption"))]
    fn open(&self, _bytes: &[u8], _aad: &[u8]) -> Result<Vec<u8>, CodecError> {
        Err(CodecError::EncryptionNotBuilt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn plain_round_trip_and_bad_rows() {
        let c = BlobCodec::plain();
        let (tag, bytes) = c.encode(&json!({"a": 1}), b"").unwrap();
        assert_eq!(tag, TAG_JSON);
        assert_eq!(c.decode::<Value>(tag, &bytes, b"").unwrap(), json!({"a": 1}));
        assert!(c.decode::<Value>(TAG_JSON, b"{not json", b"").is_err());
        assert!(c.decode::<Value>("pickle", b"x", b"").is_err());
        assert!(c.decode::<Value>(TAG_SEALED, b"0123456789abcdef", b"").is_err());
    }

    #[cfg(feature = "encryption")]
    #[test]
    fn sealed_round_trip_refuses_plaintext_wrong_key_and_moved_rows() {
        let c = BlobCodec::encrypted(&[7u8; 32]);
        let (tag, bytes) = c.encode(&json!([1, 2]), b"row-1").unwrap();
        assert_eq!(tag, TAG_SEALED);
        assert!(!bytes.windows(5).any(|w| w == b"[1,2]"));
        assert_eq!(c.decode::<Value>(tag, &bytes, b"row-1").unwrap(), json!([1, 2]));
        assert!(
            c.decode::<Value>(tag, &bytes, b"row-2").is_err(),
            "moved row must not decode"
        );
        assert!(BlobCodec::encrypted(&[8u8; 32])
            .decode::<Value>(tag, &bytes, b"row-1")
            .is_err());
        let (ptag, pbytes) = BlobCodec::plain().encode(&json!(1), b"").unwrap();
        let err = c.decode::<Value>(ptag, &pbytes, b"").unwrap_err();
        assert!(err.to_string().contains("plaintext row refused"));
        assert!(BlobCodec::plain().decode::<Value>(tag, &bytes, b"row-1").is_err());
        let mut flipped = bytes.clone();
        if let Some(last) = flipped.last_mut() {
            *last ^= 1;
        }
        assert!(c.decode::<Value>(tag, &flipped, b"row-1").is_err());
    }
}
