//! Vector search: ranking by similarity, filters with a query, scores, and searches without
//! a query.

use super::*;

/// Run the vector-search checks against a store indexed with
/// [`HashEmbedder`](graphloom_core::store::HashEmbedder) (whole values or the `text` field embedded; at
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
