//! Any request, however malformed, gets a reply below 500, over a real socket, and the
//! server still answers `/ok` after. A property test: arbitrary JSON bodies (numbers at the
//! extremes, deep nesting past serde_json's recursion limit, huge strings, wrong types for
//! every known field, unknown fields), query strings and headers thrown at every route of
//! `api::router`, with the ids of real threads, assistants, runs and checkpoints as well as
//! garbage ids. Deterministic: a fixed seed, no persistence file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{human, TestServer};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use serde_json::{json, Map, Number, Value};
use std::time::Duration;

/// Every route of `api::router` (method, path); `{t}` thread, `{a}` assistant, `{r}` run,
/// `{c}` checkpoint, `{ns}` subgraph namespace.
const ROUTES: &[(&str, &str)] = &[
    ("POST", "/assistants"),
    ("POST", "/assistants/search"),
    ("POST", "/assistants/count"),
    ("GET", "/assistants/{a}"),
    ("PATCH", "/assistants/{a}"),
    ("DELETE", "/assistants/{a}"),
    ("GET", "/assistants/{a}/graph"),
    ("GET", "/assistants/{a}/schemas"),
    ("GET", "/assistants/{a}/subgraphs"),
    ("GET", "/assistants/{a}/subgraphs/{ns}"),
    ("POST", "/assistants/{a}/versions"),
    ("POST", "/assistants/{a}/latest"),
    ("POST", "/threads"),
    ("POST", "/threads/search"),
    ("POST", "/threads/count"),
    ("POST", "/threads/prune"),
    ("GET", "/threads/{t}"),
    ("PATCH", "/threads/{t}"),
    ("DELETE", "/threads/{t}"),
    ("POST", "/threads/{t}/copy"),
    ("GET", "/threads/{t}/state"),
    ("POST", "/threads/{t}/state"),
    ("POST", "/threads/{t}/state/checkpoint"),
    ("GET", "/threads/{t}/state/{c}"),
    ("GET", "/threads/{t}/history"),
    ("POST", "/threads/{t}/history"),
    ("POST", "/threads/{t}/runs"),
    ("GET", "/threads/{t}/runs"),
    ("POST", "/threads/{t}/runs/stream"),
    ("POST", "/threads/{t}/runs/wait"),
    ("GET", "/threads/{t}/runs/{r}"),
    ("DELETE", "/threads/{t}/runs/{r}"),
    ("GET", "/threads/{t}/runs/{r}/join"),
    ("GET", "/threads/{t}/runs/{r}/stream"),
    ("POST", "/threads/{t}/runs/{r}/cancel"),
    ("POST", "/runs"),
    ("POST", "/runs/stream"),
    ("POST", "/runs/wait"),
    ("POST", "/runs/batch"),
    ("POST", "/runs/cancel"),
    ("GET", "/store/items"),
    ("PUT", "/store/items"),
    ("DELETE", "/store/items"),
    ("POST", "/store/items/search"),
    ("POST", "/store/namespaces"),
    ("GET", "/ok"),
    ("GET", "/info"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
    ("POST", "/threads/{t}/runs/crons"),
    ("POST", "/runs/crons"),
    ("POST", "/runs/crons/search"),
    ("POST", "/runs/crons/count"),
    ("GET", "/runs/crons/{r}"),
    ("PATCH", "/runs/crons/{r}"),
    ("DELETE", "/runs/crons/{r}"),
];

/// Routes that may legitimately hold the request open while a run goes on (a client
/// timeout there is a wait, not a lost reply).
fn may_wait(path: &str) -> bool {
    path.ends_with("/wait") || path.ends_with("/join") || path.ends_with("/cancel")
}

/// Field names of every request body and run config the server reads, and a few it does not.
const FIELDS: &[&str] = &[
    "assistant_id",
    "graph_id",
    "config",
    "context",
    "metadata",
    "if_exists",
    "name",
    "description",
    "limit",
    "offset",
    "sort_by",
    "sort_order",
    "select",
    "version",
    "thread_id",
    "ttl",
    "strategy",
    "supersteps",
    "updates",
    "values",
    "as_node",
    "ids",
    "status",
    "thread_ids",
    "checkpoint",
    "checkpoint_id",
    "checkpoint_ns",
    "before",
    "input",
    "command",
    "resume",
    "update",
    "goto",
    "node",
    "interrupt_before",
    "interrupt_after",
    "stream_mode",
    "stream_subgraphs",
    "stream_resumable",
    "multitask_strategy",
    "if_not_exists",
    "after_seconds",
    "durability",
    "on_disconnect",
    "on_completion",
    "webhook",
    "feedback_keys",
    "schedule",
    "end_time",
    "enabled",
    "timezone",
    "on_run_completed",
    "run_ids",
    "action",
    "namespace",
    "key",
    "value",
    "index",
    "namespace_prefix",
    "filter",
    "query",
    "refresh_ttl",
    "prefix",
    "suffix",
    "max_depth",
    "recursion_limit",
    "configurable",
    "messages",
    "sleep_ms",
    "decision",
    "steps",
    "type",
    "content",
    "$in",
    "$nin",
    "$eq",
    "$ne",
    "$gt",
    "$lte",
    "$bogus",
    "unknown_field",
    "",
];

/// Numbers at the edges of every type a handler converts them to.
fn number() -> BoxedStrategy<Value> {
    let fixed: Vec<Value> = vec![
        json!(1e308),
        json!(-1e308),
        json!(-0.0),
        json!(18_446_744_073_709_551_615_u64),
        json!(18_446_744_073_709_551_616.0_f64),
        json!(9_223_372_036_854_775_807_i64),
        json!(9_223_372_036_854_775_808.0_f64),
        json!(i64::MIN),
        json!(1e-320),
        json!(1e15),
        json!(1e20),
        json!(1e300),
        json!(4_294_967_296_u64),
        json!(0),
        json!(1),
        json!(-1),
        json!(0.5),
        json!(3),
    ];
    prop_oneof![
        4 => proptest::sample::select(fixed),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        1 => any::<f64>().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
    ]
    .boxed()
}

/// Strings that mean something somewhere (ids, enum values, operators, labels), and junk.
fn text() -> BoxedStrategy<String> {
    let fixed: Vec<&str> = vec![
        "",
        "NaN",
        "Infinity",
        "-Infinity",
        "1e400",
        "echo",
        "slow",
        "approval",
        "chatty",
        "@thread",
        "@assistant",
        "@run",
        "@checkpoint",
        "values",
        "updates",
        "messages-tuple",
        "reject",
        "interrupt",
        "rollback",
        "enqueue",
        "create",
        "delete",
        "keep",
        "cancel",
        "do_nothing",
        "asc",
        "desc",
        "created_at",
        "pending",
        "running",
        "success",
        "*",
        ".",
        "a.b",
        "langgraph",
        "owner:x",
        "$in",
        "$bogus",
        "\u{0}",
        "é",
        "💥",
        "\n",
        "00000000-0000-0000-0000-000000000000",
        "1f0a0a0a-0000-6000-8000-000000000000",
    ];
    prop_oneof![
        6 => proptest::sample::select(fixed).prop_map(str::to_owned),
        2 => "[a-z$._*:-]{0,12}",
        1 => any::<String>(),
        1 => (1usize..100_000).prop_map(|n| "x".repeat(n)),
    ]
    .boxed()
}

fn key() -> BoxedStrategy<String> {
    prop_oneof![
        8 => proptest::sample::select(FIELDS).prop_map(str::to_owned),
        1 => text(),
    ]
    .boxed()
}

/// Arbitrary JSON, objects keyed mostly by known field names.
fn value() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        3 => number(),
        3 => text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            1 => proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            2 => proptest::collection::vec((key(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
    .boxed()
}

/// A body that gets past the first checks of the route it is aimed at, with one field
/// (perhaps nested where a handler reads numbers) set to anything.
fn near_valid(method: &str, path: &str) -> BoxedStrategy<Value> {
    let with = |base: Value| {
        (key(), value()).prop_map(move |(k, v)| {
            let mut b = base.clone();
            b[k.as_str()] = v;
            b
        })
    };
    let assistant = proptest::sample::select(vec!["@assistant", "echo", "slow", "chatty", "approval"]);
    let run = (key(), value(), assistant).prop_map(|(k, v, a)| {
        let mut b = json!({"assistant_id": a, "input": human("hi")});
        b[k.as_str()] = v;
        b
    });
    let run_config = (
        proptest::sample::select(vec!["recursion_limit", "configurable", "tags"]),
        value(),
    )
        .prop_map(|(k, v)| json!({"assistant_id": "echo", "input": human("hi"), "config": {k: v}}));
    let after =
        number().prop_map(|n| json!({"assistant_id": "echo", "input": human("hi"), "after_seconds": n}));
    let runs = prop_oneof![run, run_config, after];
    let page = (number(), number(), key(), value()).prop_map(|(l, o, k, v)| {
        let mut b = json!({"limit": l, "offset": o, "max_depth": l});
        b[k.as_str()] = v;
        b
    });
    let put = with(json!({"namespace": ["notes", "fuzz"], "key": "k", "value": {"n": 1}}));
    let ttl = number().prop_map(|n| json!({"namespace": ["notes"], "key": "k", "value": {"n": 1}, "ttl": n}));
    let filter = (
        key(),
        proptest::sample::select(vec![
            "$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$bogus", "x",
        ]),
        value(),
    )
        .prop_map(|(field, op, v)| json!({"namespace_prefix": ["notes"], "filter": {field: {op: v}}}));
    let thread = with(json!({"metadata": {"graph_id": "echo"}, "ttl": 1}));
    let thread_ttl = number().prop_map(|n| json!({"ttl": n}));
    let state = with(json!({"values": {"steps": 1}, "as_node": "reply", "checkpoint_id": "@checkpoint"}));
    let cancel = with(json!({"run_ids": ["@run"], "thread_id": "@thread", "action": "interrupt"}));
    let prune = with(json!({"thread_ids": ["@thread", "nope"], "strategy": "delete"}));
    let latest = number().prop_map(|n| json!({"version": n}));
    let checkpoint =
        with(json!({"checkpoint": {"checkpoint_id": "@checkpoint"}, "before": "@checkpoint", "limit": 3}));
    let search = with(
        json!({"metadata": {"graph_id": "echo"}, "values": {"steps": 1}, "ids": ["@thread"], "status": "idle", "limit": 5}),
    );
    let cron = with(
        json!({"assistant_id": "echo", "schedule": "0 0 1 1 *", "input": {"steps": 1},
                           "end_time": "2099-01-01T00:00:00+00:00", "timezone": "UTC", "enabled": false}),
    );
    let cron_update = with(json!({"schedule": "0 0 1 1 *", "end_time": null, "enabled": false}));
    match (method, path) {
        ("POST", p) if p.ends_with("/runs/crons") => cron.boxed(),
        ("PATCH", "/runs/crons/{r}") => cron_update.boxed(),
        ("POST", "/runs/batch") => proptest::collection::vec(runs, 0..3)
            .prop_map(Value::Array)
            .boxed(),
        ("POST", p) if p.ends_with("/runs") || p.ends_with("/runs/stream") || p.ends_with("/runs/wait") => {
            runs.boxed()
        }
        ("PUT", "/store/items") => prop_oneof![put, ttl].boxed(),
        ("DELETE", "/store/items") => put.boxed(),
        ("POST", "/store/items/search") => prop_oneof![filter, page].boxed(),
        ("POST", "/threads") | ("PATCH", "/threads/{t}") => prop_oneof![thread, thread_ttl].boxed(),
        ("POST", "/threads/{t}/state") => state.boxed(),
        ("POST", "/runs/cancel") => cancel.boxed(),
        ("POST", "/threads/prune") => prune.boxed(),
        ("POST", "/assistants/{a}/latest") => latest.boxed(),
        ("POST", "/threads/{t}/state/checkpoint" | "/threads/{t}/history") => checkpoint.boxed(),
        ("POST", "/threads/search" | "/threads/count" | "/assistants/search" | "/assistants/count") => {
            prop_oneof![search, page].boxed()
        }
        ("POST", "/assistants") | ("PATCH", "/assistants/{a}") => {
            with(json!({"graph_id": "echo", "config": {"recursion_limit": 5}})).boxed()
        }
        _ => page.boxed(),
    }
}

/// A raw body that is not a `serde_json::Value` on the wire: nesting around serde_json's
/// recursion limit (128), numbers it cannot hold, bytes that are not JSON.
fn raw() -> BoxedStrategy<Vec<u8>> {
    let deep = (
        proptest::sample::select(vec![60usize, 100, 120, 124, 125, 126, 127, 128, 129, 200, 10_000]),
        proptest::sample::select(FIELDS),
        any::<bool>(),
    )
        .prop_map(|(depth, field, objects)| {
            let (open, close) = if objects {
                (r#"{"a":"#.repeat(depth), "}".repeat(depth))
            } else {
                ("[".repeat(depth), "]".repeat(depth))
            };
            format!(r#"{{"assistant_id":"echo","{field}":{open}1{close}}}"#).into_bytes()
        });
    let numbers = (
        proptest::sample::select(FIELDS),
        proptest::sample::select(vec![
            "1e400",
            "-1e400",
            "18446744073709551616",
            "-0",
            "1e-400",
            "NaN",
            "Infinity",
            "01",
            "1.",
            "-",
        ]),
    )
        .prop_map(|(field, n)| {
            format!(r#"{{"assistant_id":"echo","namespace":["n"],"key":"k","value":{{}},"{field}":{n}}}"#)
                .into_bytes()
        });
    let junk = proptest::collection::vec(any::<u8>(), 0..64);
    prop_oneof![deep, numbers, junk].boxed()
}

#[derive(Debug, Clone)]
enum Body {
    None,
    Json(Value),
    Raw(Vec<u8>),
}

/// One request.
#[derive(Debug, Clone)]
struct Case {
    /// Which server: 0 SQLite, auth off; 1 SQLite, an owner with a '.'; 2 PostgreSQL, auth off.
    target: usize,
    /// Index in [`ROUTES`].
    route: usize,
    /// The path's ids, in the order `{t}`, `{a}`, `{r}`, `{c}`, `{ns}`: `None` is the real one.
    ids: Vec<Option<String>>,
    query: Vec<(String, String)>,
    raw_query: Option<String>,
    last_event_id: Option<String>,
    body: Body,
}

fn garbage_id() -> BoxedStrategy<String> {
    let fixed = vec![
        "nope",
        "00000000-0000-0000-0000-000000000000",
        "%00",
        "%FF%FE",
        "a.b",
        "..",
        "%2F",
        "echo",
        "inner",
        "inner%7Cdeep",
        "%7C",
        "%F0%9F%92%A5",
        " ",
    ];
    prop_oneof![
        4 => proptest::sample::select(fixed).prop_map(str::to_owned),
        1 => "[a-zA-Z0-9_-]{1,40}",
        1 => (200usize..5000).prop_map(|n| "i".repeat(n)),
    ]
    .boxed()
}

fn query_value() -> BoxedStrategy<String> {
    prop_oneof![
        2 => proptest::sample::select(vec![
            "-1", "0", "1", "10", "1000", "1001", "18446744073709551616", "9223372036854775808",
            "1e308", "NaN", "", "true", "1", "notes", "notes.fuzz", "a..b", ".", "k",
            "interrupt", "rollback", "bogus", "pending", "@checkpoint",
        ])
        .prop_map(str::to_owned),
        1 => text().prop_filter("fits in a URL", |t| t.len() < 2000),
    ]
    .boxed()
}

fn case() -> impl Strategy<Value = Case> {
    let query_key = proptest::sample::select(vec![
        "limit",
        "offset",
        "status",
        "namespace",
        "key",
        "wait",
        "action",
        "recurse",
        "cancel_on_disconnect",
        "before",
        "select",
        "xray",
        "other",
    ]);
    let route_and_body = (0..ROUTES.len()).prop_flat_map(|route| {
        let (method, path) = ROUTES[route];
        let body = prop_oneof![
            1 => Just(Body::None),
            3 => value().prop_map(Body::Json),
            5 => near_valid(method, path).prop_map(Body::Json),
            2 => raw().prop_map(Body::Raw),
        ];
        (Just(route), body)
    });
    (
        0..3usize,
        route_and_body,
        proptest::collection::vec(proptest::option::weighted(0.4, garbage_id()), 5),
        proptest::collection::vec((query_key.prop_map(str::to_owned), query_value()), 0..4),
        proptest::option::weighted(
            0.1,
            proptest::sample::select(vec![
                "limit=%FF",
                "namespace=%00",
                "a=%ZZ",
                "&&==&",
                "limit=1&limit=2",
            ])
            .prop_map(str::to_owned),
        ),
        proptest::option::weighted(
            0.2,
            proptest::sample::select(vec![
                "0",
                "18446744073709551615",
                "18446744073709551616",
                "-1",
                "x",
                "99999999999999999999",
            ])
            .prop_map(str::to_owned),
        ),
    )
        .prop_map(
            |(target, (route, body), ids, query, raw_query, last_event_id)| Case {
                target,
                route,
                ids,
                query,
                raw_query,
                last_event_id,
                body,
            },
        )
}

/// Real resources of one server, (re)created when a case deleted them.
struct Fixture {
    key: Option<&'static str>,
    thread: String,
    assistant: String,
    run: String,
    checkpoint: String,
}

const THREAD: &str = "0190f000-0000-7000-8000-00000000f022";
const ASSISTANT: &str = "0190f000-0000-7000-8000-00000000a551";

/// A client that opens a connection per request, so that a connection the server drops
/// is the one of the request that made it drop.
fn client() -> &'static reqwest::Client {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap()
    })
}

async fn send(s: &TestServer, key: Option<&str>, method: &str, path: &str, body: Value) -> (u16, Value) {
    let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut rb = client().request(m, s.u(path)).json(&body);
    if let Some(k) = key {
        rb = rb.header("x-api-key", k);
    }
    common::split(rb.send().await.unwrap()).await
}

impl Fixture {
    async fn ensure(&mut self, s: &TestServer) {
        let (st, _) = send(
            s,
            self.key,
            "GET",
            &format!("/assistants/{}", self.assistant),
            Value::Null,
        )
        .await;
        if st == 404 {
            let (st, a) = send(
                s,
                self.key,
                "POST",
                "/assistants",
                json!({"graph_id": "echo", "assistant_id": ASSISTANT, "if_exists": "do_nothing"}),
            )
            .await;
            assert_eq!(st, 200, "{a}");
        }
        let (st, _) = send(
            s,
            self.key,
            "GET",
            &format!("/threads/{}/runs/{}", self.thread, self.run),
            Value::Null,
        )
        .await;
        if st == 200 {
            return;
        }
        let (st, t) = send(
            s,
            self.key,
            "POST",
            "/threads",
            json!({"thread_id": THREAD, "if_exists": "do_nothing"}),
        )
        .await;
        assert_eq!(st, 200, "{t}");
        let (st, r) = send(
            s,
            self.key,
            "POST",
            &format!("/threads/{THREAD}/runs/wait"),
            json!({"assistant_id": ASSISTANT, "input": human("hi"), "multitask_strategy": "interrupt"}),
        )
        .await;
        assert_eq!(st, 200, "{r}");
        let (_, runs) = send(
            s,
            self.key,
            "GET",
            &format!("/threads/{THREAD}/runs?limit=1"),
            Value::Null,
        )
        .await;
        self.run = runs[0]["run_id"].as_str().unwrap().to_owned();
        self.thread = THREAD.to_owned();
        let (_, state) = send(
            s,
            self.key,
            "GET",
            &format!("/threads/{THREAD}/state"),
            Value::Null,
        )
        .await;
        if let Some(c) = state.pointer("/checkpoint/checkpoint_id").and_then(Value::as_str) {
            self.checkpoint = c.to_owned();
        }
    }

    fn real(&self, v: &mut Value) {
        match v {
            Value::String(s) => {
                let real = match s.as_str() {
                    "@thread" => &self.thread,
                    "@assistant" => &self.assistant,
                    "@run" => &self.run,
                    "@checkpoint" => &self.checkpoint,
                    _ => return,
                };
                *s = real.clone();
            }
            Value::Array(a) => a.iter_mut().for_each(|x| self.real(x)),
            Value::Object(o) => o.values_mut().for_each(|x| self.real(x)),
            _ => {}
        }
    }
}

async fn check(s: &TestServer, fx: &Fixture, case: Case) -> Result<(), TestCaseError> {
    let (method, template) = ROUTES[case.route];
    let mut path = template.to_owned();
    let real = [
        &fx.thread,
        &fx.assistant,
        &fx.run,
        &fx.checkpoint,
        &"inner".to_owned(),
    ];
    for (i, name) in ["{t}", "{a}", "{r}", "{c}", "{ns}"].iter().enumerate() {
        let id = case.ids[i].clone().unwrap_or_else(|| real[i].clone());
        path = path.replace(name, &id);
    }
    let mut url = s.u(&path);
    if let Some(raw) = &case.raw_query {
        url = format!("{url}?{raw}");
    }
    let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut query = case.query.clone();
    for (_, v) in &mut query {
        let mut x = Value::String(std::mem::take(v));
        fx.real(&mut x);
        *v = x.as_str().unwrap_or_default().to_owned();
    }
    let mut rb = client()
        .request(m, url)
        .query(&query)
        .timeout(Duration::from_secs(3));
    if let Some(k) = fx.key {
        rb = rb.header("x-api-key", k);
    }
    if let Some(id) = &case.last_event_id {
        rb = rb.header("last-event-id", id.as_str());
    }
    rb = match case.body {
        Body::None => rb,
        Body::Json(mut v) => {
            fx.real(&mut v);
            rb.header("content-type", "application/json")
                .body(serde_json::to_vec(&v).unwrap())
        }
        Body::Raw(bytes) => rb.header("content-type", "application/json").body(bytes),
    };
    let res = rb.send().await;
    match res {
        Ok(r) => {
            let status = r.status().as_u16();
            prop_assert!(
                status < 500,
                "{method} {path} -> {status}: {}",
                r.text().await.unwrap_or_default()
            );
        }
        Err(e) if e.is_timeout() && may_wait(&path) => {}
        Err(e) => prop_assert!(false, "{method} {path}: no reply: {e:?}"),
    }
    Ok(())
}

/// The fixed seed; `NO_5XX_SEED=<n>` explores another sequence (for a longer hunt by hand).
fn seed() -> [u8; 32] {
    let n: u8 = std::env::var("NO_5XX_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    [n; 32]
}

#[test]
fn any_request_gets_a_reply_below_500() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (servers, _pg) = rt.block_on(async {
        let tune = |c: &mut graphloom_server::ServerConfig| {
            c.run_timeout = Some(Duration::from_secs(2));
            c.body_limit = 16 * 1024 * 1024;
        };
        let open = TestServer::sqlite(tune).await;
        // An owner whose name holds a '.', as `--api-key KEY` makes the key the owner.
        let authed = TestServer::sqlite(|c| {
            tune(c);
            c.api_keys.insert("key.1".into(), "team.a".into());
        })
        .await;
        let (url, pg) = graphloom_postgres::testing::test_database().await;
        let mut cfg = graphloom_server::ServerConfig::postgres(url);
        tune(&mut cfg);
        let postgres = TestServer::start(cfg).await;
        ([open, authed, postgres], pg)
    });
    let fixtures = [None, Some("key.1"), None].map(|key| {
        std::cell::RefCell::new(Fixture {
            key,
            thread: THREAD.into(),
            assistant: ASSISTANT.into(),
            run: "none".into(),
            checkpoint: "none".into(),
        })
    });
    let config = Config {
        cases: 500,
        failure_persistence: None,
        max_shrink_iters: 200,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed()));
    let result = runner.run(&case(), |case| {
        let server = &servers[case.target];
        let mut fx = fixtures[case.target].borrow_mut();
        rt.block_on(async {
            fx.ensure(server).await;
            check(server, &fx, case).await
        })
    });
    rt.block_on(async {
        for (i, s) in servers.iter().enumerate() {
            assert_eq!(s.get("/ok").await.0, 200, "server {i} after the cases");
        }
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    rt.block_on(async {
        for s in servers {
            s.stop().await;
        }
    });
}
