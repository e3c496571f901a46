//! Fetching a source's component bytes, every byte checked: an OCI
//! artifact (manifest, its one Wasm layer, and its cosign signature), a URL
//! (against the digest it must have), or a local file. Nothing here writes
//! anywhere; `install` decides what becomes a tool file.
//!
//! A fetch has one overall deadline ([`Settings::fetch_deadline`]), however
//! many requests it takes (an OCI artifact with its signatures can take
//! over a hundred): every request's waits are cut to what remains of it,
//! and when it runs out the fetch stops with an error naming the source
//! and the setting. Without it each request had its own deadline, and a
//! registry trickling every body just inside it held `add`, `update` and
//! `serve`'s start-up for hours.

use std::path::Path;
use std::time::{Duration, Instant};

use super::digest::Digest;
use super::keys::PublicKey;
use super::manifest;
use super::reference::{OciReference, Source};
use super::registry::Client;
use super::signature::{self, SignatureLayer, Verdict};
use crate::outbound::{Request, printable, send};

/// URL redirects followed (a release page to its download host).
const MAX_REDIRECTS: usize = 5;

/// How fetching goes.
#[derive(Clone)]
pub struct Settings {
    /// The largest component accepted, in bytes.
    pub max_bytes: u64,
    /// Each wait.
    pub timeout: Duration,
    /// Each whole download.
    pub deadline: Duration,
    /// The whole fetch of one source, every request together (`[install]
    /// fetch_deadline_ms`).
    pub fetch_deadline: Duration,
    /// The keys a signature may be made with.
    pub keys: Vec<PublicKey>,
    /// Refuse an OCI artifact no key signed (and any non-OCI source).
    pub require_signature: bool,
}

/// What a signature check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signature {
    /// Not an OCI artifact: nothing to check.
    NotApplicable,
    /// No signature is published for it.
    Unsigned,
    /// Signed, but no key is configured to check with.
    Unchecked,
    /// Verified with the key whose id is `key`; `elsewhere` is the
    /// repository the signature names, when it is not this one (a mirror
    /// or a copy: reported, not refused, as cosign does).
    Verified {
        /// The key's id.
        key: String,
        /// The `docker-reference` signed, if another repository.
        elsewhere: Option<String>,
    },
    /// A signature is there but none verifies (why).
    Invalid(String),
}

impl std::fmt::Display for Signature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Signature::NotApplicable => write!(f, "none (not an OCI artifact)"),
            Signature::Unsigned => write!(f, "UNSIGNED"),
            Signature::Unchecked => write!(
                f,
                "signed, NOT CHECKED (no key configured: `[install] keys` or --key)"
            ),
            Signature::Verified {
                key,
                elsewhere: None,
            } => write!(f, "verified (key {key})"),
            Signature::Verified {
                key,
                elsewhere: Some(other),
            } => write!(
                f,
                "verified (key {key}); note: it was signed for `{other}`, not this repository"
            ),
            Signature::Invalid(why) => write!(f, "INVALID: {why}"),
        }
    }
}

/// A fetched component.
pub struct Fetched {
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Their digest.
    pub digest: Digest,
    /// The manifest digest, for OCI.
    pub manifest: Option<Digest>,
    /// The signature check.
    pub signature: Signature,
}

/// Fetch `source`. For OCI, `manifest` (a locked manifest digest) is
/// fetched instead of the tag; for a URL, `digest` is what the bytes must
/// be (else the source's own).
///
/// # Errors
///
/// What failed, and that nothing was kept.
pub async fn fetch(
    source: &Source,
    manifest: Option<Digest>,
    digest: Option<Digest>,
    settings: &Settings,
) -> Result<Fetched, String> {
    let ends = Instant::now() + settings.fetch_deadline;
    let work = fetch_until(source, manifest, digest, settings, ends);
    // The timer stops what no request's own deadline covers (a credential
    // helper, a request started at the very end); an error after the end
    // is that end, whichever request noticed it first.
    match tokio::time::timeout_at(ends.into(), work).await {
        Ok(Ok(fetched)) => Ok(fetched),
        Ok(Err(why)) if Instant::now() < ends => Err(why),
        Ok(Err(_)) | Err(_) => Err(out_of_time(source, settings.fetch_deadline)),
    }
}

/// Why a fetch stopped at its overall deadline: the source, the setting
/// and what to do.
fn out_of_time(source: &Source, allowed: Duration) -> String {
    let shown = match source {
        Source::Oci(reference) => reference.to_string(),
        Source::Url { url, .. } => url.clone(),
        Source::Path(path) => path.display().to_string(),
    };
    format!(
        "`{shown}` was not fetched within `[install] fetch_deadline_ms` ({} ms, for all of its \
         requests together: manifests, signatures and the component), so nothing was kept; the \
         registry or the network is too slow (raise the setting if it must wait longer)",
        allowed.as_millis()
    )
}

/// [`fetch`], every request over by `ends`.
async fn fetch_until(
    source: &Source,
    manifest: Option<Digest>,
    digest: Option<Digest>,
    settings: &Settings,
    ends: Instant,
) -> Result<Fetched, String> {
    match source {
        Source::Oci(reference) => fetch_oci(reference, manifest, settings, ends).await,
        Source::Url { url, digest: own } => {
            let Some(expected) = digest.or(*own) else {
                return Err(format!(
                    "`{url}` needs the digest its bytes must have: pass --digest sha256:… (as the \
                     publisher gives it)"
                ));
            };
            if settings.require_signature {
                return Err(format!(
                    "`{url}`: a signature is required, and only OCI artifacts carry signatures"
                ));
            }
            let bytes = fetch_url(url, settings, ends).await?;
            if !expected.matches(&bytes) {
                return Err(format!(
                    "`{url}`: the bytes' digest is {}, not the expected {expected}; nothing was \
                     kept",
                    Digest::of(&bytes)
                ));
            }
            Ok(Fetched {
                digest: expected,
                bytes,
                manifest: None,
                signature: Signature::NotApplicable,
            })
        }
        Source::Path(path) => {
            if settings.require_signature {
                return Err(format!(
                    "`{}`: a signature is required, and only OCI artifacts carry signatures",
                    path.display()
                ));
            }
            let bytes = read_capped(path, settings.max_bytes)?;
            if let Some(expected) = digest
                && !expected.matches(&bytes)
            {
                return Err(format!(
                    "`{}`: its digest is {}, not the expected {expected}",
                    path.display(),
                    Digest::of(&bytes)
                ));
            }
            Ok(Fetched {
                digest: Digest::of(&bytes),
                bytes,
                manifest: None,
                signature: Signature::NotApplicable,
            })
        }
    }
}

async fn fetch_oci(
    reference: &OciReference,
    locked: Option<Digest>,
    settings: &Settings,
    ends: Instant,
) -> Result<Fetched, String> {
    let client = Client::with_credentials(&reference.registry, settings.timeout, settings.deadline)
        .await?
        .until(ends);
    let asked = match locked.or(reference.digest) {
        Some(digest) => digest.to_string(),
        None => reference.reference(),
    };
    let manifest = client.manifest(&reference.repository, &asked).await?;
    let artifact = manifest::parse(
        &manifest.bytes,
        manifest.media_type.as_deref(),
        settings.max_bytes,
    )
    .map_err(|why| format!("{reference}: {why}"))?;
    let signature = check_signature(&client, reference, &manifest.digest, settings).await?;
    match &signature {
        Signature::Verified { .. } | Signature::NotApplicable => {}
        other if settings.require_signature => {
            return Err(format!(
                "{reference}: a signature is required, and it is {other}; nothing was fetched"
            ));
        }
        _ => {}
    }
    let bytes = client
        .blob(&reference.repository, &artifact.layer, settings.max_bytes)
        .await?;
    Ok(Fetched {
        digest: artifact.layer.digest,
        bytes,
        manifest: Some(manifest.digest),
        signature,
    })
}

/// Look for cosign signatures of `digest` in both layouts cosign writes
/// (the `.sig` tag, and sigstore bundles among its referrers) and check
/// them with the keys: verified if either verifies.
async fn check_signature(
    client: &Client,
    reference: &OciReference,
    digest: &Digest,
    settings: &Settings,
) -> Result<Signature, String> {
    let simple = simple_signature(client, reference, digest, settings).await?;
    if let Some(verified @ Signature::Verified { .. }) = simple {
        return Ok(verified);
    }
    let bundle = bundle_signature(client, reference, digest, settings).await?;
    Ok(match (simple, bundle) {
        (_, Some(verified @ Signature::Verified { .. })) => verified,
        (Some(simple), _) => simple,
        (None, Some(bundle)) => bundle,
        (None, None) => Signature::Unsigned,
    })
}

/// The `.sig` layout's verdict, `None` when there is no `.sig` tag.
async fn simple_signature(
    client: &Client,
    reference: &OciReference,
    digest: &Digest,
    settings: &Settings,
) -> Result<Option<Signature>, String> {
    let tag = signature::signature_tag(digest);
    let Some(found) = client
        .manifest_if_any(&reference.repository, &tag)
        .await
        .map_err(|error| format!("looking for its signature: {error}"))?
    else {
        return Ok(None);
    };
    let layers = match signature::layers_of(&found.bytes) {
        Ok(layers) => layers,
        Err(why) => return Ok(Some(Signature::Invalid(why))),
    };
    if settings.keys.is_empty() {
        return Ok(Some(Signature::Unchecked));
    }
    let mut read = Vec::new();
    // Unsigned layers (cosign writes none) are skipped before counting.
    let signed = layers
        .into_iter()
        .filter_map(|(descriptor, annotation)| Some((descriptor, annotation?)))
        .take(signature::MAX_SIGNATURES);
    for (descriptor, signature_b64) in signed {
        let payload = match client
            .blob(
                &reference.repository,
                &descriptor,
                signature::MAX_PAYLOAD_BYTES,
            )
            .await
        {
            Ok(payload) => payload,
            Err(error) => return Ok(Some(Signature::Invalid(error))),
        };
        read.push(SignatureLayer {
            payload,
            signature_b64,
        });
    }
    Ok(Some(verdict(
        signature::verify(&settings.keys, digest, &read),
        reference,
    )))
}

/// The bundle layout's verdict, `None` when no referrer may be a bundle.
async fn bundle_signature(
    client: &Client,
    reference: &OciReference,
    digest: &Digest,
    settings: &Settings,
) -> Result<Option<Signature>, String> {
    let repository = &reference.repository;
    let index = match client.referrers(repository, digest).await? {
        Some(index) => Some(index),
        // No referrers API: the fallback tag OCI 1.1 defines.
        None => client
            .manifest_if_any(repository, &signature::referrers_tag(digest))
            .await
            .map_err(|error| format!("looking for its signature bundles: {error}"))?
            .map(|m| m.bytes),
    };
    let Some(index) = index else {
        return Ok(None);
    };
    let referrers = match signature::bundle_referrers(&index) {
        Ok(referrers) if referrers.is_empty() => return Ok(None),
        Ok(referrers) => referrers,
        Err(why) => return Ok(Some(Signature::Invalid(why))),
    };
    if settings.keys.is_empty() {
        return Ok(Some(Signature::Unchecked));
    }
    let mut bundles = Vec::new();
    // At most as many bundles as `verify_bundles` judges.
    'referrers: for referrer in referrers.into_iter().take(signature::MAX_SIGNATURES) {
        let manifest = match client.manifest(repository, &referrer.to_string()).await {
            Ok(manifest) => manifest,
            Err(error) => return Ok(Some(Signature::Invalid(error))),
        };
        let Ok(layers) = signature::layers_of(&manifest.bytes) else {
            // A referrer that is not a signature (an SBOM, an attestation).
            continue;
        };
        for (descriptor, _) in layers {
            if bundles.len() == signature::MAX_SIGNATURES {
                break 'referrers;
            }
            match client
                .blob(repository, &descriptor, signature::MAX_BUNDLE_BYTES)
                .await
            {
                Ok(bundle) => bundles.push(bundle),
                Err(error) => return Ok(Some(Signature::Invalid(error))),
            }
        }
    }
    if bundles.is_empty() {
        return Ok(None);
    }
    Ok(Some(verdict(
        signature::verify_bundles(&settings.keys, digest, &bundles),
        reference,
    )))
}

fn verdict(verdict: Verdict, reference: &OciReference) -> Signature {
    match verdict {
        Verdict::Signed {
            key_id,
            docker_reference,
        } => Signature::Verified {
            key: key_id,
            elsewhere: docker_reference.filter(|signed| {
                !signature::same_repository(signed, &reference.registry, &reference.repository)
            }),
        },
        Verdict::Invalid(why) => Signature::Invalid(why),
    }
}

/// `GET url`, following up to [`MAX_REDIRECTS`] redirects (each checked
/// as the first URL), the body capped, every hop over by `ends`.
async fn fetch_url(url: &str, settings: &Settings, ends: Instant) -> Result<Vec<u8>, String> {
    let mut current = url.to_owned();
    for _ in 0..=MAX_REDIRECTS {
        let (timeout, deadline) = super::registry::cut(
            settings.timeout,
            settings.deadline,
            Some(ends),
            Instant::now(),
        )
        .ok_or_else(|| format!("`{url}`: no time left for another request"))?;
        let response = send(Request::get(&current, timeout).deadline(deadline)).await?;
        if response.status.is_redirection() {
            let location = response
                .header(http::header::LOCATION)
                .ok_or_else(|| format!("`{current}` redirects without a Location"))?;
            let next = super::registry::resolve(&current, location).ok_or_else(|| {
                format!(
                    "`{current}` redirects to `{}`, which is not a URL",
                    printable(location, 200)
                )
            })?;
            crate::outbound::may_follow(url, &next)
                .map_err(|why| format!("`{current}` redirects to {why}"))?;
            current = next;
            continue;
        }
        if response.status != http::StatusCode::OK {
            return Err(format!("`{current}` answered {}", response.status));
        }
        return Ok(response.bytes(settings.max_bytes).await?.to_vec());
    }
    Err(format!("`{url}` redirects more than {MAX_REDIRECTS} times"))
}

/// A local file, at most `max` bytes.
fn read_capped(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    super::capped::read_capped(path, max, "over `[install] max_component_mib`")?
        .ok_or_else(|| format!("cannot read `{}`: there is no such file", path.display()))
}
