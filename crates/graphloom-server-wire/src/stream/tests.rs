//! Tests of the wire encoding that need no graph (the encoding of real runs is tested in
//! `graphloom-server`, which hosts graphs).
use super::*;

fn modes(m: &[&str]) -> WireModes {
    parse_stream_modes(&m.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>()).unwrap()
}

#[test]
fn sse_frame_bytes() {
    assert_eq!(
        sse_frame("values", &json!({"a": [1, "x\ny"]}), None),
        "event: values\r\ndata: {\"a\":[1,\"x\\ny\"]}\r\n\r\n"
    );
    assert_eq!(
        sse_frame("updates|sub:1", &json!(null), Some("7")),
        "event: updates|sub:1\r\ndata: null\r\nid: 7\r\n\r\n"
    );
    assert_eq!(
        sse_frame("a\r\nb", &json!(1), None),
        "event: a  b\r\ndata: 1\r\n\r\n"
    );
    assert_eq!(HEARTBEAT, ": heartbeat\r\n\r\n");
}

#[test]
fn stream_modes_parse_and_map_to_core_modes() {
    assert_eq!(parse_stream_modes(&[]).unwrap(), modes(&["values"]));
    assert_eq!(
        parse_stream_modes(&["values".into(), "nope".into()]),
        Err("nope".to_owned())
    );
    assert_eq!(
        modes(&["values"]).core_modes(),
        vec![StreamMode::Values, StreamMode::Updates]
    );
    assert_eq!(
        modes(&["messages-tuple"]).core_modes(),
        vec![StreamMode::Updates, StreamMode::Messages]
    );
    assert_eq!(
        modes(&["events"]).core_modes(),
        vec![StreamMode::Updates, StreamMode::Events]
    );
    let all = modes(&[
        "values",
        "updates",
        "messages",
        "messages-tuple",
        "custom",
        "events",
        "debug",
        "tasks",
        "checkpoints",
    ]);
    assert_eq!(all.core_modes().len(), 8);
}

#[test]
fn wait_body_shapes() {
    let done = JsonRunOutput {
        values: json!({"a": 1}),
        interrupts: vec![],
        interrupted: false,
        checkpoint: None,
    };
    assert_eq!(wait_body(&Ok(done.clone())), json!({"a": 1}));
    let paused = JsonRunOutput {
        interrupts: vec![graphloom_core::Interrupt {
            response_schema: None,
            id: "i1".into(),
            value: json!("ok?"),
        }],
        interrupted: true,
        ..done
    };
    assert_eq!(
        wait_body(&Ok(paused)),
        json!({"a": 1, "__interrupt__": [{"id": "i1", "value": "ok?"}]})
    );
    assert_eq!(
        wait_body(&Err(Error::RunTimeout { after_ms: 5 })),
        json!({"__error__": {"error": "TimeoutError", "message": "run timed out after 5 ms"}})
    );
}

#[test]
fn partial_json() {
    assert_eq!(parse_partial_json(""), Some(json!({})));
    assert_eq!(parse_partial_json("{\"a\": [1, 2"), Some(json!({"a": [1, 2]})));
    assert_eq!(parse_partial_json("{\"a\": \"he"), Some(json!({"a": "he"})));
    assert_eq!(parse_partial_json("{\"a\": 1, \"b"), Some(json!({"a": 1})));
    assert_eq!(parse_partial_json("{\"q\": \"x\\"), Some(json!({"q": "x"})));
    assert_eq!(parse_partial_json("]"), None);
}

#[test]
fn content_blocks_merge_by_index() {
    let mut acc =
        json!({"type": "AIMessageChunk", "id": "m", "content": [{"type": "text", "text": "a", "index": 0}]});
    merge_chunk(
        &mut acc,
        &json!({"content": [{"type": "text", "text": "b", "index": 0}, {"type": "text", "text": "c", "index": 1}]}),
    );
    assert_eq!(
        acc["content"],
        json!([{"type": "text", "text": "ab", "index": 0}, {"type": "text", "text": "c", "index": 1}])
    );
}

#[test]
fn a_foreign_error_is_reported_by_its_own_class_and_message() {
    let foreign = crate::json::ForeignError {
        class: "ValueError".into(),
        message: "boom".into(),
    };
    let e = Error::Node {
        node: "work".into(),
        message: foreign.to_string(),
        kind: graphloom_core::NodeErrorKind::Terminal,
        source: Some(graphloom_core::ErrorSource::new(foreign)),
    };
    assert_eq!(error_json(&e), json!({"error": "ValueError", "message": "boom"}));
    assert_eq!(e.to_string(), "node `work` failed: ValueError: boom");
}
