//! Storage grows with what changed: a 1,000-turn thread stores at most 5x its message bytes.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::*;
use graphloom_sqlite::SqliteSaver;

#[derive(State, Clone, Default, Debug)]
struct Chat {
    #[reducer(add_messages)]
    messages: Seq<Message>,
    #[reducer(add)]
    ticks: i64,
}

#[tokio::test]
async fn thousand_turn_thread_stores_at_most_five_times_the_message_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.db");
    let saver = SqliteSaver::open(&path).await.unwrap();
    let g = StateGraph::<Chat>::new()
        .add_node("echo", |_s, _rt| async { Ok(ChatUpdate::new().ticks(1)) })
        .add_edge(START, "echo")
        .add_edge("echo", END)
        .checkpointer(saver.clone())
        .compile()
        .unwrap();
    let body = "x".repeat(2048);
    let mut raw = 0usize;
    let started = std::time::Instant::now();
    for turn in 0..1000 {
        let m = Message::human(body.clone()).with_id(format!("m{turn}"));
        raw += serde_json::to_vec(&m).unwrap().len();
        g.invoke(ChatUpdate::new().messages(vec![m]), RunConfig::thread("long"))
            .await
            .unwrap();
    }
    let elapsed = started.elapsed();
    let stats = saver.storage_stats().await.unwrap();
    let stored = stats.total_bytes() as f64;
    let ratio = stored / raw as f64;
    println!(
        "1000 turns in {elapsed:.1?}: stored {} value bytes ({} checkpoints {} B, {} blobs {} B, {} writes {} B) \
         for {raw} raw message bytes: {ratio:.2}x",
        stats.total_bytes(),
        stats.checkpoints,
        stats.checkpoint_bytes,
        stats.blobs,
        stats.blob_bytes,
        stats.writes,
        stats.write_bytes,
    );
    assert!(
        ratio <= 5.0,
        "stored {stored} bytes for {raw} raw message bytes ({ratio:.2}x)"
    );

    // The file itself, after folding the WAL back in.
    let conn = graphloom_sqlite::rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    conn.close().unwrap();
    let file = std::fs::metadata(&path).unwrap().len() as f64;
    println!(
        "database file after a WAL checkpoint: {file} bytes ({:.2}x the raw message bytes)",
        file / raw as f64
    );
    assert!(
        file / (raw as f64) <= 6.0,
        "file is {file} bytes for {raw} raw bytes"
    );

    let st = g.get_state(&RunConfig::thread("long")).await.unwrap();
    assert_eq!(st.values.messages.len(), 1000);
    assert_eq!(st.values.ticks, 1000);
    assert_eq!(st.values.messages.get(999).unwrap().id.as_deref(), Some("m999"));
}
