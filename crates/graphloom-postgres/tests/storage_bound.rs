//! Storage grows with what changed: a 1,000-turn thread, each turn adding a 2 KB message
//! through a real graph, stores at most 5x the raw message bytes in PostgreSQL, counting
//! every column of every checkpoint, blob and pending-write row (`pg_column_size`).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::*;
use graphloom_postgres::testing::test_database;
use graphloom_postgres::PostgresSaver;

#[derive(State, Clone, Default, Debug)]
struct Chat {
    #[reducer(add_messages)]
    messages: Seq<Message>,
    #[reducer(add)]
    ticks: i64,
}

const TABLE_BYTES: &str = r#"
SELECT 'checkpoints', coalesce(sum(pg_column_size(thread_id) + pg_column_size(checkpoint_ns)
       + pg_column_size(checkpoint_id) + coalesce(pg_column_size(parent_checkpoint_id), 0)
       + pg_column_size(encoding) + pg_column_size(checkpoint) + pg_column_size(metadata)), 0)::int8,
       count(*), pg_total_relation_size('graphloom_checkpoints')
FROM graphloom_checkpoints
UNION ALL
SELECT 'blobs', coalesce(sum(pg_column_size(thread_id) + pg_column_size(checkpoint_ns)
       + pg_column_size(channel) + pg_column_size(version) + coalesce(pg_column_size(base_version), 0)
       + pg_column_size(encoding) + pg_column_size(value)), 0)::int8,
       count(*), pg_total_relation_size('graphloom_checkpoint_blobs')
FROM graphloom_checkpoint_blobs
UNION ALL
SELECT 'writes', coalesce(sum(pg_column_size(thread_id) + pg_column_size(checkpoint_ns)
       + pg_column_size(checkpoint_id) + pg_column_size(task_id) + pg_column_size(idx)
       + pg_column_size(channel) + pg_column_size(task_path) + pg_column_size(encoding)
       + pg_column_size(value) + pg_column_size(seq)), 0)::int8,
       count(*), pg_total_relation_size('graphloom_checkpoint_writes')
FROM graphloom_checkpoint_writes
"#;

/// Runs 1,000 turns with `body(turn)` as message text; returns stored / raw message bytes.
async fn thousand_turns(label: &str, body: fn(usize) -> String) -> f64 {
    let (url, _db) = test_database().await;
    let saver = PostgresSaver::connect(&url).await.unwrap();
    let g = StateGraph::<Chat>::new()
        .add_node("echo", |_s, _rt| async { Ok(ChatUpdate::new().ticks(1)) })
        .add_edge(START, "echo")
        .add_edge("echo", END)
        .checkpointer(saver.clone())
        .compile()
        .unwrap();
    let mut raw = 0usize;
    for turn in 0..1000 {
        let m = Message::human(body(turn)).with_id(format!("m{turn}"));
        raw += serde_json::to_vec(&m).unwrap().len();
        g.invoke(ChatUpdate::new().messages(vec![m]), RunConfig::thread("long"))
            .await
            .unwrap();
    }
    let tables: Vec<(String, i64, i64, i64)> =
        sqlx::query_as(TABLE_BYTES).fetch_all(saver.pool()).await.unwrap();
    let stored: i64 = tables.iter().map(|t| t.1).sum();
    assert_eq!(saver.storage_bytes().await.unwrap(), stored as u64);
    let ratio = stored as f64 / raw as f64;
    for (table, bytes, rows, on_disk) in &tables {
        println!("[{label}] {table}: {rows} rows, {bytes} bytes of column data ({on_disk} bytes on disk with indexes)");
    }
    println!("[{label}] stored {stored} bytes for {raw} raw message bytes ({ratio:.2}x)");
    let st = g.get_state(&RunConfig::thread("long")).await.unwrap();
    assert_eq!(st.values.messages.len(), 1000);
    assert_eq!(st.values.ticks, 1000);
    assert_eq!(st.values.messages.get(999).unwrap().id.as_deref(), Some("m999"));
    assert_eq!(st.values.messages.get(0).unwrap().text(), body(0));
    ratio
}

/// 2,048 pseudo-random letters: nothing for PostgreSQL's compression to find, so the ratio
/// measures the encoding itself. (graphloom-core's in-memory test uses `"x" * 2048`, which
/// TOAST compresses to a fraction: about 1.4x here, which would hide a bloated encoding.)
fn incompressible(turn: usize) -> String {
    let mut x = 0x9e37_79b9_7f4a_7c15_u64 ^ (turn as u64).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    (0..2048)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect()
}

#[tokio::test]
async fn thousand_incompressible_turns_store_at_most_five_times_the_message_bytes() {
    let ratio = thousand_turns("random text", incompressible).await;
    assert!(ratio <= 5.0, "{ratio:.2}x");
}
