//! `add_messages` on a [`Seq`] (which finds ids through its index) gives what the plain
//! scan over a `Vec` gives, update after update, and never changes an earlier snapshot
//! (proptest).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::messages::add_messages_into;
use graphloom_core::messages::REMOVE_ALL_MESSAGES;
use graphloom_core::*;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// A message with an id from a small pool (so ids repeat), or none.
    Add(Option<u8>),
    /// Remove a pooled id (an error when no message has it).
    Remove(u8),
    RemoveAll,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => proptest::option::of(0u8..6).prop_map(Op::Add),
        2 => (0u8..6).prop_map(Op::Remove),
        1 => Just(Op::RemoveAll),
    ]
}

fn messages(ops: &[Op], counter: &mut usize) -> Vec<Message> {
    ops.iter()
        .map(|o| {
            *counter += 1;
            match o {
                Op::Add(Some(p)) => Message::human(format!("m{counter}")).with_id(format!("p{p}")),
                Op::Add(None) => Message::human(format!("m{counter}")),
                Op::Remove(p) => Message::remove(format!("p{p}")),
                Op::RemoveAll => Message::remove(REMOVE_ALL_MESSAGES),
            }
        })
        .collect()
}

/// Content and pooled id of each message (assigned ids are random, so only their
/// presence counts).
fn shape<'a>(msgs: impl Iterator<Item = &'a Message>) -> Vec<(String, String)> {
    msgs.map(|m| {
        let id = match m.id.as_deref() {
            Some(id) if id.starts_with('p') => id.to_owned(),
            Some(_) => "assigned".to_owned(),
            None => "none".to_owned(),
        };
        (m.text(), id)
    })
    .collect()
}

proptest! {
    #[test]
    fn seq_with_its_index_merges_as_the_scan_does(
        updates in proptest::collection::vec(proptest::collection::vec(op(), 0..6), 1..40)
    ) {
        let mut seq: Seq<Message> = Seq::new();
        let mut vec: Vec<Message> = Vec::new();
        let mut counter = 0usize;
        for ops in &updates {
            let update = messages(ops, &mut counter);
            let before_seq = seq.clone();
            let frozen = shape(before_seq.iter());
            let before_vec = vec.clone();
            let a = add_messages_into(&mut seq, update.clone());
            let b = add_messages_into(&mut vec, update);
            prop_assert_eq!(a.is_ok(), b.is_ok());
            if a.is_ok() {
                prop_assert_eq!(a, b);
                prop_assert_eq!(shape(seq.iter()), shape(vec.iter()));
            } else {
                // A failed update is discarded, as the reducer's caller does.
                seq = before_seq.clone();
                vec = before_vec;
            }
            // The snapshot taken before the update is untouched.
            prop_assert_eq!(shape(before_seq.iter()), frozen);
        }
    }
}

#[test]
fn a_long_conversation_finds_old_ids_and_appends_new_ones() {
    let mut seq: Seq<Message> = Seq::new();
    for i in 0..3_000 {
        add_messages_into(
            &mut seq,
            vec![Message::ai(format!("a{i}")).with_id(format!("id{i}"))],
        )
        .unwrap();
    }
    let snapshot = seq.clone();
    add_messages_into(&mut seq, vec![Message::ai("again").with_id("id17")]).unwrap();
    assert_eq!(seq.len(), 3_000);
    assert_eq!(seq.get(17).unwrap().text(), "again");
    assert_eq!(snapshot.get(17).unwrap().text(), "a17");
    add_messages_into(
        &mut seq,
        vec![Message::remove("id5"), Message::ai("new").with_id("id5b")],
    )
    .unwrap();
    assert_eq!(seq.len(), 3_000);
    add_messages_into(&mut seq, vec![Message::ai("again2").with_id("id2999")]).unwrap();
    assert_eq!(seq.get(2_998).unwrap().text(), "again2");
    assert_eq!(seq.last().unwrap().text(), "new");
}
