//! `GET /threads/{id}/storage` on SQLite and PostgreSQL: the Agent Server's report of what a
//! thread's checkpoints take, counted from the checkpointer's own tables.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{human, TestServer};
use graphloom_server::ServerConfig;
use serde_json::{json, Value};

fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    k.sort_unstable();
    k
}

fn num(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

async fn storage_follows_the_thread(s: &TestServer) {
    let t = s.thread().await;
    let empty = s.get(&format!("/threads/{t}/storage")).await;
    assert_eq!(empty.0, 200, "{}", empty.1);
    assert_eq!(empty.1["total_bytes"], 0);
    assert_eq!(empty.1["checkpoints"], json!({"count": 0, "bytes": 0}));

    let run = |text: &'static str| {
        let t = t.clone();
        async move {
            let (st, body) = s
                .post(
                    &format!("/threads/{t}/runs/wait"),
                    json!({"assistant_id": "echo", "input": human(text)}),
                )
                .await;
            assert_eq!(st, 200, "{body}");
        }
    };
    run("hello").await;
    let (st, one) = s.get(&format!("/threads/{t}/storage")).await;
    assert_eq!(st, 200, "{one}");
    assert_eq!(one["thread_id"], t.as_str());
    assert_eq!(
        keys(&one),
        [
            "channel_values",
            "checkpoints",
            "pending_writes",
            "thread_id",
            "total_bytes"
        ]
    );
    assert_eq!(keys(&one["channel_values"]), ["by_channel", "bytes", "count"]);
    let history = s
        .post(&format!("/threads/{t}/history"), json!({"limit": 1000}))
        .await
        .1;
    assert_eq!(
        num(&one["checkpoints"]["count"]),
        history.as_array().unwrap().len() as u64,
        "one per checkpoint of the history"
    );
    let messages = &one["channel_values"]["by_channel"]["messages"];
    assert!(num(&messages["versions"]) >= 1, "{one}");
    assert!(num(&messages["bytes"]) > "hello".len() as u64, "{one}");
    let by_channel: u64 = one["channel_values"]["by_channel"]
        .as_object()
        .unwrap()
        .values()
        .map(|c| num(&c["bytes"]))
        .sum();
    assert_eq!(num(&one["channel_values"]["bytes"]), by_channel);
    assert_eq!(
        num(&one["total_bytes"]),
        num(&one["checkpoints"]["bytes"]) + by_channel + num(&one["pending_writes"]["bytes"])
    );

    // A second turn adds checkpoints and a messages version.
    run("again").await;
    let two = s.get(&format!("/threads/{t}/storage")).await.1;
    assert!(
        num(&two["total_bytes"]) > num(&one["total_bytes"]),
        "{one} -> {two}"
    );
    assert!(num(&two["checkpoints"]["count"]) > num(&one["checkpoints"]["count"]));
    assert!(num(&two["channel_values"]["by_channel"]["messages"]["versions"]) > num(&messages["versions"]));

    // A copy holds the same; a deleted thread has no storage to report.
    let copy = s.post(&format!("/threads/{t}/copy"), json!({})).await.1;
    let c = copy["thread_id"].as_str().unwrap();
    let copied = s.get(&format!("/threads/{c}/storage")).await.1;
    assert_eq!(copied["checkpoints"]["count"], two["checkpoints"]["count"]);
    assert_eq!(copied["channel_values"]["count"], two["channel_values"]["count"]);
    let (st, _) = s.delete(&format!("/threads/{t}")).await;
    assert!((200..300).contains(&st), "delete: {st}");
    assert_eq!(s.get(&format!("/threads/{t}/storage")).await.0, 404);
    assert_eq!(s.get("/threads/no-such-thread/storage").await.0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_thread_storage() {
    let s = TestServer::sqlite(|_| {}).await;
    storage_follows_the_thread(&s).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_thread_storage() {
    let (url, _guard) = graphloom_postgres::testing::test_database().await;
    let s = TestServer::start(ServerConfig::postgres(&url)).await;
    storage_follows_the_thread(&s).await;
    s.stop().await;
}
