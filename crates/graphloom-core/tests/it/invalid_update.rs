//! One test for every invalid update of a step (LangGraph's `InvalidUpdateError`): two
//! writes to a last-value field and two `Overwrite`s of one field alike, in the graph's own
//! step or a subgraph's; other failures are not invalid updates.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::*;

#[derive(State, Clone, Default, Debug)]
struct Desk {
    owner: String,
    #[reducer(append)]
    log: Seq<String>,
}

/// Two parallel nodes whose updates are `a` and `b`.
fn fork(a: DeskUpdate, b: DeskUpdate) -> CompiledGraph<Desk> {
    StateGraph::<Desk>::new()
        .add_node("a", move |_s, _rt| {
            let u = a.clone();
            async move { Ok(u) }
        })
        .add_node("b", move |_s, _rt| {
            let u = b.clone();
            async move { Ok(u) }
        })
        .add_edge(START, "a")
        .add_edge(START, "b")
        .add_edge("a", END)
        .add_edge("b", END)
        .compile()
        .unwrap()
}

#[tokio::test]
async fn a_conflict_and_an_overwrite_conflict_are_both_invalid_updates() {
    let conflict = fork(
        DeskUpdate::new().owner("a".into()),
        DeskUpdate::new().owner("b".into()),
    )
    .invoke(DeskUpdate::new(), RunConfig::default())
    .await
    .unwrap_err();
    assert!(
        matches!(
            &conflict,
            Error::State {
                source: StateError::Conflict { .. },
                ..
            }
        ),
        "{conflict:?}"
    );
    assert!(conflict.is_invalid_update(), "{conflict}");

    let overwrites = fork(
        DeskUpdate::new().log_overwrite(Seq::new()),
        DeskUpdate::new().log_overwrite(Seq::new()),
    )
    .invoke(DeskUpdate::new(), RunConfig::default())
    .await
    .unwrap_err();
    assert!(
        matches!(
            &overwrites,
            Error::State {
                source: StateError::OverwriteConflict { .. },
                ..
            }
        ),
        "{overwrites:?}"
    );
    assert!(overwrites.is_invalid_update(), "{overwrites}");
}

#[tokio::test]
async fn a_subgraphs_invalid_update_is_one_for_its_parent_too() {
    let child = fork(
        DeskUpdate::new().owner("a".into()),
        DeskUpdate::new().owner("b".into()),
    );
    let parent = StateGraph::<Desk>::new()
        .add_subgraph_shared("child", child)
        .add_edge(START, "child")
        .add_edge("child", END)
        .compile()
        .unwrap();
    let err = parent
        .invoke(DeskUpdate::new(), RunConfig::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Node { node, .. } if node == "child"),
        "{err:?}"
    );
    assert!(err.is_invalid_update(), "{err}");
}

#[tokio::test]
async fn other_failures_are_not_invalid_updates() {
    let g = StateGraph::<Desk>::new()
        .add_node("a", |_s, _rt| async {
            Err::<DeskUpdate, _>(NodeError::fatal("no"))
        })
        .add_edge(START, "a")
        .add_edge("a", END)
        .compile()
        .unwrap();
    let err = g
        .invoke(DeskUpdate::new(), RunConfig::default())
        .await
        .unwrap_err();
    assert!(!err.is_invalid_update());
    assert!(!StateError::UnknownField("x".into()).is_invalid_update());
}
