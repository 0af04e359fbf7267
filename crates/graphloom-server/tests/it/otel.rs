//! OpenTelemetry export: a run of a model-and-tool agent reaches a local OTLP/HTTP receiver
//! as one trace of run > node > chat / execute_tool spans with their GenAI attributes.
//!
//! The tests install the global `tracing` subscriber, so this file holds only them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use common::{human, TestServer};
use graphloom_llm::{DynChatModel, Reply, ScriptedModel, ToolCall, Usage};
use graphloom_prebuilt::{create_react_agent, AgentOptions, FnTool, ToolError};
use graphloom_server::telemetry::{init_tracing, TelemetryConfig};
use graphloom_server::{factory, GraphDeps, ServerConfig};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode as SpanStatus;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MODEL: &str = "forecaster-1";

/// An agent whose model asks for `weather` (answers) and `radar` (fails) at once, then
/// answers in text; every reply reports its usage.
fn weather_agent(
    deps: &GraphDeps,
) -> graphloom_core::Result<graphloom_core::CompiledGraph<graphloom_prebuilt::AgentState>> {
    let model = ScriptedModel::new([
        Reply::tool_calls(
            "",
            vec![
                ToolCall {
                    id: "call-weather".into(),
                    name: "weather".into(),
                    args: json!({"city": "Oslo"}),
                },
                ToolCall {
                    id: "call-radar".into(),
                    name: "radar".into(),
                    args: json!({"city": "Oslo"}),
                },
            ],
        )
        .with_usage(Usage::new(11, 7)),
        Reply::text("Sunny in Oslo.").with_usage(Usage::new(23, 5)),
    ])
    .named(MODEL);
    let weather = FnTool::new(
        "weather",
        "Today's weather",
        |a: serde_json::Value, _rt| async move { Ok::<_, ToolError>(json!({"city": a["city"], "sky": "sunny"})) },
    );
    let radar = FnTool::new("radar", "Rain radar", |_a: serde_json::Value, _rt| async move {
        Err::<serde_json::Value, _>(ToolError::execution("the radar is offline"))
    });
    let model: Arc<dyn DynChatModel> = Arc::new(model);
    create_react_agent(
        model,
        [weather.arc(), radar.arc()],
        AgentOptions {
            checkpointer: Some(Arc::clone(&deps.checkpointer)),
            ..AgentOptions::default()
        },
    )
}

type Received = Arc<Mutex<Vec<ExportTraceServiceRequest>>>;

/// POST /v1/traces: decode the protobuf body, keep it.
async fn receive(State(got): State<Received>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let protobuf = headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == b"application/x-protobuf");
    if !protobuf {
        return StatusCode::UNSUPPORTED_MEDIA_TYPE;
    }
    match ExportTraceServiceRequest::decode(body) {
        Ok(req) => {
            got.lock().unwrap().push(req);
            StatusCode::OK
        }
        Err(_) => StatusCode::BAD_REQUEST,
    }
}

/// A local OTLP/HTTP receiver; its base URL and what it received.
async fn receiver() -> (String, Received) {
    let got: Received = Arc::default();
    let app = axum::Router::new()
        .route("/v1/traces", axum::routing::post(receive))
        .with_state(Arc::clone(&got));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, got)
}

fn spans(got: &Received) -> Vec<Span> {
    got.lock()
        .unwrap()
        .iter()
        .flat_map(|r| &r.resource_spans)
        .flat_map(|rs| &rs.scope_spans)
        .flat_map(|ss| ss.spans.clone())
        .collect()
}

/// The spans received once the run span has (it ends just after the run is recorded):
/// flush, up to 5 s, until it is among them.
async fn spans_with_the_run(
    guard: &graphloom_server::telemetry::TelemetryGuard,
    got: &Received,
) -> Vec<Span> {
    let mut all = Vec::new();
    for _ in 0..50 {
        tokio::task::block_in_place(|| guard.flush()).unwrap();
        all = spans(got);
        if all.iter().any(|sp| sp.name == "run") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    all
}

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn text(span: &Span, key: &str) -> String {
    match attr(&span.attributes, key) {
        Some(AnyValue::StringValue(s)) => s.clone(),
        other => panic!("span `{}`: {key} is {other:?}, not a string", span.name),
    }
}

fn int(span: &Span, key: &str) -> i64 {
    match attr(&span.attributes, key) {
        Some(AnyValue::IntValue(n)) => *n,
        other => panic!("span `{}`: {key} is {other:?}, not an integer", span.name),
    }
}

fn status(span: &Span) -> i32 {
    span.status.as_ref().map_or(0, |s| s.code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_exports_run_node_model_and_tool_spans() {
    let (base, got) = receiver().await;
    let telemetry = TelemetryConfig {
        service_name: "graphloom-otel-test".into(),
        log_filter: "warn".into(),
        ..TelemetryConfig::default()
    }
    .with_otlp_endpoint(format!("{base}/"));
    assert_eq!(telemetry.traces_url(), Some(format!("{base}/v1/traces")));
    let guard = init_tracing(&telemetry).unwrap();
    assert!(guard.is_exporting());

    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start_with(ServerConfig::sqlite(dir.path().join("graphloom.db")), |b| {
        b.graph("weather", factory(weather_agent))
    })
    .await;
    let t = s.thread().await;
    let (code, run) = s
        .post(
            &format!("/threads/{t}/runs"),
            json!({"assistant_id": "weather", "input": human("weather in Oslo?")}),
        )
        .await;
    assert_eq!(code, 200, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let done = s.wait_run(&t, &run_id).await;
    assert_eq!(done["status"], "success", "{done}");

    let all = spans_with_the_run(&guard, &got).await;
    s.stop().await;

    let resource = got.lock().unwrap()[0].resource_spans[0].resource.clone().unwrap();
    assert!(
        matches!(attr(&resource.attributes, "service.name"), Some(AnyValue::StringValue(n)) if n == "graphloom-otel-test"),
        "{resource:?}"
    );

    let runs: Vec<&Span> = all.iter().filter(|sp| sp.name == "run").collect();
    assert_eq!(
        runs.len(),
        1,
        "one run span: {:?}",
        all.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let root = runs[0];
    assert_eq!(text(root, "run_id"), run_id);
    assert_eq!(text(root, "thread_id"), t);
    assert_eq!(text(root, "graph_id"), "weather");
    assert_eq!(int(root, "attempt"), 1);
    let in_trace = |sp: &&Span| sp.trace_id == root.trace_id;

    // agent (tool calls) > tools > agent (text): three node spans, children of the run.
    let nodes: Vec<&Span> = all
        .iter()
        .filter(in_trace)
        .filter(|sp| sp.name == "node" && text(sp, "graphloom.node") != "__start__")
        .collect();
    let names: Vec<String> = nodes.iter().map(|sp| text(sp, "graphloom.node")).collect();
    assert_eq!(names.iter().filter(|n| *n == "agent").count(), 2, "{names:?}");
    assert_eq!(names.iter().filter(|n| *n == "tools").count(), 1, "{names:?}");
    for n in &nodes {
        assert_eq!(
            n.parent_span_id,
            root.span_id,
            "node {} is a child of the run",
            text(n, "graphloom.node")
        );
        assert_eq!(int(n, "graphloom.attempt"), 1);
        assert!(!text(n, "graphloom.task_id").is_empty());
        assert!(int(n, "graphloom.step") >= 1);
    }
    let node_named = |id: &[u8]| {
        nodes
            .iter()
            .find(|n| n.span_id == id)
            .map(|n| text(n, "graphloom.node"))
    };

    // Two model calls, each under an `agent` node, with usage and finish reasons.
    let mut chats: Vec<&Span> = all
        .iter()
        .filter(in_trace)
        .filter(|sp| sp.name == format!("chat {MODEL}"))
        .collect();
    chats.sort_by_key(|sp| sp.start_time_unix_nano);
    assert_eq!(
        chats.len(),
        2,
        "{:?}",
        all.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    for c in &chats {
        assert_eq!(node_named(&c.parent_span_id).as_deref(), Some("agent"));
        assert_eq!(text(c, "gen_ai.operation.name"), "chat");
        assert_eq!(text(c, "gen_ai.provider.name"), "scripted");
        assert_eq!(text(c, "gen_ai.request.model"), MODEL);
        assert_eq!(text(c, "gen_ai.response.model"), MODEL);
        assert_ne!(status(c), SpanStatus::Error as i32);
    }
    assert_eq!(
        (
            int(chats[0], "gen_ai.usage.input_tokens"),
            int(chats[0], "gen_ai.usage.output_tokens")
        ),
        (11, 7)
    );
    assert_eq!(
        (
            int(chats[1], "gen_ai.usage.input_tokens"),
            int(chats[1], "gen_ai.usage.output_tokens")
        ),
        (23, 5)
    );
    assert_eq!(text(chats[0], "gen_ai.response.finish_reasons"), "tool_calls");
    assert_eq!(text(chats[1], "gen_ai.response.finish_reasons"), "stop");

    // Two tool calls under the `tools` node; the failing one carries an error status.
    let tool = |name: &str| {
        all.iter()
            .filter(in_trace)
            .find(|sp| sp.name == format!("execute_tool {name}"))
            .unwrap_or_else(|| {
                panic!(
                    "no span for {name}: {:?}",
                    all.iter().map(|s| &s.name).collect::<Vec<_>>()
                )
            })
    };
    let (weather, radar) = (tool("weather"), tool("radar"));
    for (sp, name, id) in [
        (weather, "weather", "call-weather"),
        (radar, "radar", "call-radar"),
    ] {
        assert_eq!(node_named(&sp.parent_span_id).as_deref(), Some("tools"));
        assert_eq!(text(sp, "gen_ai.operation.name"), "execute_tool");
        assert_eq!(text(sp, "gen_ai.tool.name"), name);
        assert_eq!(text(sp, "gen_ai.tool.call.id"), id);
    }
    assert_ne!(status(weather), SpanStatus::Error as i32);
    assert_eq!(status(radar), SpanStatus::Error as i32);
    assert_eq!(text(radar, "error.type"), "execution");
    assert!(radar.status.as_ref().unwrap().message.contains("offline"));
    drop(guard);
}

/// A seed graph's own `tracing` spans (seed 000's `agent.planner` per planning step and
/// `agent.completion` once) reach the server's OTLP export inside the run's trace, each
/// under the node that made it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seed_graphs_own_spans_join_the_runs_trace() {
    let (base, got) = receiver().await;
    let telemetry = TelemetryConfig {
        service_name: "graphloom-otel-seed".into(),
        log_filter: "warn".into(),
        ..TelemetryConfig::default()
    }
    .with_otlp_endpoint(format!("{base}/"));
    let guard = init_tracing(&telemetry).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start_with(ServerConfig::sqlite(dir.path().join("graphloom.db")), |b| {
        b.graph(
            fraud_investigation::GRAPH_ID,
            Arc::new(|deps: &GraphDeps| {
                fraud_investigation::graph(
                    Arc::clone(&deps.checkpointer),
                    Arc::clone(&deps.store),
                    Arc::new(fraud_investigation::offline::model().keep_requests(0)),
                )
                .map(graphloom_server::hosted)
            }),
        )
    })
    .await;
    let t = s.thread().await;
    let (code, run) = s
        .post(
            &format!("/threads/{t}/runs"),
            json!({"assistant_id": fraud_investigation::GRAPH_ID, "input": fraud_investigation::sample_input()}),
        )
        .await;
    assert_eq!(code, 200, "{run}");
    let done = s.wait_run(&t, run["run_id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "success", "{done}");
    let all = spans_with_the_run(&guard, &got).await;
    s.stop().await;
    let root = all.iter().find(|sp| sp.name == "run").unwrap_or_else(|| {
        panic!(
            "no run span: {:?}",
            all.iter().map(|s| &s.name).collect::<Vec<_>>()
        )
    });
    let in_trace: Vec<&Span> = all.iter().filter(|sp| sp.trace_id == root.trace_id).collect();
    let node_of = |sp: &Span| {
        in_trace
            .iter()
            .find(|n| n.span_id == sp.parent_span_id && n.name == "node")
            .map(|n| text(n, "graphloom.node"))
    };
    let planners: Vec<&&Span> = in_trace.iter().filter(|sp| sp.name == "agent.planner").collect();
    let completions: Vec<&&Span> = in_trace
        .iter()
        .filter(|sp| sp.name == "agent.completion")
        .collect();
    assert!(
        planners.len() >= 6,
        "a planner span per step, in the run's trace: {:?}",
        in_trace.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    assert_eq!(completions.len(), 1);
    for p in &planners {
        assert_eq!(node_of(p).as_deref(), Some("planner"));
        assert_eq!(text(p, "investigation_id"), "inv-sample-tx-1009");
    }
    assert_eq!(text(completions[0], "status"), "COMPLETED");
    assert_eq!(text(completions[0], "severity"), "CRITICAL");
}
