//! The same investigation persisted in PostgreSQL (the seed's store): every step is
//! checkpointed, a second service on the database reads it back and finds the audit record.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fraud_investigation::{
    open_database, Database, InvestigationService, InvestigationStatus, Settings, Severity,
};
use std::sync::Arc;

#[tokio::test]
async fn investigations_are_checkpointed_in_postgres_and_readable_by_another_service() {
    let (url, _db) = graphloom_postgres::testing::test_database().await;
    let mut settings = Settings::default();
    settings.planner.llm_enabled = false;
    let (saver, store) = open_database(&Database::Postgres(url.clone())).await.unwrap();
    let service =
        InvestigationService::standard(settings.clone(), None, saver, Some(Arc::clone(&store))).unwrap();
    let out = service.start("inv-pg", "TX-3004").await.unwrap();
    assert_eq!(out.status, InvestigationStatus::Completed);
    assert!(out.severity >= Severity::High);

    // Another replica on the same database.
    let (saver2, store2) = open_database(&Database::Postgres(url)).await.unwrap();
    let other = InvestigationService::standard(settings, None, saver2, Some(store2)).unwrap();
    let stored = other.load_state("inv-pg").await.unwrap().unwrap();
    assert_eq!(stored, out);
    let history = other
        .graph()
        .get_state_history(&graphloom_core::RunConfig::thread("inv-pg"), None)
        .await
        .unwrap();
    // The input (two checkpoints: before and after it is applied), then per tool a
    // decision and an execution, the final decision, the completion.
    assert_eq!(history.len(), 2 + 2 * 6 + 1 + 1);
    let steps: Vec<usize> = history
        .iter()
        .rev()
        .map(|h| h.values.completed_steps.len())
        .collect();
    assert!(steps.windows(2).all(|w| w[0] <= w[1]), "{steps:?}");
    let ns = vec!["fraud".to_owned(), "investigations".to_owned()];
    let doc = store.get(&ns, "inv-pg").await.unwrap().unwrap();
    assert_eq!(doc.value["transaction_id"], "TX-3004");
    // Resuming a finished investigation changes nothing.
    assert_eq!(other.resume_investigation("inv-pg").await.unwrap(), out);
}

// ── The investigation record (TDD-002 §7.2 steps 5-6) ─────────────────────────────────

use crate::common::{registry, settings, Counts};
use fraud_investigation::record::{STATE_TABLE, TOOL_LOG_TABLE};
use fraud_investigation::tools::{CONTEXT_TOOL, PATTERN_TOOL, REASONING_TOOL, SIMILARITY_TOOL};
use fraud_investigation::{
    Fault, FaultyTool, GraphParts, InvestigationState, InvestigationTool, Metrics, COMPLETION,
};
use graphloom_core::{RunConfig, RunInput, State as _};
use serde_json::Value;
use std::time::Duration;

/// `(investigation_id, thread_id, status, state->>'status', checkpoint_id)` of every record.
async fn records(pool: &sqlx::PgPool) -> Vec<(String, String, String, String, String)> {
    sqlx::query_as(
        "SELECT investigation_id, thread_id, status, state->>'status', checkpoint_id
         FROM ops_agent_investigation_state ORDER BY investigation_id",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// `(seq, tool_name, status)` of an investigation's tool log, in order.
async fn tool_log(pool: &sqlx::PgPool, id: &str) -> Vec<(i32, String, String)> {
    sqlx::query_as(
        "SELECT seq, tool_name, status FROM ops_agent_tool_execution_log
         WHERE investigation_id = $1 ORDER BY seq",
    )
    .bind(id)
    .fetch_all(pool)
    .await
    .unwrap()
}

fn log_of(s: &InvestigationState) -> Vec<(i32, String, String)> {
    s.tool_executions
        .iter()
        .enumerate()
        .map(|(i, e)| {
            (
                i32::try_from(i).unwrap(),
                e.tool_name.clone(),
                e.status.as_str().to_owned(),
            )
        })
        .collect()
}

/// The id of the thread's latest checkpoint.
async fn latest_checkpoint(service: &InvestigationService, id: &str) -> String {
    service
        .graph()
        .get_state(&RunConfig::thread(id))
        .await
        .unwrap()
        .config
        .checkpoint_id
        .unwrap()
}

#[tokio::test]
async fn an_investigation_leaves_one_jsonb_row_and_its_tool_log_with_its_final_checkpoint() {
    let (url, _db) = graphloom_postgres::testing::test_database().await;
    let (saver, store) = open_database(&Database::Postgres(url.clone())).await.unwrap();
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    // Opening PostgreSQL applied the example's migrations: the tables are there, empty.
    assert!(records(&pool).await.is_empty());

    let service = InvestigationService::standard(settings(), None, saver, Some(store)).unwrap();
    let out = service.start("inv-rec", "TX-1009").await.unwrap();
    assert_eq!(out.status, InvestigationStatus::Completed);
    assert_eq!(out.severity, Severity::Critical);

    let final_checkpoint = latest_checkpoint(&service, "inv-rec").await;
    assert_eq!(
        records(&pool).await,
        vec![(
            "inv-rec".to_owned(),
            "inv-rec".to_owned(),
            "COMPLETED".to_owned(),
            "COMPLETED".to_owned(),
            final_checkpoint
        )]
    );
    // The JSONB column is the whole final state, as the run returned it.
    let (state, severity, steps): (sqlx::types::Json<Value>, String, i32) = sqlx::query_as(&format!(
        "SELECT state, severity, step_count FROM {STATE_TABLE} WHERE investigation_id = 'inv-rec'"
    ))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(state.0, out.to_json().unwrap());
    assert_eq!(severity, "CRITICAL");
    assert_eq!(steps, i32::try_from(out.step_count).unwrap());
    // Queryable with SQL, inside the JSON too.
    let critical: Vec<(String, String, f64)> = sqlx::query_as(&format!(
        "SELECT investigation_id, state->>'transaction_id', (state->'reasoning'->>'fraud_probability')::float8
         FROM {STATE_TABLE} WHERE state->>'severity' = 'CRITICAL' AND jsonb_array_length(state->'tool_executions') = 6"
    ))
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(critical.len(), 1, "{critical:?}");
    assert_eq!(critical[0].1, "TX-1009");
    assert!(critical[0].2 >= 0.8, "{critical:?}");

    // The tool log: one row per execution, in order.
    let log = tool_log(&pool, "inv-rec").await;
    assert_eq!(log.len(), 6);
    assert_eq!(log, log_of(&out));
    let (input, ms): (sqlx::types::Json<Value>, i64) = sqlx::query_as(&format!(
        "SELECT input_summary, execution_time_ms FROM {TOOL_LOG_TABLE}
         WHERE investigation_id = 'inv-rec' AND tool_name = 'context_tool'"
    ))
    .fetch_one(&pool)
    .await
    .unwrap();
    let context = out.execution_of(CONTEXT_TOOL).unwrap();
    assert_eq!(input.0, Value::Object(context.input_summary.clone()));
    assert_eq!(ms, i64::try_from(context.execution_time_ms).unwrap());

    // Resuming the finished investigation writes nothing new.
    assert_eq!(service.resume_investigation("inv-rec").await.unwrap(), out);
    assert_eq!(records(&pool).await.len(), 1);
    assert_eq!(tool_log(&pool, "inv-rec").await.len(), 6);
}

#[tokio::test]
async fn the_record_and_the_final_checkpoint_commit_together_or_not_at_all() {
    let (url, _db) = graphloom_postgres::testing::test_database().await;
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let (saver, store) = open_database(&Database::Postgres(url.clone())).await.unwrap();
    // The log table is gone: the record's row would insert, its log would not.
    sqlx::query(&format!("DROP TABLE {TOOL_LOG_TABLE}"))
        .execute(&pool)
        .await
        .unwrap();
    let service = InvestigationService::standard(settings(), None, saver, Some(Arc::clone(&store))).unwrap();
    let err = service
        .start("inv-atomic", "TX-3004")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("checkpoint hook `fraud_investigation.record` failed"),
        "{err}"
    );
    assert!(err.contains("was not saved"), "{err}");
    assert!(err.contains(TOOL_LOG_TABLE), "{err}");

    // No final checkpoint (the completion is still to run), and no row of it either: the
    // row inserted before the log failed was rolled back with the checkpoint.
    let snap = service
        .graph()
        .get_state(&RunConfig::thread("inv-atomic"))
        .await
        .unwrap();
    assert_eq!(snap.next, vec![COMPLETION.to_owned()]);
    assert_eq!(snap.values.status, InvestigationStatus::InProgress);
    assert_eq!(snap.values.completed_steps.len(), 6);
    assert!(records(&pool).await.is_empty());

    // Fixed (the tables made again by the example's migration), the investigation is
    // resumed: the completion runs, and the row and the log come with its checkpoint.
    sqlx::query(&format!("DROP TABLE {STATE_TABLE}"))
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("DELETE FROM graphloom_migrations WHERE component = 'fraud_investigation'")
        .execute(&pool)
        .await
        .unwrap();
    let (saver, store) = open_database(&Database::Postgres(url)).await.unwrap();
    let service = InvestigationService::standard(settings(), None, saver, Some(store)).unwrap();
    let done = service.resume_investigation("inv-atomic").await.unwrap();
    assert_eq!(done.status, InvestigationStatus::Completed);
    let rows = records(&pool).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].2, "COMPLETED");
    assert_eq!(rows[0].4, latest_checkpoint(&service, "inv-atomic").await);
    assert_eq!(tool_log(&pool, "inv-atomic").await, log_of(&done));
}

/// A service on PostgreSQL with the standard tools, `replace` swapped in.
fn pg_service(
    saver: Arc<dyn graphloom_core::checkpoint::DynCheckpointer>,
    settings: Settings,
    replace: Vec<Arc<dyn InvestigationTool>>,
    counts: &Counts,
) -> InvestigationService {
    InvestigationService::new(&GraphParts {
        registry: Arc::new(registry(&settings, counts, replace)),
        llm: None,
        settings,
        metrics: Arc::new(Metrics::new()),
        checkpointer: saver,
        store: None,
    })
    .unwrap()
}

#[tokio::test]
async fn a_timed_out_then_resumed_investigation_updates_its_row_and_never_duplicates_it() {
    let (url, _db) = graphloom_postgres::testing::test_database().await;
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let counts = Counts::default();
    let mut slow = settings();
    slow.langgraph.investigation_timeout = Duration::from_secs(2);
    let (saver, _) = open_database(&Database::Postgres(url.clone())).await.unwrap();
    let service = pg_service(
        saver,
        slow,
        vec![Arc::new(FaultyTool::new(REASONING_TOOL, Fault::Hang))],
        &counts,
    );
    let out = service.start("inv-slow", "TX-4003").await.unwrap();
    assert_eq!(out.status, InvestigationStatus::TimedOut);
    // The service's write-back of the timeout ends the investigation too: its row says so.
    let rows = records(&pool).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].2, "TIMED_OUT");
    assert_eq!(rows[0].3, "TIMED_OUT");
    let log = tool_log(&pool, "inv-slow").await;
    assert_eq!(log.len(), 3, "{log:?}");
    assert_eq!(log, log_of(&out));
    drop(service);

    // Another process resumes it with a working reasoning tool (a plain saver: the graph
    // adds the record hook itself).
    let saver = graphloom_postgres::PostgresSaver::connect(&url).await.unwrap();
    let service = pg_service(Arc::new(saver), settings(), vec![], &counts);
    let done = service.resume_investigation("inv-slow").await.unwrap();
    assert_eq!(done.status, InvestigationStatus::Completed);
    let rows = records(&pool).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].2, "COMPLETED");
    assert_eq!(rows[0].4, latest_checkpoint(&service, "inv-slow").await);
    let log = tool_log(&pool, "inv-slow").await;
    assert_eq!(log, log_of(&done));
    assert_eq!(log.len(), 6);
    // Each tool once in the log, as it ran once.
    let c = counts.lock().unwrap().clone();
    for t in [CONTEXT_TOOL, PATTERN_TOOL, SIMILARITY_TOOL, REASONING_TOOL] {
        assert_eq!(c.get(t), Some(&1), "{t}: {c:?}");
        assert_eq!(log.iter().filter(|(_, n, _)| n == t).count(), 1, "{t}: {log:?}");
    }
    // Resuming again: nothing to do, nothing written.
    service.resume_investigation("inv-slow").await.unwrap();
    assert_eq!(records(&pool).await.len(), 1);
}

#[tokio::test]
async fn the_hosted_graph_on_a_server_s_postgres_saver_writes_the_record_too() {
    let (url, _db) = graphloom_postgres::testing::test_database().await;
    // As `graphloom serve --database-url` hands its saver and store to the graph's factory:
    // opened by the server, not by the example, so its tables are made on first record.
    let saver = graphloom_postgres::PostgresSaver::connect(&url).await.unwrap();
    let store = graphloom_postgres::PostgresStore::from_pool(saver.pool().clone());
    let graph = fraud_investigation::graph(
        Arc::new(saver.clone()),
        Arc::new(store),
        Arc::new(fraud_investigation::offline::model()),
    )
    .unwrap();
    // The server's saver itself stays without the hook.
    assert!(!saver.has_hook(fraud_investigation::record::HOOK_NAME));
    let out = graph
        .invoke_input(
            RunInput::Json(fraud_investigation::sample_input()),
            RunConfig::thread("server-thread-1"),
        )
        .await
        .unwrap();
    assert_eq!(out.values.status, InvestigationStatus::Completed);
    let bare = graph
        .invoke_input(
            RunInput::Json(serde_json::json!({"transaction_id": "TX-2004"})),
            RunConfig::thread("server-thread-2"),
        )
        .await
        .unwrap();
    assert_eq!(bare.values.status, InvestigationStatus::Completed);
    let pool = saver.pool();
    let rows = records(pool).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(
        (rows[0].0.as_str(), rows[0].1.as_str()),
        ("inv-sample-tx-1009", "server-thread-1")
    );
    // A bare input's investigation id is its thread's.
    assert_eq!(
        (rows[1].0.as_str(), rows[1].1.as_str()),
        ("server-thread-2", "server-thread-2")
    );
    assert_eq!(tool_log(pool, "inv-sample-tx-1009").await, log_of(&out.values));
}
