//! The thread-centric protocol against a real server on 127.0.0.1:0: bad input gets typed
//! error frames and the server keeps serving, runs show on both protocols, a thread's
//! stream replays and follows its runs (through rollbacks, cancels and reconnects), and
//! the thread's run-centric join stream follows its runs. The WebSocket, CORS and the graph
//! drawing are in `thread_protocol_socket.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::weather;

use common::{human, parse_sse, read_until, root_terminal, thread_events, TestServer};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

async fn server() -> TestServer {
    server_with(|_| {}).await
}

async fn server_with(tune: impl FnOnce(&mut graphloom_server::ServerConfig)) -> TestServer {
    TestServer::sqlite_with(tune, |b| {
        b.graph("weather", graphloom_server::factory(weather::graph))
    })
    .await
}

fn new_thread() -> String {
    uuid::Uuid::new_v4().to_string()
}

async fn command(s: &TestServer, thread: &str, body: Value) -> (u16, Value) {
    s.post(&format!("/threads/{thread}/commands"), body).await
}

fn start(id: u64) -> Value {
    json!({"id": id, "method": "run.start", "params": {"assistant_id": "weather", "input": human("weather in Paris?")}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_commands_get_typed_error_frames_and_the_server_keeps_serving() {
    // A small body limit, so that a frame over it fits in the socket's buffers whole.
    let s = server_with(|c| c.body_limit = 64 * 1024).await;
    let t = new_thread();
    let cases = [
        (
            json!({"id": 1, "method": "state.teleport", "params": {}}),
            200,
            "unknown_command",
        ),
        (
            json!({"id": 2, "method": "run.start", "params": {}}),
            200,
            "invalid_argument",
        ),
        (
            json!({"id": 3, "method": "run.start", "params": {"assistant_id": "nope", "input": {}}}),
            200,
            "invalid_argument",
        ),
        (
            json!({"id": 4, "method": "run.start", "params": {"assistant_id": "weather", "config": "fast"}}),
            200,
            "invalid_argument",
        ),
        (
            json!({"id": 5, "method": "input.respond", "params": {"namespace": [], "interrupt_id": "x", "response": 1}}),
            200,
            "no_such_run",
        ),
        (
            json!({"id": 6, "method": "input.respond", "params": {"namespace": []}}),
            200,
            "invalid_argument",
        ),
        (
            json!({"id": 7, "method": "agent.getTree", "params": {}}),
            200,
            "no_such_run",
        ),
        (
            json!({"id": 8, "method": "state.fork", "params": {}}),
            200,
            "invalid_argument",
        ),
        (
            json!({"id": 9, "method": "subscription.unsubscribe", "params": {"subscription_id": "s"}}),
            200,
            "no_such_subscription",
        ),
        (
            json!({"id": 10, "method": "input.inject", "params": {"namespace": [], "message": {"role": "robot", "content": "x"}}}),
            200,
            "invalid_argument",
        ),
        (json!({"id": 11}), 400, "invalid_argument"),
        (
            json!({"id": 12, "method": "run.start", "params": [1]}),
            400,
            "invalid_argument",
        ),
    ];
    for (body, status, code) in cases {
        let (st, frame) = command(&s, &t, body.clone()).await;
        assert_eq!(
            (st, frame["type"].as_str(), frame["error"].as_str()),
            (status, Some("error"), Some(code)),
            "{body} -> {frame}"
        );
        assert!(
            frame["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{frame}"
        );
        if let Some(id) = body.get("id") {
            assert_eq!(&frame["id"], id);
        }
    }
    // Not JSON.
    let r = s
        .http
        .post(s.u(&format!("/threads/{t}/commands")))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let frame: Value = r.json().await.unwrap();
    assert_eq!(
        (frame["error"].as_str(), &frame["id"]),
        (Some("invalid_argument"), &Value::Null)
    );
    // A huge frame: refused at the edge, typed.
    let huge = format!(
        "{{\"id\": 1, \"method\": \"run.start\", \"params\": {{\"pad\": \"{}\"}}}}",
        "x".repeat(128 * 1024)
    );
    // The server answers before reading the body and closes the connection: keep the
    // client from reusing it for the next request.
    let r = s
        .http
        .post(s.u(&format!("/threads/{t}/commands")))
        .header(reqwest::header::CONNECTION, "close")
        .body(huge)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    assert!(r.json::<Value>().await.unwrap()["detail"].is_string());
    // Bad stream filters are 400s naming what is wrong.
    for body in [
        json!({"channels": ["bogus"]}),
        json!({"channels": []}),
        json!({"channels": ["values"], "since": "x"}),
    ] {
        let r = thread_events(&s, &t, body.clone()).await;
        assert_eq!(r.status(), 400, "{body}");
        assert!(r.json::<Value>().await.unwrap()["detail"].is_string());
    }
    // None of it created the thread, and the server goes on.
    assert_eq!(s.get(&format!("/threads/{t}")).await.0, 404);
    let (st, ok) = command(&s, &t, start(20)).await;
    assert_eq!((st, ok["type"].as_str()), (200, Some("success")), "{ok}");
    let evs = read_until(
        thread_events(&s, &t, json!({"channels": ["lifecycle"]})).await,
        root_terminal,
    )
    .await;
    assert_eq!(evs.last().unwrap().1["params"]["data"]["event"], "interrupted");
    // Now an answer to an interrupt that is not pending is refused by id.
    let (_, frame) = command(
        &s,
        &t,
        json!({"id": 21, "method": "input.respond", "params": {"namespace": [], "interrupt_id": "zzz", "response": 1}}),
    )
    .await;
    assert_eq!(frame["error"], "no_such_interrupt", "{frame}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_started_on_either_protocol_streams_on_the_other() {
    let s = server().await;
    // Thread protocol -> run-centric join.
    let t = new_thread();
    let (_, ok) = command(&s, &t, start(1)).await;
    let run_id = ok["result"]["run_id"].as_str().unwrap().to_owned();
    let r = s
        .http
        .get(s.u(&format!("/threads/{t}/runs/{run_id}/stream")))
        .send()
        .await
        .unwrap();
    let body = r.text().await.unwrap();
    let events: Vec<String> = parse_sse(&body).into_iter().map(|(e, _, _)| e).collect();
    assert_eq!(events.first().map(String::as_str), Some("metadata"), "{events:?}");
    assert!(
        events.iter().any(|e| e == "values") && events.iter().any(|e| e.starts_with("messages")),
        "{events:?}"
    );
    // Run-centric -> the thread's protocol stream, live.
    let (st, th) = s.post("/threads", json!({})).await;
    assert_eq!(st, 200);
    let t2 = th["thread_id"].as_str().unwrap().to_owned();
    let stream = thread_events(&s, &t2, json!({"channels": ["lifecycle", "values"]})).await;
    let reader = tokio::spawn(read_until(stream, root_terminal));
    let (st, run) = s
        .post(
            &format!("/threads/{t2}/runs"),
            json!({"assistant_id": "slow", "input": {"sleep_ms": 300}}),
        )
        .await;
    assert_eq!(st, 200, "{run}");
    let evs = reader.await.unwrap();
    let lifecycle: Vec<&str> = evs
        .iter()
        .filter(|(e, _, _)| e == "lifecycle")
        .filter_map(|(_, d, _)| d["params"]["data"]["event"].as_str())
        .collect();
    assert_eq!(lifecycle, ["running", "completed"], "{evs:#?}");
    assert!(
        evs.iter()
            .any(|(e, d, _)| e == "values" && d["params"]["data"]["steps"] == 1),
        "{evs:#?}"
    );
    s.stop().await;
}

/// A run the protocol started keeps what its channels read: its `checkpoints` events as
/// envelopes (config, parent config, metadata), not copies of the state, and of its
/// `messages` events the model's chunks, not the messages nodes return; the channels still
/// number each checkpoint and name its parent. A run-centric run keeps them whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protocol_run_keeps_what_its_channels_read() {
    let s = server().await;
    let t = new_thread();
    let stream = thread_events(&s, &t, json!({"channels": ["lifecycle", "checkpoints"]})).await;
    let reader = tokio::spawn(read_until(stream, root_terminal));
    let (_, ok) = command(&s, &t, start(1)).await;
    let run_id = ok["result"]["run_id"].as_str().unwrap().to_owned();
    let frames = reader.await.unwrap();
    // The root graph's (its tool node's subgraph numbers its own).
    let channel: Vec<&Value> = frames
        .iter()
        .filter(|(e, d, _)| e == "checkpoints" && d["params"]["namespace"] == json!([]))
        .map(|(_, d, _)| &d["params"]["data"])
        .collect();
    assert!(channel.len() >= 3, "{frames:#?}");
    for (i, cp) in channel.iter().enumerate() {
        assert!(cp["id"].is_string() && cp["source"].is_string(), "{cp}");
        assert!(cp["step"].is_i64(), "{cp}");
        if i > 0 {
            assert_eq!(cp["parent_id"], channel[i - 1]["id"], "{channel:#?}");
        }
    }
    let kept = |thread: String, run: String| {
        let http = s.http.clone();
        let url = s.u(&format!("/threads/{thread}/runs/{run}/stream"));
        async move {
            let body = http.get(url).send().await.unwrap().text().await.unwrap();
            parse_sse(&body)
                .into_iter()
                .map(|(e, d, _)| (e, d))
                .collect::<Vec<(String, Value)>>()
        }
    };
    let of = |events: &[(String, Value)], name: &str| -> Vec<Value> {
        events
            .iter()
            .filter(|(e, _)| e == name)
            .map(|(_, d)| d.clone())
            .collect()
    };
    let message_types = |events: &[(String, Value)]| -> Vec<String> {
        let types = events.iter().filter(|(e, _)| e.starts_with("messages"));
        types
            .map(|(_, d)| d[0]["type"].as_str().unwrap_or("").to_owned())
            .collect()
    };
    let events = kept(t.clone(), run_id.clone()).await;
    let envelopes = of(&events, "checkpoints");
    assert_eq!(envelopes.len(), channel.len(), "{envelopes:#?}");
    for (cp, frame) in envelopes.iter().zip(&channel) {
        let mut keys: Vec<&String> = cp.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["config", "metadata", "parent_config"], "{cp}");
        assert_eq!(cp["config"]["configurable"]["checkpoint_id"], frame["id"]);
    }
    let types = message_types(&events);
    assert!(
        !types.is_empty() && types.iter().all(|t| t == "AIMessageChunk"),
        "{types:?}"
    );
    let (_, run) = s.get(&format!("/threads/{t}/runs/{run_id}")).await;
    assert_eq!(run["kwargs"]["thread_protocol"], true, "{run}");
    // A run-centric run gets them whole, and is not marked.
    let (_, th) = s.post("/threads", json!({})).await;
    let t2 = th["thread_id"].as_str().unwrap().to_owned();
    let (st, run) = s
        .post(
            &format!("/threads/{t2}/runs"),
            json!({"assistant_id": "weather", "input": human("weather in Paris?"),
                   "stream_mode": ["checkpoints", "messages-tuple"], "stream_resumable": true}),
        )
        .await;
    assert_eq!(st, 200, "{run}");
    assert!(run["kwargs"].get("thread_protocol").is_none(), "{run}");
    let events = kept(t2, run["run_id"].as_str().unwrap().to_owned()).await;
    let whole = of(&events, "checkpoints");
    assert!(
        !whole.is_empty()
            && whole
                .iter()
                .all(|cp| cp["values"].is_object() && cp["next"].is_array()),
        "{whole:#?}"
    );
    let types = message_types(&events);
    assert!(
        types.iter().any(|t| t == "AIMessageChunk") && types.iter().any(|t| t == "tool"),
        "{types:?}"
    );
    s.stop().await;
}

/// The run id of each root `completed` event, in order.
fn completed_runs(evs: &[(String, Value, Option<String>)]) -> Vec<String> {
    evs.iter()
        .filter(|(_, d, _)| root_terminal("", d))
        .map(|(_, d, _)| {
            d["event_id"]
                .as_str()
                .unwrap()
                .split(':')
                .next()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_stream_replays_a_threads_runs_then_follows_the_runs_queued_while_it_reads() {
    let s = server().await;
    let t = new_thread();
    let mut runs = Vec::new();
    for id in 1..=3 {
        let (_, ok) = command(&s, &t, start(id)).await;
        let run_id = ok["result"]["run_id"].as_str().unwrap().to_owned();
        let (st, _) = s.get(&format!("/threads/{t}/runs/{run_id}/join")).await;
        assert_eq!(st, 200);
        runs.push(run_id);
    }
    let stream = thread_events(&s, &t, json!({"channels": ["lifecycle"]})).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let reader = tokio::spawn(read_until(stream, move |_, d| {
        if root_terminal("", d) {
            let _ = tx.send(());
        }
        false
    }));
    // The three runs of the history, one after the other.
    for _ in 0..3 {
        tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .unwrap();
    }
    // A slow run, and one queued behind it while the stream reads the first.
    for (id, assistant, input) in [
        (4, "slow", json!({"sleep_ms": 300})),
        (5, "weather", human("and in Rome?")),
    ] {
        let (_, ok) = command(
            &s,
            &t,
            json!({"id": id, "method": "run.start", "params": {
                "assistant_id": assistant, "input": input, "multitask_strategy": "enqueue"}}),
        )
        .await;
        runs.push(ok["result"]["run_id"].as_str().unwrap().to_owned());
    }
    for _ in 0..2 {
        tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .unwrap();
    }
    reader.abort();
    // Read again from the start: every run once, in order, with rising sequence numbers.
    let again = read_until(thread_events(&s, &t, json!({"channels": ["lifecycle"]})).await, {
        let n = std::sync::atomic::AtomicUsize::new(0);
        move |_, d| root_terminal("", d) && n.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 4
    })
    .await;
    assert_eq!(completed_runs(&again), runs, "{again:#?}");
    let seqs: Vec<u64> = again.iter().map(|(_, d, _)| d["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    s.stop().await;
}

/// Start a `slow` run sleeping `sleep_ms` on thread `t`, open the thread's stream
/// (`lifecycle`) and read it in a task: what `pick` makes of each event goes to the
/// receiver. The run's id, the reading task and the receiver.
async fn follow_a_slow_run<T: Send + 'static>(
    s: &TestServer,
    t: &str,
    sleep_ms: u64,
    pick: impl Fn(&Value) -> Option<T> + Send + Sync + 'static,
) -> (
    String,
    tokio::task::JoinHandle<Vec<(String, Value, Option<String>)>>,
    tokio::sync::mpsc::UnboundedReceiver<T>,
) {
    let slow = json!({"id": 1, "method": "run.start", "params": {
        "assistant_id": "slow", "input": {"sleep_ms": sleep_ms}}});
    let (_, ok) = command(s, t, slow).await;
    let run = ok["result"]["run_id"].as_str().unwrap().to_owned();
    let stream = thread_events(s, t, json!({"channels": ["lifecycle"]})).await;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let reader = tokio::spawn(read_until(stream, move |_, d| {
        if let Some(v) = pick(d) {
            let _ = tx.send(v);
        }
        false
    }));
    (run, reader, rx)
}

/// What a stream's reader sent next, within 20 s.
async fn next<T>(rx: &mut tokio::sync::mpsc::UnboundedReceiver<T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .unwrap()
        .unwrap()
}

/// Start a `slow` run on a new thread, follow it on the thread's stream, and start a
/// `weather` run with `strategy` while the first runs: the root lifecycle events the stream
/// gives (`<graph> <event>`, with the error of a failed one), and the first run's id.
async fn a_newer_run_with(s: &TestServer, strategy: &str) -> (Vec<String>, String) {
    let t = new_thread();
    let (first, reader, mut rx) = follow_a_slow_run(s, &t, 3000, |d| {
        if d["method"] != "lifecycle" || d["params"]["namespace"] != json!([]) {
            return None;
        }
        let data = &d["params"]["data"];
        let (graph, event) = (
            data["graph_name"].as_str().unwrap_or(""),
            data["event"].as_str().unwrap_or(""),
        );
        Some(match data["error"].as_str() {
            Some(err) => format!("{graph} {event}: {err}"),
            None => format!("{graph} {event}"),
        })
    })
    .await;
    let mut seen = vec![next(&mut rx).await];
    let newer = json!({"id": 2, "method": "run.start", "params": {
        "assistant_id": "weather", "input": human("weather in Paris?"), "multitask_strategy": strategy}});
    let (_, ok) = command(s, &t, newer).await;
    assert_eq!(ok["type"], "success", "{ok}");
    // Up to the weather graph's stop at its approval.
    while seen.last().map(String::as_str) != Some("weather interrupted") {
        seen.push(next(&mut rx).await);
    }
    reader.abort();
    (seen, format!("/threads/{t}/runs/{first}"))
}

/// A run rolled back by a newer one ends on the thread's stream without a last event, as
/// on the reference server (langgraph-api 0.16.7): the stream goes on with the run that
/// rolled it back (which took the deleted run's place in the thread's listing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_threads_stream_follows_the_run_that_rolled_back_the_one_it_read() {
    let s = server().await;
    let (seen, first) = a_newer_run_with(&s, "rollback").await;
    assert_eq!(seen, ["slow running", "weather running", "weather interrupted"]);
    // The rolled-back run is gone from the thread.
    assert_eq!(s.get(&first).await.0, 404);
    s.stop().await;
}

/// A run a newer one interrupts (multitask `interrupt`) ends `interrupted` on the thread's
/// stream, as on the reference server, not failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_interrupted_by_a_newer_one_ends_interrupted() {
    let s = server().await;
    let (seen, first) = a_newer_run_with(&s, "interrupt").await;
    assert_eq!(
        seen,
        [
            "slow running",
            "slow interrupted",
            "weather running",
            "weather interrupted"
        ]
    );
    let (st, run) = s.get(&first).await;
    assert_eq!((st, run["status"].as_str()), (200, Some("interrupted")));
    s.stop().await;
}

/// A stream that reached a thread's latest run reads only the runs queued after it, from
/// the newest, a page of the listing at a time (4, 8, 16, ...): with more runs queued at
/// once than the first pages hold, it still follows each of them once, in order, with
/// rising sequence numbers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_follows_more_runs_queued_at_once_than_the_first_pages_of_the_listing() {
    let s = server().await;
    let t = new_thread();
    let (first, reader, mut rx) =
        follow_a_slow_run(&s, &t, 500, |d| root_terminal("", d).then(|| d.clone())).await;
    let mut runs = vec![first];
    // Queued behind the first while the stream reads it: more than the first two pages hold.
    for id in 2..=21 {
        let (_, ok) = command(
            &s,
            &t,
            json!({"id": id, "method": "run.start", "params": {
                "assistant_id": "slow", "input": {"sleep_ms": 0}, "multitask_strategy": "enqueue"}}),
        )
        .await;
        assert_eq!(ok["type"], "success", "{ok}");
        runs.push(ok["result"]["run_id"].as_str().unwrap().to_owned());
    }
    let mut ended = Vec::new();
    for _ in 0..runs.len() {
        let d = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(d["params"]["data"]["event"], "completed", "{d}");
        ended.push(d);
    }
    reader.abort();
    let ids: Vec<String> = ended
        .iter()
        .map(|d| {
            d["event_id"]
                .as_str()
                .unwrap()
                .split(':')
                .next()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(ids, runs);
    let seqs: Vec<u64> = ended.iter().map(|d| d["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_threads_join_stream_follows_its_runs_and_resumes_after_an_id() {
    let s = server().await;
    let t = new_thread();
    let (_, ok) = command(&s, &t, start(1)).await;
    assert_eq!(ok["type"], "success");
    // The first run is interrupted; the join stream takes the next one, the resume.
    let lc = read_until(
        thread_events(&s, &t, json!({"channels": ["lifecycle"]})).await,
        root_terminal,
    )
    .await;
    assert_eq!(lc.last().unwrap().1["params"]["data"]["event"], "interrupted");
    let join = s
        .http
        .get(s.u(&format!("/threads/{t}/stream?stream_mode=values")))
        .send()
        .await
        .unwrap();
    let reader = tokio::spawn(read_until(join, |e, d| {
        e == "metadata" && d["status"] == "run_done"
    }));
    let state = s.get(&format!("/threads/{t}/state")).await.1;
    let id = state["interrupts"][0]["id"].as_str().unwrap().to_owned();
    let (_, ok) = command(
        &s,
        &t,
        json!({"id": 2, "method": "input.respond", "params": {"namespace": [], "interrupt_id": id, "response": {"decisions": [{"type": "approve"}]}}}),
    )
    .await;
    assert_eq!(ok["type"], "success", "{ok}");
    let evs = reader.await.unwrap();
    let names: Vec<&str> = evs.iter().map(|(e, _, _)| e.as_str()).collect();
    assert_eq!(names.first(), Some(&"metadata"), "{names:?}");
    assert!(
        names
            .iter()
            .all(|n| ["metadata", "values"].contains(n) || n.starts_with("values|")),
        "{names:?}"
    );
    let last_values = evs.iter().rev().find(|(e, _, _)| e == "values").unwrap();
    assert_eq!(
        last_values.1["messages"].as_array().unwrap().last().unwrap()["content"],
        "review: approve"
    );
    // Resuming after an event replays the rest of that run, then its end.
    let (_, _, first_id) = evs
        .iter()
        .find(|(e, _, id)| e == "values" && id.is_some())
        .unwrap();
    let again = s
        .http
        .get(s.u(&format!("/threads/{t}/stream?stream_mode=values")))
        .header("last-event-id", first_id.clone().unwrap())
        .send()
        .await
        .unwrap();
    let rest = read_until(again, |e, d| e == "metadata" && d["status"] == "run_done").await;
    let values_before = evs.iter().filter(|(e, _, _)| e.starts_with("values")).count();
    let values_after = rest.iter().filter(|(e, _, _)| e.starts_with("values")).count();
    assert_eq!(values_after, values_before - 1, "{rest:#?}");
    assert_eq!(s.get(&format!("/threads/{}/stream", new_thread())).await.0, 404);
    s.stop().await;
}

/// The join stream goes on with the run that rolled back the one it followed (which took
/// the deleted run's place in the thread's listing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_threads_join_stream_follows_the_run_that_rolled_back_the_one_it_read() {
    let s = server().await;
    let t = new_thread();
    let slow = json!({"id": 1, "method": "run.start", "params": {
        "assistant_id": "slow", "input": {"sleep_ms": 3000}}});
    let (_, ok) = command(&s, &t, slow).await;
    let first = ok["result"]["run_id"].as_str().unwrap().to_owned();
    let join = s
        .http
        .get(s.u(&format!("/threads/{t}/stream")))
        .send()
        .await
        .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let reader = tokio::spawn(read_until(join, move |e, d| {
        if e == "metadata" {
            let run = d["run_id"].as_str().unwrap_or("").to_owned();
            let _ = tx.send(if d["status"] == "run_done" {
                format!("done {run}")
            } else {
                format!("start {run}")
            });
        }
        false
    }));
    assert_eq!(next(&mut rx).await, format!("start {first}"));
    let rollback = json!({"id": 2, "method": "run.start", "params": {
        "assistant_id": "weather", "input": human("weather in Paris?"), "multitask_strategy": "rollback"}});
    let (_, ok) = command(&s, &t, rollback).await;
    assert_eq!(ok["type"], "success", "{ok}");
    let second = ok["result"]["run_id"].as_str().unwrap().to_owned();
    assert_eq!(next(&mut rx).await, format!("done {first}"));
    assert_eq!(next(&mut rx).await, format!("start {second}"));
    assert_eq!(next(&mut rx).await, format!("done {second}"));
    reader.abort();
    s.stop().await;
}

/// A client that read part of a run and reconnects with its last sequence number after a
/// rollback deleted that run gets every event of the run that rolled it back: the new
/// run's sequence numbers go on past the deleted run's, though it takes that run's place
/// in the thread's listing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnect_after_a_rollback_gets_the_whole_run_that_rolled_back_the_one_it_read() {
    let s = server().await;
    let t = new_thread();
    let (first, reader, mut rx) = follow_a_slow_run(&s, &t, 3000, |d| {
        let root = d["method"] == "lifecycle" && d["params"]["namespace"] == json!([]);
        root.then(|| d["seq"].as_u64().unwrap())
    })
    .await;
    // The first run's start read; the client goes away.
    let since = next(&mut rx).await;
    reader.abort();
    let rollback = json!({"id": 2, "method": "run.start", "params": {
        "assistant_id": "weather", "input": human("weather in Paris?"), "multitask_strategy": "rollback"}});
    let (_, ok) = command(&s, &t, rollback).await;
    assert_eq!(ok["type"], "success", "{ok}");
    let second = ok["result"]["run_id"].as_str().unwrap().to_owned();
    // The client comes back once the rolled-back run is gone.
    let gone = Instant::now();
    while s.get(&format!("/threads/{t}/runs/{first}")).await.0 != 404 {
        assert!(
            gone.elapsed() < Duration::from_secs(20),
            "run {first} is still there"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let again = thread_events(&s, &t, json!({"channels": ["lifecycle"], "since": since})).await;
    let events = read_until(again, root_terminal).await;
    let root: Vec<(&str, u64)> = events
        .iter()
        .filter(|(_, d, _)| d["params"]["namespace"] == json!([]))
        .map(|(_, d, _)| {
            (
                d["params"]["data"]["event"].as_str().unwrap(),
                d["seq"].as_u64().unwrap(),
            )
        })
        .collect();
    let names: Vec<&str> = root.iter().map(|(e, _)| *e).collect();
    assert_eq!(names, ["running", "interrupted"], "{events:#?}");
    assert!(root.iter().all(|(_, seq)| *seq > since), "{root:?} after {since}");
    // They are the second run's.
    let (st, run) = s.get(&format!("/threads/{t}/runs/{second}")).await;
    assert_eq!((st, run["status"].as_str()), (200, Some("interrupted")));
    s.stop().await;
}

/// A `since` beyond every run of the thread (a client whose history comes from a copy
/// the thread no longer matches) replays the thread's history, then follows its next run,
/// instead of waiting for a run with that number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_since_beyond_the_threads_runs_replays_its_history_and_follows_the_next_run() {
    let s = server().await;
    let t = new_thread();
    let (_, ok) = command(&s, &t, start(1)).await;
    let first = ok["result"]["run_id"].as_str().unwrap().to_owned();
    assert_eq!(s.get(&format!("/threads/{t}/runs/{first}/join")).await.0, 200);
    // An event of the thread's 50th run: it has one.
    let since = (50u64 << 32) | (3 << 8);
    let stream = thread_events(&s, &t, json!({"channels": ["lifecycle"], "since": since})).await;
    let ends = std::sync::atomic::AtomicUsize::new(0);
    let reader = tokio::spawn(read_until(stream, move |e, d| {
        root_terminal(e, d) && ends.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 1
    }));
    let (_, ok) = command(&s, &t, start(2)).await;
    let second = ok["result"]["run_id"].as_str().unwrap().to_owned();
    let events = reader.await.unwrap();
    assert_eq!(completed_runs(&events), [first, second], "{events:#?}");
    s.stop().await;
}
