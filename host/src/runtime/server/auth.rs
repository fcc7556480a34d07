//! Delegated authentication and authorization, as kube-scheduler's
//! `--authentication-kubeconfig` / `--authorization-kubeconfig` do: the
//! request's bearer token goes to the API server in a TokenReview; the
//! user it names must then be allowed the request in a
//! SubjectAccessReview (`nonResourceURLs: ["/metrics"]`, verb `get` in
//! RBAC terms). Answers are cached for [`CACHE_TTL`].
//!
//! Paths in `--authorization-always-allow-paths` (the probes by default)
//! skip both. Elsewhere: no token or a token the API server does not
//! accept is 401, a user without permission 403, and an API server that
//! cannot be asked 503 (the request is refused, never let through).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use super::ttl::TtlCache;

/// How long a review's answer is reused (kube-scheduler's default for
/// both kinds, allowed and denied).
pub const CACHE_TTL: Duration = Duration::from_secs(10);
/// Entries per cache.
const CACHE_SIZE: usize = 1024;
/// Reviews in flight at once: a flood of requests with distinct tokens
/// queues here instead of flooding the API server.
const MAX_REVIEWS: usize = 4;
/// A review that takes longer fails the request (503).
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// The API clients reviews are sent with.
#[derive(Clone)]
pub struct Clients {
    /// TokenReviews (`tokenreviews` `create`).
    pub authentication: kube::Client,
    /// SubjectAccessReviews (`subjectaccessreviews` `create`).
    pub authorization: kube::Client,
}

/// A bad `--authorization-always-allow-paths` entry.
#[derive(Debug, thiserror::Error)]
#[error("--authorization-always-allow-paths: {0:?} must start with '/' (a path, or a prefix ending in '/*')")]
pub struct PathError(String);

/// What a request gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// 401: no token, or the API server does not know it.
    Unauthorized,
    /// 403, with the reason.
    Forbidden(String),
    /// 503: the API server could not be asked.
    Unavailable(String),
}

/// `--authorization-always-allow-paths`: exact paths, and prefixes
/// (written `/prefix/*`).
#[derive(Debug, Default)]
pub struct AllowPaths {
    exact: Vec<String>,
    prefixes: Vec<String>,
}

impl AllowPaths {
    pub fn parse(paths: &[String]) -> Result<Self, PathError> {
        let mut this = Self::default();
        for p in paths.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
            if !p.starts_with('/') {
                return Err(PathError(p.to_string()));
            }
            match p.strip_suffix('*') {
                Some(prefix) => this.prefixes.push(prefix.to_string()),
                None => this.exact.push(p.to_string()),
            }
        }
        Ok(this)
    }

    pub fn allows(&self, path: &str) -> bool {
        self.exact.iter().any(|p| p == path) || self.prefixes.iter().any(|p| path.starts_with(p))
    }
}

/// The check in front of every route.
pub struct Guard {
    always_allow: AllowPaths,
    reviewer: Reviewer,
}

impl Guard {
    pub fn new(always_allow: AllowPaths, clients: Clients) -> Self {
        Self {
            always_allow,
            reviewer: Reviewer::new(clients),
        }
    }

    fn always_allowed(&self, path: &str) -> bool {
        self.always_allow.allows(path)
    }

    /// For the start-up log line.
    pub fn describe(&self, path: &str) -> &'static str {
        if self.always_allowed(path) {
            "open to anyone (--authorization-always-allow-paths)"
        } else {
            "delegated authentication and authorization"
        }
    }

    /// The decision for a request (`verb` as RBAC names it: the method in
    /// lower case).
    pub async fn decide(&self, verb: &str, path: &str, headers: &HeaderMap) -> Decision {
        if self.always_allowed(path) {
            return Decision::Allow;
        }
        let Some(token) = bearer_token(headers) else {
            return Decision::Unauthorized;
        };
        let user = match self.reviewer.authenticate(token).await {
            Ok(Some(user)) => user,
            Ok(None) => return Decision::Unauthorized,
            Err(e) => return Decision::Unavailable(format!("authentication: {e}")),
        };
        match self.reviewer.authorize(&user, verb, path).await {
            Ok(Ok(())) => Decision::Allow,
            Ok(Err(reason)) => {
                let name = user.username.as_deref().unwrap_or("");
                let mut msg = format!("forbidden: User {name:?} cannot {verb} path {path:?}");
                if !reason.is_empty() {
                    msg = format!("{msg}: {reason}");
                }
                Decision::Forbidden(msg)
            }
            Err(e) => Decision::Unavailable(format!("authorization: {e}")),
        }
    }
}

/// The middleware: answers 401/403/503 itself, or passes the request on.
pub async fn guard(State(g): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    let verb = req.method().as_str().to_ascii_lowercase();
    let decision = g.decide(&verb, req.uri().path(), req.headers()).await;
    match decision {
        Decision::Allow => next.run(req).await,
        Decision::Unauthorized => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "Unauthorized\n",
        )
            .into_response(),
        Decision::Forbidden(msg) => (StatusCode::FORBIDDEN, format!("{msg}\n")).into_response(),
        Decision::Unavailable(msg) => {
            tracing::warn!(%msg, "refusing a request: the API server could not review it");
            (StatusCode::SERVICE_UNAVAILABLE, format!("{msg}\n")).into_response()
        }
    }
}

/// `Authorization: Bearer TOKEN`.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// TokenReview and SubjectAccessReview calls, cached.
struct Reviewer {
    clients: Clients,
    /// sha256 of the token -> the user (`None`: not authenticated).
    users: TtlCache<[u8; 32], Option<UserInfo>>,
    /// user, verb and path -> allowed, or the reason of the denial.
    decisions: TtlCache<String, Result<(), String>>,
    in_flight: Semaphore,
}

impl Reviewer {
    fn new(clients: Clients) -> Self {
        Self {
            clients,
            users: TtlCache::new(CACHE_TTL, CACHE_SIZE),
            decisions: TtlCache::new(CACHE_TTL, CACHE_SIZE),
            in_flight: Semaphore::new(MAX_REVIEWS),
        }
    }

    async fn authenticate(&self, token: &str) -> Result<Option<UserInfo>, String> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(user) = self.users.get(&key) {
            return Ok(user);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: None,
            },
            ..Default::default()
        };
        let api: Api<TokenReview> = Api::all(self.clients.authentication.clone());
        let answer = self
            .call(api.create(&PostParams::default(), &review))
            .await?;
        let user = answer
            .status
            .filter(|s| s.authenticated == Some(true))
            .and_then(|s| s.user);
        self.users.put(key, user.clone());
        Ok(user)
    }

    async fn authorize(
        &self,
        user: &UserInfo,
        verb: &str,
        path: &str,
    ) -> Result<Result<(), String>, String> {
        let key = serde_json::to_string(&(user, verb, path)).map_err(|e| e.to_string())?;
        if let Some(d) = self.decisions.get(&key) {
            return Ok(d);
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username.clone(),
                uid: user.uid.clone(),
                groups: user.groups.clone(),
                extra: user.extra.clone(),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some(verb.to_string()),
                }),
                resource_attributes: None,
            },
            ..Default::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.clients.authorization.clone());
        let answer = self
            .call(api.create(&PostParams::default(), &review))
            .await?;
        let status = answer.status.unwrap_or_default();
        let decision = if status.allowed && status.denied != Some(true) {
            Ok(())
        } else {
            Err(status.reason.unwrap_or_default())
        };
        self.decisions.put(key, decision.clone());
        Ok(decision)
    }

    /// One review call, within the concurrency and time bounds.
    async fn call<T>(
        &self,
        f: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, String> {
        let _permit = self.in_flight.acquire().await.map_err(|e| e.to_string())?;
        match tokio::time::timeout(REVIEW_TIMEOUT, f).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {REVIEW_TIMEOUT:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn always_allowed_paths_are_exact_or_prefixes() {
        let p =
            |v: &[&str]| AllowPaths::parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let a = p(&["/healthz", " /readyz ", "", "/debug/*"]).unwrap();
        assert!(a.allows("/healthz") && a.allows("/readyz") && a.allows("/debug/x"));
        assert!(!a.allows("/healthz/x") && !a.allows("/metrics") && !a.allows("/debug"));
        let e = p(&["metrics"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--authorization-always-allow-paths: \"metrics\" must start with '/' (a path, or a prefix ending in '/*')"
        );
    }

    #[test]
    fn bearer_tokens_are_read_from_the_authorization_header() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer_token(&h), None);
        h.insert(header::AUTHORIZATION, "Bearer abc.def".parse().unwrap());
        assert_eq!(bearer_token(&h), Some("abc.def"));
        h.insert(header::AUTHORIZATION, "bearer  xyz ".parse().unwrap());
        assert_eq!(bearer_token(&h), Some("xyz"));
        h.insert(header::AUTHORIZATION, "Basic dXNlcjpwdw==".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
        h.insert(header::AUTHORIZATION, "Bearer ".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
    }
}
