//! A stored checkpoint that does not fit the state gives a typed error, never a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::{
    ChannelValue, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource, Checkpointer,
    InMemorySaver, Version,
};
use graphloom_core::*;
use serde_json::json;
use std::collections::BTreeMap;

#[derive(State, Clone, Default, Debug)]
struct Typed {
    count: i64,
}

#[tokio::test]
async fn a_value_of_the_wrong_type_is_a_corrupt_checkpoint_error_naming_thread_and_id() {
    let saver = InMemorySaver::new();
    let g = StateGraph::<Typed>::new()
        .add_node("a", |_s, _rt| async { Ok(NodeOutput::None) })
        .add_edge(START, "a")
        .add_edge("a", END)
        .checkpointer(saver.clone())
        .compile()
        .unwrap();
    let mut cp = Checkpoint::empty();
    let v = Version { n: 1, salt: 7 };
    cp.channel_values
        .insert("count".into(), ChannelValue::Full(json!("not a number")));
    cp.channel_versions.insert("count".into(), v);
    let meta = CheckpointMetadata {
        source: CheckpointSource::Loop,
        step: 0,
        parents: BTreeMap::new(),
        run_id: None,
        extra: serde_json::Map::new(),
    };
    let id = cp.id.clone();
    saver
        .put(
            &CheckpointConfig::thread("bad"),
            cp,
            meta,
            BTreeMap::from([("count".to_string(), v)]),
        )
        .await
        .unwrap();

    for err in [
        g.invoke_input(RunInput::Continue, RunConfig::thread("bad"))
            .await
            .unwrap_err(),
        g.get_state(&RunConfig::thread("bad")).await.unwrap_err(),
        g.invoke(TypedUpdate::new().count(1), RunConfig::thread("bad"))
            .await
            .unwrap_err(),
    ] {
        match err {
            Error::CorruptCheckpoint {
                thread_id,
                checkpoint_id,
                message,
            } => {
                assert_eq!(thread_id, "bad");
                assert_eq!(checkpoint_id, id);
                assert!(message.contains("count"), "{message}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test]
async fn bad_json_input_is_a_decode_error() {
    let g = StateGraph::<Typed>::new()
        .add_node("a", |_s, _rt| async { Ok(NodeOutput::None) })
        .add_edge(START, "a")
        .add_edge("a", END)
        .compile()
        .unwrap();
    let err = g
        .invoke_input(RunInput::Json(json!({"count": "x"})), RunConfig::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Decode(_)), "{err}");
    let err = g
        .invoke_input(RunInput::Json(json!({"nope": 1})), RunConfig::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Decode(_)), "{err}");
}
