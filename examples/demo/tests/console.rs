//! The console at `/ui` in a real browser: Playwright (`tests/console/`, pinned in its lock
//! file) drives Debian's Chromium against `graphloom serve` of the five seed graphs, with
//! two owners' keys, and against a second server hosting graphs made for the console's
//! limits (a 1,000-token run, a run that holds until it is cancelled, a thread of 1,000
//! checkpoints, a state too large to render, HTML planted in state and messages; `slow`,
//! whose nodes sleep, stream two messages and call a tool; `ask`, which interrupts with a
//! HITL request or a plain question and keeps the answer). What the
//! browser does and checks is in `tests/console/console.test.mjs`; the measurements it prints
//! go to bench/README.md.
//!
//! `GRAPHLOOM_CONSOLE_SHOTS=<dir>` keeps the screenshots of each page there
//! (`scripts/console-screenshots.sh` regenerates `docs/console/` this way).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::{Message, Runtime, Seq, State, StateGraph, END, START};
use graphloom_server::{factory, Server, ServerConfig};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const ANN: &str = "key-ann";
const BOB: &str = "key-bob";
/// Tokens of the long streamed answer.
const TOKENS: usize = 1000;
/// Checkpoints of the long thread.
const CHECKPOINTS: usize = 1000;
/// Threads of metadata `kind: page` (the list shows 20 a page).
const PAGED: usize = 25;

/// The state of the limits graph.
#[derive(State, Clone, Default, Debug)]
struct Talk {
    #[reducer(add_messages)]
    messages: Seq<Message>,
    note: String,
    blob: Vec<String>,
}

/// `speak`: asked to count, it streams `TOKENS` tokens (one message chunk each) and
/// returns the whole answer with its usage; asked to hold, it waits until the run is
/// cancelled; otherwise it answers in one message.
async fn speak(s: Arc<Talk>, rt: Runtime) -> Result<TalkUpdate, graphloom_core::NodeError> {
    let asked = s.messages.last().map(Message::text).unwrap_or_default();
    if asked.starts_with("hold") {
        std::future::pending::<()>().await;
    }
    let id = format!("answer-{}", s.messages.len());
    let text = if asked.starts_with("count") {
        let mut all = String::new();
        for i in 0..TOKENS {
            let t = format!("t{i} ");
            rt.emit_message(json!({"type": "AIMessageChunk", "id": id, "content": t}));
            all.push_str(&t);
        }
        all
    } else {
        format!("you said: {asked}")
    };
    let answer: Message = serde_json::from_value(json!({
        "type": "ai", "id": id, "content": text,
        "usage_metadata": {"input_tokens": 12, "output_tokens": TOKENS, "total_tokens": TOKENS + 12},
        "response_metadata": {"model_name": "gpt-4o-mini"},
    }))
    .unwrap();
    Ok(TalkUpdate::new().messages(vec![answer]))
}

/// How long each sleeping node of `slow` runs.
const NAP: Duration = Duration::from_millis(200);

fn message(v: Value) -> Message {
    serde_json::from_value(v).unwrap()
}

/// `slow`, first node: sleeps, streams a message and asks for a tool.
async fn plan(_s: Arc<Talk>, rt: Runtime) -> Result<TalkUpdate, graphloom_core::NodeError> {
    tokio::time::sleep(NAP).await;
    for t in ["Let me ", "look that up."] {
        rt.emit_message(json!({"type": "AIMessageChunk", "id": "m-plan", "content": t}));
    }
    Ok(TalkUpdate::new().messages(vec![message(json!({
        "type": "ai", "id": "m-plan", "content": "Let me look that up.",
        "tool_calls": [{"id": "call-1", "name": "lookup", "args": {"q": "permits"}, "type": "tool_call"}],
    }))]))
}

/// `slow`, second node: sleeps and answers the tool call.
async fn lookup(_s: Arc<Talk>, _rt: Runtime) -> Result<TalkUpdate, graphloom_core::NodeError> {
    tokio::time::sleep(NAP).await;
    Ok(TalkUpdate::new().messages(vec![message(json!({
        "type": "tool", "id": "m-tool", "tool_call_id": "call-1", "name": "lookup", "content": "3 permits",
    }))]))
}

/// `slow`, last node: streams a second message at once.
async fn reply(_s: Arc<Talk>, rt: Runtime) -> Result<TalkUpdate, graphloom_core::NodeError> {
    for t in ["There are ", "3 permits."] {
        rt.emit_message(json!({"type": "AIMessageChunk", "id": "m-reply", "content": t}));
    }
    Ok(TalkUpdate::new().messages(vec![message(
        json!({"type": "ai", "id": "m-reply", "content": "There are 3 permits."}),
    )]))
}

/// `ask`: a HITL request for `send_email` allowing every decision (a plain question when
/// `note` is "plain"); the answer is kept, as JSON text, in `blob`.
async fn review(s: Arc<Talk>, rt: Runtime) -> Result<TalkUpdate, graphloom_core::NodeError> {
    let request = if s.note == "plain" {
        json!("Which colour?")
    } else {
        json!({
            "action_requests": [{"name": "send_email", "args": {"to": "ann@example.com"}, "description": "Send the summary?"}],
            "review_configs": [{"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject", "respond"]}],
        })
    };
    let answer = rt.interrupt(request)?;
    Ok(TalkUpdate::new().blob(vec![answer.to_string()]))
}

/// A server (auth off) hosting the limits graphs `talk`, `slow` and `ask`, on 127.0.0.1:0.
async fn limits_server(dir: &Path) -> (String, tokio::sync::oneshot::Sender<()>) {
    let cfg = ServerConfig::sqlite(dir.join("limits.db"));
    let server = Server::builder(cfg)
        .graph(
            "talk",
            factory(|deps| {
                StateGraph::<Talk>::new()
                    .add_node("speak", speak)
                    .add_edge(START, "speak")
                    .add_edge("speak", END)
                    .checkpointer_dyn(Arc::clone(&deps.checkpointer))
                    .compile()
            }),
        )
        .sample_input(
            "talk",
            json!({"messages": [{"type": "human", "content": "count to 1000"}]}),
        )
        .graph(
            "slow",
            factory(|deps| {
                StateGraph::<Talk>::new()
                    .add_node("plan", plan)
                    .add_node("lookup", lookup)
                    .add_node("reply", reply)
                    .add_edge(START, "plan")
                    .add_edge("plan", "lookup")
                    .add_edge("lookup", "reply")
                    .add_edge("reply", END)
                    .checkpointer_dyn(Arc::clone(&deps.checkpointer))
                    .compile()
            }),
        )
        .sample_input(
            "slow",
            json!({"messages": [{"type": "human", "content": "how many permits?"}]}),
        )
        .graph(
            "ask",
            factory(|deps| {
                StateGraph::<Talk>::new()
                    .add_node("review", review)
                    .add_edge(START, "review")
                    .add_edge("review", END)
                    .checkpointer_dyn(Arc::clone(&deps.checkpointer))
                    .compile()
            }),
        )
        .build()
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        server
            .serve(listener, async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    (url, stop)
}

/// `graphloom serve` of the five seed graphs with Ann's and Bob's keys.
async fn serve(dir: &Path) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_graphloom"))
        .current_dir(dir)
        .env_remove("GRAPHLOOM_MODEL")
        .args([
            "serve",
            "--db",
            "g.db",
            "--addr",
            "127.0.0.1:0",
            "--api-key",
            "key-ann=ann",
            "--api-key",
            "key-bob=bob",
        ])
        .kill_on_drop(true)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("graphloom serve starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.strip_prefix("graphloom listening on ") {
                return rest.split_whitespace().next().unwrap().to_owned();
            }
        }
        panic!("graphloom serve ended before listening");
    })
    .await
    .expect("graphloom serve listens in time");
    (child, url)
}

async fn call(
    http: &reqwest::Client,
    url: &str,
    key: Option<&str>,
    method: &str,
    path: &str,
    body: Value,
) -> Value {
    let mut rb = http.request(
        reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
        format!("{url}{path}"),
    );
    if let Some(k) = key {
        rb = rb.header("x-api-key", k);
    }
    if !body.is_null() {
        rb = rb.json(&body);
    }
    let r = rb.send().await.unwrap();
    let status = r.status();
    let v: Value = r.json().await.unwrap_or(Value::Null);
    assert!(status.is_success(), "{method} {path}: {status} {v}");
    v
}

/// The threads the browser checks, made through the API.
async fn prepare(seed: &str, limits: &str) -> Value {
    let http = reqwest::Client::new();
    // Bob's thread: Ann must not see it.
    let bob = call(
        &http,
        seed,
        Some(BOB),
        "POST",
        "/threads",
        json!({"metadata": {"graph_id": "permit_filing", "who": "bob"}}),
    )
    .await;
    // A thread of many checkpoints.
    let long = call(
        &http,
        limits,
        None,
        "POST",
        "/threads",
        json!({"metadata": {"graph_id": "talk", "kind": "long"}}),
    )
    .await;
    let long_id = long["thread_id"].as_str().unwrap().to_owned();
    for i in 0..CHECKPOINTS {
        call(
            &http,
            limits,
            None,
            "POST",
            &format!("/threads/{long_id}/state"),
            json!({"values": {"note": format!("n{i}")}, "as_node": "speak"}),
        )
        .await;
    }
    // HTML in a message and in a state value, never to run.
    let xss = call(
        &http,
        limits,
        None,
        "POST",
        "/threads",
        json!({"metadata": {"graph_id": "talk", "kind": "xss"}}),
    )
    .await;
    let xss_id = xss["thread_id"].as_str().unwrap().to_owned();
    let planted = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">";
    call(
        &http,
        limits,
        None,
        "POST",
        &format!("/threads/{xss_id}/state"),
        json!({
            "values": {"messages": [{"type": "human", "id": "m-xss", "content": planted}], "note": planted},
            "as_node": "speak",
        }),
    )
    .await;
    // A state too large to render whole (about 700 KB).
    let big = call(
        &http,
        limits,
        None,
        "POST",
        "/threads",
        json!({"metadata": {"graph_id": "talk", "kind": "big"}}),
    )
    .await;
    let big_id = big["thread_id"].as_str().unwrap().to_owned();
    let blob: Vec<String> = (0..700).map(|i| format!("{i:04}{}", "x".repeat(1000))).collect();
    call(
        &http,
        limits,
        None,
        "POST",
        &format!("/threads/{big_id}/state"),
        json!({"values": {"blob": blob}, "as_node": "speak"}),
    )
    .await;
    // Threads enough for two pages of the list, found by their metadata.
    for n in 0..PAGED {
        call(
            &http,
            limits,
            None,
            "POST",
            "/threads",
            json!({"metadata": {"graph_id": "talk", "kind": "page", "n": n}}),
        )
        .await;
    }
    // Threads stopped at `ask`'s interrupt, one per way of answering it.
    let mut ask = serde_json::Map::new();
    for (way, note) in [
        ("edit", "hitl"),
        ("reject", "hitl"),
        ("respond", "hitl"),
        ("plain", "plain"),
    ] {
        let t = call(
            &http,
            limits,
            None,
            "POST",
            "/threads",
            json!({"metadata": {"graph_id": "ask", "kind": way}}),
        )
        .await;
        let id = t["thread_id"].as_str().unwrap().to_owned();
        call(
            &http,
            limits,
            None,
            "POST",
            &format!("/threads/{id}/runs/wait"),
            json!({"assistant_id": "ask", "input": {"note": note}}),
        )
        .await;
        ask.insert(way.to_owned(), Value::String(id));
    }
    // A thread with one run, to fork and run again.
    let fork = call(
        &http,
        limits,
        None,
        "POST",
        "/threads",
        json!({"metadata": {"graph_id": "talk", "kind": "fork"}}),
    )
    .await;
    let fork_id = fork["thread_id"].as_str().unwrap().to_owned();
    call(
        &http,
        limits,
        None,
        "POST",
        &format!("/threads/{fork_id}/runs/wait"),
        json!({"assistant_id": "talk", "input": {"messages": [{"type": "human", "content": "hello"}]}}),
    )
    .await;
    json!({
        "bob": bob["thread_id"], "long": long_id, "xss": xss_id, "big": big_id,
        "ask": ask, "fork": fork_id, "paged": PAGED,
    })
}

/// The Node package installed (`npm ci`) outside the clone, keyed by its lock file: made
/// once however many test processes ask for it at the same moment.
async fn node_package() -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/console");
    let lock = std::fs::read(src.join("package-lock.json")).unwrap();
    let hash = lock.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    });
    let dir = graphloom_test_kit::first_use::cache_dir(&format!("console-tests-{hash:016x}"));
    let (d, s) = (dir.clone(), src.clone());
    tokio::task::spawn_blocking(move || {
        graphloom_test_kit::first_use::prepare(&d, &format!("{hash:016x}"), |dir| {
            for f in ["package.json", "package-lock.json"] {
                std::fs::copy(s.join(f), dir.join(f)).unwrap();
            }
            let out = std::process::Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund"])
                .current_dir(dir)
                .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
                .output()
                .expect("npm runs (apt-get install nodejs npm)");
            assert!(
                out.status.success(),
                "npm ci failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        });
    })
    .await
    .unwrap();
    // The script runs from next to its node_modules; put in place by a rename, so that a
    // process running it never reads another's half-copied file.
    let tmp = dir.join(format!("console.test.mjs.{}", std::process::id()));
    std::fs::copy(src.join("console.test.mjs"), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("console.test.mjs")).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_a_real_browser() {
    let chromium = std::env::var("GRAPHLOOM_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "no Chromium at {chromium}: apt-get install chromium (scripts/test.sh does)"
    );
    let dir = tempfile::tempdir().unwrap();
    let (mut child, seed) = serve(dir.path()).await;
    let (limits, stop) = limits_server(dir.path()).await;
    let threads = prepare(&seed, &limits).await;
    let pkg = node_package().await;
    let shots =
        std::env::var_os("GRAPHLOOM_CONSOLE_SHOTS").map_or_else(|| dir.path().join("shots"), PathBuf::from);
    std::fs::create_dir_all(&shots).unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(600),
        Command::new("node")
            .arg("console.test.mjs")
            .current_dir(&pkg)
            .env("GL_URL", &seed)
            .env("GL_LIMITS_URL", &limits)
            .env("GL_KEY", ANN)
            .env("GL_THREADS", threads.to_string())
            .env("GL_TOKENS", TOKENS.to_string())
            .env("GL_CHECKPOINTS", CHECKPOINTS.to_string())
            .env("GL_CHROMIUM", &chromium)
            .env("GL_SHOTS", &shots)
            .env("GL_PROFILE", dir.path().join("chromium-profile"))
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the browser test ends within 10 minutes")
    .expect("node runs (apt-get install nodejs)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        out.status.success(),
        "the browser test failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("console: all checks passed"), "{stdout}");
    let _ = stop.send(());
    let _ = child.kill().await;
}
