//! The keys of cosign signatures: the public keys artifacts are checked
//! against (`--key`, `[install] keys`, a `[[sources]]` entry's `keys`) and
//! the private key `toolcage publish --sign KEY` signs with. The only
//! module that reads PEM or DER; `signature` sees [`PublicKey`] and
//! [`SigningKey`] alone. Pure but for [`read_public_key`], which reads the
//! file it is given (at most 64 KiB).
//!
//! Read:
//! - a public key: a `PUBLIC KEY` PEM block (cosign.pub, `openssl pkey
//!   -pubout`) holding a DER SubjectPublicKeyInfo of an ECDSA P-256 or
//!   P-384 key with an uncompressed point;
//! - a private key: an unencrypted PKCS#8 `PRIVATE KEY` PEM block of an
//!   ECDSA P-256 key that carries its public key (`openssl genpkey
//!   -algorithm EC -pkeyopt ec_paramgen_curve:P-256`).
//!
//! Either way the first PEM block that is not `EC PARAMETERS` is the one
//! read.
//!
//! Invariants: the DER is read whole and strictly (every length checked
//! before it is used, nothing after the key), so no input panics; a key's
//! [`PublicKey::id`] comes from its DER alone, so it names the same key in
//! every report; a PEM label from a key file reaches a message only through
//! `outbound::quoted` (truncated, escaped); a [`SigningKey`]'s `Debug`
//! shows its public key only (ring's).
//!
//! Refused, each with what to use instead: RSA keys and curves other than
//! P-256 and P-384; Ed25519 keys, which cosign signs with as Ed25519ph and
//! ring does not verify; certificates (keyless signing is not supported;
//! the key in one can be taken out with `openssl x509`); private keys that
//! are SEC1, encrypted, cosign's own `cosign.key`, or not P-256.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ring::error::Unspecified;
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_ASN1, ECDSA_P256_SHA256_ASN1_SIGNING, ECDSA_P384_SHA256_ASN1,
    ECDSA_P384_SHA384_ASN1, EcdsaKeyPair, EcdsaVerificationAlgorithm, KeyPair as _, Signature,
    UnparsedPublicKey,
};

use super::digest::Digest;
use crate::outbound::quoted as shown;

const OID_EC: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
const OID_ED25519: &[u8] = &[0x2b, 0x65, 0x70];
const OID_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
/// A P-256 SubjectPublicKeyInfo up to its 65-byte point.
const P256_SPKI_PREFIX: &[u8] = &[
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];
/// Private key PEM labels not read, and what to do instead.
const PRIVATE_HINTS: &[(&str, &str)] = &[
    (
        "EC PRIVATE KEY",
        "a SEC1 key: convert it with `openssl pkcs8 -topk8 -nocrypt -in KEY`",
    ),
    (
        "ENCRYPTED PRIVATE KEY",
        "encrypted: decrypt it with `openssl pkcs8 -in KEY`",
    ),
    ("ENCRYPTED SIGSTORE PRIVATE KEY", COSIGN_KEY_HINT),
    ("ENCRYPTED COSIGN PRIVATE KEY", COSIGN_KEY_HINT),
];
const COSIGN_KEY_HINT: &str = "a cosign.key, which cosign cannot export: make a key with \
    `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`, and \
    `cosign import-key-pair --key KEY` makes a cosign.key of it";

/// A public key signatures are checked against: ECDSA P-256 or P-384.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    /// P-384, else P-256.
    p384: bool,
    /// The uncompressed point, `04 || X || Y`.
    point: Vec<u8>,
    id: String,
}

impl PublicKey {
    /// Read a `PUBLIC KEY` PEM block (cosign.pub, `openssl pkey -pubout`).
    ///
    /// # Errors
    ///
    /// No such block, or an algorithm not supported (with what to use).
    pub fn from_pem(text: &str) -> Result<PublicKey, String> {
        match pem_block(text) {
            Some(("PUBLIC KEY", body)) => PublicKey::from_spki(&decode_pem(&body)?),
            Some(("CERTIFICATE", _)) => {
                Err("a certificate: take its key with `openssl x509 -pubkey -noout`".into())
            }
            Some((label, _)) => Err(format!("a {} PEM block is not a public key", shown(label))),
            None => Err("no `-----BEGIN PUBLIC KEY-----` block found".into()),
        }
    }

    /// A short, stable name for reports: `sha256:` and 16 hex digits of the
    /// SHA-256 of its DER (a sigstore key hint is the base64 of all of it).
    pub fn id(&self) -> &str {
        &self.id
    }

    fn from_spki(der: &[u8]) -> Result<PublicKey, String> {
        let bad = || Err("the public key is not a DER SubjectPublicKeyInfo".to_owned());
        let Some((0x30, spki, [])) = tlv(der) else {
            return bad();
        };
        let Some((0x30, algorithm, rest)) = tlv(spki) else {
            return bad();
        };
        let (Some((0x06, oid, parameters)), Some((0x03, [0, point @ ..], []))) =
            (tlv(algorithm), tlv(rest))
        else {
            return bad();
        };
        let p384 = match (oid, tlv(parameters)) {
            (OID_EC, Some((0x06, OID_P256, []))) => false,
            (OID_EC, Some((0x06, OID_P384, []))) => true,
            (OID_EC, _) => return Err("the EC key's curve is not P-256 or P-384".into()),
            (OID_ED25519, _) => {
                return Err("Ed25519 keys are not supported (cosign signs with \
                 them as Ed25519ph); use an ECDSA P-256 key"
                    .into());
            }
            (OID_RSA, _) => {
                return Err("RSA keys are not supported; use an ECDSA P-256 key \
                 (as `cosign generate-key-pair` makes)"
                    .into());
            }
            _ => return Err("the public key is not an ECDSA key".into()),
        };
        if point.len() != if p384 { 97 } else { 65 } || point.first() != Some(&4) {
            return Err("the EC public key is not an uncompressed point".into());
        }
        let mut id = Digest::of(der).to_string();
        id.truncate("sha256:".len() + 16);
        Ok(PublicKey {
            p384,
            point: point.to_vec(),
            id,
        })
    }

    /// Whether DER `signature` signs `message`. P-384 is tried with SHA-384
    /// and SHA-256: cosign's verifiers default to either, by path.
    pub(super) fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        let algorithms: &[&'static EcdsaVerificationAlgorithm] = if self.p384 {
            &[&ECDSA_P384_SHA384_ASN1, &ECDSA_P384_SHA256_ASN1]
        } else {
            &[&ECDSA_P256_SHA256_ASN1]
        };
        algorithms.iter().any(|algorithm| {
            let key = UnparsedPublicKey::new(*algorithm, &self.point);
            key.verify(message, signature).is_ok()
        })
    }
}

/// Read the public key file at `path` ([`PublicKey::from_pem`]).
///
/// # Errors
///
/// It cannot be read, or is not a key toolcage checks with.
pub fn read_public_key(path: &Path) -> Result<PublicKey, String> {
    // A PEM public key is a few hundred bytes; a bigger file is a mistake.
    const MAX_KEY_FILE: u64 = 64 * 1024;
    let bytes = super::capped::read_capped(path, MAX_KEY_FILE, "it is not a public key")?
        .ok_or("cannot read it: there is no such file")?;
    let text = String::from_utf8(bytes).map_err(|_| "it is not PEM text".to_owned())?;
    PublicKey::from_pem(&text)
}

/// A private key to sign with: ECDSA P-256, cosign's default.
#[derive(Debug)]
pub struct SigningKey {
    pair: EcdsaKeyPair,
    public: PublicKey,
}

impl SigningKey {
    /// Read an unencrypted PKCS#8 `PRIVATE KEY` PEM block, as `openssl
    /// genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256` writes.
    ///
    /// # Errors
    ///
    /// Another format or algorithm, with how to get the right one.
    pub fn from_pem(text: &str) -> Result<SigningKey, String> {
        let der = match pem_block(text) {
            Some(("PRIVATE KEY", body)) => decode_pem(&body)?,
            Some((label, _)) => {
                return Err(
                    match PRIVATE_HINTS.iter().find(|(known, _)| *known == label) {
                        Some((_, hint)) => format!("the key is {hint}"),
                        None => format!("a {} PEM block is not a `PRIVATE KEY`", shown(label)),
                    },
                );
            }
            None => return Err("no `-----BEGIN PRIVATE KEY-----` block found".into()),
        };
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &der, &SystemRandom::new())
                .map_err(|why| format!("the key is not P-256 PKCS#8 with its public key ({why})"))?;
        let spki = [P256_SPKI_PREFIX, pair.public_key().as_ref()].concat();
        let public = PublicKey::from_spki(&spki)?;
        Ok(SigningKey { pair, public })
    }

    /// Its public key.
    pub fn public(&self) -> &PublicKey {
        &self.public
    }

    /// The DER ECDSA P-256 SHA-256 signature of `message`.
    pub(super) fn sign(&self, message: &[u8]) -> Result<Signature, Unspecified> {
        self.pair.sign(&SystemRandom::new(), message)
    }
}

/// The label and body of the first PEM block that is not curve parameters
/// (`openssl ecparam -genkey` writes those first).
fn pem_block(text: &str) -> Option<(&str, String)> {
    let mut lines = text.lines().map(str::trim);
    while let Some(line) = lines.next() {
        let label = line
            .strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"));
        let Some(label) = label else { continue };
        let end = format!("-----END {label}-----");
        let body = lines.by_ref().take_while(|line| *line != end).collect();
        if label != "EC PARAMETERS" {
            return Some((label, body));
        }
    }
    None
}

fn decode_pem(body: &str) -> Result<Vec<u8>, String> {
    STANDARD
        .decode(body)
        .map_err(|error| format!("the PEM block is not base64: {error}"))
}

/// One DER element: its tag, contents, and what follows (lengths up to two
/// bytes, which any key here fits).
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = match first {
        0..=0x7f => (usize::from(first), rest),
        0x81 => rest
            .split_first()
            .map(|(&len, rest)| (usize::from(len), rest))?,
        0x82 => rest
            .split_first_chunk()
            .map(|(len, rest)| (usize::from(u16::from_be_bytes(*len)), rest))?,
        _ => return None,
    };
    let (contents, rest) = rest.split_at_checked(len)?;
    Some((tag, contents, rest))
}

#[cfg(test)]
pub(super) mod tests {
    //! The test key pair and [`public`] are `signature`'s test fixtures too.

    use super::*;

    // Made by `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`.
    pub(in crate::source) const KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgyNWx2bCC9BycU5uD
y7dIaD55ipxIqdXrDyThIvH5kyGhRANCAAT2WlLMtV2PDtlkzHdZnU0tsRVZZ7V/
b6iFpMkgRvR9YQnV/dLW7a/tFUZlpctAs97osapvnZyb827cRUDSqZkA
-----END PRIVATE KEY-----";
    pub(in crate::source) const PUB: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE9lpSzLVdjw7ZZMx3WZ1NLbEVWWe1
f2+ohaTJIEb0fWEJ1f3S1u2v7RVGZaXLQLPe6LGqb52cm/Nu3EVA0qmZAA==
-----END PUBLIC KEY-----";

    pub(in crate::source) fn public(pem: &str) -> PublicKey {
        PublicKey::from_pem(pem).expect("a public key")
    }

    #[test]
    fn keys_are_read_by_algorithm_with_hints() {
        // `openssl genpkey` P-384, and a payload signed by `openssl dgst
        // -sha384` and `-sha256` (cosign verifies P-384 either way).
        let p384 = public(
            "-----BEGIN PUBLIC KEY-----
MHYwEAYHKoZIzj0CAQYFK4EEACIDYgAEw1BOdofg42sjQYWL7Cu7Gnwl4sZyUDve
KVfz1Ap8Y346oJX7afKg0PGZfkN9aWnk7CRzjtUXwRl1s59+YxSvRA/XWIt5/1q6
AaG32qSNeCnHZw8es7OhTd2RXxKthTUL
-----END PUBLIC KEY-----",
        );
        let subject = format!("sha256:{}", "ab".repeat(32));
        let payload = format!(
            r#"{{"critical":{{"identity":{{"docker-reference":"example.test/tools/echo"}},"image":{{"docker-manifest-digest":"{subject}"}},"type":"cosign container image signature"}},"optional":null}}"#
        );
        for signature in [
            "MGUCMQCOIs6WN6SlFd/CUEaM8vZ8hP+s33ASMC8e6qcAqVrLHPEUzXk0+EppKoTzJb3oP+4CMGg6rfqSdPIp7pvxwY4tbgn6YMzkUNblo5ghjM0YHF7ipohqyyN28G2sX+PLWoz7cQ==",
            "MGUCMEamdmBFeDVd6BMPL13f4lWleJx130Blp20FLGpUl157dM+lw8tsCda1zl9bgUwHDgIxAL5WwWu5Gh5PMJ1r4/hKyeWS1lrXRX0X3yZxE9azV1U+o0H+fsUOgvOwaFm2aybbTQ==",
        ] {
            let signature = STANDARD.decode(signature).expect("base64");
            assert!(p384.verifies(payload.as_bytes(), &signature));
        }
        let file = std::env::temp_dir().join(format!("toolcage-key-{}.pub", std::process::id()));
        std::fs::write(&file, PUB).expect("a temp file");
        assert_eq!(read_public_key(&file), Ok(public(PUB)));
        std::fs::remove_file(&file).expect("removed");
        assert!(
            read_public_key(&file)
                .expect_err("gone")
                .contains("cannot read it")
        );
        let pem = |label: &str, body: &str| {
            format!("-----BEGIN {label}-----\n{body}\n-----END {label}-----")
        };
        // As `openssl genpkey -algorithm ED25519` and `openssl ecparam -genkey` write them.
        let ed25519 = pem(
            "PUBLIC KEY",
            "MCowBQYDK2VwAyEAZxc5818cVBR9DtJkkeyuTuK3YxUjd3NeVjB8v43lXkQ=",
        );
        let sec1 = format!(
            "{}\n{}",
            pem("EC PARAMETERS", "BggqhkjOPQMBBw=="),
            pem("EC PRIVATE KEY", "MHcCAQ==")
        );
        for (text, why) in [
            (ed25519, "Ed25519ph"),
            (pem("PUBLIC KEY", "MAA="), "not a DER SubjectPublicKeyInfo"),
            (pem("PUBLIC KEY", "!"), "not base64"),
            (pem("CERTIFICATE", "AA=="), "openssl x509 -pubkey"),
            (
                KEY.to_owned(),
                "`PRIVATE KEY` PEM block is not a public key",
            ),
            ("hello".to_owned(), "no `-----BEGIN PUBLIC KEY"),
        ] {
            let error = PublicKey::from_pem(&text).expect_err(&text);
            assert!(error.contains(why), "{why}: {error}");
        }
        for (text, why) in [
            (sec1, "openssl pkcs8 -topk8 -nocrypt"),
            (
                pem("ENCRYPTED SIGSTORE PRIVATE KEY", "e30="),
                "cosign import-key-pair",
            ),
            (pem("ENCRYPTED PRIVATE KEY", "e30="), "decrypt it"),
            (PUB.to_owned(), "is not a `PRIVATE KEY`"),
            (pem("PRIVATE KEY", "MAA="), "not P-256 PKCS#8"),
        ] {
            let error = SigningKey::from_pem(&text).expect_err(&text);
            assert!(error.contains(why), "{why}: {error}");
        }
    }

    #[test]
    fn no_input_panics() {
        for text in [PUB, KEY] {
            for end in (0..text.len()).filter(|end| text.is_char_boundary(*end)) {
                let cut = &text[..end];
                let _ = (PublicKey::from_pem(cut), SigningKey::from_pem(cut));
            }
        }
        let der = decode_pem(&pem_block(PUB).expect("a block").1).expect("base64");
        for end in 0..der.len() {
            assert!(PublicKey::from_spki(&der[..end]).is_err());
        }
    }
}
