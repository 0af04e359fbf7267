//! The console's routes over a real socket: the shell is public and locked down by its
//! Content-Security-Policy, fragments need the key and answer as the key's owner (another
//! owner's thread is a 404 page), a custom `Auth`'s metadata filter hides what it hides on
//! the API, values are escaped, the overview reads the metrics, and bad input is a 4xx
//! page, never a 5xx. The browser test is `examples/demo/tests/console.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{human, TestServer};
use graphloom_server::auth::{Auth, AuthError, AuthRequest, Grant, Identity, Resource};
use serde_json::{json, Value};
use std::time::Duration;

const ANN: &str = "key-ann";
const BOB: &str = "key-bob";

async fn server() -> TestServer {
    TestServer::sqlite(|cfg| {
        cfg.api_keys.insert(ANN.into(), "ann".into());
        cfg.api_keys.insert(BOB.into(), "bob".into());
    })
    .await
}

async fn page(s: &TestServer, key: Option<&str>, path: &str) -> (u16, String, reqwest::header::HeaderMap) {
    let mut rb = s.http.get(s.u(path));
    if let Some(k) = key {
        rb = rb.header("x-api-key", k);
    }
    let r = rb.send().await.unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, r.text().await.unwrap(), headers)
}

async fn post(s: &TestServer, key: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
    let r = s
        .http
        .post(s.u(path))
        .header("x-api-key", key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{path}: {}", r.status());
    r.json().await.unwrap()
}

#[tokio::test]
async fn the_shell_is_public_and_only_runs_its_own_script() {
    let s = server().await;
    for path in [
        "/ui",
        "/ui/",
        "/ui/graphs",
        "/ui/threads/anything",
        "/ui/runs/a/b",
    ] {
        let (status, body, headers) = page(&s, None, path).await;
        assert_eq!(status, 200, "{path}");
        assert!(
            body.contains(r#"<script src="/ui/static/console.js" defer>"#),
            "{body}"
        );
        let csp = headers["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("script-src 'self'") && csp.contains("default-src 'none'"),
            "{csp}"
        );
    }
    let (status, js, headers) = page(&s, None, "/ui/static/console.js").await;
    assert_eq!(status, 200);
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/javascript"));
    assert!(js.contains("sessionStorage") && js.contains("x-api-key"));
    assert!(
        !js.contains("http://") && !js.contains("https://"),
        "no script or call leaves the server"
    );
    let (status, _, _) = page(&s, None, "/ui/static/console.css").await;
    assert_eq!(status, 200);
    s.stop().await;
}

#[tokio::test]
async fn fragments_need_the_key_and_show_only_the_owners_threads() {
    let s = server().await;
    let (status, body, _) = page(&s, None, "/ui/frag/graphs").await;
    assert_eq!(status, 401, "{body}");
    let (status, _, _) = page(&s, Some("wrong"), "/ui/frag/threads").await;
    assert_eq!(status, 401);
    let ann = post(
        &s,
        ANN,
        "/threads",
        json!({"metadata": {"graph_id": "echo", "who": "ann"}}),
    )
    .await;
    let bob = post(
        &s,
        BOB,
        "/threads",
        json!({"metadata": {"graph_id": "echo", "who": "bob"}}),
    )
    .await;
    let (ann_id, bob_id) = (
        ann["thread_id"].as_str().unwrap(),
        bob["thread_id"].as_str().unwrap(),
    );
    let (status, list, _) = page(&s, Some(ANN), "/ui/frag/threads").await;
    assert_eq!(status, 200);
    assert!(list.contains(ann_id) && !list.contains(bob_id), "{list}");
    let (status, body, _) = page(&s, Some(ANN), &format!("/ui/frag/threads/{bob_id}")).await;
    assert_eq!(status, 404);
    assert!(body.contains("404") && !body.contains("bob"), "{body}");
    let (status, _, _) = page(&s, Some(BOB), &format!("/ui/frag/threads/{bob_id}")).await;
    assert_eq!(status, 200);
    // Searching by metadata and status.
    let (_, found, _) = page(&s, Some(ANN), "/ui/frag/threads?q=who%3Dann&status=idle").await;
    assert!(found.contains(ann_id), "{found}");
    let (_, none, _) = page(&s, Some(ANN), "/ui/frag/threads?q=who%3Dnobody").await;
    assert!(!none.contains(ann_id));
    s.stop().await;
}

#[tokio::test]
async fn html_in_state_is_escaped_and_bad_input_is_a_4xx_page() {
    let s = server().await;
    let t = post(&s, ANN, "/threads", json!({})).await;
    let t = t["thread_id"].as_str().unwrap();
    let planted = "<script>alert(1)</script><img src=x onerror=alert(2)>";
    let run = post(
        &s,
        ANN,
        &format!("/threads/{t}/runs/wait"),
        json!({"assistant_id": "echo", "input": human(planted)}),
    )
    .await;
    assert!(run["messages"].is_array(), "{run}");
    let (status, body, _) = page(&s, Some(ANN), &format!("/ui/frag/threads/{t}")).await;
    assert_eq!(status, 200);
    assert!(!body.contains("<script>") && !body.contains("<img"), "{body}");
    assert!(body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(
        body.contains("echo: &lt;script&gt;"),
        "the chat shows the answer as text"
    );
    for (path, want) in [
        (format!("/ui/frag/threads/{t}?at=not-a-checkpoint"), 404),
        ("/ui/frag/threads/not-a-thread".to_owned(), 404),
        ("/ui/frag/threads?status=sleepy".to_owned(), 422),
        ("/ui/frag/threads?q=%7Bbroken".to_owned(), 422),
        ("/ui/frag/graphs/nope/svg".to_owned(), 404),
        ("/ui/frag/runs/x/y".to_owned(), 404),
        ("/ui/frag/nothing/here".to_owned(), 404),
    ] {
        let (status, body, headers) = page(&s, Some(ANN), &path).await;
        assert_eq!(status, want, "{path}: {body}");
        assert!(
            headers["content-type"].to_str().unwrap().starts_with("text/html"),
            "{path}"
        );
    }
    s.stop().await;
}

#[tokio::test]
async fn graphs_overview_and_usage_read_the_server() {
    let s = server().await;
    let (status, graphs, _) = page(&s, Some(ANN), "/ui/frag/graphs").await;
    assert_eq!(status, 200);
    for g in ["echo", "approval", "slow", "chatty"] {
        assert!(graphs.contains(&format!(r#"data-graph="{g}""#)), "{g}");
    }
    assert!(graphs.contains("<svg"));
    let t = post(&s, ANN, "/threads", json!({})).await;
    let t = t["thread_id"].as_str().unwrap();
    post(
        &s,
        ANN,
        &format!("/threads/{t}/runs/wait"),
        json!({"assistant_id": "echo", "input": human("hi")}),
    )
    .await;
    let (status, overview, _) = page(&s, Some(ANN), "/ui/frag/overview").await;
    assert_eq!(status, 200);
    assert!(overview.contains(r#"<tr data-status="success">"#), "{overview}");
    assert!(
        overview.contains("reply"),
        "node latency lists the echo node: {overview}"
    );
    let (status, usage, _) = page(
        &s,
        Some(ANN),
        "/ui/frag/usage?m=gpt-4o-mini%3A1000%3A500&m=unknown-model%3A1%3A2&m=bad",
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        usage.contains("gpt-4o-mini") && usage.contains("unpriced"),
        "{usage}"
    );
    // Only unpriced models: the total is unpriced too, not a negative zero.
    let (_, usage, _) = page(&s, Some(ANN), "/ui/frag/usage?m=unknown-model%3A1%3A2").await;
    assert!(!usage.contains("-0.0"), "{usage}");
    assert_eq!(usage.matches("unpriced").count(), 2, "{usage}");
    s.stop().await;
}

#[tokio::test]
async fn an_interrupt_that_is_not_a_hitl_request_gets_the_json_answer_form() {
    let s = server().await;
    let t = post(&s, ANN, "/threads", json!({"metadata": {"graph_id": "approval"}})).await;
    let t = t["thread_id"].as_str().unwrap();
    post(
        &s,
        ANN,
        &format!("/threads/{t}/runs/wait"),
        json!({"assistant_id": "approval", "input": human("go")}),
    )
    .await;
    let (status, body, _) = page(&s, Some(ANN), &format!("/ui/frag/threads/{t}")).await;
    assert_eq!(status, 200);
    assert!(body.contains(r#"data-kind="json""#), "{body}");
    assert!(!body.contains(r#"data-kind="hitl""#), "{body}");
    assert!(
        body.contains("approve?"),
        "the interrupt's value is shown: {body}"
    );
    assert!(body.contains("badge interrupted"), "{body}");
    s.stop().await;
}

/// Everyone is owner `acme`; `x-team` names the team, and the grant lets threads and runs
/// of that team only be seen, stamping new ones with it (LangGraph's `@auth.on` filter).
struct Teams;

impl Auth for Teams {
    async fn authenticate(&self, req: &axum::http::request::Parts) -> Result<Identity, AuthError> {
        let team = req
            .headers
            .get("x-team")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| AuthError::unauthenticated("x-team is missing"))?;
        Ok(Identity::new("acme").with_extra("team", team))
    }

    async fn authorize(&self, req: &AuthRequest<'_>) -> Result<Grant, AuthError> {
        let team = req.identity.extra["team"].clone();
        Ok(match req.resource {
            Resource::Threads | Resource::Runs => {
                Grant::allow().filter("team", team.clone()).stamp("team", team)
            }
            _ => Grant::allow(),
        })
    }
}

async fn as_team(s: &TestServer, team: &str, method: &str, path: &str, body: Option<Value>) -> (u16, String) {
    let mut rb = s
        .http
        .request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), s.u(path))
        .header("x-team", team);
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    let r = rb.send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test]
async fn a_custom_auth_filter_hides_another_teams_threads_and_runs_in_the_console() {
    let s = TestServer::sqlite_with(|_| {}, |b| b.auth(Teams)).await;
    let mut ids = Vec::new();
    for team in ["red", "blue"] {
        let (st, t) = as_team(
            &s,
            team,
            "POST",
            "/threads",
            Some(json!({"metadata": {"graph_id": "slow"}})),
        )
        .await;
        assert_eq!(st, 200, "{t}");
        let t: Value = serde_json::from_str(&t).unwrap();
        ids.push(t["thread_id"].as_str().unwrap().to_owned());
    }
    let (red, blue) = (&ids[0], &ids[1]);
    // Blue's run holds for a while: it is in flight while the lists are read.
    let (st, run) = as_team(
        &s,
        "blue",
        "POST",
        &format!("/threads/{blue}/runs"),
        Some(json!({"assistant_id": "slow", "input": {"sleep_ms": 3000}})),
    )
    .await;
    assert_eq!(st, 200, "{run}");
    let run: Value = serde_json::from_str(&run).unwrap();
    let run_id = run["run_id"].as_str().unwrap().to_owned();

    // The list: the same owner, but only the team's threads, with or without a search.
    for q in ["", "?q=graph_id%3Dslow", "?status=busy", "?q=team%3Dblue"] {
        let (st, list) = as_team(&s, "red", "GET", &format!("/ui/frag/threads{q}"), None).await;
        assert_eq!(st, 200, "{list}");
        assert!(
            !list.contains(blue.as_str()),
            "{q}: blue's thread is not listed: {list}"
        );
        if !q.contains("blue") && !q.contains("busy") {
            assert!(list.contains(red.as_str()), "{q}: {list}");
        }
    }
    let (_, list) = as_team(&s, "blue", "GET", "/ui/frag/threads", None).await;
    assert!(
        list.contains(blue.as_str()) && !list.contains(red.as_str()),
        "{list}"
    );

    // Its thread, its state download and its run are 404 pages for red, as on the API.
    for path in [
        format!("/ui/frag/threads/{blue}"),
        format!("/ui/frag/runs/{blue}/{run_id}"),
    ] {
        let (st, body) = as_team(&s, "red", "GET", &path, None).await;
        assert_eq!(st, 404, "{path}: {body}");
        let (api, _) = as_team(&s, "red", "GET", &format!("/threads/{blue}"), None).await;
        assert_eq!(api, 404, "the API agrees");
    }
    let (st, body) = as_team(&s, "blue", "GET", &format!("/ui/frag/runs/{blue}/{run_id}"), None).await;
    assert_eq!(st, 200, "{body}");
    let (st, body) = as_team(&s, "red", "GET", &format!("/ui/frag/threads/{red}"), None).await;
    assert_eq!(st, 200, "{body}");

    // The graphs page's runs in flight: blue's run, for blue only.
    let listed = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let (st, live) = as_team(&s, "blue", "GET", "/ui/frag/graphs/live", None).await;
            assert_eq!(st, 200, "{live}");
            let live: Value = serde_json::from_str(&live).unwrap();
            if let Some(r) = live
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["run"] == run_id.as_str())
            {
                return r.clone();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("blue's run is listed as running");
    assert_eq!(listed["graph"], "slow");
    assert_eq!(listed["thread"], blue.as_str());
    assert_eq!(listed["next"], json!(["sleep"]), "the node it runs");
    let (st, live) = as_team(&s, "red", "GET", "/ui/frag/graphs/live", None).await;
    assert_eq!((st, live.as_str()), (200, "[]"), "red sees no run in flight");
    // A checkpoint of blue's thread is there now; red cannot download it.
    let (_, state) = as_team(&s, "blue", "GET", &format!("/threads/{blue}/state"), None).await;
    let state: Value = serde_json::from_str(&state).unwrap();
    let cp = state["checkpoint"]["checkpoint_id"].as_str().unwrap();
    let download = format!("/ui/frag/threads/{blue}/state/{cp}");
    assert_eq!(as_team(&s, "blue", "GET", &download, None).await.0, 200);
    assert_eq!(as_team(&s, "red", "GET", &download, None).await.0, 404);
    s.stop().await;
}
