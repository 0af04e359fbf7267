//! `put` / `get_tuple` and delta-encoded channel values.

#[allow(clippy::wildcard_imports)]
use super::*;

// ---------------------------------------------------------------------------------------
// put / get_tuple
// ---------------------------------------------------------------------------------------

/// `put` and `get_tuple`: lookup by id and latest, returned configs, parent configs,
/// metadata, channel versions, `versions_seen`, pending sends and namespace isolation.
pub async fn put_and_get<C: Checkpointer>(saver: &C) {
    let tid = new_thread();
    let root = CheckpointConfig::thread(&tid);

    // --- put returns the config of the stored checkpoint.
    let name = "put_and_get/put_returns_config";
    let mut cp1 = checkpoint(
        &[("a", ver(1)), ("b", ver(1))],
        vec![
            ("a", full(json!(1))),
            ("b", full(json!({"text": "x", "n": [1, 2]}))),
        ],
    );
    cp1.versions_seen = BTreeMap::from([(
        "__input__".to_owned(),
        BTreeMap::from([("__start__".to_owned(), ver(1))]),
    )]);
    cp1.updated_channels = vec!["a".into(), "b".into()];
    let m1 = meta(CheckpointSource::Input, -1);
    let c1 = put(
        saver,
        name,
        &root,
        cp1.clone(),
        m1.clone(),
        versions(&[("a", ver(1)), ("b", ver(1))]),
    )
    .await;
    check_eq!(name, c1, root.clone().at(&cp1.id));

    // --- get by id returns exactly what was put, resolved.
    let name = "put_and_get/get_by_id";
    let t1 = must_get(saver, name, &c1).await;
    check_eq!(name, t1.config, c1);
    check_eq!(
        name,
        t1.checkpoint,
        resolved(&cp1, &[("a", json!(1)), ("b", json!({"text": "x", "n": [1, 2]}))])
    );
    check_eq!(name, t1.metadata, m1);
    check_eq!(name, t1.parent_config, None, "the first checkpoint has no parent");
    check!(
        name,
        t1.pending_writes.is_empty(),
        "unexpected writes {:?}",
        t1.pending_writes
    );

    // --- second checkpoint: parent, metadata, versions_seen and pending sends round trip.
    let name = "put_and_get/second_checkpoint";
    let mut cp2 = checkpoint(&[("a", ver(2)), ("b", ver(1))], vec![("a", full(json!(2)))]);
    cp2.versions_seen = BTreeMap::from([
        (
            "__input__".to_owned(),
            BTreeMap::from([("__start__".to_owned(), ver(1))]),
        ),
        (
            "node".to_owned(),
            BTreeMap::from([("a".to_owned(), ver(1)), ("b".to_owned(), ver(1))]),
        ),
    ]);
    cp2.pending_sends = vec![
        PendingSend {
            node: "worker".into(),
            packet: json!({"job": 1}),
        },
        PendingSend {
            node: "worker".into(),
            packet: json!({"job": 2}),
        },
    ];
    cp2.updated_channels = vec!["a".into()];
    let mut m2 = meta_with(
        CheckpointSource::Loop,
        0,
        json!({"user": "alice", "score": 42, "nested": {"k": [1, "two", null]}}),
    );
    m2.parents = BTreeMap::from([(String::new(), new_checkpoint_id())]);
    m2.run_id = Some("run-1".into());
    let c2 = put(
        saver,
        name,
        &c1,
        cp2.clone(),
        m2.clone(),
        versions(&[("a", ver(2))]),
    )
    .await;
    check_eq!(name, c2, root.clone().at(&cp2.id));
    let t2 = must_get(saver, name, &c2).await;
    check_eq!(
        name,
        t2.parent_config,
        Some(c1.clone()),
        "parent_config comes from put's config"
    );
    check_eq!(
        name,
        t2.metadata,
        m2,
        "metadata (source, step, parents, run_id, extra keys)"
    );
    check_eq!(
        name,
        t2.checkpoint,
        resolved(&cp2, &[("a", json!(2)), ("b", json!({"text": "x", "n": [1, 2]}))]),
        "channel values, versions, versions_seen, pending_sends and updated_channels"
    );
    assert_all_full(name, &t2);

    // --- latest and by id.
    let name = "put_and_get/latest";
    let latest = must_get(saver, name, &root).await;
    check_eq!(
        name,
        latest.checkpoint.id,
        cp2.id,
        "get_tuple without id returns the newest"
    );
    check_eq!(name, latest.config, c2);
    let name = "put_and_get/older_by_id";
    let again1 = must_get(saver, name, &c1).await;
    check_eq!(
        name,
        again1.checkpoint.channel_values.get("a"),
        Some(&full(json!(1)))
    );
    check_eq!(name, again1, t1, "an older checkpoint is unchanged by later puts");

    // --- a third checkpoint becomes the latest.
    let name = "put_and_get/latest_moves";
    let cp3 = checkpoint(&[("a", ver(3)), ("b", ver(1))], vec![("a", full(json!(3)))]);
    let c3 = put(
        saver,
        name,
        &c2,
        cp3.clone(),
        meta(CheckpointSource::Loop, 1),
        versions(&[("a", ver(3))]),
    )
    .await;
    check_eq!(name, must_get(saver, name, &root).await.config, c3);
    check_eq!(name, must_get(saver, name, &c2).await.checkpoint.id, cp2.id);

    // --- missing things are None.
    let name = "put_and_get/missing";
    check!(
        name,
        get(saver, name, &CheckpointConfig::thread(new_thread()))
            .await
            .is_none(),
        "unknown thread"
    );
    check!(
        name,
        get(saver, name, &root.clone().at(new_checkpoint_id()))
            .await
            .is_none(),
        "unknown id"
    );
    check!(
        name,
        get(saver, name, &root.clone().in_ns("nope:1")).await.is_none(),
        "unknown namespace"
    );
    check!(
        name,
        get(saver, name, &root.clone().in_ns("nope:1").at(&cp1.id))
            .await
            .is_none(),
        "a known id looked up in another namespace"
    );

    // --- namespaces of one thread are isolated.
    let name = "put_and_get/namespaces_isolated";
    let tid = new_thread();
    let root = CheckpointConfig::thread(&tid);
    let child = root.clone().in_ns("child:1");
    let cp_root = checkpoint(&[("a", ver(1))], vec![("a", full(json!("root")))]);
    let cp_child = checkpoint(&[("a", ver(1))], vec![("a", full(json!("child")))]);
    let c_root = put(
        saver,
        name,
        &root,
        cp_root.clone(),
        meta(CheckpointSource::Loop, 0),
        versions(&[("a", ver(1))]),
    )
    .await;
    let c_child = put(
        saver,
        name,
        &child,
        cp_child.clone(),
        meta(CheckpointSource::Loop, 0),
        versions(&[("a", ver(1))]),
    )
    .await;
    check_eq!(name, c_child, child.clone().at(&cp_child.id));
    let t_root = must_get(saver, name, &root).await;
    let t_child = must_get(saver, name, &child).await;
    check_eq!(name, t_root.config, c_root);
    check_eq!(
        name,
        t_root.checkpoint,
        resolved(&cp_root, &[("a", json!("root"))])
    );
    check_eq!(name, t_child.config, c_child);
    check_eq!(
        name,
        t_child.checkpoint,
        resolved(&cp_child, &[("a", json!("child"))])
    );
    check!(
        name,
        get(saver, name, &root.clone().at(&cp_child.id)).await.is_none(),
        "the child's checkpoint is visible in the root namespace"
    );
}

// ---------------------------------------------------------------------------------------
// Delta-encoded values
// ---------------------------------------------------------------------------------------

/// Delta-encoded channel values: appends resolve along their chain, unchanged channels keep
/// their earlier value, forks of one version do not share blobs, a channel given a new
/// version without a value is empty, and every returned value is [`ChannelValue::Full`].
pub async fn deltas<C: Checkpointer>(saver: &C) {
    let tid = new_thread();
    let root = CheckpointConfig::thread(&tid);
    let m = |step| meta(CheckpointSource::Loop, step);

    // Checkpoint 1: full values of both channels.
    let name = "deltas/full_values";
    let cp1 = checkpoint(
        &[("messages", ver(1)), ("other", ver(1))],
        vec![
            ("messages", full(json!(["m1", "m2"]))),
            ("other", full(json!({"k": 1}))),
        ],
    );
    let c1 = put(
        saver,
        name,
        &root,
        cp1.clone(),
        m(0),
        versions(&[("messages", ver(1)), ("other", ver(1))]),
    )
    .await;

    // Checkpoint 2: an append to `messages`; `other` unchanged (neither a new version nor a value).
    let name = "deltas/append_and_unchanged";
    let cp2 = checkpoint(
        &[("messages", ver(2)), ("other", ver(1))],
        vec![("messages", append(ver(1), vec![json!("m3")]))],
    );
    let c2 = put(
        saver,
        name,
        &c1,
        cp2.clone(),
        m(1),
        versions(&[("messages", ver(2))]),
    )
    .await;
    let t2 = must_get(saver, name, &c2).await;
    check_eq!(
        name,
        t2.checkpoint,
        resolved(
            &cp2,
            &[
                ("messages", json!(["m1", "m2", "m3"])),
                ("other", json!({"k": 1}))
            ]
        ),
        "the append is concatenated to its base and the unchanged channel keeps checkpoint 1's value"
    );
    assert_all_full(name, &t2);
    let t1 = must_get(saver, name, &c1).await;
    check_eq!(
        name,
        t1.checkpoint,
        resolved(
            &cp1,
            &[("messages", json!(["m1", "m2"])), ("other", json!({"k": 1}))]
        ),
        "the base checkpoint is unchanged"
    );

    // Checkpoint 3: an append to an append (a chain of two links), several items.
    let name = "deltas/append_chain";
    let cp3 = checkpoint(
        &[("messages", ver(3)), ("other", ver(1))],
        vec![(
            "messages",
            append(ver(2), vec![json!("m4"), json!({"role": "ai"})]),
        )],
    );
    let c3 = put(
        saver,
        name,
        &c2,
        cp3.clone(),
        m(2),
        versions(&[("messages", ver(3))]),
    )
    .await;
    let t3 = must_get(saver, name, &c3).await;
    check_eq!(
        name,
        t3.checkpoint.channel_values.get("messages"),
        Some(&full(json!(["m1", "m2", "m3", "m4", {"role": "ai"}])))
    );
    check_eq!(
        name,
        t3.checkpoint.channel_values.get("other"),
        Some(&full(json!({"k": 1})))
    );

    // Lists return resolved values too.
    let name = "deltas/list_resolves";
    let listed = list_all(saver, name, &ListQuery::thread(&tid)).await;
    check_eq!(name, listed.len(), 3);
    for t in &listed {
        assert_all_full(name, t);
    }
    check_eq!(name, listed[0], t3, "list and get_tuple agree");
    check_eq!(name, listed[1], t2, "list and get_tuple agree");
    check_eq!(name, listed[2], t1, "list and get_tuple agree");

    // Two forks from checkpoint 2 write "version 3" of `messages` with different salts.
    let name = "deltas/forks_do_not_share_blobs";
    let fork_a = Version { n: 3, salt: SALT + 1 };
    let fork_b = Version { n: 3, salt: SALT + 2 };
    let cpa = checkpoint(
        &[("messages", fork_a), ("other", ver(1))],
        vec![("messages", append(ver(2), vec![json!("fork-a")]))],
    );
    let cpb = checkpoint(
        &[("messages", fork_b), ("other", ver(1))],
        vec![("messages", append(ver(2), vec![json!("fork-b")]))],
    );
    let ca = put(
        saver,
        name,
        &c2,
        cpa,
        meta(CheckpointSource::Fork, 2),
        versions(&[("messages", fork_a)]),
    )
    .await;
    let cb = put(
        saver,
        name,
        &c2,
        cpb,
        meta(CheckpointSource::Fork, 2),
        versions(&[("messages", fork_b)]),
    )
    .await;
    check_eq!(
        name,
        must_get(saver, name, &ca)
            .await
            .checkpoint
            .channel_values
            .get("messages"),
        Some(&full(json!(["m1", "m2", "m3", "fork-a"])))
    );
    check_eq!(
        name,
        must_get(saver, name, &cb)
            .await
            .checkpoint
            .channel_values
            .get("messages"),
        Some(&full(json!(["m1", "m2", "m3", "fork-b"])))
    );
    check_eq!(
        name,
        must_get(saver, name, &c3)
            .await
            .checkpoint
            .channel_values
            .get("messages"),
        Some(&full(json!(["m1", "m2", "m3", "m4", {"role": "ai"}]))),
        "a fork must not change the other line of history"
    );

    // A full value after appends replaces the list.
    let name = "deltas/full_after_append";
    let cp4 = checkpoint(
        &[("messages", ver(4)), ("other", ver(1))],
        vec![("messages", full(json!(["fresh"])))],
    );
    let c4 = put(saver, name, &c3, cp4, m(3), versions(&[("messages", ver(4))])).await;
    check_eq!(
        name,
        must_get(saver, name, &c4)
            .await
            .checkpoint
            .channel_values
            .get("messages"),
        Some(&full(json!(["fresh"])))
    );

    // A channel with a new version but no value was emptied: no value is returned for it.
    let name = "deltas/emptied_channel";
    let cp5 = checkpoint(&[("messages", ver(4)), ("other", ver(2))], vec![]);
    let c5 = put(
        saver,
        name,
        &c4,
        cp5.clone(),
        m(4),
        versions(&[("other", ver(2))]),
    )
    .await;
    let t5 = must_get(saver, name, &c5).await;
    check_eq!(
        name,
        t5.checkpoint,
        resolved(&cp5, &[("messages", json!(["fresh"]))])
    );

    // Values that are not lists, and a channel first written in a later checkpoint.
    let name = "deltas/scalar_values";
    let cp6 = checkpoint(
        &[("messages", ver(4)), ("other", ver(3)), ("count", ver(1))],
        vec![("other", full(json!("back"))), ("count", full(json!(0)))],
    );
    let c6 = put(
        saver,
        name,
        &c5,
        cp6.clone(),
        m(5),
        versions(&[("other", ver(3)), ("count", ver(1))]),
    )
    .await;
    check_eq!(
        name,
        must_get(saver, name, &c6).await.checkpoint,
        resolved(
            &cp6,
            &[
                ("messages", json!(["fresh"])),
                ("other", json!("back")),
                ("count", json!(0))
            ]
        )
    );
}
