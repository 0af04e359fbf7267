//! `graphloom serve` with API keys: two owners running the seed graphs on the same
//! conversation each keep what the graphs write to the store, and no run of one reads the
//! other's; a second server on the same database file refuses to start.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const ANN: &str = "key-ann";
const BOB: &str = "key-bob";

fn graphloom(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_graphloom"));
    c.current_dir(dir)
        .env_remove("GRAPHLOOM_MODEL")
        .args(args)
        .kill_on_drop(true);
    c
}

/// `graphloom serve` on `dir/g.db` with Ann's and Bob's keys; the child and its base URL.
async fn serve(dir: &Path) -> (Child, String) {
    let mut child = graphloom(
        dir,
        &[
            "serve",
            "--db",
            "g.db",
            "--addr",
            "127.0.0.1:0",
            "--api-key",
            "key-ann=ann",
            "--api-key",
            "key-bob=bob",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .expect("graphloom serve starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(60), async {
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
    key: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut rb = http
        .request(
            reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
            format!("{url}{path}"),
        )
        .header("x-api-key", key);
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    let r = rb.send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

fn permit_input() -> Value {
    json!({
        "conversation_id": "conv-shared",
        "agent_type": "rule_37",
        "tenant_id": "tenant-permian",
        "messages": [{
            "type": "human",
            "content": "Prepare a Rule 37 spacing exception for Mitchell Ranch 1H (API 42-329-12345) \
                        and register the operator Permian Basin Energy LLC."
        }]
    })
}

fn memory_input(text: &str) -> Value {
    json!({
        "messages": [{"type": "human", "content": text}],
        "user_id": "alice",
        "session_id": "session-1",
    })
}

/// Every store item `key` sees, as one JSON text.
async fn all_items(http: &reqwest::Client, url: &str, key: &str) -> String {
    let (st, found) = call(
        http,
        url,
        key,
        "POST",
        "/store/items/search",
        Some(json!({"limit": 1000})),
    )
    .await;
    assert_eq!(st, 200, "{found}");
    found["items"].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_owners_on_one_conversation_keep_their_own_graph_written_store() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = serve(dir.path()).await;
    let http = reqwest::Client::new();
    let wm = "/store/items?namespace=working_memory.conv-shared&key=pending_mutation";

    // Ann's permit filing pauses at the approval gate of its mutating call.
    let (st, ann) = call(
        &http,
        &url,
        ANN,
        "POST",
        "/threads/ann-permit/runs/wait",
        Some(json!({"assistant_id": "permit_filing", "if_not_exists": "create", "input": permit_input()})),
    )
    .await;
    assert_eq!(st, 200, "{ann}");
    assert_eq!(ann["status"], "awaiting_hitl", "{ann}");
    let approval = ann["hitl_approval_id"].as_str().unwrap().to_owned();
    // What the graph wrote is Ann's, under the names the graph used...
    let approval_item = format!("/store/items?namespace=approvals&key={approval}");
    let (st, record) = call(&http, &url, ANN, "GET", &approval_item, None).await;
    assert_eq!(
        (st, &record["value"]["status"]),
        (200, &json!("pending")),
        "{record}"
    );
    assert_eq!(record["namespace"], json!(["approvals"]));
    let (st, pm) = call(&http, &url, ANN, "GET", wm, None).await;
    assert_eq!(
        (st, &pm["value"]["hitl_approval_id"]),
        (200, &json!(approval)),
        "{pm}"
    );
    // ... and nothing of it is Bob's.
    assert_eq!(call(&http, &url, BOB, "GET", &approval_item, None).await.0, 404);
    assert_eq!(call(&http, &url, BOB, "GET", wm, None).await.0, 404);
    assert_eq!(all_items(&http, &url, BOB).await, "[]");

    // A reviewer approves Ann's call through the store, as an approval service would.
    let mut approved = record["value"].clone();
    approved["status"] = json!("approved");
    approved["reviewer_id"] = json!("ann-reviewer");
    let (st, e) = call(
        &http,
        &url,
        ANN,
        "PUT",
        "/store/items",
        Some(json!({"namespace": ["approvals"], "key": approval, "value": approved})),
    )
    .await;
    assert_eq!(st, 204, "{e}");

    // Bob's filing on the same conversation: its memory holds no frozen call of Ann's, so
    // nothing of Ann's is replayed under Bob's name, and Ann's frozen call stays hers.
    let (st, bob) = call(
        &http,
        &url,
        BOB,
        "POST",
        "/threads/bob-permit/runs/wait",
        Some(json!({"assistant_id": "permit_filing", "if_not_exists": "create", "input": permit_input()})),
    )
    .await;
    assert_eq!(st, 200, "{bob}");
    assert_ne!(bob["hitl_reviewer_id"], "ann-reviewer", "{bob}");
    assert_ne!(bob["hitl_approval_id"], json!(approval), "{bob}");
    let replayed: Vec<&Value> = bob["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["id"].as_str().is_some_and(|id| id.starts_with("replay-")))
        .collect();
    assert!(replayed.is_empty(), "Bob's run replayed a call: {replayed:?}");
    let (st, pm) = call(&http, &url, ANN, "GET", wm, None).await;
    assert_eq!(
        (st, &pm["value"]["hitl_approval_id"]),
        (200, &json!(approval)),
        "{pm}"
    );
    assert!(!all_items(&http, &url, BOB).await.contains(&approval));
    assert_eq!(call(&http, &url, BOB, "GET", &approval_item, None).await.0, 404);

    // The memory supervisor: each owner's memory is its own, under its identity, whatever
    // user id the input names (both inputs say "alice").
    let (st, out) = call(
        &http,
        &url,
        ANN,
        "POST",
        "/runs/wait",
        Some(json!({"assistant_id": "memory_supervisor", "input": memory_input("Remember that my favourite colour is teal.")})),
    )
    .await;
    assert_eq!(st, 200, "{out}");
    assert!(out["stored"].to_string().contains("teal"), "{out}");
    let (st, out) = call(
        &http,
        &url,
        BOB,
        "POST",
        "/runs/wait",
        Some(json!({"assistant_id": "memory_supervisor", "input": memory_input("Remember that my favourite colour is crimson.")})),
    )
    .await;
    assert_eq!(st, 200, "{out}");
    assert!(out["stored"].to_string().contains("crimson"), "{out}");
    assert!(
        !out.to_string().contains("teal"),
        "Bob's run read Ann's memory: {out}"
    );
    let ann_items = all_items(&http, &url, ANN).await;
    let bob_items = all_items(&http, &url, BOB).await;
    assert!(
        ann_items.contains("teal") && !ann_items.contains("crimson"),
        "{ann_items}"
    );
    assert!(
        bob_items.contains("crimson") && !bob_items.contains("teal"),
        "{bob_items}"
    );
    let (_, ns) = call(
        &http,
        &url,
        BOB,
        "POST",
        "/store/namespaces",
        Some(json!({"prefix": ["memory"], "max_depth": 2})),
    )
    .await;
    assert_eq!(ns["namespaces"], json!([["memory", "bob"]]), "{ns}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_server_on_the_same_database_fails_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let (_first, url) = serve(dir.path()).await;
    let second = tokio::time::timeout(
        Duration::from_secs(60),
        graphloom(dir.path(), &["serve", "--db", "g.db", "--addr", "127.0.0.1:0"]).output(),
    )
    .await
    .expect("the second server exits instead of serving")
    .unwrap();
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains("g.db is in use by another graphloom server"),
        "{err}"
    );
    // The first one still serves.
    let http = reqwest::Client::new();
    assert_eq!(call(&http, &url, ANN, "GET", "/info", None).await.0, 200);
}

/// SIGTERM, what a container runtime or a process manager stops a server with, shuts it
/// down gracefully (draining its runs) as Ctrl-C does: it exits 0 and frees the database
/// file for the next server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_shuts_the_server_down_gracefully() {
    let dir = tempfile::tempdir().unwrap();
    let (mut first, _) = serve(dir.path()).await;
    let pid = first.id().unwrap().to_string();
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = tokio::time::timeout(Duration::from_secs(30), first.wait())
        .await
        .expect("graphloom serve exits after SIGTERM")
        .unwrap();
    assert!(status.success(), "{status:?}");
    let (_second, url) = serve(dir.path()).await;
    let http = reqwest::Client::new();
    assert_eq!(call(&http, &url, ANN, "GET", "/info", None).await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_flags_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    for (args, says) in [
        (&["--heartbeat-secs", "40"][..], "shorter than the lease"),
        (
            &["--lease-secs", "0"][..],
            "--lease-secs must be a number of seconds above zero",
        ),
        (
            &["--lease-secs", "5", "--heartbeat-secs=-1"][..],
            "--heartbeat-secs must be",
        ),
        (
            &["--shutdown-grace-secs", "0"][..],
            "--shutdown-grace-secs must be a number above zero",
        ),
    ] {
        let mut all = vec!["serve", "--db", "g.db", "--addr", "127.0.0.1:0"];
        all.extend_from_slice(args);
        let out = tokio::time::timeout(Duration::from_secs(60), graphloom(dir.path(), &all).output())
            .await
            .expect("graphloom serve exits")
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{args:?}: {err}");
    }
}
