//! The store a run sees when auth is on: the server's store, scoped to the run's owner.
//!
//! Every namespace a graph names lives under its owner's hidden first label, the same one
//! the `/store` endpoints add ([`scoped`]), and comes back without it ([`unscoped`]). What a
//! graph writes for owner A is then A's item at `/store/items`, and owner B's runs and
//! requests never see it. With auth off (owner `""`) runs get the server's store as is.

use graphloom_core::store::{
    validate_namespace, DynStore, Item, ListNamespaces, PutOptions, SearchItem, SearchQuery, Store,
};
use graphloom_core::Result;
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, CONTROLS};
use serde_json::Value;
use std::sync::Arc;

/// What the owner label escapes: `.` (the namespace separator), `%` (the escape itself) and
/// control characters. Any owner name becomes one valid label, and back.
const LABEL_ESCAPES: &AsciiSet = &CONTROLS.add(b'.').add(b'%');

/// The hidden first label of an owner's namespaces: `owner:` and the owner's name, escaped.
pub(crate) fn owner_label(owner: &str) -> String {
    format!("owner:{}", utf8_percent_encode(owner, LABEL_ESCAPES))
}

/// The owner an [`owner_label`] stands for; `None` for any other label.
pub(crate) fn label_owner(label: &str) -> Option<String> {
    let escaped = label.strip_prefix("owner:")?;
    percent_decode_str(escaped)
        .decode_utf8()
        .ok()
        .map(std::borrow::Cow::into_owned)
}

/// Namespaces of an owner live under one hidden first label, [`owner_label`]; with auth off
/// (owner `""`) they are as given. Graph runs see the same scoping through
/// [`OwnerStore`].
pub(crate) fn scoped(owner: &str, ns: &[String]) -> Vec<String> {
    if owner.is_empty() {
        return ns.to_vec();
    }
    let mut v = Vec::with_capacity(ns.len() + 1);
    v.push(owner_label(owner));
    v.extend(ns.iter().cloned());
    v
}

/// A namespace as its owner sees it: without the owner label [`scoped`] added.
pub(crate) fn unscoped(owner: &str, mut ns: Vec<String>) -> Vec<String> {
    if !owner.is_empty() && ns.first().and_then(|l| label_owner(l)).as_deref() == Some(owner) {
        ns.remove(0);
    }
    ns
}

/// `inner` as `owner` sees it.
pub(crate) struct OwnerStore {
    inner: Arc<dyn DynStore>,
    owner: String,
}

impl OwnerStore {
    /// The store of `owner`'s runs: `inner` itself for owner `""` (auth off), else `inner`
    /// scoped to `owner`.
    pub(crate) fn for_owner(inner: &Arc<dyn DynStore>, owner: &str) -> Arc<dyn DynStore> {
        if owner.is_empty() {
            return Arc::clone(inner);
        }
        Arc::new(Self {
            inner: Arc::clone(inner),
            owner: owner.to_owned(),
        })
    }

    fn scope(&self, ns: &[String]) -> Vec<String> {
        scoped(&self.owner, ns)
    }

    fn strip(&self, mut item: Item) -> Item {
        item.namespace = unscoped(&self.owner, item.namespace);
        item
    }
}

impl Store for OwnerStore {
    async fn get(&self, namespace: &[String], key: &str) -> Result<Option<Item>> {
        let item = self.inner.as_ref().get(&self.scope(namespace), key).await?;
        Ok(item.map(|i| self.strip(i)))
    }

    async fn put(&self, namespace: &[String], key: &str, value: Value, opts: PutOptions) -> Result<()> {
        // The graph's namespace is checked as the graph wrote it (the scoped one would
        // pass with no label of the graph's own, or a reserved first label).
        validate_namespace(namespace)?;
        self.inner
            .as_ref()
            .put(&self.scope(namespace), key, value, opts)
            .await
    }

    async fn delete(&self, namespace: &[String], key: &str) -> Result<()> {
        self.inner.as_ref().delete(&self.scope(namespace), key).await
    }

    async fn search(&self, namespace_prefix: &[String], query: SearchQuery) -> Result<Vec<SearchItem>> {
        let found = self
            .inner
            .as_ref()
            .search(&self.scope(namespace_prefix), query)
            .await?;
        Ok(found
            .into_iter()
            .map(|s| SearchItem {
                item: self.strip(s.item),
                score: s.score,
            })
            .collect())
    }

    async fn list_namespaces(&self, opts: ListNamespaces) -> Result<Vec<Vec<String>>> {
        opts.validate()?;
        // Every namespace of the owner, then the caller's options on them as the owner
        // sees them: a suffix or depth applied to the scoped namespaces would count the
        // hidden label.
        let all = ListNamespaces {
            prefix: Some(self.scope(opts.prefix.as_deref().unwrap_or_default())),
            limit: usize::MAX,
            ..ListNamespaces::default()
        };
        let mine = self.inner.as_ref().list_namespaces(all).await?;
        Ok(opts.apply(mine.into_iter().map(|ns| unscoped(&self.owner, ns))))
    }

    async fn sweep_expired(&self) -> Result<usize> {
        self.inner.as_ref().sweep_expired().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphloom_core::store::{HashEmbedder, InMemoryStore, IndexConfig};
    use proptest::prelude::*;
    use serde_json::json;

    fn ns(labels: &[&str]) -> Vec<String> {
        labels.iter().map(|l| (*l).to_owned()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn an_owners_store_keeps_the_store_contract() {
        let inner: Arc<dyn DynStore> = Arc::new(InMemoryStore::new());
        let store = OwnerStore::for_owner(&inner, "ann");
        graphloom_test_kit::store::store_conformance(&store).await;
        let index = IndexConfig::new(128, Arc::new(HashEmbedder::new(128)));
        let inner: Arc<dyn DynStore> = Arc::new(InMemoryStore::with_index(index));
        let store = OwnerStore::for_owner(&inner, "ann");
        graphloom_test_kit::store::store_vector_conformance(&store).await;
    }

    #[tokio::test]
    async fn owners_see_only_their_items_under_their_own_names() {
        let inner: Arc<dyn DynStore> = Arc::new(InMemoryStore::new());
        let ann = OwnerStore::for_owner(&inner, "ann");
        let bob = OwnerStore::for_owner(&inner, "bob");
        let put = |s: &Arc<dyn DynStore>, n: Vec<String>, v: Value| {
            let s = Arc::clone(s);
            async move { s.as_ref().put(&n, "k", v, PutOptions::default()).await.unwrap() }
        };
        put(&ann, ns(&["approvals"]), json!({"by": "ann"})).await;
        put(&bob, ns(&["approvals"]), json!({"by": "bob"})).await;
        put(&ann, ns(&["memory", "u1", "facts"]), json!({"x": 1})).await;
        let got = ann.as_ref().get(&ns(&["approvals"]), "k").await.unwrap().unwrap();
        assert_eq!(
            (got.namespace, got.value),
            (ns(&["approvals"]), json!({"by": "ann"}))
        );
        let got = bob.as_ref().get(&ns(&["approvals"]), "k").await.unwrap().unwrap();
        assert_eq!(got.value, json!({"by": "bob"}));
        assert!(bob
            .as_ref()
            .get(&ns(&["memory", "u1", "facts"]), "k")
            .await
            .unwrap()
            .is_none());
        let found = bob.as_ref().search(&[], SearchQuery::new()).await.unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].item.namespace, ns(&["approvals"]));
        // Namespaces as the owner names them; depth and suffix do not count the hidden label.
        let list = ann.as_ref().list_namespaces(ListNamespaces::new()).await.unwrap();
        assert_eq!(list, vec![ns(&["approvals"]), ns(&["memory", "u1", "facts"])]);
        let list = ann
            .as_ref()
            .list_namespaces(ListNamespaces::new().max_depth(1))
            .await
            .unwrap();
        assert_eq!(list, vec![ns(&["approvals"]), ns(&["memory"])]);
        let list = ann
            .as_ref()
            .list_namespaces(ListNamespaces::new().suffix(["*", "approvals"]))
            .await
            .unwrap();
        assert!(
            list.is_empty(),
            "the hidden label is no label of the owner's: {list:?}"
        );
        let list = ann
            .as_ref()
            .list_namespaces(ListNamespaces::new().prefix(["memory", "*"]).max_depth(2))
            .await
            .unwrap();
        assert_eq!(list, vec![ns(&["memory", "u1"])]);
        // Deleting is the owner's own too.
        bob.as_ref().delete(&ns(&["approvals"]), "k").await.unwrap();
        assert!(ann
            .as_ref()
            .get(&ns(&["approvals"]), "k")
            .await
            .unwrap()
            .is_some());
        // A namespace the owner could not write without the scoping is refused.
        assert!(ann
            .as_ref()
            .put(&[], "k", json!({}), PutOptions::default())
            .await
            .is_err());
        assert!(ann
            .as_ref()
            .put(&ns(&["langgraph"]), "k", json!({}), PutOptions::default())
            .await
            .is_err());
        // Auth off: the store itself.
        let open = OwnerStore::for_owner(&inner, "");
        assert!(Arc::ptr_eq(&open, &inner));
    }

    #[test]
    fn plain_owners_keep_their_label() {
        assert_eq!(owner_label("ann"), "owner:ann");
        assert_eq!(owner_label("team.a"), "owner:team%2Ea");
        assert_eq!(scoped("", &["n".to_owned()]), ["n"]);
        assert_eq!(scoped("team.a", &["n".to_owned()]), ["owner:team%2Ea", "n"]);
        assert_eq!(
            unscoped("team.a", vec!["owner:team%2Ea".into(), "n".into()]),
            ["n"]
        );
        assert_eq!(label_owner("notes"), None);
    }

    proptest! {
        /// Any owner name is one label a store accepts, and decodes back to itself.
        #[test]
        fn owner_labels_round_trip(owner in any::<String>().prop_filter("non-empty", |o| !o.is_empty())) {
            let label = owner_label(&owner);
            prop_assert!(graphloom_core::store::validate_namespace(&[label.clone(), "n".into()]).is_ok(), "{label:?}");
            prop_assert_eq!(label_owner(&label), Some(owner.clone()));
            prop_assert_eq!(unscoped(&owner, scoped(&owner, &["n".to_owned()])), vec!["n".to_owned()]);
        }
    }
}
