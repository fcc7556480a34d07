//! The distribution API (`/v2/...`) over HTTP: the manifest and blob
//! requests a wasm artifact needs, with authentication (Basic, or Bearer
//! tokens from the challenge's realm), retries with backoff, per-request
//! timeouts, bounded bodies and digest verification of everything read.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use reqwest::header::{HeaderMap, ACCEPT, CONTENT_TYPE, LOCATION, RETRY_AFTER, WWW_AUTHENTICATE};
use reqwest::{RequestBuilder, Response, StatusCode};
use sha2::{Digest, Sha256};

use super::artifact::{self, Descriptor};
use super::auth::{parse_challenge, Challenge, Credential, Credentials};
use super::reference::Reference;
use super::store::Store;
use super::Settings;

/// The largest manifest read (distribution's own limit is 4 MiB).
pub const MAX_MANIFEST: u64 = 4 << 20;
/// The largest token response or error body read.
const MAX_SMALL_BODY: u64 = 1 << 20;
/// Longest pause between attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(8);

/// Why a request failed; `transient` when trying again later may work
/// (connection errors, timeouts, 429 and 5xx after the retries).
#[derive(Debug, Clone)]
pub struct Failure {
    pub cause: String,
    pub transient: bool,
}

fn permanent(cause: impl Into<String>) -> Failure {
    Failure {
        cause: cause.into(),
        transient: false,
    }
}

/// What a pull produced.
#[derive(Debug, Clone)]
pub struct Pulled {
    /// The component.
    pub bytes: Vec<u8>,
    /// The manifest's digest (what a configuration pins).
    pub manifest_digest: String,
    pub layer: Descriptor,
    /// Read from the local store, not the registry.
    pub from_store: bool,
}

#[derive(Clone)]
enum Authorization {
    Basic { username: String, password: String },
    Bearer(String),
}

/// A client for one operation (a pull or a push): credentials are read
/// when it is made, tokens kept for its lifetime.
pub struct Client {
    http: reqwest::Client,
    settings: Settings,
    credentials: Credentials,
    auth: Mutex<HashMap<String, Authorization>>,
}

impl Client {
    pub fn new(settings: &Settings) -> Result<Self, String> {
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .connect_timeout(Duration::from_secs(10).min(settings.timeout))
            .timeout(settings.timeout)
            .user_agent(concat!("wasmsched/", env!("CARGO_PKG_VERSION")));
        if let Some(ca) = &settings.ca_file {
            let pem = crate::input::regular::read_regular(ca, MAX_SMALL_BODY)
                .map_err(|e| format!("CA file {}: {e}", ca.display()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| format!("CA file {}: {e}", ca.display()))?;
            if certs.is_empty() {
                return Err(format!("CA file {}: no PEM certificate", ca.display()));
            }
            for c in certs {
                builder = builder.add_root_certificate(c);
            }
        }
        let http = builder
            .build()
            .map_err(|e| format!("HTTP client: {}", innermost(&e)))?;
        let credentials = match &settings.credentials {
            Some(path) => Credentials::read(path)?,
            None => Credentials::default(),
        };
        Ok(Self {
            http,
            settings: settings.clone(),
            credentials,
            auth: Mutex::default(),
        })
    }

    fn url(&self, r: &Reference, tail: &str) -> String {
        let scheme = if self.settings.is_plain_http(&r.registry) {
            "http"
        } else {
            "https"
        };
        format!(
            "{scheme}://{}/v2/{}/{tail}",
            r.api_host(),
            r.api_repository()
        )
    }

    /// Pulls the component `reference` names, verifying the manifest's
    /// digest (against the reference's, or the registry's header for a
    /// tag) and the layer's (against the manifest). With a store, a layer
    /// stored before is not downloaded again, and what is pulled is
    /// stored.
    pub async fn pull(&self, r: &Reference, store: Option<&Store>) -> Result<Pulled, Failure> {
        let max = crate::wasm::source::MAX_MODULE_SIZE;
        let (manifest, manifest_digest, content_type) = self.manifest(r).await?;
        let layer = artifact::component_layer(&manifest, content_type.as_deref(), max)
            .map_err(|e| permanent(format!("manifest {manifest_digest} {e}")))?;
        let stored_blob = store.and_then(|s| s.get(&layer.digest, layer.size));
        let bytes = match stored_blob {
            Some(b) => b,
            None => self.blob(r, &layer).await?,
        };
        if let Some(s) = store {
            s.put(&manifest_digest, &manifest);
            s.put(&layer.digest, &bytes);
        }
        Ok(Pulled {
            bytes,
            manifest_digest,
            layer,
            from_store: false,
        })
    }

    /// The manifest's bytes, its digest (verified) and content type.
    async fn manifest(&self, r: &Reference) -> Result<(Vec<u8>, String, Option<String>), Failure> {
        let Some(name) = r.manifest_ref() else {
            return Err(permanent(
                "names neither a digest nor a tag (add @sha256:DIGEST)",
            ));
        };
        let url = self.url(r, &format!("manifests/{name}"));
        let accept = artifact::accept_header();
        let resp = self
            .send(r, false, || {
                self.http.get(&url).header(ACCEPT, accept.as_str())
            })
            .await?;
        let resp = expect(resp, &[StatusCode::OK], &format!("GET {url}")).await?;
        let header_digest = header(resp.headers(), "docker-content-digest");
        let content_type = header(resp.headers(), CONTENT_TYPE.as_str());
        let body = read_limited(resp, MAX_MANIFEST, "manifest").await?;
        let computed = artifact::digest_of(&body);
        if let Some(want) = &r.digest {
            if *want != computed {
                return Err(permanent(format!(
                    "manifest digest mismatch: asked for {want}, the registry sent content with digest {computed}"
                )));
            }
        } else if let Some(h) = header_digest.filter(|h| *h != computed) {
            return Err(permanent(format!(
                "manifest digest mismatch: the registry says {h}, its content has digest {computed}"
            )));
        }
        Ok((body, computed, content_type))
    }

    /// The layer's bytes, verified against its descriptor (size and
    /// digest); a download cut off midway is tried again.
    async fn blob(&self, r: &Reference, layer: &Descriptor) -> Result<Vec<u8>, Failure> {
        let url = self.url(r, &format!("blobs/{}", layer.digest));
        let mut attempt = 0;
        loop {
            attempt += 1;
            let resp = self.send(r, false, || self.http.get(&url)).await?;
            let resp = expect(resp, &[StatusCode::OK], &format!("GET {url}")).await?;
            match read_verified(resp, layer).await {
                Err(f) if f.transient && attempt <= self.settings.retries => {
                    tokio::time::sleep(backoff(attempt, None)).await;
                }
                other => return other,
            }
        }
    }

    /// Pushes a wasm artifact: both blobs (unless the registry has them),
    /// then the manifest under the reference's tag (or its digest);
    /// returns the manifest's digest.
    pub async fn push(
        &self,
        r: &Reference,
        component: Bytes,
        config: Bytes,
        manifest: Bytes,
    ) -> Result<String, Failure> {
        self.upload(r, config).await?;
        self.upload(r, component).await?;
        let digest = artifact::digest_of(&manifest);
        let name = r.tag.clone().unwrap_or_else(|| digest.clone());
        let url = self.url(r, &format!("manifests/{name}"));
        let resp = self
            .send(r, true, || {
                self.http
                    .put(&url)
                    .header(CONTENT_TYPE, artifact::MANIFEST_MEDIA_TYPE)
                    .body(manifest.clone())
            })
            .await?;
        let resp = expect(resp, &[StatusCode::CREATED], &format!("PUT {url}")).await?;
        if let Some(h) = header(resp.headers(), "docker-content-digest").filter(|h| *h != digest) {
            return Err(permanent(format!(
                "the registry stored the manifest as {h}, its content has digest {digest}"
            )));
        }
        Ok(digest)
    }

    /// Uploads a blob in one request (POST for a session, PUT with the
    /// digest), unless the registry already has it.
    async fn upload(&self, r: &Reference, blob: Bytes) -> Result<(), Failure> {
        let digest = artifact::digest_of(&blob);
        let url = self.url(r, &format!("blobs/{digest}"));
        let head = self.send(r, true, || self.http.head(&url)).await?;
        if head.status() == StatusCode::OK {
            return Ok(());
        }
        let start = self.url(r, "blobs/uploads/");
        let resp = self.send(r, true, || self.http.post(&start)).await?;
        let resp = expect(resp, &[StatusCode::ACCEPTED], &format!("POST {start}")).await?;
        let location = header(resp.headers(), LOCATION.as_str())
            .ok_or_else(|| permanent(format!("POST {start}: no Location in the answer")))?;
        let mut session = reqwest::Url::parse(&start)
            .and_then(|base| base.join(&location))
            .map_err(|e| permanent(format!("POST {start}: bad Location {location:?}: {e}")))?;
        session.query_pairs_mut().append_pair("digest", &digest);
        let resp = self
            .send(r, true, || {
                self.http
                    .put(session.clone())
                    .header(CONTENT_TYPE, "application/octet-stream")
                    .body(blob.clone())
            })
            .await?;
        expect(resp, &[StatusCode::CREATED], &format!("PUT {session}")).await?;
        Ok(())
    }

    /// Sends a request (built afresh for each attempt), authenticating
    /// once when the registry challenges it.
    async fn send(
        &self,
        r: &Reference,
        push: bool,
        make: impl Fn() -> RequestBuilder,
    ) -> Result<Response, Failure> {
        let scope = format!(
            "repository:{}:{}",
            r.api_repository(),
            if push { "pull,push" } else { "pull" }
        );
        let resp = self.execute(|| self.authorize(make(), &scope)).await?;
        if resp.status() != StatusCode::UNAUTHORIZED {
            return Ok(resp);
        }
        self.authenticate(r, &scope, resp.headers()).await?;
        let resp = self.execute(|| self.authorize(make(), &scope)).await?;
        if resp.status() == StatusCode::UNAUTHORIZED {
            let refused = status_line(resp).await;
            return Err(permanent(format!(
                "{} refused the credentials{}: {refused}",
                r.registry,
                self.credentials_source(r)
            )));
        }
        Ok(resp)
    }

    fn authorize(&self, req: RequestBuilder, scope: &str) -> RequestBuilder {
        match self.auth.lock().get(scope) {
            Some(Authorization::Basic { username, password }) => {
                req.basic_auth(username, Some(password))
            }
            Some(Authorization::Bearer(t)) => req.bearer_auth(t),
            None => req,
        }
    }

    /// Answers a 401's challenge: Basic with the file's credentials, or a
    /// Bearer token from the realm.
    async fn authenticate(
        &self,
        r: &Reference,
        scope: &str,
        headers: &HeaderMap,
    ) -> Result<(), Failure> {
        let credential = self.credentials.get(&r.registry);
        let challenge = header(headers, WWW_AUTHENTICATE.as_str());
        let auth = match (challenge.as_deref().and_then(parse_challenge), credential) {
            (_, Some(Credential::Token(t))) => Authorization::Bearer(t.clone()),
            (Some(Challenge::Basic), Some(Credential::Basic { username, password })) => {
                Authorization::Basic {
                    username: username.clone(),
                    password: password.clone(),
                }
            }
            (Some(Challenge::Basic), None) => {
                return Err(permanent(format!(
                    "{} requires credentials (401){}",
                    r.registry,
                    self.credentials_source(r)
                )))
            }
            (
                Some(Challenge::Bearer {
                    realm,
                    service,
                    scope: asked,
                }),
                credential,
            ) => {
                let scope = asked.unwrap_or_else(|| scope.to_string());
                Authorization::Bearer(self.token(&realm, service, &scope, credential).await?)
            }
            (None, _) => {
                return Err(permanent(format!(
                    "{} answered 401 with no usable challenge ({:?})",
                    r.registry,
                    challenge.unwrap_or_default()
                )))
            }
        };
        self.auth.lock().insert(scope.to_string(), auth);
        Ok(())
    }

    /// A bearer token from `realm` (docker's token protocol).
    async fn token(
        &self,
        realm: &str,
        service: Option<String>,
        scope: &str,
        credential: Option<&Credential>,
    ) -> Result<String, Failure> {
        let mut url = reqwest::Url::parse(realm)
            .map_err(|e| permanent(format!("token realm {realm:?}: {e}")))?;
        let plain = url.scheme() == "http";
        let realm_host = url.host_str().unwrap_or_default().to_string();
        let realm_host = match url.port() {
            Some(p) => format!("{realm_host}:{p}"),
            None => realm_host,
        };
        if plain && credential.is_some() && !self.settings.is_plain_http(&realm_host) {
            return Err(permanent(format!(
                "token realm {realm} is plain HTTP: credentials are not sent there (list {realm_host} in plainHTTP to allow it)"
            )));
        }
        {
            let mut q = url.query_pairs_mut();
            if let Some(s) = &service {
                q.append_pair("service", s);
            }
            q.append_pair("scope", scope);
        }
        let resp = self
            .execute(|| {
                let req = self.http.get(url.clone());
                match credential {
                    Some(Credential::Basic { username, password }) => {
                        req.basic_auth(username, Some(password))
                    }
                    _ => req,
                }
            })
            .await?;
        let resp = expect(resp, &[StatusCode::OK], &format!("token from {realm}")).await?;
        let body = read_limited(resp, MAX_SMALL_BODY, "token").await?;
        #[derive(serde::Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
        }
        let t: Token = serde_json::from_slice(&body)
            .map_err(|e| permanent(format!("token from {realm}: not a token answer: {e}")))?;
        t.token
            .or(t.access_token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| permanent(format!("token from {realm}: the answer has no token")))
    }

    fn credentials_source(&self, r: &Reference) -> String {
        match &self.settings.credentials {
            None => "; no credentials file is configured".into(),
            Some(p) if self.credentials.get(&r.registry).is_none() => {
                format!("; {} has none for {}", p.display(), r.registry)
            }
            Some(p) => format!(" (from {})", p.display()),
        }
    }

    /// Sends with retries: connection errors, timeouts, 408, 429 and 5xx
    /// are tried again after a backoff (0.5 s doubling, at most 8 s, or
    /// the server's Retry-After up to 30 s), `retries` times.
    async fn execute(&self, make: impl Fn() -> RequestBuilder) -> Result<Response, Failure> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let req = make().build().map_err(|e| permanent(innermost(&e)))?;
            let what = format!("{} {}", req.method(), req.url());
            let last = attempt > self.settings.retries;
            match self.http.execute(req).await {
                Err(e) if last => {
                    return Err(Failure {
                        cause: format!(
                            "{what}: {}{}",
                            describe(&e, self.settings.timeout),
                            tries(attempt)
                        ),
                        transient: true,
                    })
                }
                Err(e) => {
                    tracing::debug!(request = %what, error = %describe(&e, self.settings.timeout), attempt, "registry request failed; retrying");
                    tokio::time::sleep(backoff(attempt, None)).await;
                }
                Ok(resp) if retryable(resp.status()) && !last => {
                    let after = header(resp.headers(), RETRY_AFTER.as_str())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    tracing::debug!(request = %what, status = %resp.status(), attempt, "registry request failed; retrying");
                    tokio::time::sleep(backoff(attempt, after)).await;
                }
                Ok(resp) if retryable(resp.status()) => {
                    let line = status_line(resp).await;
                    return Err(Failure {
                        cause: format!("{what}: {line}{}", tries(attempt)),
                        transient: true,
                    });
                }
                Ok(resp) => return Ok(resp),
            }
        }
    }
}

/// A pinned artifact from the store, when both its manifest and its
/// layer are there and intact.
pub(super) fn stored(store: &Store, digest: &str, max: u64) -> Option<Pulled> {
    let manifest = store.get(digest, MAX_MANIFEST)?;
    let layer = artifact::component_layer(&manifest, None, max).ok()?;
    let bytes = store.get(&layer.digest, layer.size)?;
    Some(Pulled {
        bytes,
        manifest_digest: digest.to_string(),
        layer,
        from_store: true,
    })
}

fn tries(attempt: u32) -> String {
    if attempt > 1 {
        format!(" (after {attempt} attempts)")
    } else {
        String::new()
    }
}

fn retryable(s: StatusCode) -> bool {
    matches!(s.as_u16(), 408 | 429 | 500 | 502 | 503 | 504)
}

fn backoff(attempt: u32, after: Option<Duration>) -> Duration {
    let base = Duration::from_millis(500)
        .saturating_mul(1 << (attempt - 1).min(5))
        .min(MAX_BACKOFF);
    // ±25% so that replicas retrying together spread out.
    let jittered = base.mul_f64(0.75 + fastrand::f64() / 2.0);
    match after {
        Some(a) => jittered.max(a.min(Duration::from_secs(30))),
        None => jittered,
    }
}

fn header(h: &HeaderMap, name: &str) -> Option<String> {
    h.get(name)?.to_str().ok().map(str::to_string)
}

/// The response when its status is one of `ok`, else the status line
/// with the registry's error code and message.
async fn expect(resp: Response, ok: &[StatusCode], what: &str) -> Result<Response, Failure> {
    if ok.contains(&resp.status()) {
        return Ok(resp);
    }
    let transient = retryable(resp.status());
    let line = status_line(resp).await;
    Err(Failure {
        cause: format!("{what}: {line}"),
        transient,
    })
}

/// `404 Not Found (MANIFEST_UNKNOWN: manifest unknown)`.
async fn status_line(resp: Response) -> String {
    let status = resp.status();
    let body = read_limited(resp, 64 << 10, "error")
        .await
        .unwrap_or_default();
    #[derive(serde::Deserialize)]
    struct Errors {
        errors: Vec<ErrorItem>,
    }
    #[derive(serde::Deserialize)]
    struct ErrorItem {
        code: Option<String>,
        message: Option<String>,
    }
    let detail = serde_json::from_slice::<Errors>(&body)
        .ok()
        .and_then(|e| e.errors.into_iter().next())
        .map(|e| {
            let parts: Vec<String> = [e.code, e.message].into_iter().flatten().collect();
            format!(" ({})", parts.join(": "))
        })
        .unwrap_or_default();
    format!("{status}{detail}")
}

/// At most `limit` bytes of the body.
async fn read_limited(mut resp: Response, limit: u64, what: &str) -> Result<Vec<u8>, Failure> {
    let mut out = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| Failure {
        cause: format!("reading the {what}: {}", innermost(&e)),
        transient: true,
    })? {
        if out.len() as u64 + chunk.len() as u64 > limit {
            return Err(permanent(format!(
                "the {what} is larger than the {}",
                crate::input::regular::limit_text(limit)
            )));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// The blob, checked against its descriptor as it arrives: never more
/// than the descriptor's size is read, and the digest must match.
async fn read_verified(mut resp: Response, layer: &Descriptor) -> Result<Vec<u8>, Failure> {
    let mut hasher = Sha256::new();
    let mut out = Vec::with_capacity(layer.size.min(64 << 20) as usize);
    while let Some(chunk) = resp.chunk().await.map_err(|e| Failure {
        cause: format!("reading layer {}: {}", layer.digest, innermost(&e)),
        transient: true,
    })? {
        if out.len() as u64 + chunk.len() as u64 > layer.size {
            return Err(permanent(format!(
                "layer {} is larger than the {} bytes its descriptor says",
                layer.digest, layer.size
            )));
        }
        hasher.update(&chunk);
        out.extend_from_slice(&chunk);
    }
    let got = format!("sha256:{}", hex::encode(hasher.finalize()));
    if got != layer.digest {
        return Err(permanent(format!(
            "layer digest mismatch: the manifest says {}, the registry sent {} bytes with digest {got}",
            layer.digest,
            out.len()
        )));
    }
    Ok(out)
}

/// A request error in a few words: a timeout, a refused connection, a
/// TLS failure (the innermost cause).
fn describe(e: &reqwest::Error, timeout: Duration) -> String {
    if e.is_timeout() {
        format!("timed out after {}", humantime::format_duration(timeout))
    } else if e.is_connect() {
        format!("cannot connect: {}", innermost(e))
    } else {
        innermost(e)
    }
}

fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    crate::escape::escape(&cur.to_string()).into_owned()
}
