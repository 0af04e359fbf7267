//! Messages share their bodies: cloning a message, a conversation, or a step's state
//! copies no message content, and a step copies only the messages it changes.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use futures::StreamExt;
use graphloom_core::*;
use std::sync::Arc;

#[derive(State, Clone, Default, Debug)]
struct Chat {
    #[reducer(add_messages)]
    messages: Seq<Message>,
}

#[test]
fn a_cloned_message_shares_its_body_until_one_side_writes() {
    let a = Message::tool("x".repeat(36_000), "call-1").with_id("t1");
    let mut b = a.clone();
    assert!(Message::shares_body(&a, &b));
    assert_eq!(a, b);
    b.content = serde_json::json!("changed");
    assert!(!Message::shares_body(&a, &b));
    assert_eq!(a.text(), "x".repeat(36_000));
    assert_eq!(b.text(), "changed");
    assert_eq!(b.id.as_deref(), Some("t1"));
}

#[test]
fn appending_to_a_clone_of_a_long_conversation_shares_every_body() {
    let base: Seq<Message> = (0..2_000)
        .map(|i| Message::human(format!("message {i}")).with_id(format!("m{i}")))
        .collect();
    let mut grown = base.clone();
    for i in 0..500 {
        grown.push(Message::ai(format!("reply {i}")));
    }
    assert_eq!(base.len(), 2_000);
    assert_eq!(grown.len(), 2_500);
    for (old, new) in base.iter().zip(grown.iter()) {
        assert!(Message::shares_body(old, new), "{:?} was copied", old.id);
    }
    // A copy into a `Vec` (what a chat model is handed) shares them too.
    let request = grown.to_vec();
    for (held, sent) in grown.iter().zip(&request) {
        assert!(Message::shares_body(held, sent));
    }
}

#[tokio::test]
async fn a_step_copies_no_message_it_does_not_change() {
    let rounds = 40usize;
    let g = StateGraph::<Chat>::new()
        .add_node("agent", |s: Arc<Chat>, _rt| async move {
            // What a chat model is handed: the conversation as a `Vec`.
            let request = s.messages.to_vec();
            let answer = Message::ai(format!("answer {}", request.len()));
            Ok(ChatUpdate::new().messages(vec![answer]))
        })
        .add_node("tool", |_s: Arc<Chat>, _rt| async move {
            Ok(ChatUpdate::new().messages(vec![Message::tool("r".repeat(10_000), "c")]))
        })
        .add_edge(START, "agent")
        .add_conditional_edges_map(
            "agent",
            move |s: &Chat| {
                if s.messages.len() < 2 * rounds {
                    "tool"
                } else {
                    END
                }
            },
            [("tool", "tool"), (END, END)],
        )
        .add_edge("tool", "agent")
        .compile()
        .unwrap();
    // Every step's state is kept alive by the stream consumer, so a copy would show.
    let states: Vec<Chat> = g
        .stream(
            RunInput::Update(ChatUpdate::new().messages(vec![Message::human("hi")])),
            RunConfig::default().recursion_limit(1_000),
            StreamOptions::modes([StreamMode::Values]),
        )
        .filter_map(|e| async move {
            match e {
                RunEvent::Part(p) => p.values::<Chat>().cloned(),
                RunEvent::End(_) => None,
            }
        })
        .collect()
        .await;
    assert!(states.len() > rounds);
    let last = states.last().unwrap();
    assert_eq!(last.messages.len(), 2 * rounds);
    for earlier in &states {
        for (i, m) in earlier.messages.iter().enumerate() {
            let later = last.messages.get(i).unwrap();
            assert!(Message::shares_body(m, later), "message {i} was copied");
        }
    }
}
