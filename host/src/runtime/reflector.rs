//! The watches' engine, in place of kube-rs's `watcher`: list (in pages),
//! then watch from the list's resourceVersion; after a lost watch, watch
//! again from the last version seen, and list again only when the server
//! says that version is gone (410). What it adds is what the cache needs
//! to know and `watcher` does not say: when a watch is lost and when it
//! is back ([`Watched`]: the cache is not current in between), and a
//! relist's start ([`Change::Init`]) at the moment it starts, not after a
//! backoff.
//!
//! Retries back off with jitter from 250 ms to 2 s (a short cap: the
//! cache waits for the slowest watch, and scheduling with it) and never
//! sooner than the API server's Retry-After.

use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::Resource;
use serde::de::DeserializeOwned;

use super::cache_sync::Watched;
use super::client::Backoff;

/// What a watch reports, as kube-rs's `watcher::Event`.
#[derive(Debug)]
pub enum Change<K> {
    /// A complete list starts: the objects until [`Change::InitDone`] are
    /// all there are.
    Init,
    InitApply(K),
    InitDone,
    Apply(K),
    Delete(K),
}

/// Objects per page of a list.
const PAGE: u32 = 500;
/// How long the server keeps a watch open.
const WATCH_SECONDS: u32 = 290;
/// A watch silent for longer than this (the server ends it, or sends a
/// bookmark, before) is taken as lost.
const IDLE: Duration = Duration::from_secs(WATCH_SECONDS as u64 + 60);
/// After a watch is established: how long to wait for the changes the
/// server replays from the version asked for before calling the watch
/// current.
const SETTLE: Duration = Duration::from_millis(200);

fn backoff() -> Backoff {
    Backoff::new(Duration::from_millis(250), Duration::from_secs(2))
}

/// The server no longer has that resourceVersion.
fn is_gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 410)
}

/// One line for an error (the status's message for an answer).
fn cause(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} {}", s.code, s.message),
        e => e.to_string(),
    }
}

/// Runs the watch until the task is aborted, calling `on` with each
/// change (inline: the watch reads nothing more until it returns). The
/// watch is current in `watched` from the moment `on` has applied a
/// complete list (or, after a lost connection, once the watch is back).
pub async fn run<K, F>(api: Api<K>, watched: Watched, mut on: F)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    F: FnMut(Change<K>),
{
    let resource = watched.resource();
    let hint = watched.hint();
    let mut version: Option<String> = None;
    let mut retry = backoff();
    let mut relist_why = String::from("first list");
    // The last error logged, so a long outage logs once, not per retry.
    let mut logged = String::new();
    let fail = |what: &str, e: &str, logged: &mut String| {
        watched.error();
        let line = format!("{what}: {e}");
        // At info: the cache going stale is the warning (cache_sync),
        // once for all the watches a fault takes down together.
        if *logged != line {
            if hint.is_empty() {
                tracing::info!(resource = %resource, error = %e, "{what} failed; retrying");
            } else {
                tracing::warn!(resource = %resource, error = %e, "{what} failed ({hint}); retrying");
            }
            *logged = line;
        }
    };
    loop {
        let Some(from) = version.clone() else {
            watched.listing(&relist_why);
            match list(&api, &mut on).await {
                Ok(v) => {
                    on(Change::InitDone);
                    watched.current();
                    version = Some(v);
                    retry.reset();
                    logged.clear();
                }
                Err(e) => {
                    fail("list", &cause(&e), &mut logged);
                    relist_why = format!("list failed: {}", cause(&e));
                    tokio::time::sleep(retry.next_delay()).await;
                }
            }
            continue;
        };
        // Bookmarks are on by default.
        let params = WatchParams::default().timeout(WATCH_SECONDS);
        let mut stream = match api.watch(&params, &from).await {
            Ok(s) => s.boxed(),
            Err(e) if is_gone(&e) => {
                version = None;
                relist_why = "410 Gone".into();
                continue;
            }
            Err(e) => {
                watched.disconnected(&cause(&e));
                fail("watch", &cause(&e), &mut logged);
                tokio::time::sleep(retry.next_delay()).await;
                continue;
            }
        };
        // Established: the changes since `from` come first.
        let mut settled = false;
        let ended = loop {
            let wait = if settled { IDLE } else { SETTLE };
            let item = match tokio::time::timeout(wait, stream.next()).await {
                Ok(item) => item,
                Err(_) if !settled => {
                    settled = true;
                    watched.current();
                    continue;
                }
                Err(_) => break Some(format!("no event or bookmark for {}s", IDLE.as_secs())),
            };
            match item {
                Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o))) => {
                    if let Some(v) = o.meta().resource_version.clone() {
                        version = Some(v);
                    }
                    on(Change::Apply(o));
                }
                Some(Ok(WatchEvent::Deleted(o))) => {
                    if let Some(v) = o.meta().resource_version.clone() {
                        version = Some(v);
                    }
                    on(Change::Delete(o));
                }
                Some(Ok(WatchEvent::Bookmark(b))) => {
                    version = Some(b.metadata.resource_version);
                }
                Some(Ok(WatchEvent::Error(e))) if e.code == 410 => {
                    version = None;
                    relist_why = "410 Gone".into();
                    break None;
                }
                Some(Ok(WatchEvent::Error(e))) => break Some(format!("{} {}", e.code, e.message)),
                Some(Err(e)) => break Some(cause(&e)),
                // The server ended the watch (its timeout): watch again.
                None => break None,
            }
            if !settled {
                settled = true;
                watched.current();
            }
            retry.reset();
            logged.clear();
        };
        if let Some(e) = ended {
            watched.disconnected(&e);
            fail("watch", &e, &mut logged);
            tokio::time::sleep(retry.next_delay()).await;
        }
    }
}

/// Lists every object, page by page, into `on` (after [`Change::Init`]);
/// returns the list's resourceVersion.
async fn list<K, F>(api: &Api<K>, on: &mut F) -> Result<String, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    F: FnMut(Change<K>),
{
    let mut params = ListParams::default().limit(PAGE);
    let mut started = false;
    loop {
        let page = api.list(&params).await?;
        if !started {
            started = true;
            on(Change::Init);
        }
        for o in page.items {
            on(Change::InitApply(o));
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params.continue_token = Some(token),
            None => {
                return page.metadata.resource_version.ok_or_else(|| {
                    kube::Error::Api(
                        kube::core::Status::failure(
                            "the list has no resourceVersion",
                            "NoResourceVersion",
                        )
                        .boxed(),
                    )
                })
            }
        }
    }
}
