//! Content digests (`sha256:<64 lowercase hex>`), the only algorithm
//! accepted: what a lock records, what every fetched byte is checked
//! against before it is kept.

use std::fmt;

use sha2::{Digest as _, Sha256};

/// A SHA-256 content digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest([u8; 32]);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest(Sha256::digest(bytes).into())
    }

    /// The digest whose SHA-256 output is `bytes` (a hash computed while
    /// streaming).
    pub fn from_bytes(bytes: [u8; 32]) -> Digest {
        Digest(bytes)
    }

    /// Parse `sha256:<64 hex>` (hex in either case; printed lowercase).
    ///
    /// # Errors
    ///
    /// Another algorithm, or not 64 hex digits.
    pub fn parse(text: &str) -> Result<Digest, String> {
        let Some(hex) = text.strip_prefix("sha256:") else {
            return Err(match text.split_once(':') {
                Some((algorithm, _)) => {
                    format!("the digest algorithm `{algorithm}` is not supported; only sha256 is")
                }
                None => format!("`{text}` is not a digest (sha256:<64 hex digits>)"),
            });
        };
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "`{text}` is not a digest: sha256 needs 64 hex digits"
            ));
        }
        let mut bytes = [0u8; 32];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
                .map_err(|_| format!("`{text}` is not a digest"))?;
        }
        Ok(Digest(bytes))
    }

    /// Whether `bytes` have this digest.
    pub fn matches(&self, bytes: &[u8]) -> bool {
        use subtle::ConstantTimeEq as _;
        Digest::of(bytes).0.ct_eq(&self.0).into()
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sha256:")?;
        self.0.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_round_trip_and_check_bytes() {
        let digest = Digest::of(b"hello");
        let text = digest.to_string();
        assert_eq!(
            text,
            "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert_eq!(
            Digest::parse(&text.to_uppercase().replace("SHA256", "sha256")),
            Ok(digest)
        );
        assert!(digest.matches(b"hello") && !digest.matches(b"hellO"));
        assert!(
            Digest::parse("sha512:00")
                .expect_err("algorithm")
                .contains("only sha256")
        );
        assert!(Digest::parse("sha256:abc").is_err());
        assert!(Digest::parse(&format!("sha256:{}", "g".repeat(64))).is_err());
        assert!(Digest::parse("nope").is_err());
    }
}
