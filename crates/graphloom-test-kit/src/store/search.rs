//! Search under a namespace prefix (filters, paging, order) and listing namespaces.

use super::*;

pub(super) async fn check_search<S: Store>(store: &S) {
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

pub(super) async fn check_list_namespaces<S: Store>(store: &S) {
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
