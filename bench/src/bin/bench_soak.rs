//! `bench_soak`: the server's memory under sustained load. Starts `graphloom serve` (a
//! fresh SQLite file per kind of run), drives N runs of one kind on the `chat_runtime`
//! graph, and samples the server's resident size (`VmRSS` in `/proc/<pid>/status`) every
//! K runs. The model is a local OpenAI Chat Completions wire server in this process
//! (`GRAPHLOOM_MODEL=openai-compatible:soak`, streamed answers), or with `--model scripted`
//! the graph's offline scripted model.
//!
//! Kinds (`--kinds`, comma separated):
//!
//! - `wait`: `POST /threads`, then `POST /threads/{id}/runs/wait`.
//! - `stream`: `POST /threads`, then `POST /threads/{id}/runs/stream` read to its end.
//! - `join`: `POST /threads`, `POST /threads/{id}/runs` (background), then
//!   `GET /threads/{id}/runs/{run_id}/join`.
//! - `stateless`: `POST /runs/wait` (a temporary thread, deleted after the run).
//! - `thread`: every run on ONE thread, one after the other (`runs/wait`): its state
//!   grows by four messages a run, so the database's live data grows too.
//!
//! Output: a CSV (`kind,model,phase,runs,rss_mib,db_mib,seconds`), one row per sample:
//! phase `load` every K runs (the row at `runs` = 0 is the server before the first run),
//! then phase `idle` after `--settle` seconds without requests. `bench_soak_plot` draws it. See bench/README.md.

use anyhow::{bail, Context};
use clap::Parser;
use futures::StreamExt;
use graphloom_llm::testing::OpenAiWireServer;
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Command line.
#[derive(Parser, Debug, Clone)]
#[command(about = "RSS of `graphloom serve` against runs, per kind of run")]
struct Args {
    /// The `graphloom` binary (default: `$CARGO_TARGET_DIR/release/graphloom`).
    #[arg(long)]
    bin: Option<PathBuf>,
    /// Kinds of run: wait, stream, join, stateless, thread (comma separated).
    #[arg(long, default_value = "wait,stream,join,stateless,thread")]
    kinds: String,
    /// Runs per kind (the `thread` kind: `--thread-runs`).
    #[arg(long, default_value_t = 100_000)]
    runs: usize,
    /// Runs of the `thread` kind (one after the other on one thread).
    #[arg(long, default_value_t = 5_000)]
    thread_runs: usize,
    /// Sample RSS every this many runs.
    #[arg(long, default_value_t = 2_000)]
    every: usize,
    /// Sample RSS every this many runs of the `thread` kind.
    #[arg(long, default_value_t = 100)]
    thread_every: usize,
    /// Concurrent clients (the `thread` kind uses one).
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// `wire` (a local OpenAI wire server) or `scripted` (the graph's offline model).
    #[arg(long, default_value = "wire")]
    model: String,
    /// Seconds of idleness before the last sample.
    #[arg(long, default_value_t = 15.0)]
    settle: f64,
    /// Where the server's SQLite files go (default: a temp dir).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Output CSV.
    #[arg(long, default_value = "bench/out/soak.csv")]
    csv: PathBuf,
    /// Drive a server started elsewhere (e.g. under a heap profiler) instead of starting
    /// one; give its process id with `--pid` for RSS samples, and one kind only.
    #[arg(long)]
    url: Option<String>,
    /// Process id of the `--url` server.
    #[arg(long)]
    pid: Option<u32>,
    /// Address of the local OpenAI wire server (a fixed one lets a `--url` server use it as
    /// `OPENAI_BASE_URL=http://<addr>/v1`).
    #[arg(long, default_value = "127.0.0.1:0")]
    wire_addr: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Wait,
    Stream,
    Join,
    Stateless,
    Thread,
}

impl Kind {
    fn parse(s: &str) -> anyhow::Result<Self> {
        Ok(match s {
            "wait" => Kind::Wait,
            "stream" => Kind::Stream,
            "join" => Kind::Join,
            "stateless" => Kind::Stateless,
            "thread" => Kind::Thread,
            other => bail!("unknown kind {other:?} (wait, stream, join, stateless, thread)"),
        })
    }
    fn name(self) -> &'static str {
        match self {
            Kind::Wait => "wait",
            Kind::Stream => "stream",
            Kind::Join => "join",
            Kind::Stateless => "stateless",
            Kind::Thread => "thread",
        }
    }
}

/// `VmRSS` of `pid` in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Bytes of the SQLite file and its WAL, in MiB.
fn db_mib(db: &Path) -> f64 {
    let size = |p: PathBuf| std::fs::metadata(p).map_or(0, |m| m.len());
    let wal = PathBuf::from(format!("{}-wal", db.display()));
    (size(db.to_path_buf()) + size(wal)) as f64 / (1024.0 * 1024.0)
}

struct ServerProc {
    child: Option<Child>,
    pid: Option<u32>,
    url: String,
}

impl ServerProc {
    fn rss(&self) -> f64 {
        self.pid.map_or(f64::NAN, rss_mib)
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Start `graphloom serve` on a free port and wait for its "listening" line.
fn start_server(bin: &Path, db: &Path, wire: Option<&str>) -> anyhow::Result<ServerProc> {
    let mut cmd = Command::new(bin);
    cmd.args(["serve", "--addr", "127.0.0.1:0", "--db"])
        .arg(db)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    match wire {
        Some(base) => {
            cmd.env("GRAPHLOOM_MODEL", "openai-compatible:soak")
                .env("OPENAI_BASE_URL", base)
                .env("OPENAI_API_KEY", "soak-key");
        }
        None => {
            cmd.env_remove("GRAPHLOOM_MODEL");
        }
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {}", bin.display()))?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut lines = std::io::BufReader::new(stdout).lines();
    let line = lines.next().context("the server printed nothing")??;
    // "graphloom listening on http://127.0.0.1:PORT (SQLite ...); graphs: ..."
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .context("no URL in the server's first line")?
        .to_owned();
    // Keep reading (and dropping) its output so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Ok(ServerProc {
        pid: Some(child.id()),
        child: Some(child),
        url,
    })
}

fn input(i: usize) -> Value {
    json!({"messages": [{"type": "human", "content": format!("How do I reset my password? ({i})")}]})
}

async fn post(http: &reqwest::Client, url: String, body: Value) -> anyhow::Result<Value> {
    let r = http.post(&url).json(&body).send().await?;
    let status = r.status();
    let v: Value = r.json().await?;
    if !status.is_success() {
        bail!("POST {url}: {status} {v}");
    }
    Ok(v)
}

async fn new_thread(http: &reqwest::Client, url: &str) -> anyhow::Result<String> {
    let v = post(http, format!("{url}/threads"), json!({})).await?;
    v["thread_id"]
        .as_str()
        .map(str::to_owned)
        .context("POST /threads: no thread_id")
}

/// The final values of a run must end with the model's answer.
fn check_values(what: &str, v: &Value) -> anyhow::Result<()> {
    let last = v["messages"].as_array().and_then(|m| m.last());
    match last {
        Some(m) if m["type"] == "ai" && m["tool_calls"].as_array().is_none_or(Vec::is_empty) => Ok(()),
        _ => bail!("{what}: the run did not end with an answer: {v}"),
    }
}

/// One run of `kind` (on `thread` for the `thread` kind).
async fn one_run(
    http: &reqwest::Client,
    url: &str,
    kind: Kind,
    thread: Option<&str>,
    i: usize,
) -> anyhow::Result<()> {
    let body = json!({"assistant_id": "chat_runtime", "input": input(i)});
    match kind {
        Kind::Wait => {
            let t = new_thread(http, url).await?;
            let v = post(http, format!("{url}/threads/{t}/runs/wait"), body).await?;
            check_values("runs/wait", &v)
        }
        Kind::Thread => {
            let t = thread.context("no thread")?;
            let v = post(http, format!("{url}/threads/{t}/runs/wait"), body).await?;
            check_values("runs/wait on one thread", &v)
        }
        Kind::Stateless => {
            let v = post(http, format!("{url}/runs/wait"), body).await?;
            check_values("/runs/wait", &v)
        }
        Kind::Join => {
            let t = new_thread(http, url).await?;
            let run = post(http, format!("{url}/threads/{t}/runs"), body).await?;
            let run_id = run["run_id"].as_str().context("no run_id")?;
            let r = http
                .get(format!("{url}/threads/{t}/runs/{run_id}/join"))
                .send()
                .await?;
            let status = r.status();
            let v: Value = r.json().await?;
            if !status.is_success() {
                bail!("join: {status} {v}");
            }
            check_values("join", &v)
        }
        Kind::Stream => {
            let t = new_thread(http, url).await?;
            let mut body = body;
            body["stream_mode"] = json!(["values", "updates"]);
            let r = http
                .post(format!("{url}/threads/{t}/runs/stream"))
                .json(&body)
                .send()
                .await?;
            let status = r.status();
            let mut text = Vec::new();
            let mut s = r.bytes_stream();
            while let Some(chunk) = s.next().await {
                text.extend_from_slice(&chunk?);
            }
            let text = String::from_utf8_lossy(&text);
            if !status.is_success() || text.contains("event: error") || !text.contains("event: values") {
                bail!("runs/stream: {status}: {text}");
            }
            Ok(())
        }
    }
}

struct Sample {
    phase: &'static str,
    runs: usize,
    rss: f64,
    db: f64,
    secs: f64,
}

/// Drive `total` runs of `kind` with `clients` clients, sampling every `every` runs.
async fn drive(
    http: &reqwest::Client,
    server: &ServerProc,
    db: &Path,
    kind: Kind,
    total: usize,
    clients: usize,
    every: usize,
) -> anyhow::Result<Vec<Sample>> {
    let pid = server.pid;
    let t0 = Instant::now();
    let samples = Arc::new(Mutex::new(vec![Sample {
        phase: "load",
        runs: 0,
        rss: server.rss(),
        db: db_mib(db),
        secs: 0.0,
    }]));
    let thread = match kind {
        Kind::Thread => Some(new_thread(http, &server.url).await?),
        _ => None,
    };
    let clients = if kind == Kind::Thread { 1 } else { clients };
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (http, url, thread) = (http.clone(), server.url.clone(), thread.clone());
        let (next, done, samples, db) = (next.clone(), done.clone(), samples.clone(), db.to_path_buf());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    return Ok::<(), anyhow::Error>(());
                }
                one_run(&http, &url, kind, thread.as_deref(), i).await?;
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if n % every == 0 || n == total {
                    let s = Sample {
                        phase: "load",
                        runs: n,
                        rss: pid.map_or(f64::NAN, rss_mib),
                        db: db_mib(&db),
                        secs: t0.elapsed().as_secs_f64(),
                    };
                    eprintln!(
                        "{:>9} {:>8} runs  RSS {:>7.1} MiB  db {:>7.1} MiB  {:>6.1} s",
                        kind.name(),
                        s.runs,
                        s.rss,
                        s.db,
                        s.secs
                    );
                    if let Ok(mut v) = samples.lock() {
                        v.push(s);
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    let mut out = match Arc::try_unwrap(samples) {
        Ok(m) => m.into_inner().unwrap_or_default(),
        Err(_) => bail!("samples still shared"),
    };
    out.sort_by_key(|s| s.runs);
    Ok(out)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let bin = match &args.bin {
        Some(b) => b.clone(),
        None => PathBuf::from(std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".to_owned()))
            .join("release/graphloom"),
    };
    let kinds = args
        .kinds
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(Kind::parse)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let wire = match args.model.as_str() {
        "wire" => Some(OpenAiWireServer::bind(&args.wire_addr, OpenAiWireServer::react()).await?),
        "scripted" => None,
        other => bail!("unknown model {other:?} (wire, scripted)"),
    };
    let tmp = tempfile::tempdir()?;
    let dir = args.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir)?;
    if let Some(parent) = args.csv.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let mut csv =
        std::fs::File::create(&args.csv).with_context(|| format!("cannot write {}", args.csv.display()))?;
    writeln!(csv, "kind,model,phase,runs,rss_mib,db_mib,seconds")?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(args.clients * 2)
        .timeout(Duration::from_secs(120))
        .build()?;
    for kind in kinds {
        let db = dir.join(format!("soak-{}.db", kind.name()));
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
        }
        let server = match &args.url {
            Some(url) => ServerProc {
                child: None,
                pid: args.pid,
                url: url.trim_end_matches('/').to_owned(),
            },
            None => start_server(&bin, &db, wire.as_ref().map(OpenAiWireServer::base_url))?,
        };
        let (total, every) = match kind {
            Kind::Thread => (args.thread_runs, args.thread_every),
            _ => (args.runs, args.every),
        };
        let mut samples = drive(&http, &server, &db, kind, total, args.clients, every.max(1)).await?;
        tokio::time::sleep(Duration::from_secs_f64(args.settle)).await;
        let secs = samples.last().map_or(0.0, |s| s.secs) + args.settle;
        samples.push(Sample {
            phase: "idle",
            runs: total,
            rss: server.rss(),
            db: db_mib(&db),
            secs,
        });
        eprintln!(
            "{:>9} after {:.0} s idle: RSS {:.1} MiB",
            kind.name(),
            args.settle,
            server.rss()
        );
        for s in &samples {
            writeln!(
                csv,
                "{},{},{},{},{:.1},{:.1},{:.2}",
                kind.name(),
                args.model,
                s.phase,
                s.runs,
                s.rss,
                s.db,
                s.secs
            )?;
        }
        csv.flush()?;
        drop(server);
    }
    if let Some(w) = &wire {
        eprintln!("the wire server answered {} chat completions", w.served());
    }
    Ok(())
}
