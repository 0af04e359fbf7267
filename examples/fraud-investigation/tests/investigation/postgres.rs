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
