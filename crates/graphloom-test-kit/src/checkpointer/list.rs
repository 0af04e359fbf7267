//! `list`: filters, `before`, limits and order.

#[allow(clippy::wildcard_imports)]
use super::*;

// ---------------------------------------------------------------------------------------
// list
// ---------------------------------------------------------------------------------------

/// `list`: newest first, metadata filters (source, step, user keys, several keys), `before`,
/// `limit`, all threads when `thread_id` is `None`, namespace filters, and pending writes in
/// listed tuples.
pub async fn list<C: Checkpointer>(saver: &C) {
    let tag = uuid::Uuid::new_v4().to_string();
    let tid = new_thread();
    let root = CheckpointConfig::thread(&tid);
    let sources = [CheckpointSource::Input, CheckpointSource::Loop];
    let name = "list/setup";
    let configs = chain(saver, name, &root, 4, |i| {
        meta_with(
            sources[(i % 2) as usize],
            i as i64,
            json!({"kit_tag": tag, "score": i * 10}),
        )
    })
    .await;
    let ids: Vec<String> = configs.iter().map(|c| c.checkpoint_id.clone().unwrap()).collect();
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();
    let q = || ListQuery::thread(&tid);

    let name = "list/newest_first";
    let all = list_all(saver, name, &q()).await;
    check_eq!(
        name,
        all.iter().map(|t| t.checkpoint.id.clone()).collect::<Vec<_>>(),
        newest_first
    );
    for (i, t) in all.iter().rev().enumerate() {
        check_eq!(name, t.config, configs[i]);
        check_eq!(
            name,
            t.parent_config,
            if i == 0 {
                None
            } else {
                Some(configs[i - 1].clone())
            }
        );
        check_eq!(name, t.metadata.step, i as i64);
        check_eq!(
            name,
            t.checkpoint.channel_values.get("step"),
            Some(&full(json!(i)))
        );
        check_eq!(
            name,
            *t,
            must_get(saver, name, &configs[i]).await,
            "list and get_tuple agree"
        );
    }

    let name = "list/filter_source";
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            filter: filter(json!({"source": "input"})),
            ..q()
        },
    )
    .await;
    check_eq!(name, got, vec![ids[2].clone(), ids[0].clone()]);
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            filter: filter(json!({"source": "loop"})),
            ..q()
        },
    )
    .await;
    check_eq!(name, got, vec![ids[3].clone(), ids[1].clone()]);

    let name = "list/filter_step";
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            filter: filter(json!({"step": 1})),
            ..q()
        },
    )
    .await;
    check_eq!(name, got, vec![ids[1].clone()]);

    let name = "list/filter_user_key";
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            filter: filter(json!({"score": 20})),
            ..q()
        },
    )
    .await;
    check_eq!(name, got, vec![ids[2].clone()]);

    let name = "list/filter_several_keys";
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            filter: filter(json!({"source": "input", "step": 2, "kit_tag": tag})),
            ..q()
        },
    )
    .await;
    check_eq!(name, got, vec![ids[2].clone()]);
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            filter: filter(json!({"source": "input", "step": 1})),
            ..q()
        },
    )
    .await;
    check!(
        name,
        got.is_empty(),
        "keys matching different checkpoints must not match: {got:?}"
    );
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            filter: filter(json!({"missing_key": 1})),
            ..q()
        },
    )
    .await;
    check!(
        name,
        got.is_empty(),
        "a key no checkpoint has must match nothing: {got:?}"
    );

    let name = "list/before";
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            before: Some(ids[2].clone()),
            ..q()
        },
    )
    .await;
    check_eq!(
        name,
        got,
        vec![ids[1].clone(), ids[0].clone()],
        "strictly before, newest first"
    );
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            before: Some(ids[0].clone()),
            ..q()
        },
    )
    .await;
    check!(
        name,
        got.is_empty(),
        "nothing is before the first checkpoint: {got:?}"
    );

    let name = "list/limit";
    check_eq!(
        name,
        list_ids(
            saver,
            name,
            &ListQuery {
                limit: Some(1),
                ..q()
            }
        )
        .await,
        vec![ids[3].clone()]
    );
    check_eq!(
        name,
        list_ids(
            saver,
            name,
            &ListQuery {
                limit: Some(2),
                ..q()
            }
        )
        .await,
        vec![ids[3].clone(), ids[2].clone()]
    );
    check_eq!(
        name,
        list_ids(
            saver,
            name,
            &ListQuery {
                limit: Some(10),
                ..q()
            }
        )
        .await,
        newest_first
    );

    let name = "list/before_and_limit";
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            before: Some(ids[3].clone()),
            limit: Some(1),
            ..q()
        },
    )
    .await;
    check_eq!(name, got, vec![ids[2].clone()]);
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            before: Some(ids[3].clone()),
            limit: Some(1),
            filter: filter(json!({"source": "input"})),
            ..q()
        },
    )
    .await;
    check_eq!(name, got, vec![ids[2].clone()]);

    let name = "list/unknown_thread";
    let got = list_ids(saver, name, &ListQuery::thread(new_thread())).await;
    check!(name, got.is_empty(), "{got:?}");

    // All threads: a second thread with the same tag; the tag filter isolates this run.
    let name = "list/all_threads";
    let other = new_thread();
    let other_cfg = chain(saver, name, &CheckpointConfig::thread(&other), 1, |_| {
        meta_with(CheckpointSource::Loop, 7, json!({"kit_tag": tag}))
    })
    .await;
    let across = list_all(
        saver,
        name,
        &ListQuery {
            thread_id: None,
            checkpoint_ns: None,
            filter: filter(json!({"kit_tag": tag})),
            ..ListQuery::default()
        },
    )
    .await;
    let mut expected = vec![other_cfg[0].clone()];
    expected.extend(configs.iter().rev().cloned());
    check_eq!(
        name,
        across.iter().map(|t| t.config.clone()).collect::<Vec<_>>(),
        expected,
        "newest first across threads"
    );
    let got = list_all(
        saver,
        name,
        &ListQuery {
            thread_id: None,
            checkpoint_ns: None,
            filter: filter(json!({"kit_tag": tag})),
            limit: Some(2),
            ..ListQuery::default()
        },
    )
    .await;
    check_eq!(
        name,
        got.iter().map(|t| t.config.clone()).collect::<Vec<_>>(),
        expected[..2].to_vec()
    );

    // Namespaces.
    let name = "list/namespaces";
    let tid = new_thread();
    let root = CheckpointConfig::thread(&tid);
    let mut by_ns = Vec::new();
    for ns in ["", "child:1", "child:2"] {
        let c = chain(saver, name, &root.clone().in_ns(ns), 1, |_| {
            meta(CheckpointSource::Loop, 0)
        })
        .await;
        by_ns.push(c[0].clone());
    }
    for c in &by_ns {
        let got = list_all(
            saver,
            name,
            &ListQuery {
                checkpoint_ns: Some(c.checkpoint_ns.clone()),
                ..ListQuery::thread(&tid)
            },
        )
        .await;
        check_eq!(
            name,
            got.iter().map(|t| t.config.clone()).collect::<Vec<_>>(),
            vec![c.clone()]
        );
    }
    let got = list_all(
        saver,
        name,
        &ListQuery {
            checkpoint_ns: None,
            ..ListQuery::thread(&tid)
        },
    )
    .await;
    let expected: Vec<CheckpointConfig> = by_ns.iter().rev().cloned().collect();
    check_eq!(
        name,
        got.iter().map(|t| t.config.clone()).collect::<Vec<_>>(),
        expected,
        "all namespaces, newest first"
    );

    // Pending writes are part of listed tuples.
    let name = "list/includes_pending_writes";
    let task = uuid::Uuid::new_v4().to_string();
    put_w(saver, name, &by_ns[0], &[("ch", json!("val"))], &task, "").await;
    let got = list_all(saver, name, &ListQuery::thread(&tid)).await;
    check_eq!(name, got.len(), 1);
    check_eq!(name, got[0].pending_writes, vec![pw(&task, "ch", json!("val"))]);
}
