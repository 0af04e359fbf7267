//! Single items: put, get, delete, and what a store refuses (bad namespaces, keys, values).

use super::*;

pub(super) async fn check_put_get_delete<S: Store>(store: &S) {
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

pub(super) async fn check_validation<S: Store>(store: &S) {
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
