//! Time to live: expiry, refresh on read, and sweeping expired items.

use super::*;

pub(super) async fn check_ttl<S: Store>(store: &S) {
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
