//! `bench_load`: the load generator of the server benchmark (`bench/server.sh`), the same for
//! graphloom's server and `langgraph dev`.
//!
//! Scenarios (`--scenarios`, comma separated):
//!
//! - `wait`: `--clients` concurrent clients for `--duration` seconds (after `--warmup`
//!   seconds that are not recorded); each iteration creates a thread (`POST /threads`) and
//!   calls `POST /threads/{id}/runs/wait` on assistant `agent`, checking the final state
//!   holds the 4 messages of the run.
//! - `stream`: the same with `POST /threads/{id}/runs/stream` (`stream_mode: ["values"]`),
//!   reading the SSE stream to its end and checking it carried `values` events and no error.
//! - `stream-all`: the same with the stream modes of the run the thread-centric protocol
//!   starts (below): `stream_mode` values, updates, messages-tuple, custom and checkpoints,
//!   subgraphs, and `stream_resumable` (its events stored for replay). The protocol's run
//!   keeps less of them (checkpoint envelopes, the models' chunks: what its channels read);
//!   this one keeps them whole, as any run-centric run does.
//! - `thread`: the same run through the thread-centric protocol that `@langchain/react`'s
//!   `useStream` speaks: `POST /threads/{id}/commands` `run.start` on a new thread id (the
//!   server creates the thread), then `POST /threads/{id}/stream/events` (`values` and
//!   `lifecycle`), read until the root's `completed` event (the stream stays open: the
//!   client closes it), checking it carried `values` events and no failure.
//! - `stream-chat` and `thread-chat`: conversations of five runs on one thread, each run
//!   sent once the one before it completed (the state grows by a turn each run):
//!   `stream-chat` with one `runs/stream` (`values`) per run, `thread-chat` through the
//!   protocol as `useStream` holds a conversation (one `stream/events` opened after the
//!   first `run.start` and read for all five runs, a `run.start` per run). Each run counts
//!   as an iteration; its latency runs from its request to its end.
//! - `idle`: creates `--idle-threads` threads, each with a `runs/wait` on assistant
//!   `interrupter` that stops at its interrupt (`--clients` at once), then reads the server's
//!   peak RSS (`VmHWM` in `/proc/<pid>/status`, summed over `--pid` and its descendants).
//!
//! Requests per second count completed iterations (thread creation + run; for `thread`, its
//! two requests); latencies are of the run request alone (sent to last byte read; for
//! `thread`, both requests). With `--pid`, the server's CPU time
//! (`/proc/<pid>/stat`, process tree) per run is reported too, and the generator's own.

use anyhow::{bail, Context};
use clap::Parser;
use futures::StreamExt;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// mimalloc, as the server's: the generator shares the machine with the server, and
/// glibc's allocator took a tenth of its time.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Command line.
#[derive(Parser, Debug, Clone)]
#[command(about = "load generator for graphloom's server benchmark")]
struct Args {
    /// Server base URL.
    #[arg(long, default_value = "http://127.0.0.1:8123")]
    url: String,
    /// Label of the server in the JSON output.
    #[arg(long, default_value = "server")]
    label: String,
    /// Scenarios: wait, stream, stream-all, thread, stream-chat, thread-chat, idle (comma
    /// separated).
    #[arg(long, default_value = "wait,stream")]
    scenarios: String,
    /// Concurrent clients.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Measured seconds per scenario.
    #[arg(long, default_value_t = 20.0)]
    duration: f64,
    /// Unrecorded warm-up seconds before each timed scenario.
    #[arg(long, default_value_t = 3.0)]
    warmup: f64,
    /// Threads of the `idle` scenario.
    #[arg(long, default_value_t = 10_000)]
    idle_threads: usize,
    /// Server process id (CPU time and RSS of it and its descendants).
    #[arg(long)]
    pid: Option<u32>,
    /// Write the results here as JSON.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

/// Clock ticks per second of `/proc/<pid>/stat` times (`getconf CLK_TCK`; 100 on Linux).
const CLK_TCK: f64 = 100.0;

/// `pid` and all its descendants.
fn process_tree(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) {
                // Fields after the `(comm)`: state, ppid, ...
                if let Some(rest) = stat.rsplit_once(") ").map(|x| x.1) {
                    if let Some(pp) = rest.split(' ').nth(1).and_then(|s| s.parse::<u32>().ok()) {
                        parents.push((p, pp));
                    }
                }
            }
        }
    }
    let mut out = vec![pid];
    let mut i = 0;
    while let Some(&cur) = out.get(i) {
        for &(p, pp) in &parents {
            if pp == cur && !out.contains(&p) {
                out.push(p);
            }
        }
        i += 1;
    }
    out
}

/// CPU seconds (user + system) of a process tree.
fn cpu_seconds(pid: u32) -> f64 {
    process_tree(pid)
        .iter()
        .map(|&p| own_cpu_seconds(&format!("/proc/{p}/stat")))
        .sum()
}

fn own_cpu_seconds(path: &str) -> f64 {
    let Ok(stat) = std::fs::read_to_string(path) else {
        return 0.0;
    };
    let Some(rest) = stat.rsplit_once(") ").map(|x| x.1) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of stat; `rest` starts at field 3.
    let ticks = |i: usize| f.get(i).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / CLK_TCK
}

/// A `kB` field of `/proc/<pid>/status`, summed over the process tree, in MiB.
fn status_mib(pid: u32, field: &str) -> f64 {
    let mut kb = 0.0;
    for p in process_tree(pid) {
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{p}/status")) {
            for line in s.lines() {
                if let Some(v) = line.strip_prefix(field).and_then(|r| r.strip_prefix(':')) {
                    kb += v
                        .trim()
                        .trim_end_matches(" kB")
                        .trim()
                        .parse::<f64>()
                        .unwrap_or(0.0);
                }
            }
        }
    }
    kb / 1024.0
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Wait,
    Stream,
    StreamAll,
    Thread,
    ThreadWs,
    StreamChat,
    ThreadChat,
}

/// Runs of one conversation in the `*-chat` scenarios.
const TURNS: usize = 5;

async fn create_thread(http: &reqwest::Client, url: &str) -> anyhow::Result<String> {
    let r = http
        .post(format!("{url}/threads"))
        .json(&json!({}))
        .send()
        .await?;
    let status = r.status();
    let v: Value = r.json().await?;
    if !status.is_success() {
        bail!("POST /threads: {status} {v}");
    }
    v["thread_id"]
        .as_str()
        .map(str::to_owned)
        .context("POST /threads: no thread_id")
}

fn agent_input() -> Value {
    json!({"messages": [{"type": "human", "content": "Paris"}]})
}

/// One run on a fresh thread; the latency of the run request.
async fn iteration(http: &reqwest::Client, url: &str, kind: Kind) -> anyhow::Result<Duration> {
    // The thread-centric client makes its own thread id: no `POST /threads` first.
    let thread = match kind {
        Kind::Thread => return thread_iteration(http, url).await,
        Kind::ThreadWs => return thread_ws_iteration(url).await,
        Kind::StreamChat | Kind::ThreadChat => bail!("a conversation is not one iteration"),
        Kind::Wait | Kind::Stream | Kind::StreamAll => create_thread(http, url).await?,
    };
    stream_run(http, url, &thread, kind).await
}

/// One run on `thread` (`wait`, `stream`, `stream-all`): its latency.
async fn stream_run(http: &reqwest::Client, url: &str, thread: &str, kind: Kind) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    match kind {
        Kind::Thread | Kind::ThreadWs | Kind::StreamChat | Kind::ThreadChat => {
            bail!("not a run-centric run")
        }
        Kind::Wait => {
            let r = http
                .post(format!("{url}/threads/{thread}/runs/wait"))
                .json(&json!({"assistant_id": "agent", "input": agent_input()}))
                .send()
                .await?;
            let status = r.status();
            let v: Value = r.json().await?;
            let took = t0.elapsed();
            let n = v["messages"].as_array().map_or(0, Vec::len);
            if !status.is_success() || n != 4 {
                bail!("runs/wait: {status}, {n} messages: {v}");
            }
            Ok(took)
        }
        Kind::Stream | Kind::StreamAll => {
            let body = if kind == Kind::Stream {
                json!({"assistant_id": "agent", "input": agent_input(), "stream_mode": ["values"]})
            } else {
                json!({
                    "assistant_id": "agent",
                    "input": agent_input(),
                    "stream_mode": ["values", "updates", "messages-tuple", "custom", "checkpoints"],
                    "stream_subgraphs": true,
                    "stream_resumable": true,
                })
            };
            let r = http
                .post(format!("{url}/threads/{thread}/runs/stream"))
                .json(&body)
                .send()
                .await?;
            let status = r.status();
            let mut body = Vec::new();
            let mut s = r.bytes_stream();
            while let Some(chunk) = s.next().await {
                body.extend_from_slice(&chunk?);
            }
            let took = t0.elapsed();
            let text = String::from_utf8_lossy(&body);
            let values = text.matches("event: values").count();
            if !status.is_success() || values < 3 || text.contains("event: error") {
                bail!("runs/stream: {status}, {values} values events: {text}");
            }
            Ok(took)
        }
    }
}

/// A fresh thread id, made as the thread-centric client makes its own: a UUID v7
/// (`@langchain/langgraph-sdk`'s `threads.stream` and `useStream` call `v7()`), so new
/// threads sort by time as the server's own ids do.
fn new_thread_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// One run through the thread-centric protocol (see the module docs): its latency, from
/// the command to the root's `completed` event.
async fn thread_iteration(http: &reqwest::Client, url: &str) -> anyhow::Result<Duration> {
    let thread = new_thread_id();
    let t0 = Instant::now();
    let r = http
        .post(format!("{url}/threads/{thread}/commands"))
        .json(&json!({"id": 1, "method": "run.start", "params": {"assistant_id": "agent", "input": agent_input()}}))
        .send()
        .await?;
    let v: Value = r.json().await?;
    if v["type"] != "success" {
        bail!("run.start: {v}");
    }
    let r = http
        .post(format!("{url}/threads/{thread}/stream/events"))
        .json(&json!({"channels": ["values", "lifecycle"]}))
        .send()
        .await?;
    let mut frames = ThreadFrames::new(r);
    let values = frames.next_completed().await?;
    if values < 3 {
        bail!("thread stream: {values} values events");
    }
    Ok(t0.elapsed())
}

/// `thread-ws`: the same run through the protocol over a WebSocket, as `useStream` with
/// its WebSocket transport speaks it: one socket on a new thread id, a subscription to
/// `values` and `lifecycle`, `run.start`, then the socket's frames until the root's
/// `completed` event (the socket is closed then). Its latency, from the connection on.
async fn thread_ws_iteration(url: &str) -> anyhow::Result<Duration> {
    use futures::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    let thread = new_thread_id();
    let ws_url = format!("{}/threads/{thread}/stream/events", url.replacen("http", "ws", 1));
    let t0 = Instant::now();
    // A browser's socket allocates no 128 KiB read buffer up front (the library's default).
    let config =
        tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default().read_buffer_size(8 * 1024);
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(ws_url, Some(config), true).await?;
    let subscribe =
        json!({"id": 1, "method": "subscription.subscribe", "params": {"channels": ["values", "lifecycle"]}});
    let start =
        json!({"id": 2, "method": "run.start", "params": {"assistant_id": "agent", "input": agent_input()}});
    ws.send(Message::text(subscribe.to_string())).await?;
    ws.send(Message::text(start.to_string())).await?;
    let mut values = 0;
    loop {
        let text = match ws.next().await {
            Some(Ok(Message::Text(t))) => t,
            Some(Ok(Message::Close(_))) | None => bail!("thread socket closed"),
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(e.into()),
        };
        // `values` frames are counted by their method, not parsed (as `thread` does).
        if text.contains(r#""method":"values""#) {
            values += 1;
            continue;
        }
        let v: Value = serde_json::from_str(&text)?;
        if v["type"] == "error" {
            bail!("thread socket: {v}");
        }
        if v["method"] != "lifecycle" || !v["params"]["namespace"].as_array().is_some_and(Vec::is_empty) {
            continue;
        }
        match v["params"]["data"]["event"].as_str() {
            Some("completed") => break,
            Some("failed" | "interrupted") => bail!("thread socket: {v}"),
            _ => {}
        }
    }
    let took = t0.elapsed();
    let _ = ws.close(None).await;
    if values < 3 {
        bail!("thread socket: {values} values events");
    }
    Ok(took)
}

/// A thread's `stream/events` as the generators read it: frames split on the bytes as
/// they arrive (the generator shares the machine with the server, so it copies and parses
/// as little as `stream` does), `values` frames counted by name, lifecycle frames (small)
/// parsed.
struct ThreadFrames {
    status: reqwest::StatusCode,
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    /// Bytes received and not read yet, from `read` on.
    buf: Vec<u8>,
    read: usize,
}

/// The end of the first frame in `buf` (a blank line, in `\r\n` or `\n`: either server's
/// framing): the frame's length and where the next one begins.
fn frame_end(buf: &[u8]) -> Option<(usize, usize)> {
    let mut from = 0;
    while let Some(i) = buf[from..].iter().position(|&b| b == b'\n') {
        let nl = from + i;
        match &buf[nl + 1..] {
            [b'\n', ..] => return Some((nl, nl + 2)),
            [b'\r', b'\n', ..] => return Some((nl, nl + 3)),
            _ => from = nl + 1,
        }
    }
    None
}

/// The value of the line of `frame` that starts with `field` (`event: `, `data: `).
fn field<'a>(frame: &'a [u8], field: &[u8]) -> Option<&'a [u8]> {
    frame.split(|&b| b == b'\n').find_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        line.strip_prefix(field)
    })
}

impl ThreadFrames {
    fn new(r: reqwest::Response) -> Self {
        Self {
            status: r.status(),
            body: r.bytes_stream().boxed(),
            buf: Vec::new(),
            read: 0,
        }
    }

    /// Read to the next root `completed` event: the `values` frames before it. A root
    /// `failed` or `interrupted`, or the stream's end, is an error.
    async fn next_completed(&mut self) -> anyhow::Result<usize> {
        let mut values = 0;
        loop {
            while let Some((len, next)) = frame_end(&self.buf[self.read..]) {
                let frame = &self.buf[self.read..self.read + len];
                self.read += next;
                let method = field(frame, b"event: ");
                if method == Some(b"values") {
                    values += 1;
                    continue;
                }
                let (Some(b"lifecycle"), Some(data)) = (method, field(frame, b"data: ")) else {
                    continue;
                };
                let ev: Value = serde_json::from_slice(data)?;
                if !ev["params"]["namespace"].as_array().is_some_and(Vec::is_empty) {
                    continue;
                }
                match ev["params"]["data"]["event"].as_str() {
                    Some("completed") => return Ok(values),
                    Some("failed" | "interrupted") => bail!("thread stream: {ev}"),
                    _ => {}
                }
            }
            self.buf.drain(..self.read);
            self.read = 0;
            match self.body.next().await {
                Some(chunk) => self.buf.extend_from_slice(&chunk?),
                None => bail!(
                    "thread stream ({}) ended: {}",
                    self.status,
                    String::from_utf8_lossy(&self.buf)
                ),
            }
        }
    }
}

/// `stream-chat`: a conversation of [`TURNS`] runs on one thread, each a `runs/stream`
/// (`values`): the latency of each.
async fn stream_chat(http: &reqwest::Client, url: &str) -> anyhow::Result<Vec<Duration>> {
    let thread = create_thread(http, url).await?;
    let mut out = Vec::with_capacity(TURNS);
    for _ in 0..TURNS {
        out.push(stream_run(http, url, &thread, Kind::Stream).await?);
    }
    Ok(out)
}

/// `thread-chat`: the same conversation through the thread-centric protocol as
/// `useStream` holds one: `run.start` on a new thread id, one `stream/events` (`values`,
/// `lifecycle`) opened after it and read for the whole conversation, and each next
/// `run.start` sent once the stream showed the previous run `completed`. The latency of
/// each run, from its command to its `completed` event.
async fn thread_chat(http: &reqwest::Client, url: &str) -> anyhow::Result<Vec<Duration>> {
    let thread = new_thread_id();
    let start = |id: usize| {
        let http = http.clone();
        let url = format!("{url}/threads/{thread}/commands");
        async move {
            let body = json!({"id": id, "method": "run.start", "params": {"assistant_id": "agent", "input": agent_input()}});
            let v: Value = http.post(url).json(&body).send().await?.json().await?;
            if v["type"] != "success" {
                bail!("run.start: {v}");
            }
            Ok(())
        }
    };
    let mut t0 = Instant::now();
    start(1).await?;
    let r = http
        .post(format!("{url}/threads/{thread}/stream/events"))
        .json(&json!({"channels": ["values", "lifecycle"]}))
        .send()
        .await?;
    let mut frames = ThreadFrames::new(r);
    let mut out = Vec::with_capacity(TURNS);
    // Runs go one after the other: the k-th root `completed` is run k's.
    loop {
        let values = frames.next_completed().await?;
        if values < 3 {
            bail!("thread chat: {values} values events in run {}", out.len() + 1);
        }
        out.push(t0.elapsed());
        if out.len() == TURNS {
            return Ok(out);
        }
        t0 = Instant::now();
        start(out.len() + 1).await?;
    }
}

fn pct(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted
        .get(i.min(sorted.len() - 1))
        .map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
}

/// `clients` loops of `iteration` until `secs` have passed: latencies, errors, first error.
async fn drive(
    args: &Args,
    http: &reqwest::Client,
    kind: Kind,
    secs: f64,
) -> (Vec<Duration>, usize, Option<String>) {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for _ in 0..args.clients {
        let http = http.clone();
        let url = args.url.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0usize;
            let mut first = None;
            while Instant::now() < deadline {
                let one = match kind {
                    Kind::StreamChat => stream_chat(&http, &url).await,
                    Kind::ThreadChat => thread_chat(&http, &url).await,
                    _ => iteration(&http, &url, kind).await.map(|d| vec![d]),
                };
                match one {
                    Ok(d) => lat.extend(d),
                    Err(e) => {
                        errors += 1;
                        if first.is_none() {
                            first = Some(format!("{e:#}").chars().take(400).collect());
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
            (lat, errors, first)
        }));
    }
    let mut all = Vec::new();
    let mut errors = 0;
    let mut first = None;
    for t in tasks {
        if let Ok((lat, e, f)) = t.await {
            all.extend(lat);
            errors += e;
            first = first.or(f);
        }
    }
    (all, errors, first)
}

async fn timed(args: &Args, http: &reqwest::Client, kind: Kind) -> Value {
    let name = match kind {
        Kind::Wait => "wait",
        Kind::Stream => "stream",
        Kind::StreamAll => "stream-all",
        Kind::Thread => "thread",
        Kind::ThreadWs => "thread-ws",
        Kind::StreamChat => "stream-chat",
        Kind::ThreadChat => "thread-chat",
    };
    if args.warmup > 0.0 {
        let _ = drive(args, http, kind, args.warmup).await;
    }
    let cpu0 = args.pid.map(cpu_seconds);
    let me0 = own_cpu_seconds("/proc/self/stat");
    let t0 = Instant::now();
    let (mut lat, errors, first) = drive(args, http, kind, args.duration).await;
    let wall = t0.elapsed().as_secs_f64();
    let me = own_cpu_seconds("/proc/self/stat") - me0;
    let server_cpu = args.pid.zip(cpu0).map(|(p, c)| cpu_seconds(p) - c);
    lat.sort();
    let n = lat.len();
    let mean = lat.iter().map(Duration::as_secs_f64).sum::<f64>() / n.max(1) as f64 * 1e3;
    let per_run = |s: f64| if n == 0 { f64::NAN } else { s / n as f64 * 1e3 };
    let out = json!({
        "scenario": name,
        "clients": args.clients,
        "seconds": wall,
        "runs": n,
        "errors": errors,
        "first_error": first,
        "rps": n as f64 / wall,
        "p50_ms": pct(&lat, 0.5),
        "p99_ms": pct(&lat, 0.99),
        "mean_ms": mean,
        "max_ms": pct(&lat, 1.0),
        "server_cpu_ms_per_run": server_cpu.map(per_run),
        "client_cpu_ms_per_run": per_run(me),
        "loadavg": loadavg(),
    });
    eprintln!("{} {name}: {out}", args.label);
    out
}

async fn idle(args: &Args, http: &reqwest::Client) -> anyhow::Result<Value> {
    let rss0 = args.pid.map(|p| status_mib(p, "VmRSS"));
    let t0 = Instant::now();
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // Seconds at which each fifth of the threads was done (does the server slow down as
    // threads accumulate?).
    let marks = std::sync::Arc::new(std::sync::Mutex::new(Vec::<f64>::new()));
    let fifth = (args.idle_threads / 5).max(1);
    let mut tasks = Vec::new();
    for _ in 0..args.clients {
        let (http, url, next, total) = (http.clone(), args.url.clone(), next.clone(), args.idle_threads);
        let (done, marks) = (done.clone(), marks.clone());
        tasks.push(tokio::spawn(async move {
            let mut interrupted = 0usize;
            while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < total {
                let thread = create_thread(&http, &url).await?;
                let r = http
                    .post(format!("{url}/threads/{thread}/runs/wait"))
                    .json(&json!({"assistant_id": "interrupter", "input": agent_input()}))
                    .send()
                    .await?;
                let status = r.status();
                let v: Value = r.json().await?;
                if !status.is_success() || v.get("__interrupt__").is_none() {
                    bail!("interrupter runs/wait: {status}: {v}");
                }
                interrupted += 1;
                if (done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1) % fifth == 0 {
                    if let Ok(mut m) = marks.lock() {
                        m.push(t0.elapsed().as_secs_f64());
                    }
                }
            }
            Ok::<usize, anyhow::Error>(interrupted)
        }));
    }
    let mut interrupted = 0;
    for t in tasks {
        interrupted += t.await??;
    }
    let secs = t0.elapsed().as_secs_f64();
    let marks = marks.lock().map(|m| m.clone()).unwrap_or_default();
    let mut prev = 0.0;
    let per_fifth: Vec<f64> = marks
        .iter()
        .map(|&t| {
            let r = fifth as f64 / (t - prev).max(1e-9);
            prev = t;
            r
        })
        .collect();
    // Let background work settle before reading the resident size.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let out = json!({
        "scenario": "idle",
        "threads": interrupted,
        "seconds": secs,
        "rps": interrupted as f64 / secs,
        "rps_per_fifth": per_fifth,
        "rss_before_mib": rss0,
        "rss_after_mib": args.pid.map(|p| status_mib(p, "VmRSS")),
        "peak_rss_mib": args.pid.map(|p| status_mib(p, "VmHWM")),
        "loadavg": loadavg(),
    });
    eprintln!("{} idle: {out}", args.label);
    Ok(out)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(args.clients * 2)
        .timeout(Duration::from_secs(120))
        .build()?;
    let mut results = Vec::new();
    for s in args.scenarios.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        results.push(match s {
            "wait" => timed(&args, &http, Kind::Wait).await,
            "stream" => timed(&args, &http, Kind::Stream).await,
            "stream-all" => timed(&args, &http, Kind::StreamAll).await,
            "thread" => timed(&args, &http, Kind::Thread).await,
            "thread-ws" => timed(&args, &http, Kind::ThreadWs).await,
            "stream-chat" => timed(&args, &http, Kind::StreamChat).await,
            "thread-chat" => timed(&args, &http, Kind::ThreadChat).await,
            "idle" => idle(&args, &http).await?,
            other => bail!(
                "unknown scenario {other:?} (wait, stream, stream-all, thread, thread-ws, stream-chat, thread-chat, idle)"
            ),
        });
    }
    let out = json!({"server": args.label, "url": args.url, "results": results});
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&out)?)?;
    }
    println!("{out}");
    Ok(())
}
