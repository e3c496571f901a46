//! Cosign signatures of OCI artifacts: checked offline against the
//! operator's public keys before an artifact is installed, and made for
//! `toolcage publish --sign KEY`. Pure: `keys` reads the keys, the
//! registry client fetches and pushes; this module decides, and writes the
//! bytes to push.
//!
//! Read, the two layouts `cosign sign --key` writes:
//! - simple signing (cosign 2; 3 with `--new-bundle-format=false`): a
//!   manifest tagged [`signature_tag`], one layer per signature, each blob a
//!   payload naming the manifest digest, each [`SIGNATURE_ANNOTATION`] the
//!   base64 DER ECDSA signature of exactly that blob: [`layers_of`], then
//!   [`verify`]. [`sign`] writes it.
//! - the sigstore bundle (cosign 3's default): a referrer of the manifest
//!   (referrers API, else the index tagged [`referrers_tag`]:
//!   [`bundle_referrers`]) whose one layer ([`layers_of`]) is a bundle; its
//!   DSSE envelope signs an in-toto statement with predicate
//!   [`SIGN_PREDICATE`] and the manifest digest as subject:
//!   [`verify_bundles`].
//!
//! Invariants: a signature is checked before the bytes it covers are
//! parsed; every input is capped before it is read, then parsed strictly;
//! no input panics; text from an artifact reaches a message only through
//! `outbound::quoted` (truncated, escaped).
//!
//! Deliberately not done: transparency log entries and timestamps are not
//! checked; trust rests on the configured keys alone, as `cosign verify
//! --key K --insecure-ignore-tlog` (offline, no trust root to keep fresh).
//! Keyless (certificate) signatures are refused, and so are keys other
//! than ECDSA P-256 and P-384, when `keys` reads them.
//! The payload's `docker-reference` is returned, not required to match:
//! mirrors and relocation rewrite it, and cosign does not check it either;
//! [`same_repository`] tells the caller whether to report a mismatch.

use std::collections::HashMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use serde::de::IgnoredAny;

use super::digest::Digest;
use super::keys::{PublicKey, SigningKey};
use super::manifest::{Descriptor, MAX_MANIFEST_BYTES, RawDescriptor};
use crate::outbound::quoted as shown;

/// The media type of a simple-signing layer.
pub const SIMPLESIGNING_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding a simple-signing layer's signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The artifact type of a cosign 3 bundle referrer, and its layer's type.
pub const BUNDLE_TYPE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
/// The in-toto predicate of a cosign 3 image signature.
pub const SIGN_PREDICATE: &str = "https://sigstore.dev/cosign/sign/v1";
/// Largest payload read: cosign's is about 250 bytes, plus the signer's
/// `-a key=value` annotations.
pub const MAX_PAYLOAD_BYTES: u64 = 64 * 1024;
/// Largest bundle read: a key-signed one with a log entry is about 4 KiB.
pub const MAX_BUNDLE_BYTES: u64 = 256 * 1024;
/// Most signatures considered per artifact: each is a blob to fetch, and a
/// `.sig` manifest grows by a layer per `cosign sign`.
pub const MAX_SIGNATURES: usize = 64;

/// `critical.type` of a simple-signing payload.
const PAYLOAD_TYPE: &str = "cosign container image signature";
/// The DSSE payload type of an in-toto statement.
const IN_TOTO_TYPE: &str = "application/vnd.in-toto+json";
/// How every sigstore bundle media type starts (v0.1 to v0.3).
const BUNDLE_PREFIX: &str = "application/vnd.dev.sigstore.bundle";
/// The artifact type go-containerregistry's fallback index records for a
/// cosign bundle: its config's media type.
const EMPTY_TYPE: &str = "application/vnd.oci.empty.v1+json";
/// A DER P-384 signature is at most 104 bytes; this is ample.
const MAX_SIGNATURE_B64: usize = 1024;
/// Signatures tried per DSSE envelope (cosign writes one).
const MAX_ENVELOPE_SIGNATURES: usize = 4;

/// The tag of the simple-signing manifest of `manifest`: `sha256-<hex>.sig`.
pub fn signature_tag(manifest: &Digest) -> String {
    format!("{}.sig", referrers_tag(manifest))
}

/// The fallback referrers tag of `manifest`, `sha256-<hex>`: the index a
/// registry without the referrers API serves instead.
pub fn referrers_tag(manifest: &Digest) -> String {
    manifest.to_string().replacen(':', "-", 1)
}

/// A simple-signing layer the registry client fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureLayer {
    /// Its blob: the signed payload.
    pub payload: Vec<u8>,
    /// Its [`SIGNATURE_ANNOTATION`].
    pub signature_b64: String,
}

/// Whether an artifact is signed by a configured key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A signature checks.
    Signed {
        /// [`PublicKey::id`] of the key.
        key_id: String,
        /// The repository the signer named (simple signing; a bundle names
        /// only the digest): see [`same_repository`].
        docker_reference: Option<String>,
    },
    /// None does: why each failed.
    Invalid(String),
}

/// What `toolcage publish --sign` pushes: the two blobs, then the manifest
/// (`application/vnd.oci.image.manifest.v1+json`) at [`signature_tag`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    /// The payload blob, the manifest's one layer.
    pub payload: Vec<u8>,
    /// Its signature, as in the layer's annotation.
    pub signature_b64: String,
    /// The config blob.
    pub config_json: Vec<u8>,
    /// The manifest.
    pub manifest_json: Vec<u8>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawManifest {
    schema_version: Option<u32>,
    #[serde(default)]
    layers: Vec<RawDescriptor>,
    #[serde(default)]
    manifests: Vec<RawDescriptor>,
}

fn read_manifest(body: &[u8], what: &str) -> Result<RawManifest, String> {
    if body.len() > MAX_MANIFEST_BYTES {
        return Err(format!("the {what} is over {MAX_MANIFEST_BYTES} bytes"));
    }
    let raw: RawManifest = parse(body, &format!("the {what}"))?;
    match raw.schema_version {
        Some(2) => Ok(raw),
        _ => Err(format!("the {what} is not schema version 2")),
    }
}

/// The signature layers of a `.sig` manifest or of a bundle referrer, each
/// with its [`SIGNATURE_ANNOTATION`]: the simple-signing layers (which have
/// one, unless unsigned) and bundle layers (which do not); others skipped.
/// Fetch each blob checked against its descriptor.
///
/// # Errors
///
/// Not a manifest, over [`MAX_SIGNATURES`] layers, a signature layer over
/// its size cap, or no signature layer.
pub fn layers_of(signature_manifest: &[u8]) -> Result<Vec<(Descriptor, Option<String>)>, String> {
    let layers = read_manifest(signature_manifest, "signature manifest")?.layers;
    if layers.len() > MAX_SIGNATURES {
        let n = layers.len();
        return Err(format!(
            "the signature manifest has {n} layers, over the cap of {MAX_SIGNATURES}"
        ));
    }
    let mut found = Vec::new();
    for (n, raw) in (1..).zip(&layers) {
        let cap = match raw.media_type.as_str() {
            SIMPLESIGNING_TYPE => MAX_PAYLOAD_BYTES,
            other if other.starts_with(BUNDLE_PREFIX) => MAX_BUNDLE_BYTES,
            _ => continue,
        };
        let layer = raw
            .check("signature layer")
            .map_err(|why| format!("layer {n}: {why}"))?;
        if layer.size > cap {
            return Err(format!(
                "layer {n} is {} bytes, over the cap of {cap}",
                layer.size
            ));
        }
        found.push((layer, raw.annotations.get(SIGNATURE_ANNOTATION).cloned()));
    }
    if found.is_empty() {
        return Err("the signature manifest has no signature layer".into());
    }
    Ok(found)
}

/// The manifests of a referrers index (the referrers API's answer, or the
/// index at [`referrers_tag`]) that may be bundles: of type
/// [`BUNDLE_TYPE`], of none, or of the empty config's (as the fallback
/// index records cosign's).
///
/// # Errors
///
/// Not an index, or over [`MAX_SIGNATURES`] entries.
pub fn bundle_referrers(index: &[u8]) -> Result<Vec<Digest>, String> {
    let manifests = read_manifest(index, "referrers index")?.manifests;
    if manifests.len() > MAX_SIGNATURES {
        let n = manifests.len();
        return Err(format!(
            "the referrers index lists {n} manifests, over the cap of {MAX_SIGNATURES}"
        ));
    }
    let bundle = |m: &&RawDescriptor| {
        matches!(
            m.artifact_type.as_deref(),
            None | Some(BUNDLE_TYPE | EMPTY_TYPE)
        )
    };
    manifests
        .iter()
        .filter(bundle)
        .map(|m| Ok(m.check("referrer")?.digest))
        .collect()
}

/// Whether any one of `layers` is a valid simple signature of
/// `manifest_digest` by any one of `keys`.
pub fn verify(keys: &[PublicKey], manifest_digest: &Digest, layers: &[SignatureLayer]) -> Verdict {
    judge(keys, layers, |layer| {
        verify_simple(keys, manifest_digest, &layer.payload, &layer.signature_b64)
    })
}

/// Whether any one of `bundles` (the layers of the referrers
/// [`bundle_referrers`] lists) is a valid signature of `manifest_digest` by
/// any one of `keys`.
pub fn verify_bundles(
    keys: &[PublicKey],
    manifest_digest: &Digest,
    bundles: &[Vec<u8>],
) -> Verdict {
    judge(keys, bundles, |bundle| {
        let key_id = verify_bundle(keys, manifest_digest, bundle)?;
        Ok((key_id, None))
    })
}

/// The verdict on `signatures`, each checked by `check` (key id and named
/// reference, or why not) until one passes.
fn judge<T>(
    keys: &[PublicKey],
    signatures: &[T],
    check: impl Fn(&T) -> Result<(String, Option<String>), String>,
) -> Verdict {
    if keys.is_empty() {
        return Verdict::Invalid("no public keys are configured to check signatures".into());
    }
    if signatures.is_empty() {
        return Verdict::Invalid("the artifact is not signed (no signature found)".into());
    }
    if signatures.len() > MAX_SIGNATURES {
        let n = signatures.len();
        return Verdict::Invalid(format!("{n} signatures, over the cap of {MAX_SIGNATURES}"));
    }
    let mut reasons = Vec::new();
    for (n, signature) in (1..).zip(signatures) {
        match check(signature) {
            Ok((key_id, docker_reference)) => {
                return Verdict::Signed {
                    key_id,
                    docker_reference,
                };
            }
            Err(why) => reasons.push(format!("signature {n}: {why}")),
        }
    }
    let more = reasons.len().saturating_sub(4);
    reasons.truncate(4);
    if more > 0 {
        reasons.push(format!("and {more} more"));
    }
    Verdict::Invalid(format!("no valid signature: {}", reasons.join("; ")))
}

// A simple-signing payload; unknown fields refused, as the containers
// signature format requires of `critical`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Payload {
    critical: Critical,
    #[serde(rename = "optional")]
    _optional: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Critical {
    identity: Identity,
    image: Image,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Identity {
    docker_reference: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Image {
    docker_manifest_digest: String,
}

/// The key id and docker reference of a valid simple signature.
fn verify_simple(
    keys: &[PublicKey],
    digest: &Digest,
    payload: &[u8],
    signature_b64: &str,
) -> Result<(String, Option<String>), String> {
    if payload.len() as u64 > MAX_PAYLOAD_BYTES {
        return Err(format!("its payload is over {MAX_PAYLOAD_BYTES} bytes"));
    }
    let key = signed_by(keys, payload, [signature_b64])?;
    let parsed: Payload = parse(payload, "its payload")?;
    let Critical {
        identity,
        image,
        kind,
    } = parsed.critical;
    if kind != PAYLOAD_TYPE {
        return Err(format!(
            "its payload's type is {}, not `{PAYLOAD_TYPE}`",
            shown(&kind)
        ));
    }
    if Digest::parse(&image.docker_manifest_digest).as_ref() != Ok(digest) {
        return Err(format!(
            "it signs {}, not {digest}",
            shown(&image.docker_manifest_digest)
        ));
    }
    Ok((key.id().to_owned(), Some(identity.docker_reference)))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Bundle {
    media_type: String,
    dsse_envelope: Option<Envelope>,
    message_signature: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    payload: String,
    payload_type: String,
    signatures: Vec<EnvelopeSignature>,
}

#[derive(Deserialize)]
struct EnvelopeSignature {
    sig: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Statement {
    #[serde(rename = "_type")]
    kind: String,
    subject: Vec<Subject>,
    predicate_type: String,
}

#[derive(Deserialize)]
struct Subject {
    digest: HashMap<String, String>,
}

/// The key id of a valid bundle.
fn verify_bundle(keys: &[PublicKey], digest: &Digest, bundle: &[u8]) -> Result<String, String> {
    if bundle.len() as u64 > MAX_BUNDLE_BYTES {
        return Err(format!("the bundle is over {MAX_BUNDLE_BYTES} bytes"));
    }
    let parsed: Bundle = parse(bundle, "the bundle")?;
    if !parsed.media_type.starts_with(BUNDLE_PREFIX) {
        return Err(format!(
            "the bundle's type is {}",
            shown(&parsed.media_type)
        ));
    }
    let envelope = match (parsed.dsse_envelope, parsed.message_signature) {
        (Some(envelope), _) => envelope,
        (None, Some(_)) => return Err("the bundle signs a blob (`cosign sign-blob`)".into()),
        (None, None) => return Err("the bundle holds no DSSE envelope".into()),
    };
    if envelope.payload_type != IN_TOTO_TYPE {
        let kind = shown(&envelope.payload_type);
        return Err(format!(
            "the envelope's payload is {kind}, not `{IN_TOTO_TYPE}`"
        ));
    }
    let statement = STANDARD
        .decode(&envelope.payload)
        .map_err(|error| format!("the envelope's payload is not base64: {error}"))?;
    // DSSE signs its pre-authentication encoding, not the payload alone.
    let header = format!(
        "DSSEv1 {} {IN_TOTO_TYPE} {} ",
        IN_TOTO_TYPE.len(),
        statement.len()
    );
    let signatures = envelope.signatures.iter().take(MAX_ENVELOPE_SIGNATURES);
    let texts = signatures.map(|signature| signature.sig.as_str());
    let key = signed_by(keys, &[header.as_bytes(), &statement].concat(), texts)?;
    let statement: Statement = parse(&statement, "the statement")?;
    if !statement.kind.starts_with("https://in-toto.io/Statement/") {
        return Err(format!(
            "the statement's type is {}",
            shown(&statement.kind)
        ));
    }
    if statement.predicate_type != SIGN_PREDICATE {
        let predicate = shown(&statement.predicate_type);
        return Err(format!(
            "the statement's predicate is {predicate}, not `{SIGN_PREDICATE}`"
        ));
    }
    let names = |subject: &Subject| {
        let hex = subject.digest.get("sha256");
        hex.map(|hex| Digest::parse(&format!("sha256:{hex}"))) == Some(Ok(*digest))
    };
    if !statement.subject.iter().any(names) {
        return Err(format!("the statement does not name {digest}"));
    }
    Ok(key.id().to_owned())
}

/// The first of `keys` that one of `signatures` (base64 DER) signs
/// `message` with.
fn signed_by<'k, 's>(
    keys: &'k [PublicKey],
    message: &[u8],
    signatures: impl IntoIterator<Item = &'s str>,
) -> Result<&'k PublicKey, String> {
    // Why the last signature could not even be tried, if it could not.
    let mut unusable = None;
    for text in signatures {
        if text.is_empty() {
            unusable = Some("it carries no signature".to_owned());
            continue;
        }
        if text.len() > MAX_SIGNATURE_B64 {
            let n = text.len();
            unusable = Some(format!("its signature is {n} characters, too long for one"));
            continue;
        }
        // Go's base64 decoder, cosign's, skips line breaks; some tools wrap.
        let text: String = text.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
        match STANDARD.decode(&text) {
            Ok(signature) => match keys.iter().find(|key| key.verifies(message, &signature)) {
                Some(key) => return Ok(key),
                None => unusable = None,
            },
            Err(error) => unusable = Some(format!("its signature is not base64: {error}")),
        }
    }
    Err(unusable.unwrap_or_else(|| {
        let ids: Vec<&str> = keys.iter().map(PublicKey::id).collect();
        format!("no configured key verifies it (tried {})", ids.join(", "))
    }))
}

/// Sign `manifest_digest` as the artifact at `docker_reference`
/// (`registry/repository`, what cosign names) in the simple-signing
/// layout, byte for byte as cosign writes it.
///
/// # Errors
///
/// A reference with characters no OCI reference has; a failed signing.
pub fn sign(
    key: &SigningKey,
    docker_reference: &str,
    manifest_digest: &Digest,
) -> Result<Signed, String> {
    // So it needs no JSON escaping, which Go and serde_json do differently.
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._-/:@".contains(c);
    let length = 1..=1024;
    if !length.contains(&docker_reference.len()) || !docker_reference.chars().all(allowed) {
        return Err(format!(
            "{} is not a registry/repository",
            shown(docker_reference)
        ));
    }
    let payload = format!(
        r#"{{"critical":{{"identity":{{"docker-reference":"{docker_reference}"}},"image":{{"docker-manifest-digest":"{manifest_digest}"}},"type":"{PAYLOAD_TYPE}"}},"optional":null}}"#
    )
    .into_bytes();
    let signature = key.sign(&payload);
    let signature_b64 = STANDARD.encode(signature.map_err(|_| "signing failed")?.as_ref());
    let layer = Digest::of(&payload);
    // go-containerregistry's config of the empty image with a layer added.
    let config_json = format!(
        r#"{{"architecture":"","created":"0001-01-01T00:00:00Z","history":[{{"created":"0001-01-01T00:00:00Z"}}],"os":"","rootfs":{{"type":"layers","diff_ids":["{layer}"]}},"config":{{}}}}"#
    )
    .into_bytes();
    let (config_size, config) = (config_json.len(), Digest::of(&config_json));
    let manifest_json = format!(
        r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","size":{config_size},"digest":"{config}"}},"layers":[{{"mediaType":"{SIMPLESIGNING_TYPE}","size":{},"digest":"{layer}","annotations":{{"{SIGNATURE_ANNOTATION}":"{signature_b64}"}}}}]}}"#,
        payload.len()
    )
    .into_bytes();
    Ok(Signed {
        payload,
        signature_b64,
        config_json,
        manifest_json,
    })
}

/// Whether a payload's `docker_reference` (`registry/repository`, maybe
/// with a tag or digest) names `repository` at `registry`.
pub fn same_repository(docker_reference: &str, registry: &str, repository: &str) -> bool {
    let name = docker_reference
        .split_once('@')
        .map_or(docker_reference, |(name, _)| name);
    let name = match name.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => name,
        _ => name,
    };
    let host = |host: &str| {
        let host = host.to_ascii_lowercase();
        if host == "docker.io" {
            "index.docker.io".to_owned()
        } else {
            host
        }
    };
    let split = name.split_once('/');
    split.is_some_and(|(named, path)| host(named) == host(registry) && path == repository)
}

/// `bytes` as JSON of type `T`, or why not.
fn parse<'a, T: Deserialize<'a>>(bytes: &'a [u8], what: &str) -> Result<T, String> {
    let error =
        |error: serde_json::Error| format!("{what} does not parse: {}", shown(&error.to_string()));
    serde_json::from_slice(bytes).map_err(error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::keys::tests::{KEY, PUB, public};

    // Genuine cosign v3.0.4 output, classic layout (`cosign sign --key …
    // --tlog-upload=false`), from tobby-fetch/tobby-fetch,
    // internal/sigverify/cosign_compat_test.go.
    const COSIGN_PUB: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEA9oFvTJJuu0cszKBsiuqfFYN3NLV
meleaASYW5l+nqDxoUg4f8177owlgVD89pZQ9jUxP8dbibmDJpvcjBo9RQ==
-----END PUBLIC KEY-----";
    const COSIGN_MANIFEST: &str = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","size":233,"digest":"sha256:2122b6ad0794d3fdae43a4b477cf1d95d4a38d3c5f10631e199676039b876e37"},"layers":[{"mediaType":"application/vnd.dev.cosign.simplesigning.v1+json","size":245,"digest":"sha256:3a29d26a2fc848d25ccf9c2288194ca90599e70ef69087644f186e5e7331f28b","annotations":{"dev.cosignproject.cosign/signature":"MEUCIEB+pz4s+9yxG+Om/bukeAfwloKFEISUhxLvIYlP02P8AiEAz1oNkilC+cprxcrEHqN0vxM+zvP34ikHFzi8e7Sevls="}}]}"#;
    const COSIGN_PAYLOAD: &str = r#"{"critical":{"identity":{"docker-reference":"localhost:15381/tobby/fixture"},"image":{"docker-manifest-digest":"sha256:f20c43161d73848408ef247f0ec7111b19fe58ffebc0cbcaa0d2c8bda4967268"},"type":"cosign container image signature"},"optional":null}"#;
    const COSIGN_SUBJECT: &str =
        "sha256:f20c43161d73848408ef247f0ec7111b19fe58ffebc0cbcaa0d2c8bda4967268";

    // Genuine cosign v3.0.4 output, bundle layout, as the registry served
    // it: tobby-fetch/tobby-fetch, internal/sigverify/testdata/ (bundle-
    // cosign.pub, -referrers-index.json, -referring-manifest.json, -sigstore.json).
    const BUNDLE_PUB: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEsL6GJsyjiA16JAsOHk/4vtCk8/zx
NFa7+v2fVC812/3EINipjpuksf5IhY8dR17Lnc3M2tFZ97ZIb4zb7Ai2LQ==
-----END PUBLIC KEY-----";
    const BUNDLE_INDEX: &str = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","size":875,"digest":"sha256:aa34dbe1db5336a0a85e4cc7eced2f5dc91f0062322972fe29c4002372a7adff","artifactType":"application/vnd.oci.empty.v1+json"}]}"#;
    const BUNDLE_MANIFEST: &str = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.empty.v1+json","size":2,"digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","artifactType":"application/vnd.dev.sigstore.bundle.v0.3+json"},"layers":[{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","size":4037,"digest":"sha256:adbf6372367b1d18204f9a60675cdd31c26e60b5cb664b937a69c448cfab6512"}],"annotations":{"dev.sigstore.bundle.content":"dsse-envelope","dev.sigstore.bundle.predicateType":"https://sigstore.dev/cosign/sign/v1","org.opencontainers.image.created":"2026-08-12T20:53:28Z"},"subject":{"mediaType":"application/vnd.oci.image.index.v1+json","size":928,"digest":"sha256:d7d5640c741c60b47fa4b5530daa20a6469b55754a89dd42adbadadb59f9093c"},"artifactType":"application/vnd.dev.sigstore.bundle.v0.3+json"}"#;
    const BUNDLE: &str = r#"{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"publicKey":{"hint":"98n9we7FWgY2iBPaTrUAKorkXZduZLcsRIaF6c81jQc="},"tlogEntries":[{"logIndex":"2440595631","logId":{"keyId":"wNI9atQGlz+VWfO6LRygH4QUfY/8W4RFwiT5i5WRgB0="},"kindVersion":{"kind":"dsse","version":"0.0.1"},"integratedTime":"1786568008","inclusionPromise":{"signedEntryTimestamp":"MEMCIFsMRKGEZvk7ojDx/xpDqT7M9+031WOK6rJxKmzyFZ2FAh87h/C8aDw7bXMWelHoOYfk8nlmI5Saz0qyQWyv3clm"},"inclusionProof":{"logIndex":"2318691369","rootHash":"hwcwBBW6MQNmyTciBYvkr3JAtJGIofFKCwl8h3J5H9s=","treeSize":"2318691384","hashes":["4vfJHohZ9efqlsnaIdUAFjIWtK/NL3+1AOIKZSoyXO0=","boCrTkreZmmZNe9p37pFPx77EQ2YOHk8Y+UdJQk/5KE=","gErNd68aP/x6TB59bEE7Cfr5S6z/n+uxDwWMhc0F5ms=","Z554W1PJGKeh0uGPVR7WBnKHfbsxbLWmTaFfzCxJpIw=","slbHD6PaSmsIKBvqMZoTlyDyAUFP6WkTuN0m3CwF3BY=","XSsXZJFOEjBmGuP/Jctj6Y052jU2aq+TOUOP7E6st4g=","hsAm5XMTIhqoVrzAYtASd0MA9GjeF2nGbw4OAs7YRoM=","YzfhurOruoLw7QtFXol9ZgUSTPHZ/SNOPhtrddYAVng=","ZbDzyBrZbKwIghjLy/hqXem7q0bmtEq32Nnmdm+n6YI=","dGbXqPIRS6cpCT2qH0XkNbyUnM0x0MpeHWGxlHxQsWc=","NWTCEkdkY4mmIzciQAsPsU/n+9Uk6kWG+k6LO6Z9ifE=","t0mkaxQ4fw9aKmIfYOnoyfYFOplQHNdkgJcfamLv1ys=","XSxOwG3OOcLZKmz63eZsCs2meyCMl1YtmU2DNsxBM5Q=","mYkFdqU5C9m3w88wTn9l6UpYo+PI93c232s+vBiBEpM=","ygTG08vB2EEmJQPXRvF5H06Tlac72AkODENK7PhCPkw=","xH/DCseLHr9eKoYT8qsORZK7zVdEGYWHuVtsVrD95wY="],"checkpoint":{"envelope":"rekor.sigstore.dev - 1193050959916656506\n2318691384\nhwcwBBW6MQNmyTciBYvkr3JAtJGIofFKCwl8h3J5H9s=\n\n— rekor.sigstore.dev wNI9ajBFAiBge9N03mbhKUVcgIdLWwoX4m1PZ/orIqtbyKiNjmt0swIhALkwliL6OREmx1Q7kWLgAQjSGQ4weZ0A+FBnZvf4y/Lr\n"}},"canonicalizedBody":"eyJhcGlWZXJzaW9uIjoiMC4wLjEiLCJraW5kIjoiZHNzZSIsInNwZWMiOnsiZW52ZWxvcGVIYXNoIjp7ImFsZ29yaXRobSI6InNoYTI1NiIsInZhbHVlIjoiZGVmOWFmMzY3MGMzNWQ3OTVlY2Q4ZjJjYWJmODgyMTU3NTAwYWI1YjU0NGFjMTY2MDc3Yjc4ZTIzMWQ2MzhmNSJ9LCJwYXlsb2FkSGFzaCI6eyJhbGdvcml0aG0iOiJzaGEyNTYiLCJ2YWx1ZSI6ImRlZjE3Y2NiY2ZjMjViNGQ0ZGFiMzA1MWRjYTk2YmYwZDQ1YWNmYjM0OTc4ZWYzNTA3NWNhZTE1NjdjMDYwYzQifSwic2lnbmF0dXJlcyI6W3sic2lnbmF0dXJlIjoiTUVVQ0lIK2QyMmh5bkFSdTBCZ3MxdTk4a2pXMXFIUW1vMWtHa3JvM1E3aC90bDdUQWlFQXg4c0g2UVZnZjFic3BidjJvM3dBckw4TWxYRnI5Um1WR2RTNVhiM0JDWXM9IiwidmVyaWZpZXIiOiJMUzB0TFMxQ1JVZEpUaUJRVlVKTVNVTWdTMFZaTFMwdExTMEtUVVpyZDBWM1dVaExiMXBKZW1vd1EwRlJXVWxMYjFwSmVtb3dSRUZSWTBSUlowRkZjMHcyUjBwemVXcHBRVEUyU2tGelQwaHJMelIyZEVOck9DOTZlQXBPUm1FM0szWXlabFpET0RFeUx6TkZTVTVwY0dwd2RXdHpaalZKYUZrNFpGSXhOMHh1WXpOTk1uUkdXamszV2tsaU5IcGlOMEZwTWt4UlBUMEtMUzB0TFMxRlRrUWdVRlZDVEVsRElFdEZXUzB0TFMwdENnPT0ifV19fQ=="}],"timestampVerificationData":{"rfc3161Timestamps":[{"signedTimestamp":"MIICyjADAgEAMIICwQYJKoZIhvcNAQcCoIICsjCCAq4CAQMxDTALBglghkgBZQMEAgEwgbcGCyqGSIb3DQEJEAEEoIGnBIGkMIGhAgEBBgkrBgEEAYO/MAIwMTANBglghkgBZQMEAgEFAAQgeMi42gxlishYWq/oUSlb6NT8/HU72HrvNcksOrPIyY4CFF0lZ2IGEYshtj9fcG+dztAAg+WNGA8yMDI2MDgxMjIwNTMyOFowAwIBAaAypDAwLjEVMBMGA1UEChMMc2lnc3RvcmUuZGV2MRUwEwYDVQQDEwxzaWdzdG9yZS10c2GgADGCAdwwggHYAgEBMFEwOTEVMBMGA1UEChMMc2lnc3RvcmUuZGV2MSAwHgYDVQQDExdzaWdzdG9yZS10c2Etc2VsZnNpZ25lZAIUOhNULwyQYe68wUMvy4qOiyojiwwwCwYJYIZIAWUDBAIBoIH8MBoGCSqGSIb3DQEJAzENBgsqhkiG9w0BCRABBDAcBgkqhkiG9w0BCQUxDxcNMjYwODEyMjA1MzI4WjAvBgkqhkiG9w0BCQQxIgQgCKVP/c0/svdQaZTDA9DBOJoLlxLM1UzHuzuAQFvdUTQwgY4GCyqGSIb3DQEJEAIvMX8wfTB7MHkEIIX5J7wHq2LKw7RDVsEO/IGyxog/2nq55thw2dE6zQW3MFUwPaQ7MDkxFTATBgNVBAoTDHNpZ3N0b3JlLmRldjEgMB4GA1UEAxMXc2lnc3RvcmUtdHNhLXNlbGZzaWduZWQCFDoTVC8MkGHuvMFDL8uKjosqI4sMMAoGCCqGSM49BAMCBGgwZgIxAIWJlSxLcIz/N6hycUqx283FCUrzFHu/fWg0QRX9544qyXEDJu7bXstNYmrSbtRUzwIxAI0guAxAaUmTKSzqJsV5SJeeenQMniXgt3eG3/U3qkqYko59PPg44FVEfQRm+sMOWA=="}]}},"dsseEnvelope":{"payload":"eyJfdHlwZSI6Imh0dHBzOi8vaW4tdG90by5pby9TdGF0ZW1lbnQvdjEiLCJzdWJqZWN0IjpbeyJkaWdlc3QiOnsic2hhMjU2IjoiZDdkNTY0MGM3NDFjNjBiNDdmYTRiNTUzMGRhYTIwYTY0NjliNTU3NTRhODlkZDQyYWRiYWRhZGI1OWY5MDkzYyJ9LCJhbm5vdGF0aW9ucyI6e319XSwicHJlZGljYXRlVHlwZSI6Imh0dHBzOi8vc2lnc3RvcmUuZGV2L2Nvc2lnbi9zaWduL3YxIn0=","payloadType":"application/vnd.in-toto+json","signatures":[{"sig":"MEUCIH+d22hynARu0Bgs1u98kjW1qHQmo1kGkro3Q7h/tl7TAiEAx8sH6QVgf1bspbv2o3wArL8MlXFr9RmVGdS5Xb3BCYs="}]}}"#;
    const BUNDLE_SUBJECT: &str =
        "sha256:d7d5640c741c60b47fa4b5530daa20a6469b55754a89dd42adbadadb59f9093c";

    fn digest(text: &str) -> Digest {
        Digest::parse(text).expect("a digest")
    }

    fn simple(payload: &str, signature_b64: &str) -> SignatureLayer {
        let (payload, signature_b64) = (payload.into(), signature_b64.into());
        SignatureLayer {
            payload,
            signature_b64,
        }
    }

    /// `payload` signed by the test key.
    fn signed(payload: &str) -> SignatureLayer {
        let key = SigningKey::from_pem(KEY).expect("the test key");
        let signature = key.sign(payload.as_bytes());
        simple(payload, &STANDARD.encode(signature.expect("signs")))
    }

    /// The payload cosign writes.
    fn payload(digest: &str, kind: &str) -> String {
        format!(
            r#"{{"critical":{{"identity":{{"docker-reference":"r.test/t"}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"{kind}"}},"optional":null}}"#
        )
    }

    fn refusal(keys: &[PublicKey], subject: &str, layers: &[SignatureLayer]) -> String {
        match verify(keys, &digest(subject), layers) {
            Verdict::Invalid(why) => why,
            signed => panic!("expected a refusal, got {signed:?}"),
        }
    }

    fn signer(keys: &[PublicKey], subject: &str, layers: &[SignatureLayer]) -> PublicKey {
        match verify(keys, &digest(subject), layers) {
            Verdict::Signed { key_id, .. } => {
                let key = keys.iter().find(|key| key.id() == key_id);
                key.expect("a configured key").clone()
            }
            Verdict::Invalid(why) => panic!("expected a signature: {why}"),
        }
    }

    #[test]
    fn what_sign_writes_is_cosigns_layout_and_verifies() {
        let key = SigningKey::from_pem(KEY).expect("the test key");
        assert_eq!(key.public(), &public(PUB));
        let subject = digest(COSIGN_SUBJECT);
        assert_eq!(
            signature_tag(&subject),
            format!("sha256-{}.sig", &COSIGN_SUBJECT[7..])
        );
        let out = sign(&key, "localhost:15381/tobby/fixture", &subject).expect("signs");
        // Cosign's bytes for the same reference and digest, bar the signature.
        assert_eq!(out.payload, COSIGN_PAYLOAD.as_bytes());
        let theirs = COSIGN_MANIFEST.replace(
            "MEUCIEB+pz4s+9yxG+Om/bukeAfwloKFEISUhxLvIYlP02P8AiEAz1oNkilC+cprxcrEHqN0vxM+zvP34ikHFzi8e7Sevls=",
            &out.signature_b64,
        );
        assert_eq!(String::from_utf8(out.manifest_json.clone()), Ok(theirs));
        assert!(COSIGN_MANIFEST.contains(&Digest::of(&out.config_json).to_string()));
        let layers = layers_of(&out.manifest_json).expect("our manifest");
        assert_eq!(layers[0].0.digest, Digest::of(&out.payload));
        let annotation = layers[0].1.as_deref().expect("a signature");
        let evidence = [simple(COSIGN_PAYLOAD, annotation)];
        let expected = Verdict::Signed {
            key_id: key.public().id().into(),
            docker_reference: Some("localhost:15381/tobby/fixture".into()),
        };
        assert_eq!(verify(&[public(PUB)], &subject, &evidence), expected);
        let error = sign(&key, "r.test/\"x", &subject).expect_err("a quote");
        assert!(error.contains("not a registry/repository"), "{error}");
    }

    #[test]
    fn signatures_cosign_and_sigstore_rs_made_verify() {
        let keys = [public(PUB), public(COSIGN_PUB)];
        assert_eq!(keys[1].id(), "sha256:dc2bcfdb0402cd08");
        let layers = layers_of(COSIGN_MANIFEST.as_bytes()).expect("cosign's manifest");
        assert_eq!(layers[0].0.digest, Digest::of(COSIGN_PAYLOAD.as_bytes()));
        let evidence = [simple(
            COSIGN_PAYLOAD,
            layers[0].1.as_deref().expect("signed"),
        )];
        assert_eq!(signer(&keys, COSIGN_SUBJECT, &evidence), keys[1]);
        // From sigstore/sigstore-rs: src/crypto/verification_key.rs
        // (`verify_signature_success`) and its key, src/crypto/mod.rs.
        let key = [public(
            "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAENptdY/l3nB0yqkXLBWkZWQwo6+cu
OSWS1X9vPavpiQOoTTGC0xX57OojUadxF1cdQmrsiReWg2Wn4FneJfa8xw==
-----END PUBLIC KEY-----",
        )];
        let subject = "sha256:f3cfc9d0dbf931d3db4685ec659b7ac68e2a578219da4aae65427886e649b06b";
        let payload =
            payload(subject, PAYLOAD_TYPE).replace("r.test/t", "registry-testing.svc.lan/busybox");
        let signature = "MEUCIQD6q/COgzOyW0YH1Dk+CCYSt4uAhm3FDHUwvPI55zwnlwIgE0ZK58ZOWpZw8YVmBapJhBqCfdPekIknimuO0xH8Jh8=";
        assert_eq!(
            signer(&key, subject, &[simple(&payload, signature)]),
            key[0]
        );
    }

    #[test]
    fn a_bundle_cosign_made_verifies() {
        let manifests = bundle_referrers(BUNDLE_INDEX.as_bytes()).expect("the index");
        assert_eq!(manifests, [Digest::of(BUNDLE_MANIFEST.as_bytes())]);
        let layers = layers_of(BUNDLE_MANIFEST.as_bytes()).expect("the referrer");
        let (layer, annotation) = &layers[0];
        assert_eq!((layers.len(), layer.media_type.as_str()), (1, BUNDLE_TYPE));
        assert!(layer.digest.matches(BUNDLE.as_bytes()) && annotation.is_none());
        let bundles = [BUNDLE.as_bytes().to_vec()];
        // The bundle's `publicKey.hint` is the base64 of the digest this begins.
        let keys = [public(BUNDLE_PUB)];
        assert_eq!(keys[0].id(), "sha256:f7c9fdc1eec55a06");
        let subject = digest(BUNDLE_SUBJECT);
        assert_eq!(
            referrers_tag(&subject),
            format!("sha256-{}", &BUNDLE_SUBJECT[7..])
        );
        let expected = Verdict::Signed {
            key_id: keys[0].id().into(),
            docker_reference: None,
        };
        assert_eq!(verify_bundles(&keys, &subject, &bundles), expected);
        let other = Digest::of(b"other").to_string();
        let forged = BUNDLE.replace("MEUCIH+d22", "MEUCIH+d23");
        let blob = r#"{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","messageSignature":{}}"#;
        for (bundle, subject, why) in [
            (BUNDLE, other.as_str(), "does not name"),
            (&forged, BUNDLE_SUBJECT, "no configured key"),
            (
                &BUNDLE.replace("vnd.in-toto", "vnd.other"),
                BUNDLE_SUBJECT,
                "payload is `application",
            ),
            (blob, BUNDLE_SUBJECT, "sign-blob"),
            (
                &blob.replace("message", "x"),
                BUNDLE_SUBJECT,
                "no DSSE envelope",
            ),
            (
                &blob.replace("vnd.dev.sigstore", "x"),
                BUNDLE_SUBJECT,
                "bundle's type",
            ),
            ("{}", BUNDLE_SUBJECT, "missing field"),
        ] {
            let verdict = verify_bundles(&keys, &digest(subject), &[bundle.into()]);
            assert!(
                matches!(&verdict, Verdict::Invalid(e) if e.contains(why)),
                "{why}: {verdict:?}"
            );
        }
        let big = vec![b' '; 300 * 1024];
        for (keys, bundles, why) in [
            (&[public(PUB)][..], &bundles[..], "no configured key"),
            (&keys[..], &[big], "over 262144 bytes"),
        ] {
            let verdict = verify_bundles(keys, &subject, bundles);
            assert!(
                matches!(&verdict, Verdict::Invalid(e) if e.contains(why)),
                "{why}: {verdict:?}"
            );
        }
    }

    #[test]
    fn every_bad_simple_signature_is_refused_with_why() {
        let subject = Digest::of(b"tool").to_string();
        let good = payload(&subject, PAYLOAD_TYPE);
        let sig = signed(&good).signature_b64;
        let keys = [public(PUB)];
        let other = Digest::of(b"x").to_string();
        let unknown = good.replace(r#""type""#, r#""more":1,"type""#);
        for (layer, why) in [
            (
                simple(&good.replace("r.test", "s.test"), &sig),
                "no configured key",
            ),
            (
                simple(&good, &STANDARD.encode(b"not DER")),
                "no configured key",
            ),
            (simple(&good, "not base64!"), "not base64"),
            (simple(&good, ""), "carries no signature"),
            (simple(&good, &"A".repeat(2000)), "too long"),
            (simple(&" ".repeat(65 * 1024), &sig), "over 65536 bytes"),
            (signed(&payload(&other, PAYLOAD_TYPE)), "it signs"),
            (
                signed(&payload("md5:00", PAYLOAD_TYPE)),
                "it signs `md5:00`",
            ),
            (signed(&payload(&subject, "atomic")), "type is `atomic`"),
            (signed(&unknown), "unknown field `more`"),
            (
                signed(&good.replace("null}", r#"null,"x":1}"#)),
                "unknown field `x`",
            ),
            (signed(&good[..good.len() - 9]), "payload does not parse"),
            (signed("[]"), "payload does not parse"),
        ] {
            let error = refusal(&keys, &subject, &[layer]);
            assert!(error.contains(why), "{why}: {error}");
        }
        // Base64 wrapped over lines, as some tools write it, still reads.
        let wrapped = format!("{}\n{}\r\n", &sig[..20], &sig[20..]);
        assert_eq!(signer(&keys, &subject, &[simple(&good, &wrapped)]), keys[0]);
        // Any one valid signature suffices; failures are summed up, capped.
        let bad = simple(&good, "x");
        assert_eq!(
            signer(&keys, &subject, &[bad.clone(), signed(&good)]),
            keys[0]
        );
        assert!(refusal(&keys, &subject, &vec![bad.clone(); 6]).ends_with("and 2 more"));
        let many = vec![bad; MAX_SIGNATURES + 1];
        assert!(refusal(&keys, &subject, &many).contains("65 signatures, over the cap"));
        assert!(refusal(&keys, &subject, &[]).contains("not signed"));
        assert!(refusal(&[], &subject, &[signed(&good)]).contains("no public keys"));
        let long = refusal(
            &keys,
            &subject,
            &[signed(&payload(&subject, &"t".repeat(5000)))],
        );
        assert!(long.len() < 300 && long.contains("t…`"), "{long}");
    }

    #[test]
    fn manifests_and_indexes_are_read_strictly() {
        let layer = |media_type: &str, size: u64| {
            let digest = Digest::of(b"");
            format!(r#"{{"mediaType":"{media_type}","size":{size},"digest":"{digest}"}}"#)
        };
        let manifest =
            |layers: &[String]| format!(r#"{{"schemaVersion":2,"layers":[{}]}}"#, layers.join(","));
        let (other, ok) = (layer("text/plain", 1), layer(SIMPLESIGNING_TYPE, 250));
        let found = layers_of(manifest(&[other.clone(), ok.clone()]).as_bytes()).expect("valid");
        assert_eq!((found.len(), found[0].1.as_ref()), (1, None));
        for (body, why) in [
            ("not json".to_owned(), "manifest does not parse"),
            (r#"{"schemaVersion":1}"#.to_owned(), "schema version 2"),
            (manifest(&[]), "no signature layer"),
            (manifest(&[other]), "no signature layer"),
            (
                manifest(&vec![ok.clone(); MAX_SIGNATURES + 1]),
                "65 layers, over the cap",
            ),
            (
                manifest(&[layer(SIMPLESIGNING_TYPE, 70_000)]),
                "over the cap of 65536",
            ),
            (
                manifest(&[layer(BUNDLE_TYPE, 300_000)]),
                "over the cap of 262144",
            ),
            (
                manifest(&[ok.replace("sha256:", "sha512:")]),
                "not supported",
            ),
        ] {
            let error = layers_of(body.as_bytes()).expect_err(&body);
            assert!(error.contains(why), "{why}: {error}");
        }
        assert!(layers_of(&vec![b' '; MAX_MANIFEST_BYTES + 1]).is_err());
        let index = |entries: usize, kind: &str| {
            let digest = Digest::of(b"");
            let entry = format!(
                r#"{{"mediaType":"m","size":1,"digest":"{digest}","artifactType":"{kind}"}}"#
            );
            format!(
                r#"{{"schemaVersion":2,"manifests":[{}]}}"#,
                vec![entry; entries].join(",")
            )
        };
        assert_eq!(
            bundle_referrers(index(2, BUNDLE_TYPE).as_bytes()).map(|d| d.len()),
            Ok(2)
        );
        assert_eq!(
            bundle_referrers(index(1, "application/spdx+json").as_bytes()),
            Ok(vec![])
        );
        let error = bundle_referrers(index(65, BUNDLE_TYPE).as_bytes()).expect_err("cap");
        assert!(error.contains("65 manifests, over the cap"), "{error}");
    }

    #[test]
    fn no_input_panics() {
        let keys = [public(BUNDLE_PUB)];
        let subject = digest(BUNDLE_SUBJECT);
        for text in [
            BUNDLE,
            BUNDLE_MANIFEST,
            BUNDLE_INDEX,
            COSIGN_MANIFEST,
            PUB,
            KEY,
        ] {
            for end in (0..text.len()).filter(|end| text.is_char_boundary(*end)) {
                let cut = &text[..end];
                let _ = verify_bundles(&keys, &subject, &[cut.into()]);
                let _ = verify(&keys, &subject, &[simple(cut, cut)]);
                let _ = (layers_of(cut.as_bytes()), bundle_referrers(cut.as_bytes()));
                let _ = same_repository(cut, "r", cut);
            }
        }
    }

    #[test]
    fn the_named_repository_is_compared_without_tag_or_digest() {
        for (reference, same) in [
            ("ghcr.io/acme/echo", true),
            ("ghcr.io/acme/echo:v1", true),
            ("GHCR.io/acme/echo@sha256:00", true),
            ("ghcr.io/acme/other", false),
            ("mirror.test/acme/echo", false),
            ("echo", false),
        ] {
            assert_eq!(
                same_repository(reference, "ghcr.io", "acme/echo"),
                same,
                "{reference}"
            );
        }
        assert!(same_repository(
            "localhost:5000/echo:v1",
            "localhost:5000",
            "echo"
        ));
        assert!(same_repository(
            "index.docker.io/library/echo",
            "docker.io",
            "library/echo"
        ));
    }
}
