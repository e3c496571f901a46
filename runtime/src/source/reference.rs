//! Where a tool comes from, as the operator writes it: `oci://REGISTRY/
//! REPOSITORY[:TAG][@sha256:DIGEST]`, `https://HOST/PATH` (with the digest
//! it must have), or a local path. Parsed once, strictly: anything the OCI
//! distribution spec's grammar does not allow is refused with why, so a
//! reference cannot smuggle a path, a query or a second host into a request.

use std::fmt;
use std::path::PathBuf;

use super::digest::Digest;

/// A parsed source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// An artifact in an OCI registry.
    Oci(OciReference),
    /// A component file over HTTPS (plain HTTP only to a loopback host).
    Url {
        /// The URL, as given (checked).
        url: String,
        /// The digest the bytes must have, if given.
        digest: Option<Digest>,
    },
    /// A file on this machine.
    Path(PathBuf),
}

/// `oci://registry/repository[:tag][@digest]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciReference {
    /// `host` or `host:port`, lowercase.
    pub registry: String,
    /// `a/b/c`, each component as the spec allows.
    pub repository: String,
    /// The tag, if given.
    pub tag: Option<String>,
    /// The manifest digest, if given (then the tag is only informative).
    pub digest: Option<Digest>,
}

/// Longest repository name the distribution spec lets registries refuse
/// beyond (255 with the registry); longer is certainly a mistake.
const MAX_REPOSITORY: usize = 255;

impl Source {
    /// Parse `text`: `oci://…`, `https://…` (`http://` for a loopback host),
    /// or else a path. `digest` is the digest a URL's bytes must have
    /// (`--digest`), or the manifest digest for an OCI tag.
    ///
    /// # Errors
    ///
    /// What is wrong with it.
    pub fn parse(text: &str) -> Result<Source, String> {
        if let Some(rest) = text.strip_prefix("oci://") {
            return OciReference::parse(rest).map(Source::Oci);
        }
        if text.starts_with("https://") || text.starts_with("http://") {
            crate::outbound::check_url(text).map_err(|why| format!("`{text}` {why}"))?;
            if text.contains('?') {
                return Err(format!(
                    "`{text}` has a query; give the component's plain URL"
                ));
            }
            return Ok(Source::Url {
                url: text.to_owned(),
                digest: None,
            });
        }
        if text.contains("://") {
            return Err(format!(
                "`{text}`: only oci://, https:// (http:// to loopback) and local paths are sources"
            ));
        }
        if text.is_empty() {
            return Err("the source is empty".into());
        }
        Ok(Source::Path(PathBuf::from(text)))
    }

    /// A name for the tool file this source becomes, from its last path
    /// component (`ghcr.io/acme/tools/word-count:1` → `word-count`):
    /// lowercase letters, digits, `-` and `_` only, so it can never name a
    /// path outside the tools folder.
    pub fn default_name(&self) -> Option<String> {
        let last = match self {
            Source::Oci(reference) => reference.repository.rsplit('/').next()?.to_owned(),
            Source::Url { url, .. } => url.rsplit('/').next()?.trim_end_matches(".wasm").to_owned(),
            Source::Path(path) => path.file_stem()?.to_string_lossy().into_owned(),
        };
        let name: String = last
            .chars()
            .map(|c| match c {
                'A'..='Z' => c.to_ascii_lowercase(),
                'a'..='z' | '0'..='9' | '-' | '_' => c,
                _ => '_',
            })
            .collect();
        check_name(&name).ok().map(|()| name)
    }
}

/// Check a tool file name (without `.wasm`): 1 to 64 of `a-z 0-9 - _`,
/// starting with a letter or digit.
///
/// # Errors
///
/// What is wrong with it.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{name}` cannot name a tool file: use 1 to 64 lowercase letters, digits, `-` and `_`"
        ))
    }
}

impl OciReference {
    /// Parse what follows `oci://`.
    ///
    /// # Errors
    ///
    /// What is wrong with it.
    pub fn parse(text: &str) -> Result<OciReference, String> {
        let whole = format!("oci://{text}");
        let (registry, rest) = text.split_once('/').ok_or_else(|| {
            format!("`{whole}` names no repository (oci://REGISTRY/REPOSITORY:TAG)")
        })?;
        check_registry(registry)
            .map_err(|why| format!("`{whole}`: the registry `{registry}` is refused: {why}"))?;
        let (named, digest) = match rest.split_once('@') {
            Some((named, digest)) => (
                named,
                Some(Digest::parse(digest).map_err(|why| format!("`{whole}`: {why}"))?),
            ),
            None => (rest, None),
        };
        // A tag follows the last `:` after the last `/`.
        let (repository, tag) = match named.rsplit_once(':') {
            Some((repository, tag)) if !tag.contains('/') => (repository, Some(tag)),
            _ => (named, None),
        };
        check_repository(repository).map_err(|why| format!("`{whole}`: the repository {why}"))?;
        if let Some(tag) = tag {
            check_tag(tag).map_err(|why| format!("`{whole}`: the tag {why}"))?;
        }
        if tag.is_none() && digest.is_none() {
            return Err(format!(
                "`{whole}` names no tag or digest: add `:TAG` or `@sha256:…` (toolcage never guesses `latest`)"
            ));
        }
        Ok(OciReference {
            registry: registry.to_ascii_lowercase(),
            repository: repository.to_owned(),
            tag: tag.map(str::to_owned),
            digest,
        })
    }

    /// What to ask the registry for: the digest if there is one, else the
    /// tag.
    pub fn reference(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(digest), _) => digest.to_string(),
            (None, Some(tag)) => tag.clone(),
            (None, None) => unreachable!("parse refuses a reference with neither"),
        }
    }
}

impl fmt::Display for OciReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oci://{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// `host[:port]`: what every request of a fetch connects to, so it is read
/// by the one authority parser outbound requests use
/// ([`crate::grants::network::Target`]), never by a second one.
fn check_registry(registry: &str) -> Result<(), String> {
    let uri: http::Uri = format!("https://{registry}/")
        .parse()
        .map_err(|_| "it is not a host or host:port".to_owned())?;
    if uri.path() != "/" || uri.query().is_some() {
        return Err("it is not a host or host:port".into());
    }
    crate::grants::network::Target::parse(&uri).map(|_| ())
}

/// Path components of `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`, joined by `/`.
fn check_repository(repository: &str) -> Result<(), String> {
    if repository.is_empty() || repository.len() > MAX_REPOSITORY {
        return Err(format!("must be 1 to {MAX_REPOSITORY} characters"));
    }
    for component in repository.split('/') {
        let bytes = component.as_bytes();
        let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        let mut ok = !bytes.is_empty() && alnum(bytes[0]) && alnum(bytes[bytes.len() - 1]);
        let mut i = 0;
        while ok && i < bytes.len() {
            if alnum(bytes[i]) {
                i += 1;
                continue;
            }
            // A separator: `.`, `_`, `__` or a run of `-`, between alphanumerics.
            let start = i;
            match bytes[i] {
                b'.' => i += 1,
                b'_' => {
                    i += if bytes.get(i + 1) == Some(&b'_') {
                        2
                    } else {
                        1
                    }
                }
                b'-' => {
                    while bytes.get(i) == Some(&b'-') {
                        i += 1;
                    }
                }
                _ => ok = false,
            }
            ok = ok && i > start && bytes.get(i).is_some_and(|&b| alnum(b));
        }
        if !ok {
            return Err(format!(
                "component `{component}` is not lowercase letters and digits separated by `.`, `_`, `__` or `-`"
            ));
        }
    }
    Ok(())
}

/// `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`.
fn check_tag(tag: &str) -> Result<(), String> {
    let ok = !tag.is_empty()
        && tag.len() <= 128
        && tag.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{tag}` is not a tag (letters, digits, `_`, `.`, `-`; at most 128)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn oci_references_parse_as_the_spec_writes_them() {
        let parsed = OciReference::parse("ghcr.io/acme/tools/word-count:1.2.0").expect("valid");
        assert_eq!(parsed.registry, "ghcr.io");
        assert_eq!(parsed.repository, "acme/tools/word-count");
        assert_eq!(parsed.tag.as_deref(), Some("1.2.0"));
        assert_eq!(parsed.reference(), "1.2.0");
        let pinned = OciReference::parse(&format!("LOCALHOST:5000/a__b/c.d:v1@sha256:{HEX}"))
            .expect("valid");
        assert_eq!(pinned.registry, "localhost:5000");
        assert_eq!(pinned.reference(), format!("sha256:{HEX}"));
        assert_eq!(
            pinned.to_string(),
            format!("oci://localhost:5000/a__b/c.d:v1@sha256:{HEX}")
        );
        let digest_only =
            OciReference::parse(&format!("[::1]:5000/tool@sha256:{HEX}")).expect("valid");
        assert_eq!(digest_only.tag, None);
    }

    #[test]
    fn bad_oci_references_say_what_is_wrong() {
        for (text, why) in [
            ("ghcr.io", "no repository"),
            ("ghcr.io/tool", "no tag or digest"),
            ("ghcr.io/Tool:1", "component `Tool`"),
            ("ghcr.io/../etc:1", "component `..`"),
            ("ghcr.io/a//b:1", "component ``"),
            ("ghcr.io/a-:1", "component `a-`"),
            ("ghcr.io/a:b:c", "component `a:b`"),
            ("ghcr.io/a:-x", "the tag"),
            ("ghcr.io/a:x?y", "the tag"),
            ("ghcr.io:99999/a:1", "not a port"),
            ("gh cr.io/a:1", "not a host or host:port"),
            ("user@ghcr.io/a:1", "user name or password"),
            ("ghcr.io/a@sha512:00", "sha256"),
            ("ghcr.io/a@sha256:abc", "64"),
        ] {
            let error = OciReference::parse(text).expect_err(text);
            assert!(error.contains(why), "{text}: {error}");
        }
    }

    #[test]
    fn sources_and_their_default_names() {
        let oci = Source::parse("oci://ghcr.io/acme/Word.Count:1").expect_err("uppercase");
        assert!(oci.contains("component"), "{oci}");
        let oci = Source::parse("oci://ghcr.io/acme/word.count:1").expect("valid");
        assert_eq!(oci.default_name().as_deref(), Some("word_count"));
        let url = Source::parse("https://example.com/dl/Fetch-Tool.wasm").expect("valid");
        assert_eq!(url.default_name().as_deref(), Some("fetch-tool"));
        assert!(
            Source::parse("http://example.com/x.wasm").is_err(),
            "plain http off loopback"
        );
        assert!(Source::parse("http://127.0.0.1:8000/x.wasm").is_ok());
        assert!(Source::parse("https://example.com/x.wasm?token=1").is_err());
        assert!(Source::parse("ftp://example.com/x.wasm").is_err());
        let path = Source::parse("./build/my_tool.wasm").expect("path");
        assert_eq!(path.default_name().as_deref(), Some("my_tool"));
        assert_eq!(Source::parse("/x/..").expect("path").default_name(), None);
        for bad in ["", "../x", "a/b", "X", &"a".repeat(65), ".hidden"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
