//! Rows and constants the storage tests share.
#![allow(dead_code)]

use graphloom_server::db::NewRun;
use graphloom_server::models::{Assistant, MultitaskStrategy, Run, RunStatus, Thread, ThreadStatus};
use serde_json::{json, Map, Value};
use std::time::Duration;

pub const ALICE: &str = "alice";
pub const BOB: &str = "bob";
pub const LONG: Duration = Duration::from_secs(30);

pub fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

pub fn assistant(id: &str, graph: &str, name: &str, metadata: Value) -> Assistant {
    Assistant {
        assistant_id: id.into(),
        graph_id: graph.into(),
        config: json!({"configurable": {}}),
        context: json!({}),
        created_at: String::new(),
        updated_at: String::new(),
        metadata: obj(metadata),
        version: 7,
        name: name.into(),
        description: Some(format!("{name} description")),
    }
}

pub fn thread(id: &str, metadata: Value) -> Thread {
    Thread {
        thread_id: id.into(),
        created_at: String::new(),
        updated_at: String::new(),
        state_updated_at: String::new(),
        metadata: obj(metadata),
        config: json!({}),
        status: ThreadStatus::Idle,
        values: Value::Null,
        interrupts: json!({}),
        error: None,
        ttl: None,
    }
}

pub fn run_on(thread_id: &str) -> Run {
    Run {
        run_id: uuid::Uuid::now_v7().to_string(),
        thread_id: thread_id.into(),
        assistant_id: "asst".into(),
        created_at: String::new(),
        updated_at: String::new(),
        status: RunStatus::Pending,
        metadata: obj(json!({"k": "v"})),
        kwargs: json!({"input": {"n": 1}, "stream_mode": ["values"]}),
        multitask_strategy: MultitaskStrategy::Enqueue,
        cancel_reason: None,
        ordinal: 0,
    }
}

pub fn enqueue(thread_id: &str) -> NewRun {
    NewRun {
        run: run_on(thread_id),
        owner: ALICE.into(),
        delay: None,
        reject_if_busy: false,
        cancel_active: None,
        thread_metadata: None,
        claim: None,
        create_thread: None,
    }
}
