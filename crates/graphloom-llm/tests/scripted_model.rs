//! The scripted model: replies in order (text, tool calls, errors, delays, explicit chunks),
//! streaming by splitting, a record of requests, and a clear error when the script runs out.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use graphloom_llm::{
    ChatChunk, ChatModel, ChatModelExt, ChatOptions, DynChatModel, Error, ErrorKind, Message, MessageExt,
    Reply, ScriptedModel, ToolCall, Usage, DEFAULT_KEPT_REQUESTS,
};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn replies_in_order_and_records_requests() {
    let call = ToolCall {
        id: "c1".into(),
        name: "search".into(),
        args: json!({"q": "x"}),
    };
    let m = ScriptedModel::new([
        Reply::text("one"),
        Reply::tool_calls("", vec![call.clone()]),
        Reply::failure("provider down"),
        Reply::text("four").with_usage(Usage::new(1, 2)),
    ]);
    let opts = ChatOptions::new().temperature(0.5);
    let a = m.invoke(&[Message::human("first")], &opts).await.unwrap();
    assert_eq!(a.text(), "one");
    assert!(a.id.as_deref().unwrap().starts_with("run-"));
    assert_eq!(a.finish_reason(), Some("stop"));
    assert!(a.usage().unwrap().output_tokens >= 1);
    let b = m.invoke(&[Message::human("second")], &opts).await.unwrap();
    assert_eq!(b.tool_calls, vec![call]);
    assert_eq!(b.finish_reason(), Some("tool_calls"));
    let c = m.invoke(&[Message::human("third")], &opts).await.unwrap_err();
    assert!(matches!(c, Error::Scripted(ref s) if s == "provider down"));
    let d = m.invoke(&[Message::human("fourth")], &opts).await.unwrap();
    assert_eq!(d.usage(), Some(Usage::new(1, 2)));
    let e = m.invoke(&[Message::human("fifth")], &opts).await.unwrap_err();
    assert!(
        e.to_string().contains("no reply left: the script had 4 replies"),
        "{e}"
    );

    let reqs = m.requests();
    assert_eq!(reqs.len(), 5);
    assert_eq!(reqs[1].messages[0].text(), "second");
    assert_eq!(reqs[0].options.temperature, Some(0.5));
    assert!(!reqs[0].streamed);
    assert_eq!(m.remaining(), 0);
}

/// A model shared by a long-lived server must not keep every conversation it was shown:
/// the record holds the most recent requests only, `calls` still counts them all.
#[tokio::test]
async fn the_record_of_requests_is_bounded() {
    let m = ScriptedModel::repeating([Reply::text("ok")]);
    let opts = ChatOptions::new();
    let n = DEFAULT_KEPT_REQUESTS + 10;
    for i in 0..n {
        m.invoke(&[Message::human(format!("q{i}"))], &opts).await.unwrap();
    }
    assert_eq!(m.calls(), n);
    let reqs = m.requests();
    assert_eq!(reqs.len(), DEFAULT_KEPT_REQUESTS);
    assert_eq!(reqs[0].messages[0].text(), "q10", "the oldest went first");
    assert_eq!(reqs.last().unwrap().messages[0].text(), format!("q{}", n - 1));

    // Fewer kept: the surplus goes at once; clones and renamed copies share the setting.
    let m = m.keep_requests(3);
    assert_eq!(m.requests().len(), 3);
    let shared = m.clone();
    shared.invoke(&[Message::human("last")], &opts).await.unwrap();
    assert_eq!(m.requests().len(), 3);
    assert_eq!(m.requests()[2].messages[0].text(), "last");
    let renamed = ScriptedModel::repeating([Reply::text("ok")])
        .keep_requests(3)
        .named("other");
    for q in ["x", "y", "z", "w"] {
        renamed.invoke(&[Message::human(q)], &opts).await.unwrap();
    }
    assert_eq!(renamed.requests().len(), 3);
    assert_eq!(renamed.requests()[0].messages[0].text(), "y");

    // None kept: still counted, still answered.
    let quiet = ScriptedModel::repeating([Reply::text("ok")]).keep_requests(0);
    for _ in 0..5 {
        let a = quiet.invoke(&[Message::human("q")], &opts).await.unwrap();
        assert_eq!(a.text(), "ok");
    }
    let mut s = quiet.stream(&[Message::human("q")], &opts);
    while s.next().await.is_some() {}
    assert_eq!(quiet.calls(), 6);
    assert!(quiet.requests().is_empty());
}

#[tokio::test]
async fn streaming_splits_text_into_words_and_arguments_into_pieces() {
    let m = ScriptedModel::new([Reply::tool_calls(
        "Let me check that",
        vec![
            ToolCall {
                id: "a".into(),
                name: "t1".into(),
                args: json!({"k": "v"}),
            },
            ToolCall {
                id: "b".into(),
                name: "t2".into(),
                args: json!({}),
            },
        ],
    )]);
    let chunks: Vec<ChatChunk> = m
        .stream(&[Message::human("x")], &ChatOptions::new())
        .map(Result::unwrap)
        .collect()
        .await;
    let words: Vec<&str> = chunks
        .iter()
        .map(|c| c.text.as_str())
        .filter(|t| !t.is_empty())
        .collect();
    assert_eq!(words, ["Let ", "me ", "check ", "that"]);
    let tool_pieces = chunks.iter().filter(|c| !c.tool_call_chunks.is_empty()).count();
    assert_eq!(tool_pieces, 4);
    let ids: std::collections::HashSet<_> = chunks.iter().map(|c| c.id.clone()).collect();
    assert_eq!(ids.len(), 1, "one message id for all chunks");
    assert!(chunks.last().unwrap().usage.is_some());
    assert!(m.requests()[0].streamed);
}

#[tokio::test]
async fn explicit_chunks_stream_as_given_and_invoke_assembles_them() {
    let chunks = vec![
        ChatChunk::text("a"),
        ChatChunk::tool_call(0, Some("c"), Some("t"), "{\"x\":"),
        ChatChunk::tool_call(0, None, None, "1}"),
        ChatChunk::end(Some(Usage::new(3, 4)), "tool_calls"),
    ];
    let m = ScriptedModel::new([Reply::chunks(chunks.clone()), Reply::chunks(chunks.clone())]);
    let streamed: Vec<ChatChunk> = m
        .stream(&[Message::human("x")], &ChatOptions::new())
        .map(Result::unwrap)
        .collect()
        .await;
    assert_eq!(streamed, chunks);
    let msg = m
        .invoke(&[Message::human("x")], &ChatOptions::new())
        .await
        .unwrap();
    assert_eq!(msg.tool_calls[0].args, json!({"x": 1}));
    assert_eq!(msg.usage(), Some(Usage::new(3, 4)));
}

#[tokio::test(start_paused = true)]
async fn delays_honour_the_call_timeout() {
    let m = ScriptedModel::new([
        Reply::text("slow").after(Duration::from_secs(30)),
        Reply::text("slow too").after(Duration::from_secs(30)),
        Reply::text("in time").after(Duration::from_millis(10)),
    ]);
    let opts = ChatOptions::new().timeout(Duration::from_secs(1));
    let err = m.invoke(&[Message::human("x")], &opts).await.unwrap_err();
    assert!(matches!(err, Error::Timeout { after_ms: 1000, .. }), "{err:?}");
    let first = m.stream(&[Message::human("x")], &opts).next().await.unwrap();
    assert_eq!(first.unwrap_err().kind(), ErrorKind::Timeout);
    let ok = m.invoke(&[Message::human("x")], &opts).await.unwrap();
    assert_eq!(ok.text(), "in time");
}

#[tokio::test]
async fn a_scripted_error_in_a_stream_and_a_repeating_script() {
    let m = ScriptedModel::new([Reply::error(Error::Http {
        provider: "openai".into(),
        status: 503,
        message: "busy".into(),
        attempts: 3,
    })]);
    let items: Vec<_> = m
        .stream(&[Message::human("x")], &ChatOptions::new())
        .collect()
        .await;
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].as_ref().unwrap_err().kind(), ErrorKind::Server);

    let r = ScriptedModel::repeating(["a", "b"]);
    let mut texts = Vec::new();
    for _ in 0..4 {
        texts.push(r.invoke(&[], &ChatOptions::new()).await.unwrap().text());
    }
    assert_eq!(texts, ["a", "b", "b", "b"]);
    r.push("c");
    assert_eq!(r.invoke(&[], &ChatOptions::new()).await.unwrap().text(), "c");
}

#[tokio::test]
async fn usable_as_a_dyn_model_and_with_bound_options() {
    let m = ScriptedModel::new(["x", "y"]).named("my-model");
    let dynamic: Arc<dyn DynChatModel> = Arc::new(m.clone().with_options(ChatOptions::new().max_tokens(7)));
    assert_eq!(dynamic.model_name(), "my-model");
    assert_eq!(dynamic.provider(), "scripted");
    let a = dynamic
        .invoke(&[Message::human("q")], &ChatOptions::new())
        .await
        .unwrap();
    assert_eq!(a.text(), "x");
    let b = dynamic
        .stream_collect(&[Message::human("q")], &ChatOptions::new())
        .await
        .unwrap();
    assert_eq!(b.text(), "y");
    assert_eq!(m.requests()[0].options.max_tokens, Some(7));
    assert_eq!(b.response_metadata().unwrap()["model_name"], "my-model");
}

#[tokio::test]
async fn a_responding_model_answers_any_number_of_calls_from_the_conversation() {
    let model = ScriptedModel::responding(|msgs, opts| {
        if opts.response_format.is_some() {
            return Reply::json(serde_json::json!({"n": msgs.len()}));
        }
        match msgs.last().map(|m| m.kind) {
            Some(graphloom_llm::MessageKind::Tool) => Reply::text("from the tool"),
            _ => Reply::tool_call("lookup", serde_json::json!({"q": msgs.len()})),
        }
    })
    .named("responder");
    assert_eq!(model.model_name(), "responder");
    for _ in 0..3 {
        let first = model
            .invoke(&[Message::human("q")], &ChatOptions::new())
            .await
            .unwrap();
        assert_eq!(first.tool_calls[0].args["q"], 1);
        let streamed = model
            .stream_collect(
                &[
                    Message::human("q"),
                    first.clone(),
                    Message::tool("r", first.tool_calls[0].id.clone()),
                ],
                &ChatOptions::new(),
            )
            .await
            .unwrap();
        assert_eq!(streamed.text(), "from the tool");
    }
    // A pushed reply goes first, then the function again.
    model.push(Reply::text("pushed"));
    let m = model
        .invoke(&[Message::human("q")], &ChatOptions::new())
        .await
        .unwrap();
    assert_eq!(m.text(), "pushed");
    let m = model
        .invoke(&[Message::human("q")], &ChatOptions::new())
        .await
        .unwrap();
    assert!(m.has_tool_calls());
    assert_eq!(model.calls(), 8, "every call is recorded");
}
