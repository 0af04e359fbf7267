//! The seed's span names and fields (TDD-002 §12), captured by a minimal subscriber.
//!
//! Its own test binary: tracing caches per-callsite interest process-wide, so spans first
//! hit by a concurrent test without a subscriber could be skipped here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "investigation/common.rs"]
mod common;

use common::{settings, setup};
use fraud_investigation::{Fault, FaultyTool};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Fields of a span by name.
type FieldMap = BTreeMap<String, String>;

/// Every span opened: its name and the fields recorded on it (at creation or later).
#[derive(Default, Clone)]
struct Capture {
    next: Arc<AtomicU64>,
    spans: Arc<Mutex<BTreeMap<u64, (String, FieldMap)>>>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        self.spans
            .lock()
            .unwrap()
            .insert(id, (attrs.metadata().name().to_owned(), fields));
        Id::from_u64(id)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        if let Some((_, fields)) = self.spans.lock().unwrap().get_mut(&span.into_u64()) {
            values.record(&mut Fields(fields));
        }
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

impl Capture {
    fn named(&self, name: &str) -> Vec<BTreeMap<String, String>> {
        self.spans
            .lock()
            .unwrap()
            .values()
            .filter(|(n, _)| n == name)
            .map(|(_, f)| f.clone())
            .collect()
    }
}

// One thread, so the thread-local subscriber sees the spawned tool tasks too.
#[tokio::test(flavor = "current_thread")]
async fn planner_and_tool_spans_carry_the_seed_names_and_fields() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    let dir = tempfile::tempdir().unwrap();
    let mut st = settings();
    st.langgraph.tool_timeout = Duration::from_millis(200);
    let s = setup(
        &dir.path().join("f.db"),
        st,
        None,
        vec![std::sync::Arc::new(FaultyTool::new(
            "rule_draft_tool",
            Fault::Hang,
        ))],
        Default::default(),
    )
    .await;
    s.service.start("inv-spans", "TX-1009").await.unwrap();

    let planners = capture.named("agent.planner");
    assert_eq!(planners.len(), 7);
    assert!(planners.iter().all(|f| f["investigation_id"] == "inv-spans"));
    let selected: Vec<&str> = planners.iter().map(|f| f["selected_tool"].as_str()).collect();
    assert!(
        selected.contains(&"context_tool") && selected.contains(&"COMPLETE"),
        "{selected:?}"
    );
    assert!(planners.iter().any(|f| f["step_count"] == "0"));
    for tool in fraud_investigation::FALLBACK_SEQUENCE {
        let spans = capture.named(&format!("agent.tool.{tool}"));
        assert_eq!(spans.len(), 1, "{tool}");
        assert_eq!(spans[0]["investigation_id"], "inv-spans");
        assert!(
            spans[0].contains_key("execution_time_ms"),
            "{tool}: {:?}",
            spans[0]
        );
    }
    assert_eq!(capture.named("agent.tool.context_tool")[0]["status"], "SUCCESS");
    assert_eq!(
        capture.named("agent.tool.rule_draft_tool")[0]["status"],
        "TIMED_OUT"
    );
    assert_eq!(capture.named("agent.completion")[0]["status"], "COMPLETED");
    assert_eq!(
        capture.named("agent.investigation")[0]["transaction_id"],
        "TX-1009"
    );
}
