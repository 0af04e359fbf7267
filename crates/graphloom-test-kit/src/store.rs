//! Store conformance kit: checks every [`Store`] promise against a backend.
//!
//! Each check works in fresh, random namespaces (under a `kit-<uuid>` first label), so the
//! kit can run against a store that already holds data, or several times on one store.
//! A failed check panics with a message naming it. Runs should not overlap on one store:
//! the TTL check calls [`Store::sweep_expired`], which also sweeps other runs' items.
//!
//! The TTL check waits for a 50 ms TTL to run out with `tokio::time::sleep` (expiry *is*
//! time); with a paused tokio clock the wait is instant for stores that read
//! `tokio::time::Instant`, such as [`InMemoryStore`](graphloom_core::InMemoryStore).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod items;
mod search;
mod ttl;
mod vector;

use self::items::{check_put_get_delete, check_validation};
use self::search::{check_list_namespaces, check_search};
use self::ttl::check_ttl;
pub use self::vector::store_vector_conformance;
use graphloom_core::store::{IndexFields, Item, ListNamespaces, PutOptions, SearchItem, SearchQuery, Store};
use graphloom_core::{BackendErrorKind, Error, Result};
use serde_json::{json, Value};
use std::fmt::Debug;
use std::time::Duration;

/// Run every check of the plain (non-vector) store contract.
///
/// # Panics
/// On the first failed check, naming it.
pub async fn store_conformance<S: Store>(store: &S) {
    check_put_get_delete(store).await;
    check_validation(store).await;
    check_search(store).await;
    check_list_namespaces(store).await;
    check_ttl(store).await;
}

// ---- helpers ------------------------------------------------------------------------------

fn fresh_root() -> String {
    format!("kit-{}", uuid::Uuid::new_v4().simple())
}

fn ns(root: &str, labels: &[&str]) -> Vec<String> {
    std::iter::once(root)
        .chain(labels.iter().copied())
        .map(str::to_owned)
        .collect()
}

#[track_caller]
fn ok<T>(res: Result<T>, check: &str) -> T {
    match res {
        Ok(v) => v,
        Err(e) => panic!("store conformance [{check}]: unexpected error: {e}"),
    }
}

#[track_caller]
fn assert_invalid<T: Debug>(res: &Result<T>, check: &str) {
    match res {
        Err(Error::Backend(e)) if e.kind() == BackendErrorKind::InvalidInput => {}
        Err(e) => {
            panic!("store conformance [{check}]: want an InvalidInput backend error, got {e}")
        }
        Ok(v) => {
            panic!("store conformance [{check}]: want an InvalidInput backend error, got Ok({v:?})")
        }
    }
}

async fn put<S: Store>(store: &S, ns: &[String], key: &str, value: Value, check: &str) {
    put_opts(store, ns, key, value, PutOptions::new(), check).await;
}

async fn put_opts<S: Store>(
    store: &S,
    ns: &[String],
    key: &str,
    value: Value,
    opts: PutOptions,
    check: &str,
) {
    ok(
        store.put(ns, key, value, opts).await,
        &format!("{check}: put {ns:?}/{key}"),
    );
}

async fn get<S: Store>(store: &S, ns: &[String], key: &str, check: &str) -> Option<Item> {
    ok(store.get(ns, key).await, &format!("{check}: get {ns:?}/{key}"))
}

async fn search<S: Store>(store: &S, prefix: &[String], query: SearchQuery, check: &str) -> Vec<SearchItem> {
    ok(
        store.search(prefix, query).await,
        &format!("{check}: search {prefix:?}"),
    )
}

fn keys(found: &[SearchItem]) -> Vec<&str> {
    found.iter().map(|f| f.item.key.as_str()).collect()
}

fn sorted_keys(found: &[SearchItem]) -> Vec<&str> {
    let mut keys = keys(found);
    keys.sort_unstable();
    keys
}

/// `found`'s keys if `found` has `len` items starting with `first`, else something that
/// cannot equal them (so the assertion shows the real keys).
fn keys_of<'a>(found: &'a [SearchItem], first: &[&'a str], len: usize) -> Vec<&'a str> {
    let keys = keys(found);
    if keys.len() == len && keys.starts_with(first) {
        keys
    } else {
        let mut want = first.to_vec();
        want.push("<and the rest of the indexed items>");
        want
    }
}

#[track_caller]
fn check_scores(found: &[SearchItem], check: &str) {
    for f in found {
        let Some(score) = f.score else {
            panic!(
                "store conformance [{check}]: a query search must score every result ({})",
                f.item.key
            )
        };
        assert!(
            (-1.0..=1.0).contains(&score),
            "store conformance [{check}]: score {score} of {} is outside [-1, 1]",
            f.item.key
        );
    }
    assert!(
        found.windows(2).all(|w| w[0].score >= w[1].score),
        "store conformance [{check}]: results must come best score first"
    );
}

#[track_caller]
fn check_newest_first(found: &[SearchItem], check: &str) {
    assert!(
        found
            .windows(2)
            .all(|w| w[0].item.updated_at >= w[1].item.updated_at),
        "store conformance [{check}]: results without a query must come newest first"
    );
}

#[cfg(test)]
mod tests {
    //! The kit must catch broken stores: each test wraps [`InMemoryStore`] with one bug.
    use super::*;
    use graphloom_core::InMemoryStore;

    /// A store breaking one promise, to check that the kit notices.
    struct Broken {
        inner: InMemoryStore,
        ignore_ttl: bool,
    }

    impl Store for Broken {
        async fn get(&self, namespace: &[String], key: &str) -> Result<Option<Item>> {
            self.inner.get(namespace, key).await
        }
        async fn put(
            &self,
            namespace: &[String],
            key: &str,
            value: Value,
            mut opts: PutOptions,
        ) -> Result<()> {
            if self.ignore_ttl {
                opts.ttl = None;
            } else {
                // Forget created_at on overwrite.
                self.inner.delete(namespace, key).await?;
            }
            self.inner.put(namespace, key, value, opts).await
        }
        async fn delete(&self, namespace: &[String], key: &str) -> Result<()> {
            self.inner.delete(namespace, key).await
        }
        async fn search(&self, prefix: &[String], query: SearchQuery) -> Result<Vec<SearchItem>> {
            self.inner.search(prefix, query).await
        }
        async fn list_namespaces(&self, opts: ListNamespaces) -> Result<Vec<Vec<String>>> {
            self.inner.list_namespaces(opts).await
        }
        async fn sweep_expired(&self) -> Result<usize> {
            self.inner.sweep_expired().await
        }
    }

    #[tokio::test(start_paused = true)]
    #[should_panic(expected = "store conformance [ttl/get]")]
    async fn kit_catches_ignored_ttl() {
        store_conformance(&Broken {
            inner: InMemoryStore::new(),
            ignore_ttl: true,
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    #[should_panic(expected = "store conformance [overwrite]: created_at must be kept")]
    async fn kit_catches_lost_created_at() {
        store_conformance(&Broken {
            inner: InMemoryStore::new(),
            ignore_ttl: false,
        })
        .await;
    }
}
