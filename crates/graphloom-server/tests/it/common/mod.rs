//! A server on 127.0.0.1:0 with small test graphs, and HTTP helpers.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod faulty;

use graphloom_core::*;
use graphloom_server::{factory, Server, ServerBuilder, ServerConfig};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

#[derive(State, Clone, Default, Debug)]
pub struct Chat {
    /// Conversation.
    #[reducer(add_messages)]
    pub messages: Seq<Message>,
    /// Nodes run so far.
    #[reducer(add)]
    pub steps: i64,
    /// What a person decided at the approval interrupt.
    pub decision: String,
    /// How long the `sleep` node sleeps.
    pub sleep_ms: u64,
}

fn last_text(s: &Chat) -> String {
    s.messages.iter().last().map(Message::text).unwrap_or_default()
}

/// `echo`: one node answering `echo: <last message>`.
pub fn echo(deps: &graphloom_server::GraphDeps) -> graphloom_core::Result<CompiledGraph<Chat>> {
    StateGraph::<Chat>::new()
        .add_node("reply", |s: Arc<Chat>, _rt| async move {
            Ok(ChatUpdate::new()
                .messages(vec![Message::ai(format!("echo: {}", last_text(&s)))])
                .steps(1))
        })
        .add_edge(START, "reply")
        .add_edge("reply", END)
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .store_dyn(Arc::clone(&deps.store))
        .compile()
}

/// `approval`: asks a person (interrupt), records the decision, then replies.
pub fn approval(deps: &graphloom_server::GraphDeps) -> graphloom_core::Result<CompiledGraph<Chat>> {
    StateGraph::<Chat>::new()
        .add_node("ask", |_s: Arc<Chat>, rt: Runtime| async move {
            let v = rt.interrupt(json!({"question": "approve?"}))?;
            Ok(ChatUpdate::new()
                .decision(v.as_str().unwrap_or("?").to_owned())
                .steps(1))
        })
        .add_node("reply", |s: Arc<Chat>, _rt| async move {
            Ok(ChatUpdate::new()
                .messages(vec![Message::ai(format!("decided: {}", s.decision))])
                .steps(1))
        })
        .add_edge(START, "ask")
        .add_edge("ask", "reply")
        .add_edge("reply", END)
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .compile()
}

/// `slow`: sleeps `sleep_ms`, then counts a step.
pub fn slow(deps: &graphloom_server::GraphDeps) -> graphloom_core::Result<CompiledGraph<Chat>> {
    StateGraph::<Chat>::new()
        .add_node("sleep", |s: Arc<Chat>, _rt| async move {
            tokio::time::sleep(Duration::from_millis(s.sleep_ms)).await;
            Ok(ChatUpdate::new().steps(1))
        })
        .add_edge(START, "sleep")
        .add_edge("sleep", END)
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .compile()
}

/// `chatty`: `talk` streams two message chunks and a custom event, then answers
/// `Hello`; `inner` is a subgraph whose `deep` node writes a custom event and sets `decision`.
pub fn chatty(deps: &graphloom_server::GraphDeps) -> graphloom_core::Result<CompiledGraph<Chat>> {
    let inner = StateGraph::<Chat>::new()
        .add_node("deep", |_s: Arc<Chat>, rt: Runtime| async move {
            rt.write(json!({"from": "deep"}));
            Ok(ChatUpdate::new().decision("deep".to_owned()))
        })
        .add_edge(START, "deep")
        .add_edge("deep", END)
        .compile()?;
    StateGraph::<Chat>::new()
        .add_node("talk", |_s: Arc<Chat>, rt: Runtime| async move {
            rt.write(json!({"progress": 0.5}));
            for tok in ["Hel", "lo"] {
                rt.emit_message(json!({"type": "AIMessageChunk", "id": "m1", "content": tok}));
            }
            Ok(ChatUpdate::new()
                .messages(vec![Message::ai("Hello").with_id("m1")])
                .steps(1))
        })
        .add_subgraph_shared("inner", inner)
        .add_edge(START, "talk")
        .add_edge("talk", "inner")
        .add_edge("inner", END)
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .compile()
}

pub struct TestServer {
    pub url: String,
    pub server: Server,
    pub http: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    _dir: Option<tempfile::TempDir>,
}

impl TestServer {
    /// A server on a fresh SQLite file.
    pub async fn sqlite(tune: impl FnOnce(&mut ServerConfig)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = ServerConfig::sqlite(dir.path().join("graphloom.db"));
        cfg.lease = Duration::from_secs(3);
        tune(&mut cfg);
        let mut s = Self::start(cfg).await;
        s._dir = Some(dir);
        s
    }

    /// A server on a fresh SQLite file with the test graphs and whatever `more` registers.
    pub async fn sqlite_with(
        tune: impl FnOnce(&mut ServerConfig),
        more: impl FnOnce(ServerBuilder) -> ServerBuilder,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = ServerConfig::sqlite(dir.path().join("graphloom.db"));
        cfg.lease = Duration::from_secs(3);
        tune(&mut cfg);
        let mut s = Self::start_with(cfg, more).await;
        s._dir = Some(dir);
        s
    }

    pub async fn start(cfg: ServerConfig) -> Self {
        Self::start_with(cfg, |b| b).await
    }

    /// A server with the test graphs and whatever `more` registers.
    pub async fn start_with(cfg: ServerConfig, more: impl FnOnce(ServerBuilder) -> ServerBuilder) -> Self {
        let builder = Server::builder(cfg)
            .graph("echo", factory(echo))
            .graph("approval", factory(approval))
            .graph("slow", factory(slow))
            .graph("chatty", factory(chatty));
        let server = more(builder).build().await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let s2 = server.clone();
        let task = tokio::spawn(async move {
            s2.serve(listener, async move {
                let _ = rx.await;
            })
            .await
        });
        Self {
            url,
            server,
            http: reqwest::Client::new(),
            stop: Some(tx),
            task: Some(task),
            _dir: None,
        }
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }

    pub fn u(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// POST JSON; returns (status, JSON body or Null).
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self.http.post(self.u(path)).json(&body).send().await.unwrap();
        split(r).await
    }
    pub async fn get(&self, path: &str) -> (u16, Value) {
        split(self.http.get(self.u(path)).send().await.unwrap()).await
    }
    pub async fn patch(&self, path: &str, body: Value) -> (u16, Value) {
        split(self.http.patch(self.u(path)).json(&body).send().await.unwrap()).await
    }
    pub async fn delete(&self, path: &str) -> (u16, Value) {
        split(self.http.delete(self.u(path)).send().await.unwrap()).await
    }

    /// Create a thread; its id.
    pub async fn thread(&self) -> String {
        let (s, t) = self.post("/threads", json!({})).await;
        assert_eq!(s, 200, "{t}");
        t["thread_id"].as_str().unwrap().to_owned()
    }

    /// Poll a run until it is final; its JSON.
    pub async fn wait_run(&self, thread: &str, run: &str) -> Value {
        for _ in 0..500 {
            let (_, r) = self.get(&format!("/threads/{thread}/runs/{run}")).await;
            let st = r["status"].as_str().unwrap_or("");
            if !["pending", "running"].contains(&st) {
                return r;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("run {run} did not finish");
    }
}

pub async fn split(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    let v = if text.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    (status, v)
}

/// Parse an SSE body into (event, data) pairs (and ids).
pub fn parse_sse(body: &str) -> Vec<(String, Value, Option<String>)> {
    let mut out = Vec::new();
    for frame in body.split("\r\n\r\n") {
        let mut event = None;
        let mut data = String::new();
        let mut id = None;
        for line in frame.split("\r\n") {
            if let Some(e) = line.strip_prefix("event: ") {
                event = Some(e.to_owned());
            } else if let Some(d) = line.strip_prefix("data: ") {
                data.push_str(d);
            } else if let Some(i) = line.strip_prefix("id: ") {
                id = Some(i.to_owned());
            }
        }
        if let Some(e) = event {
            out.push((e, serde_json::from_str(&data).unwrap_or(Value::Null), id));
        }
    }
    out
}

pub fn human(text: &str) -> Value {
    json!({"messages": [{"type": "human", "content": text}]})
}

/// Read an SSE response until `until` holds for an event's data (at most 20 s).
pub async fn read_until(
    r: reqwest::Response,
    until: impl Fn(&str, &Value) -> bool,
) -> Vec<(String, Value, Option<String>)> {
    use futures::StreamExt;
    assert_eq!(r.status(), 200);
    let mut bytes = r.bytes_stream();
    let mut buf = String::new();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(chunk) = bytes.next().await {
            buf.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            while let Some(end) = buf.find("\r\n\r\n") {
                let frame: String = buf.drain(..end + 4).collect();
                for (event, data, id) in parse_sse(&frame) {
                    let stop = until(&event, &data);
                    out.push((event, data, id));
                    if stop {
                        return;
                    }
                }
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no end in {out:#?}"));
    out
}

/// `POST /threads/{thread}/stream/events` with `body`.
pub async fn thread_events(s: &TestServer, thread: &str, body: Value) -> reqwest::Response {
    s.http
        .post(s.u(&format!("/threads/{thread}/stream/events")))
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// Whether a protocol event is the root graph's end (completed, interrupted or failed).
pub fn root_terminal(_: &str, v: &Value) -> bool {
    v["method"] == "lifecycle"
        && v["params"]["namespace"] == json!([])
        && ["completed", "interrupted", "failed"]
            .contains(&v["params"]["data"]["event"].as_str().unwrap_or(""))
}
