//! Store conformance kit: checks every [`Store`] promise against a backend.
//!
//! Each check works in fresh, random namespaces (under a `kit-<uuid>` first label), so the
//! kit can run against a store that already holds data, or several times on one store.
//! A failed check panics with a message naming it. Runs should not overlap on one store:
//! the TTL check calls [`Store::sweep_expired`], which also sweeps other runs' items.
//!
//! The TTL check waits for a 50 ms TTL to run out with `tokio::time::sleep` (expiry *is*
//! time); with a paused tokio clock the wait is instant for stores that read
//! `tokio::time::Instant`, such as [`super::InMemoryStore`].
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::{IndexFields, ListNamespaces, PutOptions, SearchItem, SearchQuery, Store};
use crate::error::{BackendErrorKind, Error, Result};
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

/// Run the vector-search checks against a store indexed with
/// [`HashEmbedder`](super::HashEmbedder) (whole values or the `text` field embedded; at
/// least 64 dimensions advised).
///
/// # Panics
/// On the first failed check, naming it.
pub async fn store_vector_conformance<S: Store>(store: &S) {
    let root = fresh_root();
    let ns = ns(&root, &["vec"]);
    let docs = [
        ("rust", "rust async runtime with tokio tasks", "code"),
        ("bread", "baking sourdough bread with wild yeast", "food"),
        ("garden", "growing tomatoes in a sunny summer garden", "garden"),
    ];
    for (key, text, topic) in docs {
        put(
            store,
            &ns,
            key,
            json!({"text": text, "topic": topic}),
            "vector/put",
        )
        .await;
    }
    let skipped = PutOptions::new().index(IndexFields::Skip);
    ok(
        store
            .put(
                &ns,
                "skipped",
                json!({"text": "rust async runtime with tokio tasks", "topic": "code"}),
                skipped,
            )
            .await,
        "vector/put with IndexFields::Skip",
    );
    let query = "tokio async runtime for rust";

    let found = search(store, &ns, SearchQuery::new().query(query), "vector/ranking").await;
    assert_eq!(
        keys(&found),
        keys_of(&found, &["rust"], 3),
        "store conformance [vector/ranking]: the most similar item must rank first, and items put with \
         IndexFields::Skip must be left out; got {:?}",
        keys(&found)
    );
    check_scores(&found, "vector/ranking");

    let filtered = search(
        store,
        &ns,
        SearchQuery::new().query(query).filter("topic", "food"),
        "vector/filter",
    )
    .await;
    assert_eq!(
        keys(&filtered),
        ["bread"],
        "store conformance [vector/filter]: a query search must apply the filter"
    );
    check_scores(&filtered, "vector/filter");

    let first = search(
        store,
        &ns,
        SearchQuery::new().query(query).limit(1),
        "vector/limit",
    )
    .await;
    assert_eq!(keys(&first), ["rust"], "store conformance [vector/limit]");
    let second = search(
        store,
        &ns,
        SearchQuery::new().query(query).offset(1).limit(1),
        "vector/offset",
    )
    .await;
    assert_eq!(
        keys(&second),
        [found[1].item.key.as_str()],
        "store conformance [vector/offset]: offset applies after ranking"
    );

    // Overwriting re-embeds: the bread item now talks about rust too.
    put(
        store,
        &ns,
        "bread",
        json!({"text": "rust tokio async runtime scheduler", "topic": "code"}),
        "vector/overwrite",
    )
    .await;
    let found = search(
        store,
        &ns,
        SearchQuery::new().query(query).limit(2),
        "vector/overwrite",
    )
    .await;
    let mut top: Vec<&str> = keys(&found);
    top.sort_unstable();
    assert_eq!(
        top,
        ["bread", "rust"],
        "store conformance [vector/overwrite]: an overwrite must re-embed the value"
    );

    ok(store.delete(&ns, "rust").await, "vector/delete");
    let found = search(store, &ns, SearchQuery::new().query(query), "vector/delete").await;
    assert!(
        !keys(&found).contains(&"rust"),
        "store conformance [vector/delete]: a deleted item must leave the vector index"
    );
    assert_eq!(found[0].item.key, "bread", "store conformance [vector/delete]");

    // Without a query: every item, unscored, newest first.
    let all = search(store, &ns, SearchQuery::new(), "vector/no-query").await;
    assert_eq!(
        all.len(),
        3,
        "store conformance [vector/no-query]: got {:?}",
        keys(&all)
    );
    assert!(
        all.iter().all(|f| f.score.is_none()),
        "store conformance [vector/no-query]: results of a search without a query have no score"
    );
    check_newest_first(&all, "vector/no-query");
}

async fn check_put_get_delete<S: Store>(store: &S) {
    const CHECK: &str = "put/get/delete";
    let root = fresh_root();
    let ns_a = ns(&root, &["a"]);
    let ns_ab = ns(&root, &["a", "b"]);

    assert!(
        get(store, &ns_a, "k", CHECK).await.is_none(),
        "store conformance [{CHECK}]: a missing item must be None"
    );

    let value =
        json!({"text": "hello", "n": 1.5, "nested": {"list": [1, "two", null, true]}, "unicode": "ü∑"});
    put(store, &ns_a, "k", value.clone(), CHECK).await;
    let first = get(store, &ns_a, "k", CHECK)
        .await
        .unwrap_or_else(|| panic!("store conformance [{CHECK}]: put item not found"));
    assert_eq!(first.namespace, ns_a, "store conformance [{CHECK}]: namespace");
    assert_eq!(first.key, "k", "store conformance [{CHECK}]: key");
    assert_eq!(
        first.value, value,
        "store conformance [{CHECK}]: the value must round-trip"
    );
    assert!(
        !first.created_at.is_empty() && first.created_at <= first.updated_at,
        "store conformance [{CHECK}]: created_at {:?} must not be after updated_at {:?}",
        first.created_at,
        first.updated_at
    );

    // Same key elsewhere is another item.
    put(store, &ns_ab, "k", json!({"other": true}), CHECK).await;
    let odd_key = "with/slash, space and ü";
    put(store, &ns_a, odd_key, json!({"odd": 1}), CHECK).await;
    assert_eq!(
        get(store, &ns_a, "k", CHECK).await.map(|i| i.value),
        Some(value),
        "store conformance [{CHECK}]: items in a child namespace are separate"
    );
    assert_eq!(
        get(store, &ns_ab, "k", CHECK).await.map(|i| i.value),
        Some(json!({"other": true})),
        "store conformance [{CHECK}]: items in a child namespace are separate"
    );
    assert_eq!(
        get(store, &ns_a, odd_key, CHECK).await.map(|i| i.key),
        Some(odd_key.to_owned()),
        "store conformance [{CHECK}]: keys may hold any characters"
    );

    // Overwrite.
    const OVERWRITE: &str = "overwrite";
    put(store, &ns_a, "k", json!({"text": "bye"}), OVERWRITE).await;
    let second = get(store, &ns_a, "k", OVERWRITE)
        .await
        .unwrap_or_else(|| panic!("store conformance [{OVERWRITE}]: item lost"));
    assert_eq!(
        second.value,
        json!({"text": "bye"}),
        "store conformance [{OVERWRITE}]: the new value replaces the old one"
    );
    assert_eq!(
        second.created_at, first.created_at,
        "store conformance [{OVERWRITE}]: created_at must be kept"
    );
    assert!(
        second.updated_at > first.updated_at,
        "store conformance [{OVERWRITE}]: updated_at must move forward ({:?} -> {:?})",
        first.updated_at,
        second.updated_at
    );

    // Delete.
    const DELETE: &str = "delete";
    ok(store.delete(&ns_a, "k").await, DELETE);
    assert!(
        get(store, &ns_a, "k", DELETE).await.is_none(),
        "store conformance [{DELETE}]: a deleted item must be gone"
    );
    assert!(
        get(store, &ns_ab, "k", DELETE).await.is_some(),
        "store conformance [{DELETE}]: delete must touch one item only"
    );
    ok(store.delete(&ns_a, "k").await, "delete (again)");
    ok(
        store.delete(&ns(&root, &["never"]), "k").await,
        "delete (missing namespace)",
    );
    put(store, &ns_a, "k", json!({"back": 1}), DELETE).await;
    let reborn = get(store, &ns_a, "k", DELETE)
        .await
        .unwrap_or_else(|| panic!("store conformance [{DELETE}]: re-put item not found"));
    assert!(
        reborn.created_at >= second.updated_at,
        "store conformance [{DELETE}]: a key written after delete is a new item"
    );
}

async fn check_validation<S: Store>(store: &S) {
    const CHECK: &str = "validation";
    let root = fresh_root();
    let bad_namespaces: [(Vec<String>, &str); 4] = [
        (Vec::new(), "an empty namespace"),
        (ns(&root, &[""]), "an empty label"),
        (ns(&root, &["a.b"]), "a label with '.'"),
        (
            vec!["langgraph".to_owned(), root.clone()],
            "the reserved first label \"langgraph\"",
        ),
    ];
    for (bad, why) in &bad_namespaces {
        let res = store.put(bad, "k", json!({"a": 1}), PutOptions::new()).await;
        assert_invalid(&res, &format!("{CHECK}: put into a namespace with {why}"));
    }
    assert!(
        get(store, &bad_namespaces[3].0, "k", CHECK).await.is_none(),
        "store conformance [{CHECK}]: a rejected put must store nothing"
    );

    let good = ns(&root, &["ok"]);
    for bad in [json!(null), json!(1), json!("text"), json!([1, 2]), json!(true)] {
        let res = store.put(&good, "k", bad.clone(), PutOptions::new()).await;
        assert_invalid(&res, &format!("{CHECK}: put of the non-object value {bad}"));
    }
    assert!(
        get(store, &good, "k", CHECK).await.is_none(),
        "store conformance [{CHECK}]: a rejected value must store nothing"
    );

    put(store, &good, "k", json!({"n": 1}), CHECK).await;
    for bad in [
        json!({"$bogus": [1]}),
        json!({"$in": 1}),
        json!({"$gt": 1, "plain": 2}),
        json!({"$lt": [1]}),
    ] {
        let res = store
            .search(&good, SearchQuery::new().filter("n", bad.clone()))
            .await;
        assert_invalid(
            &res,
            &format!("{CHECK}: search with the malformed filter condition {bad}"),
        );
    }
    let res = store
        .list_namespaces(ListNamespaces::new().prefix([root.as_str()]).max_depth(0))
        .await;
    assert_invalid(&res, &format!("{CHECK}: list_namespaces with max_depth 0"));
}

async fn check_search<S: Store>(store: &S) {
    const CHECK: &str = "search";
    let root = fresh_root();
    let docs = ns(&root, &["docs"]);
    let sub = ns(&root, &["docs", "sub"]);
    let other = ns(&root, &["other"]);
    put(
        store,
        &docs,
        "a",
        json!({"kind": "note", "n": 1, "author": {"name": "ada"}}),
        CHECK,
    )
    .await;
    put(
        store,
        &docs,
        "b",
        json!({"kind": "note", "n": 5, "author": {"name": "bob"}}),
        CHECK,
    )
    .await;
    put(store, &docs, "c", json!({"kind": "todo", "n": 10}), CHECK).await;
    put(store, &sub, "d", json!({"kind": "note", "n": 7.5}), CHECK).await;
    put(store, &other, "e", json!({"kind": "note", "n": 3}), CHECK).await;
    let root_ns = vec![root.clone()];

    let all = search(store, &root_ns, SearchQuery::new().limit(100), CHECK).await;
    assert_eq!(
        sorted_keys(&all),
        ["a", "b", "c", "d", "e"],
        "store conformance [search/prefix]: everything under the root"
    );
    assert!(
        all.iter().all(|f| f.score.is_none()),
        "store conformance [search/prefix]: no query, no score"
    );
    check_newest_first(&all, "search/order");
    let found = search(store, &docs, SearchQuery::new(), CHECK).await;
    assert_eq!(
        sorted_keys(&found),
        ["a", "b", "c", "d"],
        "store conformance [search/prefix]: a prefix includes child namespaces"
    );
    let found = search(store, &ns(&root, &["doc"]), SearchQuery::new(), CHECK).await;
    assert!(
        found.is_empty(),
        "store conformance [search/prefix]: prefixes match whole labels, got {:?}",
        keys(&found)
    );
    let found = search(store, &sub, SearchQuery::new(), CHECK).await;
    assert_eq!(
        keys(&found),
        ["d"],
        "store conformance [search/prefix]: the full namespace as prefix"
    );

    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        ("kind", json!("note"), vec!["a", "b", "d"]),
        ("kind", json!({"$eq": "todo"}), vec!["c"]),
        ("kind", json!({"$ne": "note"}), vec!["c"]),
        ("n", json!(5), vec!["b"]),
        ("n", json!(5.0), vec!["b"]),
        ("n", json!({"$gt": 4}), vec!["b", "c", "d"]),
        ("n", json!({"$gte": 5, "$lt": 10}), vec!["b", "d"]),
        ("n", json!({"$lte": 1}), vec!["a"]),
        ("n", json!({"$lt": 7.6, "$gt": 7.4}), vec!["d"]),
        ("kind", json!({"$gt": "o"}), vec!["c"]),
        ("author.name", json!("ada"), vec!["a"]),
        ("author", json!({"name": "bob"}), vec!["b"]),
        ("missing", json!(1), vec![]),
        ("missing", json!({"$gt": 0}), vec![]),
        ("kind", json!({"$in": ["todo", "done"]}), vec!["c"]),
        ("n", json!({"$in": [1, 7.5, 99]}), vec!["a", "d"]),
        ("kind", json!({"$nin": ["note"]}), vec!["c"]),
        ("missing", json!({"$nin": [1]}), vec!["a", "b", "c", "d"]),
        ("missing", json!({"$in": [null]}), vec![]),
    ];
    for (field, condition, want) in cases {
        let found = search(
            store,
            &docs,
            SearchQuery::new().filter(field, condition.clone()),
            CHECK,
        )
        .await;
        assert_eq!(
            sorted_keys(&found),
            want,
            "store conformance [search/filter]: filter {{{field:?}: {condition}}} under {docs:?}"
        );
    }
    let found = search(
        store,
        &docs,
        SearchQuery::new()
            .filter("kind", "note")
            .filter("n", json!({"$gt": 1})),
        CHECK,
    )
    .await;
    assert_eq!(
        sorted_keys(&found),
        ["b", "d"],
        "store conformance [search/filter]: several conditions must all hold"
    );

    // Paging.
    const PAGE: &str = "search/limit-offset";
    let mut paged = Vec::new();
    for offset in [0, 2, 4] {
        let page = search(store, &root_ns, SearchQuery::new().offset(offset).limit(2), PAGE).await;
        assert!(
            page.len() <= 2,
            "store conformance [{PAGE}]: limit 2 returned {}",
            page.len()
        );
        paged.extend(page);
    }
    assert_eq!(
        keys(&paged),
        keys(&all),
        "store conformance [{PAGE}]: pages must follow the full order"
    );
    let past = search(store, &root_ns, SearchQuery::new().offset(5), PAGE).await;
    assert!(
        past.is_empty(),
        "store conformance [{PAGE}]: an offset past the end gives nothing"
    );
    let none = search(store, &root_ns, SearchQuery::new().limit(0), PAGE).await;
    assert!(
        none.is_empty(),
        "store conformance [{PAGE}]: limit 0 gives nothing"
    );
    let one = search(
        store,
        &root_ns,
        SearchQuery::new().filter("kind", "todo").limit(1),
        PAGE,
    )
    .await;
    assert_eq!(
        keys(&one),
        ["c"],
        "store conformance [{PAGE}]: limit applies after filtering"
    );
    let default = search(store, &root_ns, SearchQuery::new(), PAGE).await;
    assert_eq!(
        default.len(),
        5,
        "store conformance [{PAGE}]: default limit is 10"
    );

    // Updates and deletes show up.
    const FRESH: &str = "search/updates";
    put(store, &docs, "a", json!({"kind": "todo", "n": 1}), FRESH).await;
    let found = search(store, &root_ns, SearchQuery::new(), FRESH).await;
    let a = found
        .iter()
        .find(|f| f.item.key == "a")
        .unwrap_or_else(|| panic!("store conformance [{FRESH}]: item a missing"));
    assert_eq!(
        found[0].item.updated_at, a.item.updated_at,
        "store conformance [{FRESH}]: the item written last must sort first"
    );
    let found = search(store, &docs, SearchQuery::new().filter("kind", "todo"), FRESH).await;
    assert_eq!(
        sorted_keys(&found),
        ["a", "c"],
        "store conformance [{FRESH}]: filters see the new value"
    );
    ok(store.delete(&docs, "c").await, FRESH);
    let found = search(store, &root_ns, SearchQuery::new(), FRESH).await;
    assert_eq!(
        sorted_keys(&found),
        ["a", "b", "d", "e"],
        "store conformance [{FRESH}]: deleted items are gone"
    );
}

async fn check_list_namespaces<S: Store>(store: &S) {
    const CHECK: &str = "list_namespaces";
    let root = fresh_root();
    let r = root.as_str();
    let spaces = [
        ns(&root, &["a", "x"]),
        ns(&root, &["a", "y"]),
        ns(&root, &["b", "x"]),
        ns(&root, &["b", "y", "z"]),
        ns(&root, &["c"]),
    ];
    // Reverse order, so sorting is the store's doing; two items in one namespace.
    for space in spaces.iter().rev() {
        put(store, space, "k", json!({"v": 1}), CHECK).await;
    }
    put(store, &spaces[0], "k2", json!({"v": 2}), CHECK).await;

    let list = |opts: ListNamespaces, what: &'static str| async move {
        let got = store.list_namespaces(opts).await;
        ok(got, &format!("{CHECK}/{what}"))
    };
    let all = list(ListNamespaces::new().prefix([r]), "prefix").await;
    assert_eq!(
        all, spaces,
        "store conformance [{CHECK}/prefix]: sorted, deduplicated namespaces under the prefix"
    );
    let got = list(ListNamespaces::new().prefix([r, "a"]), "prefix").await;
    assert_eq!(got, spaces[..2], "store conformance [{CHECK}/prefix]");
    let got = list(ListNamespaces::new().prefix([r, "c", "deeper"]), "prefix").await;
    assert!(
        got.is_empty(),
        "store conformance [{CHECK}/prefix]: a prefix longer than the namespace never matches"
    );
    let got = list(ListNamespaces::new().prefix([r]).suffix(["x"]), "suffix").await;
    assert_eq!(
        got,
        [spaces[0].clone(), spaces[2].clone()],
        "store conformance [{CHECK}/suffix]"
    );
    let got = list(ListNamespaces::new().prefix([r]).suffix(["y", "z"]), "suffix").await;
    assert_eq!(got, [spaces[3].clone()], "store conformance [{CHECK}/suffix]");
    let got = list(ListNamespaces::new().prefix([r, "*", "x"]), "wildcard").await;
    assert_eq!(
        got,
        [spaces[0].clone(), spaces[2].clone()],
        "store conformance [{CHECK}/wildcard]: '*' in a prefix"
    );
    let got = list(
        ListNamespaces::new().prefix([r]).suffix(["*", "y", "*"]),
        "wildcard",
    )
    .await;
    assert_eq!(
        got,
        [spaces[3].clone()],
        "store conformance [{CHECK}/wildcard]: '*' in a suffix"
    );
    let got = list(ListNamespaces::new().prefix([r]).max_depth(2), "max_depth").await;
    assert_eq!(
        got,
        [ns(&root, &["a"]), ns(&root, &["b"]), ns(&root, &["c"])],
        "store conformance [{CHECK}/max_depth]: cut, deduplicated, sorted"
    );
    let got = list(ListNamespaces::new().prefix([r]).max_depth(1), "max_depth").await;
    assert_eq!(got, [vec![root.clone()]], "store conformance [{CHECK}/max_depth]");
    let got = list(ListNamespaces::new().prefix([r]).limit(2), "limit").await;
    assert_eq!(got, spaces[..2], "store conformance [{CHECK}/limit]");
    let got = list(ListNamespaces::new().prefix([r]).offset(2).limit(2), "offset").await;
    assert_eq!(got, spaces[2..4], "store conformance [{CHECK}/offset]");
    let got = list(
        ListNamespaces::new().prefix([r]).max_depth(2).offset(1).limit(1),
        "offset",
    )
    .await;
    assert_eq!(
        got,
        [ns(&root, &["b"])],
        "store conformance [{CHECK}/offset]: paging applies after max_depth"
    );

    ok(store.delete(&spaces[4], "k").await, CHECK);
    let got = list(ListNamespaces::new().prefix([r]), "after delete").await;
    assert_eq!(
        got,
        spaces[..4],
        "store conformance [{CHECK}/after delete]: a namespace without items is not listed"
    );
    let whole = list(ListNamespaces::new().limit(usize::MAX), "no prefix").await;
    for space in &spaces[..4] {
        assert!(
            whole.contains(space),
            "store conformance [{CHECK}/no prefix]: {space:?} missing"
        );
    }
    assert!(
        whole.windows(2).all(|w| w[0] < w[1]),
        "store conformance [{CHECK}/no prefix]: namespaces must be sorted and unique"
    );
}

async fn check_ttl<S: Store>(store: &S) {
    const CHECK: &str = "ttl";
    let ttl = Duration::from_millis(50);
    let long = Duration::from_secs(3600);
    let root = fresh_root();
    let mixed = ns(&root, &["mixed"]);
    let lone = ns(&root, &["lone"]);
    let unread = ns(&root, &["unread"]);

    let start = tokio::time::Instant::now();
    put_opts(
        store,
        &mixed,
        "short",
        json!({"v": 1}),
        PutOptions::new().ttl(ttl),
        CHECK,
    )
    .await;
    put_opts(
        store,
        &mixed,
        "long",
        json!({"v": 2}),
        PutOptions::new().ttl(long),
        CHECK,
    )
    .await;
    put_opts(
        store,
        &lone,
        "short",
        json!({"v": 3}),
        PutOptions::new().ttl(ttl),
        CHECK,
    )
    .await;
    put_opts(
        store,
        &unread,
        "short",
        json!({"v": 4}),
        PutOptions::new().ttl(ttl),
        CHECK,
    )
    .await;
    if start.elapsed() < ttl / 2 {
        assert!(
            get(store, &mixed, "short", CHECK).await.is_some(),
            "store conformance [{CHECK}]: an item must be readable before its TTL runs out"
        );
    }

    tokio::time::sleep(ttl + Duration::from_millis(30)).await;

    assert!(
        get(store, &mixed, "short", CHECK).await.is_none(),
        "store conformance [{CHECK}/get]: an expired item must not be returned, even before a sweep"
    );
    let found = search(store, &mixed, SearchQuery::new(), CHECK).await;
    assert_eq!(
        keys(&found),
        ["long"],
        "store conformance [{CHECK}/search]: expired items must not be searched"
    );
    let listed = ok(
        store
            .list_namespaces(ListNamespaces::new().prefix([root.as_str()]))
            .await,
        &format!("{CHECK}/list_namespaces"),
    );
    assert_eq!(
        listed,
        std::slice::from_ref(&mixed),
        "store conformance [{CHECK}/list_namespaces]: namespaces holding only expired items are not listed"
    );

    const SWEEP: &str = "ttl/sweep_expired";
    let swept = ok(store.sweep_expired().await, SWEEP);
    assert!(
        swept >= 1,
        "store conformance [{SWEEP}]: the expired items were not counted (got {swept})"
    );
    assert!(
        get(store, &unread, "short", SWEEP).await.is_none(),
        "store conformance [{SWEEP}]"
    );
    assert!(
        get(store, &mixed, "long", SWEEP).await.is_some(),
        "store conformance [{SWEEP}]: live items must survive a sweep"
    );
    let again = ok(store.sweep_expired().await, SWEEP);
    let found = search(store, std::slice::from_ref(&root), SearchQuery::new(), SWEEP).await;
    assert_eq!(
        keys(&found),
        ["long"],
        "store conformance [{SWEEP}]: after sweeping ({again} more on the second pass)"
    );
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

async fn get<S: Store>(store: &S, ns: &[String], key: &str, check: &str) -> Option<super::Item> {
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
