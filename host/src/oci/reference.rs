//! OCI references: `oci://REGISTRY/REPOSITORY[:TAG][@sha256:HEX]`.
//!
//! The registry is always explicit (`REGISTRY` is `host`, `host:port` or
//! `[v6-address]:port`); the repository and tag follow the distribution
//! grammar (lower-case path components separated by `/`, tags of at most
//! 128 characters); the only digest algorithm accepted is sha256.

use std::fmt;

/// The URL scheme of a reference in a configuration.
pub const SCHEME: &str = "oci://";

/// Whether a configured plugin path is an OCI reference.
pub fn is_oci(path: &str) -> bool {
    path.starts_with(SCHEME)
}

/// A parsed reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    /// `host[:port]`, as written.
    pub registry: String,
    /// The repository, e.g. `policies/gpu`.
    pub repository: String,
    pub tag: Option<String>,
    /// `sha256:` and 64 lower-case hex digits.
    pub digest: Option<String>,
}

impl Reference {
    /// Parses `oci://REGISTRY/REPOSITORY[:TAG][@sha256:HEX]`; the `oci://`
    /// prefix may be left out (the command line's form, as other OCI tools
    /// write references). Errors say what is wrong, not where the text
    /// came from.
    pub fn parse(text: &str) -> Result<Self, String> {
        let rest = text.strip_prefix(SCHEME).unwrap_or(text);
        if rest.is_empty() {
            return Err("empty reference".into());
        }
        if rest.len() > 1024 {
            return Err("reference is longer than 1024 characters".into());
        }
        let (rest, digest) = match rest.rsplit_once('@') {
            Some((r, d)) => (r, Some(parse_digest(d)?)),
            None => (rest, None),
        };
        let Some((registry, path)) = rest.split_once('/') else {
            return Err(format!(
                "{rest:?} names no repository: write REGISTRY/REPOSITORY (e.g. oci://ghcr.io/org/policy@sha256:...)"
            ));
        };
        check_registry(registry)?;
        let (repository, tag) = match path.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => (r, Some(t)),
            _ => (path, None),
        };
        check_repository(repository)?;
        if let Some(t) = tag {
            check_tag(t)?;
        }
        Ok(Self {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag: tag.map(str::to_string),
            digest,
        })
    }

    /// The host (and port) requests go to: Docker Hub's API host for
    /// `docker.io`.
    pub fn api_host(&self) -> &str {
        match self.registry.as_str() {
            "docker.io" | "index.docker.io" => "registry-1.docker.io",
            r => r,
        }
    }

    /// The repository in requests: Docker Hub's official images live
    /// under `library/`.
    pub fn api_repository(&self) -> String {
        if self.api_host() == "registry-1.docker.io" && !self.repository.contains('/') {
            format!("library/{}", self.repository)
        } else {
            self.repository.clone()
        }
    }

    /// The manifest a request names: the digest when there is one (a tag
    /// beside it is only a label), else the tag.
    pub fn manifest_ref(&self) -> Option<&str> {
        self.digest.as_deref().or(self.tag.as_deref())
    }

    /// The same repository pinned to `digest` (the tag kept as a label).
    pub fn pinned(&self, digest: &str) -> Self {
        Self {
            digest: Some(digest.to_string()),
            ..self.clone()
        }
    }

    /// `oci://REGISTRY/REPOSITORY@DIGEST`, the form to put in a
    /// configuration.
    pub fn by_digest(&self, digest: &str) -> String {
        format!("{SCHEME}{}/{}@{digest}", self.registry, self.repository)
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

/// `sha256:` and 64 lower-case hex digits.
pub fn parse_digest(d: &str) -> Result<String, String> {
    let Some((algorithm, hex)) = d.split_once(':') else {
        return Err(format!(
            "invalid digest {d:?}: expected sha256:<64 hex digits>"
        ));
    };
    if algorithm != "sha256" {
        return Err(format!(
            "digest algorithm {algorithm:?} is not supported (only sha256)"
        ));
    }
    if hex.len() != 64
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(format!(
            "invalid digest {d:?}: expected sha256:<64 lower-case hex digits>"
        ));
    }
    Ok(d.to_string())
}

fn check_registry(r: &str) -> Result<(), String> {
    let bad = || {
        Err(format!(
            "invalid registry {r:?}: expected HOST or HOST:PORT"
        ))
    };
    let (host, port) = if let Some(v6) = r.strip_prefix('[') {
        match v6.split_once(']') {
            Some((addr, rest)) if !addr.is_empty() => (addr, rest.strip_prefix(':')),
            _ => return bad(),
        }
    } else {
        match r.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (r, None),
        }
    };
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b':');
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.parse::<u16>().is_ok());
    if host_ok && port_ok {
        Ok(())
    } else {
        bad()
    }
}

/// Distribution's grammar: components of `[a-z0-9]+` joined by `.`, `_`,
/// `__` or runs of `-`, separated by `/`.
fn check_repository(repo: &str) -> Result<(), String> {
    let ok = !repo.is_empty()
        && repo.len() <= 255
        && repo.split('/').all(|c| {
            let b = c.as_bytes();
            let alnum = |x: &u8| x.is_ascii_lowercase() || x.is_ascii_digit();
            !b.is_empty()
                && alnum(&b[0])
                && alnum(&b[b.len() - 1])
                && b.iter()
                    .all(|x| alnum(x) || matches!(x, b'.' | b'_' | b'-'))
                && !c.contains("..")
                && !c.contains("___")
                && !c.contains("._")
                && !c.contains("_.")
                && !c.contains(".-")
                && !c.contains("-.")
                && !c.contains("_-")
                && !c.contains("-_")
        });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid repository {repo:?}: lower-case letters, digits and . _ - between them, components separated by /"
        ))
    }
}

fn check_tag(t: &str) -> Result<(), String> {
    let b = t.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter()
            .all(|x| x.is_ascii_alphanumeric() || matches!(x, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid tag {t:?}: at most 128 letters, digits, _ . -, not starting with . or -"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn parses_digests_tags_and_ports() {
        let r = Reference::parse(&format!("oci://127.0.0.1:5000/policies/gpu@{D}")).unwrap();
        assert_eq!(
            (
                r.registry.as_str(),
                r.repository.as_str(),
                r.tag,
                r.digest.as_deref()
            ),
            ("127.0.0.1:5000", "policies/gpu", None, Some(D))
        );
        let r = Reference::parse("ghcr.io/org/gpu-policy:v1.2").unwrap();
        assert_eq!(r.tag.as_deref(), Some("v1.2"));
        assert_eq!(r.manifest_ref(), Some("v1.2"));
        assert_eq!(r.to_string(), "oci://ghcr.io/org/gpu-policy:v1.2");
        let r = Reference::parse(&format!("oci://[::1]:5000/a/b:t@{D}")).unwrap();
        assert_eq!(r.registry, "[::1]:5000");
        assert_eq!(r.manifest_ref(), Some(D), "the digest wins over the tag");
        let hub = Reference::parse("docker.io/busybox:1").unwrap();
        assert_eq!(
            (hub.api_host(), hub.api_repository().as_str()),
            ("registry-1.docker.io", "library/busybox")
        );
    }

    #[test]
    fn refuses_bad_references_saying_why() {
        for (text, why) in [
            ("oci://", "empty reference"),
            ("oci://registry", "names no repository"),
            ("oci://r.io/Policies", "invalid repository"),
            ("oci://r.io/a//b", "invalid repository"),
            ("oci://r.io/a:-x", "invalid tag"),
            ("oci://r.io/a@sha512:00", "only sha256"),
            ("oci://r.io/a@sha256:ABC", "invalid digest"),
            ("oci://r.io:99999/a", "invalid registry"),
            ("oci://r io/a", "invalid registry"),
        ] {
            let e = Reference::parse(text).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
    }
}
