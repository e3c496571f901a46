//! `toolcage publish FILE oci://…`: a component pushed as an OCI artifact
//! in the wasm OCI artifact layout (one `application/wasm` layer, config
//! `application/vnd.wasm.config.v0+json`), so other Wasm tooling reads it;
//! with `--sign KEY`, a cosign signature beside it.

use bytes::Bytes;
use serde_json::json;

use super::digest::Digest;
use super::keys::SigningKey;
use super::manifest::{WASM_CONFIG_TYPE, WASM_LAYER_TYPES};
use super::reference::OciReference;
use super::registry::{Client, OCI_MANIFEST_TYPE};
use super::signature;

/// What was pushed.
pub struct Published {
    /// The manifest's digest (what `oci://…@sha256:…` names).
    pub manifest: Digest,
    /// The component's digest.
    pub layer: Digest,
    /// The signature manifest's tag, when signed.
    pub signature_tag: Option<String>,
}

/// Push `bytes` (a component, whose unversioned imports are `imports`) to
/// `reference` (which must have a tag), signing with `key` if given.
///
/// # Errors
///
/// The registry refused or could not be reached, or the reference has no
/// tag.
pub async fn publish(
    bytes: Vec<u8>,
    imports: &[String],
    reference: &OciReference,
    key: Option<&SigningKey>,
    timeout: std::time::Duration,
) -> Result<Published, String> {
    let Some(tag) = &reference.tag else {
        return Err(format!(
            "`{reference}`: publishing needs a tag (oci://REGISTRY/REPOSITORY:TAG)"
        ));
    };
    if reference.digest.is_some() {
        return Err(format!(
            "`{reference}`: a published reference is a tag, without `@sha256:…`"
        ));
    }
    let client = Client::with_credentials(&reference.registry, timeout, timeout * 20).await?;
    let repository = &reference.repository;
    let size = bytes.len();
    let layer = client.push_blob(repository, Bytes::from(bytes)).await?;
    // The wasm OCI artifact layout's config: what the component is, so a
    // registry UI or another runtime can tell without fetching it.
    let config = serde_json::to_vec(&json!({
        "created": jiff::Timestamp::now().to_string(),
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer.to_string()],
        "component": {
            "imports": imports,
            "exports": ["toolcage:tool/tool"],
        },
    }))
    .map_err(|error| error.to_string())?;
    let config_size = config.len();
    let config_digest = client.push_blob(repository, Bytes::from(config)).await?;
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST_TYPE,
        "config": {
            "mediaType": WASM_CONFIG_TYPE,
            "digest": config_digest.to_string(),
            "size": config_size,
        },
        "layers": [{
            "mediaType": WASM_LAYER_TYPES[0],
            "digest": layer.to_string(),
            "size": size,
        }],
    }))
    .map_err(|error| error.to_string())?;
    let manifest_digest = client
        .push_manifest(repository, tag, Bytes::from(manifest), OCI_MANIFEST_TYPE)
        .await?;
    let signature_tag = match key {
        None => None,
        Some(key) => {
            let identity = format!("{}/{}", reference.registry, repository);
            let signed = signature::sign(key, &identity, &manifest_digest)?;
            client
                .push_blob(repository, Bytes::from(signed.payload))
                .await?;
            client
                .push_blob(repository, Bytes::from(signed.config_json))
                .await?;
            let tag = signature::signature_tag(&manifest_digest);
            client
                .push_manifest(
                    repository,
                    &tag,
                    Bytes::from(signed.manifest_json),
                    OCI_MANIFEST_TYPE,
                )
                .await?;
            Some(tag)
        }
    };
    Ok(Published {
        manifest: manifest_digest,
        layer,
        signature_tag,
    })
}
