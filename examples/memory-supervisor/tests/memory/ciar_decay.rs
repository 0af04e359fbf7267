//! CIAR age and recency come from time: a fact's score decays from when it was stated and
//! since it was last used, searches filter on the score now, and a search that returns a
//! fact makes it recent again.

use graphloom_core::store::DynStore;
use memory_supervisor::memory::{current_ciar, long_term_namespace, Clock};
use memory_supervisor::{open_database, Database, Ids, Memory};
use std::sync::{Arc, Mutex};

const DAY: f64 = 86_400.0;
const T0: f64 = 1_780_000_000.0;

fn clock() -> (Arc<Mutex<f64>>, Clock) {
    let now = Arc::new(Mutex::new(T0));
    let read = Arc::clone(&now);
    (now, Arc::new(move || *read.lock().unwrap()))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 0.0015
}

#[tokio::test]
async fn ciar_decays_with_age_and_idleness_and_use_refreshes_it() {
    let (url, _db) = graphloom_postgres::testing::test_database().await;
    let (_saver, store) = open_database(&Database::Postgres(url)).await.unwrap();
    let (now, clock) = clock();
    let ids = Ids {
        user_id: "alice".into(),
        session_id: "s-1".into(),
    };
    let mem = Memory::new(Arc::clone(&store), ids).with_clock(clock);
    let teal = "my favourite colour is teal";
    let fact = mem.remember(teal, "test").await.unwrap();
    assert!(close(fact.ciar, 0.81) && fact.promoted);

    // The day it was stated it scores its full 0.81.
    let hits = mem.search_session("favourite colour", 0.6, 5).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert!(close(hits[0].ciar, 0.81), "{}", hits[0].ciar);

    // Ten days later, unused since: age 0.5^(10/30), recency 0.5^(10/7).
    *now.lock().unwrap() = T0 + 10.0 * DAY;
    let expected = 0.81 * 0.5f64.powf(10.0 / 30.0) * 0.5f64.powf(10.0 / 7.0);
    assert!(mem
        .search_session("favourite colour", 0.6, 5)
        .await
        .unwrap()
        .is_empty());
    let hits = mem.search_session("favourite colour", 0.0, 5).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert!(close(hits[0].ciar, expected), "{} vs {expected}", hits[0].ciar);

    // That search used it: recency is back to 1, only age still counts.
    *now.lock().unwrap() = T0 + 10.0 * DAY + 60.0;
    let hits = mem.search_session("favourite colour", 0.6, 5).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert!(
        close(hits[0].ciar, 0.81 * 0.5f64.powf(10.0 / 30.0)),
        "{}",
        hits[0].ciar
    );

    // Long-term knowledge decays the same way and reports the score now.
    *now.lock().unwrap() = T0 + 60.0 * DAY;
    let l3 = mem.search_long_term("favourite colour", 5).await.unwrap();
    assert_eq!(l3.len(), 1);
    let expected = 0.81 * 0.25 * 0.5f64.powf(60.0 / 7.0);
    assert!(close(l3[0].ciar, expected), "{} vs {expected}", l3[0].ciar);
    // ... and records the use in the store.
    let stored = store
        .get(&long_term_namespace("alice"), &fact.key)
        .await
        .unwrap()
        .unwrap()
        .value;
    assert_eq!(stored["last_used_at"], serde_json::json!(T0 + 60.0 * DAY));
    assert_eq!(stored["stated_at"], serde_json::json!(T0));
    assert!(close(current_ciar(&stored, T0 + 60.0 * DAY).score, 0.81 * 0.25));
}
