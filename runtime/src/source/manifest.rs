//! An OCI image manifest, read as a WebAssembly artifact: exactly one
//! layer that is a Wasm binary (the layer media types the wasm OCI artifact
//! layout and its predecessors use), its digest and declared size checked
//! against the caps before a byte of it is fetched.
//!
//! Refused, each with a message: a document over [`MAX_MANIFEST_BYTES`],
//! an image index (several platforms; name a manifest by digest), a
//! manifest with no Wasm layer or with several, a layer over the size cap,
//! a descriptor whose digest is not `sha256:`.

use serde::Deserialize;

use super::digest::Digest;

/// Largest manifest read, in bytes (the distribution spec lets registries
/// refuse over 4 MiB).
pub const MAX_MANIFEST_BYTES: usize = 4 * 1024 * 1024;

/// The manifest media types accepted.
pub const MANIFEST_TYPES: &[&str] = &[
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
];

/// Index media types: recognised to refuse them clearly.
const INDEX_TYPES: &[&str] = &[
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// Layer media types that carry a Wasm binary: the wasm OCI artifact
/// layout's, and the ones earlier tools wrote.
pub const WASM_LAYER_TYPES: &[&str] = &[
    "application/wasm",
    "application/vnd.wasm.content.layer.v1+wasm",
    "application/vnd.bytecodealliance.wasm.component.layer.v0+wasm",
    "application/vnd.module.wasm.content.layer.v1+wasm",
];

/// The config media type of the wasm OCI artifact layout (what
/// `toolcage publish` writes).
pub const WASM_CONFIG_TYPE: &str = "application/vnd.wasm.config.v0+json";

/// A content descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Descriptor {
    /// Its media type.
    pub media_type: String,
    /// Its digest.
    pub digest: Digest,
    /// Its declared size, in bytes.
    pub size: u64,
}

/// The Wasm artifact a manifest describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WasmArtifact {
    /// The config blob.
    pub config: Descriptor,
    /// The one Wasm layer.
    pub layer: Descriptor,
    /// `artifactType`, if the manifest says.
    pub artifact_type: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawManifest {
    schema_version: Option<u32>,
    media_type: Option<String>,
    artifact_type: Option<String>,
    config: Option<RawDescriptor>,
    layers: Option<Vec<RawDescriptor>>,
    manifests: Option<serde_json::Value>,
}

/// A content descriptor as written (also read by `signature`, whose
/// layers carry annotations and whose indexes name artifact types).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawDescriptor {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default)]
    pub annotations: std::collections::HashMap<String, String>,
    pub artifact_type: Option<String>,
}

impl RawDescriptor {
    /// The descriptor, its digest parsed (`what` names it in the error).
    pub fn check(&self, what: &str) -> Result<Descriptor, String> {
        Ok(Descriptor {
            digest: Digest::parse(&self.digest)
                .map_err(|why| format!("the {what}'s digest: {why}"))?,
            media_type: self.media_type.clone(),
            size: self.size,
        })
    }
}

/// Read `body` (served with `content_type`, if the registry said) as a
/// Wasm artifact whose layer is at most `max_layer_bytes`.
///
/// # Errors
///
/// Why it is not one (see the module's list).
pub fn parse(
    body: &[u8],
    content_type: Option<&str>,
    max_layer_bytes: u64,
) -> Result<WasmArtifact, String> {
    if body.len() > MAX_MANIFEST_BYTES {
        return Err(format!(
            "the manifest is over {} MiB",
            MAX_MANIFEST_BYTES / (1024 * 1024)
        ));
    }
    let raw: RawManifest = serde_json::from_slice(body)
        .map_err(|error| format!("the manifest is not valid JSON: {error}"))?;
    let media_type = raw.media_type.as_deref().or(content_type).unwrap_or("");
    if INDEX_TYPES.contains(&media_type) || raw.manifests.is_some() {
        return Err(
            "this is an image index (one manifest per platform), not a Wasm artifact: name the \
             Wasm manifest by its digest (`@sha256:…`)"
                .into(),
        );
    }
    if !media_type.is_empty() && !MANIFEST_TYPES.contains(&media_type) {
        return Err(format!(
            "the manifest's media type `{media_type}` is not an image manifest"
        ));
    }
    if raw.schema_version != Some(2) {
        return Err("the manifest is not schema version 2".into());
    }
    let config = raw
        .config
        .ok_or("the manifest has no config")?
        .check("config")?;
    let layers = raw.layers.unwrap_or_default();
    let mut wasm = Vec::new();
    let mut others = Vec::new();
    for layer in layers {
        if WASM_LAYER_TYPES.contains(&layer.media_type.as_str()) {
            wasm.push(layer);
        } else {
            others.push(layer.media_type);
        }
    }
    let layer = match wasm.len() {
        1 => wasm.pop().ok_or("no layer")?.check("layer")?,
        0 if others.is_empty() => return Err("the manifest has no layers".into()),
        0 => {
            return Err(format!(
                "the manifest has no Wasm layer (its layers are {}); a Wasm artifact's layer is `application/wasm`",
                others.join(", ")
            ));
        }
        n => {
            return Err(format!(
                "the manifest has {n} Wasm layers; a tool is one component (publish one per artifact)"
            ));
        }
    };
    if layer.size > max_layer_bytes {
        return Err(format!(
            "the Wasm layer is {} bytes, over the cap of {max_layer_bytes}",
            layer.size
        ));
    }
    Ok(WasmArtifact {
        config,
        layer,
        artifact_type: raw.artifact_type,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(layers: &str) -> String {
        let hex = "ab".repeat(32);
        format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
               "artifactType":"application/vnd.wasm.component.v1+wasm",
               "config":{{"mediaType":"{WASM_CONFIG_TYPE}","digest":"sha256:{hex}","size":2}},
               "layers":[{layers}]}}"#
        )
    }

    fn layer(media_type: &str, size: u64) -> String {
        format!(
            r#"{{"mediaType":"{media_type}","digest":"sha256:{}","size":{size}}}"#,
            "cd".repeat(32)
        )
    }

    #[test]
    fn one_wasm_layer_is_the_artifact() {
        let artifact = parse(
            manifest(&layer("application/wasm", 1000)).as_bytes(),
            None,
            1 << 20,
        )
        .expect("valid");
        assert_eq!(artifact.layer.size, 1000);
        assert_eq!(artifact.config.media_type, WASM_CONFIG_TYPE);
        assert_eq!(
            artifact.artifact_type.as_deref(),
            Some("application/vnd.wasm.component.v1+wasm")
        );
        // An older layout's layer type, beside a non-Wasm layer.
        let mixed = format!(
            "{},{}",
            layer("text/plain", 5),
            layer("application/vnd.wasm.content.layer.v1+wasm", 9)
        );
        assert_eq!(
            parse(manifest(&mixed).as_bytes(), None, 1 << 20)
                .expect("valid")
                .layer
                .size,
            9
        );
    }

    #[test]
    fn an_artifact_an_independent_client_pushed_is_read() {
        // As oras 0.2.43 (PyPI) pushed a component to Debian's
        // docker-registry 2.8.2 in the wasm artifact layout.
        let pushed = r#"{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.wasm.config.v0+json", "size": 0,
                "digest": "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
            "layers": [{"mediaType": "application/wasm", "size": 66220,
                "digest": "sha256:73feeaffecf9548a9e4c588ee8c120fc736cf6d0e0ca1e43884e82b00c2572fc",
                "annotations": {"org.opencontainers.image.title": "tool.wasm"}}], "annotations": {}}"#;
        let artifact = parse(pushed.as_bytes(), None, 1 << 20).expect("valid");
        assert_eq!(artifact.layer.size, 66220);
        assert_eq!(
            artifact.layer.digest.to_string(),
            "sha256:73feeaffecf9548a9e4c588ee8c120fc736cf6d0e0ca1e43884e82b00c2572fc"
        );
        assert_eq!(artifact.config.digest, Digest::of(b""));
    }

    #[test]
    fn everything_else_is_refused_with_why() {
        let two = format!(
            "{},{}",
            layer("application/wasm", 1),
            layer("application/wasm", 2)
        );
        for (body, why) in [
            (manifest(""), "no layers".to_owned()),
            (
                manifest(&layer("application/vnd.oci.image.layer.v1.tar+gzip", 5)),
                "no Wasm layer".to_owned(),
            ),
            (manifest(&two), "2 Wasm layers".to_owned()),
            (
                manifest(&layer("application/wasm", 2 << 20)),
                "over the cap".to_owned(),
            ),
            (
                r#"{"schemaVersion":2,"manifests":[]}"#.to_owned(),
                "image index".to_owned(),
            ),
            (r#"{"schemaVersion":2}"#.to_owned(), "no config".to_owned()),
            ("not json".to_owned(), "not valid JSON".to_owned()),
            (
                manifest(&layer("application/wasm", 1))
                    .replace("schemaVersion\":2", "schemaVersion\":3"),
                "schema version 2".to_owned(),
            ),
            (
                manifest(&layer("application/wasm", 1)).replace("sha256:cd", "md5:cd"),
                "not supported".to_owned(),
            ),
            (
                manifest(&layer("application/wasm", 1))
                    .replace("vnd.oci.image.manifest.v1", "vnd.oci.image.config.v1"),
                "not an image manifest".to_owned(),
            ),
        ] {
            let error = parse(body.as_bytes(), None, 1 << 20).expect_err(&body);
            assert!(error.contains(&why), "{why}: {error}");
        }
        let huge = vec![b' '; MAX_MANIFEST_BYTES + 1];
        assert!(
            parse(&huge, None, 1)
                .expect_err("huge")
                .contains("over 4 MiB")
        );
    }
}
