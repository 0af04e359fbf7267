//! get_state, get_state_history, update_state (as a node), running from an older checkpoint.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::{CheckpointSource, InMemorySaver};
use graphloom_core::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(State, Clone, Default, Debug)]
struct Doc {
    #[reducer(append)]
    trail: Seq<String>,
    note: String,
}

struct Counts {
    a: AtomicUsize,
    b: AtomicUsize,
    c: AtomicUsize,
}

fn graph(saver: InMemorySaver, counts: Arc<Counts>) -> CompiledGraph<Doc> {
    let (ca, cb, cc) = (Arc::clone(&counts), Arc::clone(&counts), counts);
    StateGraph::<Doc>::new()
        .add_node("a", move |_s, _rt| {
            ca.a.fetch_add(1, Ordering::SeqCst);
            async { Ok(DocUpdate::new().trail(vec!["a".into()])) }
        })
        .add_node("b", move |_s, _rt| {
            cb.b.fetch_add(1, Ordering::SeqCst);
            async { Ok(DocUpdate::new().trail(vec!["b".into()])) }
        })
        .add_node("c", move |s: Arc<Doc>, _rt| {
            cc.c.fetch_add(1, Ordering::SeqCst);
            async move { Ok(DocUpdate::new().trail(vec![format!("c(note={})", s.note)])) }
        })
        .add_edge(START, "a")
        .add_sequence(["a", "b", "c"])
        .add_edge("c", END)
        .checkpointer(saver)
        .compile()
        .unwrap()
}

fn counts() -> Arc<Counts> {
    Arc::new(Counts {
        a: AtomicUsize::new(0),
        b: AtomicUsize::new(0),
        c: AtomicUsize::new(0),
    })
}

#[tokio::test]
async fn history_lists_every_checkpoint_newest_first_with_next_nodes() {
    let g = graph(InMemorySaver::new(), counts());
    let cfg = RunConfig::thread("h");
    g.invoke(DocUpdate::new(), cfg.clone()).await.unwrap();
    let hist = g.get_state_history(&cfg, HistoryQuery::default()).await.unwrap();
    let steps: Vec<i64> = hist.iter().map(|s| s.metadata.as_ref().unwrap().step).collect();
    assert_eq!(steps, vec![3, 2, 1, 0, -1]);
    let next: Vec<Vec<String>> = hist.iter().map(|s| s.next.clone()).collect();
    assert_eq!(
        next,
        vec![
            vec![],
            vec!["c".to_string()],
            vec!["b".to_string()],
            vec!["a".to_string()],
            vec!["__start__".to_string()]
        ]
    );
    assert_eq!(hist[4].metadata.as_ref().unwrap().source, CheckpointSource::Input);
    assert_eq!(hist[0].metadata.as_ref().unwrap().source, CheckpointSource::Loop);
    // Each checkpoint's parent is the one before it.
    for w in hist.windows(2) {
        assert_eq!(
            w[0].parent_config.as_ref().unwrap().checkpoint_id,
            w[1].config.checkpoint_id
        );
    }
    assert_eq!(hist[2].values.trail.to_vec(), vec!["a"]);
    // Filters and limits.
    let limited = g
        .get_state_history(
            &cfg,
            HistoryQuery {
                limit: Some(2),
                ..HistoryQuery::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(limited.len(), 2);
    let mut filter = serde_json::Map::new();
    filter.insert("source".into(), "input".into());
    let inputs = g
        .get_state_history(
            &cfg,
            HistoryQuery {
                filter,
                ..HistoryQuery::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(inputs.len(), 1);
    let before = g
        .get_state_history(
            &cfg,
            HistoryQuery {
                before: hist[1].config.checkpoint_id.clone(),
                ..HistoryQuery::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(before.len(), 3);
}

#[tokio::test]
async fn update_state_as_a_node_then_continue() {
    let c = counts();
    let g = graph(InMemorySaver::new(), Arc::clone(&c));
    let cfg = RunConfig::thread("u").interrupt_before(NodeSet::of(["c"]));
    g.invoke(DocUpdate::new(), cfg.clone()).await.unwrap();
    assert_eq!(g.get_state(&cfg).await.unwrap().next, vec!["c".to_string()]);
    // Edit as if `b` had written the note: `b`'s edges fire again, so `c` is next.
    let new_cfg = g
        .update_state(
            &RunConfig::thread("u"),
            Some(DocUpdate::new().note("edited".into())),
            Some("b"),
        )
        .await
        .unwrap();
    let st = g.get_state(&RunConfig::thread("u")).await.unwrap();
    assert_eq!(st.config.checkpoint_id, new_cfg.checkpoint_id);
    assert_eq!(st.next, vec!["c".to_string()]);
    assert_eq!(st.metadata.as_ref().unwrap().source, CheckpointSource::Update);
    let out = g
        .invoke_input(RunInput::Continue, RunConfig::thread("u"))
        .await
        .unwrap();
    assert_eq!(out.values.trail.to_vec(), vec!["a", "b", "c(note=edited)"]);
    assert_eq!(c.b.load(Ordering::SeqCst), 1);
    // Without as_node, the node that ran last is used (`c`, which leads to END).
    g.update_state(
        &RunConfig::thread("u"),
        Some(DocUpdate::new().note("late".into())),
        None,
    )
    .await
    .unwrap();
    assert!(g
        .get_state(&RunConfig::thread("u"))
        .await
        .unwrap()
        .next
        .is_empty());
    // Unknown node is refused.
    let err = g
        .update_state(&RunConfig::thread("u"), None, Some("zzz"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnknownNode(_)));
}

#[tokio::test]
async fn running_from_an_older_checkpoint_forks_and_reruns_later_nodes() {
    let c = counts();
    let g = graph(InMemorySaver::new(), Arc::clone(&c));
    let cfg = RunConfig::thread("f");
    g.invoke(DocUpdate::new(), cfg.clone()).await.unwrap();
    let hist = g.get_state_history(&cfg, HistoryQuery::default()).await.unwrap();
    let after_a = hist.iter().find(|s| s.next == vec!["b".to_string()]).unwrap();
    let fork_id = after_a.config.checkpoint_id.clone().unwrap();

    let out = g
        .invoke_input(RunInput::Continue, RunConfig::thread("f").checkpoint_id(&fork_id))
        .await
        .unwrap();
    assert_eq!(out.values.trail.to_vec(), vec!["a", "b", "c(note=)"]);
    assert_eq!(
        (
            c.a.load(Ordering::SeqCst),
            c.b.load(Ordering::SeqCst),
            c.c.load(Ordering::SeqCst)
        ),
        (1, 2, 2)
    );
    let hist2 = g.get_state_history(&cfg, HistoryQuery::default()).await.unwrap();
    assert_eq!(hist2.len(), hist.len() + 2);
    // The new branch hangs off the fork point.
    let first_new = &hist2[1];
    assert_eq!(
        first_new.parent_config.as_ref().unwrap().checkpoint_id.as_deref(),
        Some(fork_id.as_str())
    );

    // Editing an older checkpoint forks from it too.
    let edited = g
        .update_state(
            &RunConfig::thread("f").checkpoint_id(&fork_id),
            Some(DocUpdate::new().note("fork".into())),
            Some("a"),
        )
        .await
        .unwrap();
    let st = g.get_state(&RunConfig::thread("f")).await.unwrap();
    assert_eq!(st.config.checkpoint_id, edited.checkpoint_id);
    assert_eq!(
        st.parent_config.unwrap().checkpoint_id.as_deref(),
        Some(fork_id.as_str())
    );
    assert_eq!(st.next, vec!["b".to_string()]);
    let out = g
        .invoke_input(RunInput::Continue, RunConfig::thread("f"))
        .await
        .unwrap();
    assert_eq!(out.values.trail.to_vec(), vec!["a", "b", "c(note=fork)"]);

    let missing = g
        .invoke_input(RunInput::Continue, RunConfig::thread("f").checkpoint_id("nope"))
        .await;
    assert!(matches!(missing, Err(Error::NotFound(_))));
}

#[tokio::test]
async fn update_state_on_an_empty_thread_acts_as_input() {
    let g = graph(InMemorySaver::new(), counts());
    g.update_state(
        &RunConfig::thread("e"),
        Some(DocUpdate::new().note("seed".into())),
        None,
    )
    .await
    .unwrap();
    let st = g.get_state(&RunConfig::thread("e")).await.unwrap();
    assert_eq!(st.values.note, "seed");
    assert_eq!(st.next, vec!["a".to_string()]);
    let out = g
        .invoke_input(RunInput::Continue, RunConfig::thread("e"))
        .await
        .unwrap();
    assert_eq!(out.values.trail.to_vec(), vec!["a", "b", "c(note=seed)"]);
}

#[tokio::test]
async fn delete_and_copy_threads() {
    let g = graph(InMemorySaver::new(), counts());
    g.invoke(DocUpdate::new().note("x".into()), RunConfig::thread("src"))
        .await
        .unwrap();
    g.copy_thread("src", "dst").await.unwrap();
    let copy = g.get_state(&RunConfig::thread("dst")).await.unwrap();
    assert_eq!(copy.values.note, "x");
    assert_eq!(copy.values.trail.len(), 3);
    g.delete_thread("src").await.unwrap();
    let gone = g.get_state(&RunConfig::thread("src")).await.unwrap();
    assert!(gone.metadata.is_none());
    assert!(gone.values.trail.is_empty());
    assert_eq!(
        g.get_state(&RunConfig::thread("dst"))
            .await
            .unwrap()
            .values
            .trail
            .len(),
        3
    );
}

/// In `sync` mode the input checkpoint is saved together with the `__start__` step's; it
/// is there however the run stops: before its first node, or when that node fails.
#[tokio::test]
async fn the_input_checkpoint_is_saved_however_the_run_stops() {
    let saver = InMemorySaver::new();
    let g = graph(saver.clone(), counts());
    let paused = RunConfig {
        interrupt_before: NodeSet::Some(vec!["a".into()]),
        ..RunConfig::thread("paused")
    };
    let out = g.invoke(DocUpdate::new(), paused.clone()).await.unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    let hist = g
        .get_state_history(&paused, HistoryQuery::default())
        .await
        .unwrap();
    let steps: Vec<i64> = hist.iter().map(|s| s.metadata.as_ref().unwrap().step).collect();
    assert_eq!(steps, vec![0, -1]);
    assert_eq!(
        hist[0].parent_config.as_ref().unwrap().checkpoint_id,
        hist[1].config.checkpoint_id
    );

    let failing = StateGraph::<Doc>::new()
        .add_node("a", |_s, _rt| async {
            Err::<NodeOutput<Doc>, _>(NodeError::fatal("no"))
        })
        .add_edge(START, "a")
        .add_edge("a", END)
        .checkpointer(saver)
        .compile()
        .unwrap();
    let cfg = RunConfig::thread("failing");
    assert!(failing.invoke(DocUpdate::new(), cfg.clone()).await.is_err());
    let hist = failing
        .get_state_history(&cfg, HistoryQuery::default())
        .await
        .unwrap();
    let sources: Vec<CheckpointSource> = hist.iter().map(|s| s.metadata.as_ref().unwrap().source).collect();
    assert_eq!(sources, vec![CheckpointSource::Loop, CheckpointSource::Input]);
}
