//! Behaviour of `#[derive(State)]`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::{Changed, FieldChange, Message, Seq, State, StateError, TaskUpdate};
use serde_json::json;
use std::collections::BTreeMap;

fn keep_max(current: &mut i64, new: i64) {
    if new > *current {
        *current = new;
    }
}

/// A state exercising every reducer.
#[derive(State, Clone, Default, Debug, PartialEq)]
struct MyState {
    /// The question asked.
    question: String,
    /// What happened, in order.
    #[reducer(append)]
    log: Seq<String>,
    #[reducer(add)]
    count: i64,
    #[reducer(merge)]
    seen: BTreeMap<String, i64>,
    #[reducer(add_messages)]
    messages: Seq<Message>,
    #[reducer(with = keep_max)]
    best: i64,
    #[reducer(last)]
    other: Option<String>,
    #[reducer(append)]
    items: Vec<u32>,
}

/// Checks `#[state(crate = ...)]`, raw identifiers and the string form of `with`.
#[derive(State, Clone, Default, Debug)]
#[state(crate = "graphloom_core")]
/// Public, so `missing_docs` checks the generated update struct and setters too.
pub struct Renamed {
    /// A raw identifier.
    pub r#type: String,
    /// Folded by a function named in a string.
    #[reducer(with = "keep_max")]
    pub score: i64,
}

const NAMES: [&str; 8] = [
    "question", "log", "count", "seen", "messages", "best", "other", "items",
];

fn task(node: &str, update: MyStateUpdate) -> TaskUpdate<'_, MyStateUpdate> {
    TaskUpdate { node, update }
}

fn merge(state: &mut MyState, updates: Vec<TaskUpdate<'_, MyStateUpdate>>) -> Vec<Changed> {
    let mut changes = Vec::new();
    state.merge(updates, &mut changes).unwrap();
    changes
}

fn idx(name: &str) -> usize {
    MyState::default().field_index(name).unwrap()
}

#[test]
fn field_names_and_count_follow_declaration_order() {
    let s = MyState::default();
    assert_eq!(s.field_count(), NAMES.len());
    for (i, name) in NAMES.iter().enumerate() {
        assert_eq!(s.field_name(i), *name);
        assert_eq!(s.field_index(name), Some(i));
    }
    assert_eq!(s.field_index("nope"), None);
    assert_eq!(s.field_name(99), "");
}

#[test]
fn merge_applies_a_single_update() {
    let mut s = MyState::default();
    let u = MyStateUpdate::new()
        .question("why?".into())
        .log(vec!["a".into()])
        .count(3)
        .other(Some("x".into()));
    let changes = merge(&mut s, vec![task("n1", u)]);
    assert_eq!(s.question, "why?");
    assert_eq!(s.log.to_vec(), vec!["a".to_owned()]);
    assert_eq!(s.count, 3);
    assert_eq!(s.other.as_deref(), Some("x"));
    assert_eq!(s.best, 0);
    let fields: Vec<usize> = changes.iter().map(|c| c.field).collect();
    assert_eq!(
        fields,
        vec![idx("question"), idx("log"), idx("count"), idx("other")]
    );
}

#[test]
fn two_writers_to_last_value_field_conflict_and_leave_state_unchanged() {
    let mut s = MyState {
        question: "orig".into(),
        count: 1,
        ..MyState::default()
    };
    let before = s.clone();
    let mut changes = Vec::new();
    let err = s
        .merge(
            vec![
                task("a", MyStateUpdate::new().count(5)),
                task("b", MyStateUpdate::new().question("x".into()).count(1)),
                task("c", MyStateUpdate::new().log(vec!["l".into()])),
                task("d", MyStateUpdate::new().question("y".into())),
            ],
            &mut changes,
        )
        .unwrap_err();
    assert_eq!(
        err,
        StateError::Conflict {
            field: "question".into(),
            nodes: vec!["b".into(), "d".into()],
        }
    );
    assert!(err.to_string().contains("question"));
    assert_eq!(s, before);
    assert!(changes.is_empty());
}

#[test]
fn explicit_last_reducer_is_single_writer_too() {
    let mut s = MyState::default();
    let err = s
        .merge(
            vec![
                task("a", MyStateUpdate::new().other(None)),
                task("b", MyStateUpdate::new().other(Some("z".into()))),
            ],
            &mut Vec::new(),
        )
        .unwrap_err();
    assert!(matches!(err, StateError::Conflict { ref field, .. } if field == "other"));
}

#[test]
fn multi_writer_reducers_merge_in_the_given_order() {
    let mut s = MyState {
        log: Seq::from(vec!["0".to_owned()]),
        count: 10,
        seen: BTreeMap::from([("k".to_owned(), 1), ("old".to_owned(), 7)]),
        messages: Seq::from(vec![Message::human("hi").with_id("m0")]),
        items: vec![1],
        ..MyState::default()
    };
    let first = MyStateUpdate::new()
        .log(vec!["a".into(), "b".into()])
        .count(2)
        .seen(BTreeMap::from([("k".to_owned(), 2), ("x".to_owned(), 3)]))
        .messages(vec![Message::ai("one").with_id("m1")])
        .items(vec![2, 3]);
    let second = MyStateUpdate::new()
        .log(vec!["c".into()])
        .count(-5)
        .seen(BTreeMap::from([("k".to_owned(), 9)]))
        .messages(vec![
            Message::ai("two").with_id("m2"),
            Message::ai("zero").with_id("m0"),
        ])
        .items(vec![4]);
    merge(&mut s, vec![task("n1", first), task("n2", second)]);
    assert_eq!(s.log.to_vec(), ["0", "a", "b", "c"].map(String::from).to_vec());
    assert_eq!(s.count, 7);
    assert_eq!(
        s.seen,
        BTreeMap::from([("k".to_owned(), 9), ("old".to_owned(), 7), ("x".to_owned(), 3)])
    );
    let ids: Vec<_> = s.messages.iter().map(|m| m.id.clone().unwrap()).collect();
    assert_eq!(ids, ["m0", "m1", "m2"]);
    assert_eq!(s.messages.get(0).map(Message::text).as_deref(), Some("zero"));
    assert_eq!(s.items, vec![1, 2, 3, 4]);
}

#[test]
fn custom_fn_reducer_folds_every_writer() {
    let mut s = MyState {
        best: 4,
        ..MyState::default()
    };
    let changes = merge(
        &mut s,
        vec![
            task("a", MyStateUpdate::new().best(2)),
            task("b", MyStateUpdate::new().best(9)),
            task("c", MyStateUpdate::new().best(5)),
        ],
    );
    assert_eq!(s.best, 9);
    assert_eq!(
        changes,
        vec![Changed {
            field: idx("best"),
            change: FieldChange::Replaced
        }]
    );
}

#[test]
fn changes_report_appended_for_sequences_and_replaced_otherwise() {
    let mut s = MyState::default();
    let changes = merge(
        &mut s,
        vec![
            task(
                "a",
                MyStateUpdate::new()
                    .log(vec!["1".into(), "2".into()])
                    .count(1)
                    .messages(vec![Message::human("q")])
                    .items(vec![7]),
            ),
            task(
                "b",
                MyStateUpdate::new()
                    .log(vec!["3".into()])
                    .count(1)
                    .seen(BTreeMap::from([("a".to_owned(), 1)]))
                    .messages(vec![Message::ai("r")]),
            ),
        ],
    );
    let expected = vec![
        Changed {
            field: idx("log"),
            change: FieldChange::Appended(3),
        },
        Changed {
            field: idx("count"),
            change: FieldChange::Replaced,
        },
        Changed {
            field: idx("seen"),
            change: FieldChange::Replaced,
        },
        Changed {
            field: idx("messages"),
            change: FieldChange::Appended(2),
        },
        Changed {
            field: idx("items"),
            change: FieldChange::Appended(1),
        },
    ];
    assert_eq!(changes, expected);
    // Replacing a message by id is not a pure append.
    let id = s.messages.get(0).and_then(|m| m.id.clone()).unwrap();
    let changes = merge(
        &mut s,
        vec![task(
            "a",
            MyStateUpdate::new().messages(vec![Message::human("q2").with_id(id)]),
        )],
    );
    assert_eq!(
        changes,
        vec![Changed {
            field: idx("messages"),
            change: FieldChange::Replaced
        }]
    );
}

#[test]
fn reducer_errors_name_the_field() {
    let mut s = MyState::default();
    let err = s
        .merge(
            vec![task(
                "a",
                MyStateUpdate::new().messages(vec![Message::remove("ghost")]),
            )],
            &mut Vec::new(),
        )
        .unwrap_err();
    match err {
        StateError::Reducer { field, message } => {
            assert_eq!(field, "messages");
            assert!(message.contains("ghost"), "{message}");
        }
        other => panic!("expected a reducer error, got {other:?}"),
    }
}

#[test]
fn update_fields_lists_written_fields_in_order() {
    let s = MyState::default();
    let u = MyStateUpdate::new().items(vec![]).question(String::new()).best(1);
    assert_eq!(s.update_fields(&u), vec!["question", "best", "items"]);
    assert!(s.update_fields(&MyStateUpdate::new()).is_empty());
}

#[test]
fn tail_to_json_returns_the_last_items_of_sequences_only() {
    let s = MyState {
        log: ["a", "b", "c"].map(String::from).into_iter().collect(),
        items: vec![1, 2, 3, 4],
        messages: Seq::from(vec![Message::human("x").with_id("1")]),
        ..MyState::default()
    };
    let tail = s.field_tail_to_json(idx("log"), 2).unwrap().unwrap();
    assert_eq!(tail, vec![json!("b"), json!("c")]);
    let tail = s.field_tail_to_json(idx("items"), 10).unwrap().unwrap();
    assert_eq!(tail, vec![json!(1), json!(2), json!(3), json!(4)]);
    let tail = s.field_tail_to_json(idx("messages"), 1).unwrap().unwrap();
    assert_eq!(tail[0]["id"], json!("1"));
    for name in ["question", "count", "seen", "best", "other"] {
        assert!(s.field_tail_to_json(idx(name), 1).is_none(), "{name}");
    }
    assert!(s.field_tail_to_json(99, 1).is_none());
}

#[test]
fn update_json_round_trips_and_rejects_unknown_keys() {
    let s = MyState::default();
    let u = MyStateUpdate::new()
        .question("q".into())
        .log(vec!["l".into()])
        .seen(BTreeMap::from([("k".to_owned(), 1)]))
        .best(3)
        .other(None);
    let v = s.update_to_json(&u).unwrap();
    assert_eq!(
        v,
        json!({"question": "q", "log": ["l"], "seen": {"k": 1}, "best": 3, "other": null})
    );
    let back = s.update_from_json(v.clone()).unwrap();
    assert_eq!(s.update_to_json(&back).unwrap(), v);
    assert_eq!(
        s.update_fields(&back),
        vec!["question", "log", "seen", "best", "other"]
    );

    let err = s
        .update_from_json(json!({"question": "q", "bogus": 1}))
        .unwrap_err();
    assert!(
        matches!(&err, StateError::Decode { message, .. } if message.contains("bogus")),
        "{err:?}"
    );
    assert!(s.update_from_json(json!({"count": "not a number"})).is_err());
    assert_eq!(s.update_to_json(&MyStateUpdate::new()).unwrap(), json!({}));
}

#[test]
fn state_json_round_trips() {
    let s = MyState {
        question: "q".into(),
        log: Seq::from(vec!["a".to_owned()]),
        count: 2,
        seen: BTreeMap::from([("k".to_owned(), 1)]),
        messages: Seq::from(vec![Message::ai("hello").with_id("m")]),
        best: 8,
        other: Some("o".into()),
        items: vec![5],
    };
    let v = s.to_json().unwrap();
    assert_eq!(v["question"], json!("q"));
    assert_eq!(v["messages"][0]["content"], json!("hello"));
    assert_eq!(v.as_object().unwrap().len(), NAMES.len());
    let back = s.state_from_json(v).unwrap();
    assert_eq!(back, s);

    let partial = s.state_from_json(json!({"count": 4})).unwrap();
    assert_eq!(
        partial,
        MyState {
            count: 4,
            ..MyState::default()
        }
    );
    assert_eq!(s.empty_like(), MyState::default());
}

#[test]
fn field_json_errors() {
    let mut s = MyState::default();
    assert_eq!(s.field_to_json(idx("count")).unwrap(), json!(0));
    assert_eq!(s.field_to_json(42), Err(StateError::UnknownField("42".into())));
    assert_eq!(
        s.set_field_from_json(42, json!(1)),
        Err(StateError::UnknownField("42".into()))
    );
    let err = s.set_field_from_json(idx("count"), json!("x")).unwrap_err();
    assert!(matches!(err, StateError::Decode { ref field, .. } if field == "count"));
    assert!(matches!(s.state_from_json(json!({"zzz": 1})), Err(StateError::UnknownField(f)) if f == "zzz"));
    s.set_field_from_json(idx("log"), json!(["a", "b"])).unwrap();
    assert_eq!(s.log.len(), 2);
}

#[test]
fn json_schema_describes_every_field() {
    let schema = MyState::default().json_schema();
    assert_eq!(schema["type"], json!("object"));
    assert_eq!(schema["title"], json!("MyState"));
    assert_eq!(schema["description"], json!("A state exercising every reducer."));
    let props = schema["properties"].as_object().unwrap();
    let keys: Vec<&str> = props.keys().map(String::as_str).collect();
    let mut expected = NAMES.to_vec();
    expected.sort_unstable();
    let mut keys_sorted = keys.clone();
    keys_sorted.sort_unstable();
    assert_eq!(keys_sorted, expected);
    assert_eq!(props["question"]["type"], json!("string"));
    assert_eq!(props["question"]["description"], json!("The question asked."));
    assert_eq!(props["log"]["type"], json!("array"));
    assert_eq!(props["log"]["description"], json!("What happened, in order."));
    assert!(props["count"].get("description").is_none());
    assert_eq!(props["count"]["type"], json!("integer"));
    // Message is a named schema: referenced from the property, defined in `$defs`.
    let item_ref = props["messages"]["items"]["$ref"].as_str().unwrap();
    let def_name = item_ref.strip_prefix("#/$defs/").unwrap();
    assert!(schema["$defs"][def_name].is_object(), "{schema}");
}

#[test]
fn builder_setters_set_only_their_field() {
    let u = MyStateUpdate::new();
    assert!(u.question.is_none() && u.log.is_none() && u.best.is_none());
    let u = u.count(4).messages(vec![Message::human("hi")]);
    assert_eq!(u.count, Some(4));
    assert_eq!(u.messages.as_ref().map(Vec::len), Some(1));
    assert!(u.question.is_none() && u.seen.is_none() && u.items.is_none());
    let u = u.count(6);
    assert_eq!(u.count, Some(6));
    let d = MyStateUpdate::default();
    assert!(d.count.is_none());
}

#[test]
fn crate_attribute_raw_identifiers_and_string_with_path() {
    let mut s = Renamed::default();
    assert_eq!(s.field_name(0), "type");
    let u = s.update_from_json(json!({"type": "kind", "score": 3})).unwrap();
    let mut changes = Vec::new();
    s.merge(
        vec![
            TaskUpdate { node: "a", update: u },
            TaskUpdate {
                node: "b",
                update: RenamedUpdate::new().score(1),
            },
        ],
        &mut changes,
    )
    .unwrap();
    assert_eq!(s.r#type, "kind");
    assert_eq!(s.score, 3);
    assert_eq!(changes.len(), 2);
    assert!(s.json_schema()["properties"]["type"].is_object());
}

/// A state without fields still derives.
#[derive(State, Clone, Default)]
struct Empty {}

#[test]
fn empty_struct_derives() {
    let mut s = Empty {};
    assert_eq!(s.field_count(), 0);
    let mut changes = Vec::new();
    s.merge(
        vec![
            TaskUpdate {
                node: "a",
                update: EmptyUpdate::new(),
            },
            TaskUpdate {
                node: "b",
                update: EmptyUpdate::new(),
            },
        ],
        &mut changes,
    )
    .unwrap();
    assert!(changes.is_empty());
    assert_eq!(s.to_json().unwrap(), json!({}));
    assert!(s.update_from_json(json!({"x": 1})).is_err());
    assert_eq!(s.json_schema()["properties"], json!({}));
}
