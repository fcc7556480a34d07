//! Registry credentials and authentication challenges.
//!
//! Credentials come from a docker config file: the `.dockerconfigjson` key
//! of a Kubernetes `kubernetes.io/dockerconfigjson` Secret (`{"auths":
//! {"REGISTRY": {"auth": "base64(user:password)"}}}`, or `username` and
//! `password`, or a `registrytoken`), mounted as a file; the older
//! `.dockercfg` form (the same map without `auths`) is read too. The file
//! is read at every pull, so a rotated Secret is used without a restart.
//!
//! A registry answers an unauthenticated request with 401 and a
//! `WWW-Authenticate` challenge: `Basic` (the credentials are sent as they
//! are) or `Bearer realm=...,service=...,scope=...` (a token is fetched
//! from the realm, with the credentials when there are any, anonymously
//! otherwise, and sent instead).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::input::regular::{self, FileError};

/// The largest credentials file read.
const MAX_CREDENTIALS: u64 = 1 << 20;

/// What a registry accepts from us.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    Basic {
        username: String,
        password: String,
    },
    /// A bearer token given in the file (`registrytoken`).
    Token(String),
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a secret.
        match self {
            Self::Basic { username, .. } => write!(f, "Basic({username}, ***)"),
            Self::Token(_) => write!(f, "Token(***)"),
        }
    }
}

#[derive(Deserialize)]
struct Entry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
    registrytoken: Option<String>,
}

/// The credentials of a docker config file, by registry.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    by_host: BTreeMap<String, Credential>,
}

impl Credentials {
    /// Reads a docker config file (at most 1 MiB); errors name the file.
    pub fn read(path: &Path) -> Result<Self, String> {
        let shown = path.display();
        let raw = regular::read_regular(path, MAX_CREDENTIALS)
            .map_err(|e: FileError| format!("credentials file {shown}: {e}"))?;
        Self::parse(&raw).map_err(|e| format!("credentials file {shown}: {e}"))
    }

    /// Parses a docker config's JSON.
    pub fn parse(raw: &[u8]) -> Result<Self, String> {
        let value: serde_json::Value =
            serde_json::from_slice(raw).map_err(|e| format!("not JSON: {e}"))?;
        let map = match value.get("auths") {
            Some(a) => a.clone(),
            // `.dockercfg`: the map itself.
            None => value,
        };
        let entries: BTreeMap<String, Entry> =
            serde_json::from_value(map).map_err(|e| format!("auths: {e}"))?;
        let mut by_host = BTreeMap::new();
        for (key, e) in entries {
            let cred = if let Some(t) = e.registrytoken.filter(|t| !t.is_empty()) {
                Credential::Token(t)
            } else if let (Some(u), Some(p)) = (&e.username, &e.password) {
                Credential::Basic {
                    username: u.clone(),
                    password: p.clone(),
                }
            } else if let Some(a) = e.auth.filter(|a| !a.is_empty()) {
                let decoded = base64_decode(a.trim())
                    .and_then(|b| String::from_utf8(b).ok())
                    .ok_or_else(|| format!("auths.{key}.auth: not base64 of USER:PASSWORD"))?;
                let Some((u, p)) = decoded.split_once(':') else {
                    return Err(format!("auths.{key}.auth: not base64 of USER:PASSWORD"));
                };
                Credential::Basic {
                    username: u.to_string(),
                    password: p.to_string(),
                }
            } else {
                // An entry with only an identity token or a helper: nothing
                // this client can use; the registry is then anonymous.
                continue;
            };
            by_host.insert(normalize_host(&key), cred);
        }
        Ok(Self { by_host })
    }

    /// The credential for `registry` (`host[:port]`), if the file has one.
    pub fn get(&self, registry: &str) -> Option<&Credential> {
        let host = normalize_host(registry);
        self.by_host.get(&host)
    }

    pub fn is_empty(&self) -> bool {
        self.by_host.is_empty()
    }
}

/// A docker config key as a `host[:port]`: `https://index.docker.io/v1/`,
/// `registry.example.com`, `http://127.0.0.1:5000/v2/` all name a host;
/// Docker Hub's names are one.
fn normalize_host(key: &str) -> String {
    let k = key
        .trim()
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    let host = k.split('/').next().unwrap_or(k).to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" | "docker.io" => "docker.io".into(),
        _ => host,
    }
}

/// A `WWW-Authenticate` challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    Basic,
    Bearer {
        realm: String,
        service: Option<String>,
        scope: Option<String>,
    },
}

/// Parses a `WWW-Authenticate` header value (the first challenge).
pub fn parse_challenge(header: &str) -> Option<Challenge> {
    let header = header.trim();
    let (scheme, params) = header.split_once(' ').unwrap_or((header, ""));
    if scheme.eq_ignore_ascii_case("basic") {
        return Some(Challenge::Basic);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let params = parse_params(params);
    let get = |k: &str| {
        params
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(k))
            .map(|(_, v)| v.clone())
    };
    Some(Challenge::Bearer {
        realm: get("realm")?,
        service: get("service"),
        scope: get("scope"),
    })
}

/// `key="value", key=token, ...` with quoted values that may hold commas
/// and backslash escapes.
fn parse_params(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c == ',' {
                break;
            }
            key.push(c);
            chars.next();
        }
        if key.is_empty() && chars.peek().is_none() {
            return out;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'=') {
            chars.next();
            if chars.peek() == Some(&'"') {
                chars.next();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => value.extend(chars.next()),
                        '"' => break,
                        c => value.push(c),
                    }
                }
            } else {
                while let Some(&c) = chars.peek() {
                    if c == ',' {
                        break;
                    }
                    value.push(c);
                    chars.next();
                }
            }
        }
        out.push((key.trim().to_string(), value.trim().to_string()));
        if chars.peek().is_none() {
            return out;
        }
    }
}

/// Standard base64, with or without padding; `None` when malformed.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    use base64::Engine as _;
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    LENIENT.decode(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kubernetes_docker_config_secrets() {
        // `kubectl create secret docker-registry` writes this shape.
        let c = Credentials::parse(
            br#"{"auths":{"https://registry.example.com/v2/":{"username":"u","password":"p","auth":"dTpw"},
                 "127.0.0.1:5000":{"auth":"YWxpY2U6czNjcjN0OndpdGg6Y29sb25z"},
                 "https://index.docker.io/v1/":{"auth":"aHViOnRvaw=="},
                 "tok.example.com":{"registrytoken":"abc"},
                 "helper.example.com":{"identitytoken":"x"}}}"#,
        )
        .unwrap();
        let basic = |u: &str, p: &str| Credential::Basic {
            username: u.into(),
            password: p.into(),
        };
        assert_eq!(c.get("registry.example.com"), Some(&basic("u", "p")));
        assert_eq!(
            c.get("127.0.0.1:5000"),
            Some(&basic("alice", "s3cr3t:with:colons"))
        );
        assert_eq!(c.get("docker.io"), Some(&basic("hub", "tok")));
        assert_eq!(
            c.get("tok.example.com"),
            Some(&Credential::Token("abc".into()))
        );
        assert_eq!(c.get("helper.example.com"), None);
        assert_eq!(c.get("other.example.com"), None);
        // `.dockercfg`: no `auths` level.
        let old = Credentials::parse(br#"{"r.io":{"auth":"dTpw"}}"#).unwrap();
        assert_eq!(old.get("r.io"), Some(&basic("u", "p")));
        let e = Credentials::parse(br#"{"auths":{"r.io":{"auth":"!!"}}}"#).unwrap_err();
        assert_eq!(e, "auths.r.io.auth: not base64 of USER:PASSWORD");
        // Secrets never reach a log line through Debug.
        assert_eq!(format!("{:?}", basic("u", "p")), "Basic(u, ***)");
    }

    #[test]
    fn parses_challenges() {
        assert_eq!(
            parse_challenge(
                r#"Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:a/b:pull,push""#
            ),
            Some(Challenge::Bearer {
                realm: "https://auth.example.com/token".into(),
                service: Some("registry.example.com".into()),
                scope: Some("repository:a/b:pull,push".into()),
            })
        );
        assert_eq!(
            parse_challenge(r#"Basic realm="wasmsched-test""#),
            Some(Challenge::Basic)
        );
        assert_eq!(
            parse_challenge("bearer realm=https://a/t"),
            Some(Challenge::Bearer {
                realm: "https://a/t".into(),
                service: None,
                scope: None
            })
        );
        assert_eq!(parse_challenge("Negotiate"), None);
        assert_eq!(parse_challenge("Bearer service=x"), None);
    }

    #[test]
    fn base64_round_trips() {
        assert_eq!(base64_decode("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(base64_decode("aGVsbG8").unwrap(), b"hello");
        assert_eq!(base64_decode("").unwrap(), b"");
        assert_eq!(base64_decode("a*"), None);
    }
}
