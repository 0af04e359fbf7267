//! The `graphloom` command as a library: serve graphs over the LangGraph Server API, run a
//! graph with a live view, inspect threads checkpoint by checkpoint, draw graphs.
//!
//! The command knows no graphs of its own: a binary hands it the graphs it hosts, as
//! [`Graphs`], and calls [`main`]. The seed examples' binary (`examples/demo`, the
//! `graphloom` of the README) is one such binary; a team's own is another:
//!
//! ```no_run
//! use graphloom_cli::{Entry, Graphs};
//! use graphloom_core::*;
//! use std::sync::Arc;
//!
//! #[derive(State, Clone, Default, Debug)]
//! struct Chat {
//!     #[reducer(add_messages)]
//!     messages: Seq<Message>,
//! }
//!
//! /// One node that answers; compiled against the server's checkpointer.
//! fn my_factory() -> graphloom_server::GraphFactory {
//!     graphloom_server::factory(|deps| {
//!         StateGraph::<Chat>::new()
//!             .add_node("reply", |_s, _rt| async {
//!                 Ok(ChatUpdate::new().messages(vec![Message::ai("hello")]))
//!             })
//!             .add_edge(START, "reply")
//!             .add_edge("reply", END)
//!             .checkpointer_dyn(Arc::clone(&deps.checkpointer))
//!             .compile()
//!     })
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     graphloom_cli::main(Graphs::new(vec![Entry {
//!         id: "my_agent",
//!         about: "what it does",
//!         factory: my_factory(),
//!         sample: || serde_json::json!({"messages": [{"role": "user", "content": "hi"}]}),
//!     }]))
//! }
//! ```

mod graphs;
mod jwt;
mod ops;
mod raster;
mod render;
mod scaffold;
mod threads;

pub use graphs::{Entry, Graphs, ServerHook};
pub use scaffold::{new_crate, NewCrate};

use anyhow::{bail, Context as _};
use clap::{Parser, Subcommand, ValueEnum};
use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::store::DynStore;
use graphloom_llm::ModelChoice;
use graphloom_server::telemetry::{self, TelemetryConfig};
use graphloom_server::{GraphDeps, Server, ServerConfig};
use serde_json::Value;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Parser)]
#[command(
    name = "graphloom",
    version,
    about = "Durable agent graphs: serve, run, inspect, draw"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(clap::Args, Clone)]
struct DbArgs {
    /// SQLite file (the default persistence).
    #[arg(long, default_value = "graphloom.db")]
    db: PathBuf,
    /// PostgreSQL URL instead of SQLite.
    #[arg(long)]
    database_url: Option<String>,
}

#[derive(Subcommand)]
// Parsed once per process: the size of `Serve`'s options does not matter.
#[allow(clippy::large_enum_variant)]
enum Cmd {
    /// Serve the example graphs over the LangGraph Server HTTP API. SIGTERM or Ctrl-C
    /// drains it: running runs stop at a step boundary and go back to the queue.
    Serve {
        /// A `langgraph.json` naming Python graphs to serve beside this binary's (the
        /// Python package's `graphloom serve` reads it; default there: ./langgraph.json).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        #[command(flatten)]
        db: DbArgs,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:2024")]
        addr: String,
        /// Runs executed at once (0: serve the API only; other replicas execute the runs).
        #[arg(long, default_value_t = 8)]
        workers: usize,
        /// API key, as KEY or KEY=OWNER (repeat for several owners). Without any, auth is off.
        #[arg(long = "api-key")]
        api_keys: Vec<String>,
        /// Answer /info, /metrics and /openapi.json without a key even when keys are set
        /// (/ok never needs one).
        #[arg(long)]
        public_system_routes: bool,
        /// Lease of a claimed run, in seconds: a run whose worker stops renewing it for this
        /// long is taken over by another. Matters with --database-url (replicas sharing the
        /// queue): shorter means a faster takeover after a crash, more heartbeat writes, and
        /// a stalled but live worker losing its run sooner. On SQLite a restarted server
        /// takes over its predecessor's runs at once.
        #[arg(long, value_name = "SECS", default_value_t = 30.0)]
        lease_secs: f64,
        /// How often a worker renews its lease, in seconds (default: a third of the lease;
        /// must be shorter than the lease).
        #[arg(long, value_name = "SECS")]
        heartbeat_secs: Option<f64>,
        /// Allowed CORS origin (repeatable; `*` for any, `http://host:*` for any port,
        /// `none` for no CORS headers). Default: the hosted LangGraph Studio
        /// (https://smith.langchain.com) and localhost on any port.
        #[arg(long = "cors")]
        cors: Vec<String>,
        /// Export OpenTelemetry traces over OTLP/HTTP to this collector base URL (traces go
        /// to `<URL>/v1/traces`); wins over OTEL_EXPORTER_OTLP_ENDPOINT and
        /// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT.
        #[arg(long, value_name = "URL")]
        otlp_endpoint: Option<String>,
        #[command(flatten)]
        ops: ops::OpsArgs,
        #[command(flatten)]
        jwt: jwt::JwtArgs,
    },
    /// Run a graph here and show what happens, node by node.
    Run {
        /// Graph id (see `graphloom graphs`).
        graph: String,
        /// Input as JSON, or @file with JSON; default: the graph's sample input.
        #[arg(long)]
        input: Option<String>,
        /// Thread id (default: a new one). Reuse it to continue a conversation.
        #[arg(long)]
        thread: Option<String>,
        /// Resume value for an interrupt, as JSON (non-interactive).
        #[arg(long)]
        resume: Option<String>,
        /// Continue the thread from its last checkpoint instead of giving it new input
        /// (after a failed or stopped run). The default when the thread stopped part-way
        /// and no --input is given.
        #[arg(long = "continue", conflicts_with = "input")]
        continue_: bool,
        /// Print the raw events as JSON lines, for scripts.
        #[arg(long)]
        json: bool,
        /// Also print the graph's custom stream events.
        #[arg(long)]
        custom: bool,
        /// End with the whole final state, not a summary.
        #[arg(long)]
        full: bool,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Inspect threads stored in the database.
    Threads {
        #[command(subcommand)]
        what: threads::ThreadCmd,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Draw a graph.
    Draw {
        /// Graph id.
        graph: String,
        /// Output format.
        #[arg(long, value_enum, default_value_t = DrawFormat::Mermaid)]
        format: DrawFormat,
        /// Output file (default: standard output for Mermaid, `<graph>.<format>` otherwise).
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Draw subgraphs expanded, each inside a frame (SVG and PNG).
        #[arg(long)]
        expand: bool,
    },
    /// List the graphs this command knows.
    Graphs,
    /// Make a crate with a graph of your own, its test, and a main that serves it with
    /// `graphloom serve`'s options.
    New {
        /// The crate's directory (its last part is the crate's name), e.g. `my-agent`.
        path: PathBuf,
    },
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum DrawFormat {
    Mermaid,
    Svg,
    Png,
}

/// The store's vector index `GRAPHLOOM_EMBEDDINGS` names (`openai:text-embedding-3-small`,
/// `openai-compatible:<model>`, `ollama:<model>`, `hash`), if set.
fn store_index() -> anyhow::Result<Option<graphloom_core::store::IndexConfig>> {
    graphloom_llm::index_from_env().map_err(|e| {
        anyhow::anyhow!(
            "{}={} cannot be used: {e}",
            graphloom_llm::EMBEDDINGS_ENV,
            std::env::var(graphloom_llm::EMBEDDINGS_ENV).unwrap_or_default()
        )
    })
}

/// Persistence for local commands.
pub(crate) async fn open_deps(db: &DbArgs) -> anyhow::Result<GraphDeps> {
    let index = store_index()?;
    let (checkpointer, store): (Arc<dyn DynCheckpointer>, Arc<dyn DynStore>) = match &db.database_url {
        Some(url) => (
            Arc::new(
                graphloom_postgres::PostgresSaver::connect(url)
                    .await
                    .with_context(|| "cannot open the PostgreSQL checkpointer")?,
            ),
            Arc::new(match index {
                Some(i) => graphloom_postgres::PostgresStore::connect(url)
                    .await?
                    .with_index(i),
                None => graphloom_postgres::PostgresStore::connect(url).await?,
            }),
        ),
        None => (
            Arc::new(
                graphloom_sqlite::SqliteSaver::open(db.db.clone())
                    .await
                    .with_context(|| format!("cannot open {}", db.db.display()))?,
            ),
            Arc::new(match index {
                Some(i) => graphloom_sqlite::SqliteStore::open(db.db.clone())
                    .await?
                    .with_index(i),
                None => graphloom_sqlite::SqliteStore::open(db.db.clone()).await?,
            }),
        ),
    };
    Ok(GraphDeps::new(checkpointer, store))
}

/// Parse `--input`: JSON text or `@file`; errors point at the line and column.
pub(crate) fn parse_json_arg(what: &str, arg: &str) -> anyhow::Result<Value> {
    let (text, origin) = match arg.strip_prefix('@') {
        Some(path) => (
            std::fs::read_to_string(path).with_context(|| format!("cannot read {what} file {path}"))?,
            path.to_owned(),
        ),
        None => (arg.to_owned(), format!("--{what}")),
    };
    serde_json::from_str(&text).map_err(|e| {
        let line = text.lines().nth(e.line().saturating_sub(1)).unwrap_or_default();
        let caret = " ".repeat(e.column().saturating_sub(1));
        anyhow::anyhow!(
            "{what} is not valid JSON ({origin}, line {}, column {}): {e}\n  {line}\n  {caret}^",
            e.line(),
            e.column()
        )
    })
}

/// The model `GRAPHLOOM_MODEL` names, checked now: one that cannot be built is an error
/// with what to set, before any graph is built.
fn check_model() -> anyhow::Result<ModelChoice> {
    let choice = ModelChoice::from_env();
    if let ModelChoice::Spec(spec) = &choice {
        graphloom_llm::init_chat_model(spec).map_err(|e| {
            anyhow::anyhow!(
                "GRAPHLOOM_MODEL={spec} cannot be used: {e}\n\
                 Set the provider's key (OPENAI_API_KEY, ANTHROPIC_API_KEY; OPENAI_BASE_URL for an \
                 OpenAI-compatible server), or GRAPHLOOM_MODEL=scripted for the offline demo model."
            )
        })?;
    }
    Ok(choice)
}

/// How `graphloom run`'s first line names the model that answers.
fn model_line(choice: &ModelChoice) -> String {
    match choice {
        ModelChoice::Spec(spec) => spec.clone(),
        ModelChoice::Unset | ModelChoice::Scripted => "scripted (canned answers, no LLM is called; \
             set GRAPHLOOM_MODEL for a real one)"
            .to_owned(),
    }
}

/// What `graphloom serve` prints on standard error when its graphs answer with the
/// scripted demo model.
const SCRIPTED_BANNER: &str = "\
note: serving the scripted demo model: every answer is canned, no LLM is called.
      For a real model set GRAPHLOOM_MODEL, e.g. GRAPHLOOM_MODEL=openai:gpt-4o-mini with
      OPENAI_API_KEY, anthropic:claude-3-5-haiku-latest with ANTHROPIC_API_KEY, ollama:llama3.2,
      or openai-compatible:<model> with OPENAI_BASE_URL.";

/// A server meant for others (PostgreSQL, or listening beyond this machine) does not guess
/// its model: with `GRAPHLOOM_MODEL` unset it refuses to start. Checked twice: for
/// `--database-url` before the database is opened (`local` is `None`), for the address
/// once it is bound.
fn require_explicit_model(
    choice: &ModelChoice,
    postgres: bool,
    local: Option<std::net::SocketAddr>,
) -> anyhow::Result<()> {
    let beyond_loopback = local.filter(|a| !a.ip().is_loopback());
    if *choice != ModelChoice::Unset || (!postgres && beyond_loopback.is_none()) {
        return Ok(());
    }
    let why = match beyond_loopback {
        Some(local) if !postgres => format!("listening on {local}"),
        _ => "--database-url".to_owned(),
    };
    bail!(
        "GRAPHLOOM_MODEL is unset: a server with {why} does not pick the canned demo model by itself.\n\
         Set GRAPHLOOM_MODEL to a model (openai:gpt-4o-mini, anthropic:claude-3-5-haiku-latest, \
         ollama:llama3.2, openai-compatible:<model>), or GRAPHLOOM_MODEL=scripted to serve the \
         scripted demo model."
    )
}

/// Options of `graphloom serve`.
struct ServeArgs {
    model: ModelChoice,
    db: DbArgs,
    addr: String,
    workers: usize,
    api_keys: Vec<String>,
    public_system_routes: bool,
    lease_secs: f64,
    heartbeat_secs: Option<f64>,
    cors: Vec<String>,
    otlp_endpoint: Option<String>,
    ops: ops::OpsArgs,
    jwt: jwt::JwtArgs,
}

/// A `--<flag> SECS` value as a duration longer than zero.
fn seconds(flag: &str, secs: f64) -> anyhow::Result<std::time::Duration> {
    match std::time::Duration::try_from_secs_f64(secs) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => bail!("--{flag} must be a number of seconds above zero, not {secs}"),
    }
}

/// Listen on `addr`; a taken address says how to pick another.
async fn bind(addr: &str) -> anyhow::Result<tokio::net::TcpListener> {
    match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            let other = match addr.rsplit_once(':') {
                Some((host, port)) => port
                    .parse::<u16>()
                    .ok()
                    .and_then(|p| p.checked_add(1))
                    .map_or_else(|| format!("{host}:2025"), |p| format!("{host}:{p}")),
                None => "127.0.0.1:2025".to_owned(),
            };
            bail!(
                "cannot listen on {addr}: the address is in use (another graphloom serve, or \
                 langgraph dev?). Stop that server, or listen elsewhere with --addr {other}"
            )
        }
        Err(e) => Err(anyhow::Error::new(e).context(format!("cannot listen on {addr}"))),
    }
}

/// An error and its causes on one line, each cause once: a message that already ends
/// with its cause's text does not repeat it.
fn error_line(e: &anyhow::Error) -> String {
    let msgs: Vec<String> = e.chain().map(ToString::to_string).collect();
    let mut out: Vec<&str> = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let mut m = m.as_str();
        // Cut the text the next causes repeat at this message's end.
        for next in &msgs[i + 1..] {
            if let Some(head) = m.strip_suffix(next.as_str()) {
                m = head.trim_end_matches([':', ' ']);
                break;
            }
        }
        if !m.is_empty() && !out.iter().any(|o| o.ends_with(m)) {
            out.push(m);
        }
    }
    out.join(": ")
}

async fn serve(args: ServeArgs, graphs: &Graphs) -> anyhow::Result<()> {
    let ServeArgs {
        model,
        db,
        addr,
        workers,
        api_keys,
        public_system_routes,
        lease_secs,
        heartbeat_secs,
        cors,
        otlp_endpoint,
        ops,
        jwt,
    } = args;
    let own_models = graphs.own_models();
    if !own_models {
        require_explicit_model(&model, db.database_url.is_some(), None)?;
    }
    let mut cfg = match &db.database_url {
        Some(url) => ServerConfig::postgres(url.clone()),
        None => ServerConfig::sqlite(db.db.clone()),
    };
    // Structured logs (`RUST_LOG`, default info; `GRAPHLOOM_LOG_FORMAT=json` for JSON lines)
    // and, with an OTLP endpoint, traces. The guard sends pending spans when serve ends.
    let mut telemetry = TelemetryConfig::from_env();
    if let Some(url) = otlp_endpoint {
        telemetry = telemetry.with_otlp_endpoint(url);
    }
    let traces_url = telemetry.traces_url();
    let _telemetry = telemetry::init_tracing(&telemetry)?;
    if let Some(url) = traces_url {
        tracing::info!(url = %url, service = %telemetry.service_name, "exporting traces over OTLP/HTTP");
    }
    cfg.workers = workers;
    if !cors.is_empty() {
        cfg.cors_origins = cors.into_iter().filter(|o| o != "none").collect();
    }
    cfg.public_system_routes = public_system_routes;
    cfg.store_index = match graphs.store_index() {
        Some(index) => Some(index.clone()),
        None => store_index()?,
    };
    cfg.lease = seconds("lease-secs", lease_secs)?;
    cfg.heartbeat = heartbeat_secs.map(|s| seconds("heartbeat-secs", s)).transpose()?;
    ops.apply(&mut cfg)?;
    for k in api_keys {
        let (key, owner) = k.split_once('=').unwrap_or((k.as_str(), k.as_str()));
        cfg.api_keys.insert(key.to_owned(), owner.to_owned());
    }
    let jwt = jwt.build(!cfg.api_keys.is_empty())?;
    let auth_off = cfg.api_keys.is_empty() && jwt.is_none();
    let mut builder = Server::builder(cfg);
    if let Some(mirror) = graphs.thread_checkpoints() {
        builder = builder.mirror_checkpoints(Arc::clone(mirror));
    }
    if let Some(jwt) = jwt {
        builder = builder.auth(jwt);
    }
    for hook in graphs.server_hooks() {
        builder = hook(builder);
    }
    for e in graphs.all() {
        builder = builder.graph(e.id, Arc::clone(&e.factory));
        let sample = (e.sample)();
        if !sample.is_null() {
            builder = builder.sample_input(e.id, sample);
        }
        if !own_models {
            builder = builder.model(e.id, model.label());
        }
    }
    // Bound before the database is opened: a taken port leaves no database behind.
    let listener = bind(&addr).await?;
    let server = builder.build().await?;
    let local = listener.local_addr()?;
    if !own_models {
        require_explicit_model(&model, false, Some(local))?;
    }
    if !own_models && model.label() == graphloom_llm::SCRIPTED_MODEL {
        eprintln!("{SCRIPTED_BANNER}");
    }
    if auth_off && !local.ip().is_loopback() {
        eprintln!("warning: listening on {local} with auth off; pass --api-key or --jwt-secret to require credentials");
    }
    let store = match &db.database_url {
        Some(_) => "PostgreSQL".to_owned(),
        None => format!("SQLite {}", db.db.display()),
    };
    let stop = shutdown_signal();
    println!(
        "graphloom listening on http://{local} ({store}); graphs: {}",
        server.graph_ids().join(", ")
    );
    server.serve(listener, stop).await?;
    Ok(())
}

/// Completes at Ctrl-C (SIGINT) or, on Unix, SIGTERM (what a container runtime or a
/// process manager sends to stop a server): the server then drains its runs (see
/// `--shutdown-grace-secs`). The handlers are installed here, before the future is first
/// polled, so a signal that comes as soon as the server says it listens is not missed.
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let streams = signal(SignalKind::terminate()).and_then(|t| Ok((t, signal(SignalKind::interrupt())?)));
        async move {
            match streams {
                Ok((mut term, mut int)) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot listen for SIGTERM; only Ctrl-C stops the server gracefully");
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

async fn draw(
    graphs: &Graphs,
    graph: &str,
    format: DrawFormat,
    output: Option<PathBuf>,
    expand: bool,
) -> anyhow::Result<()> {
    let entry = graphs.find(graph)?;
    let dir = std::env::temp_dir().join(format!("graphloom-draw-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir)?;
    let deps = open_deps(&DbArgs {
        db: dir.join("draw.db"),
        database_url: None,
    })
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    let g = (entry.factory)(&deps?)?;
    let mut options = graphloom_core::draw::SvgOptions::new();
    if expand {
        options = options.expand_all();
    }
    let (bytes, ext) = match format {
        DrawFormat::Mermaid => (g.mermaid().into_bytes(), "mmd"),
        DrawFormat::Svg => (g.draw().to_svg(&options).into_bytes(), "svg"),
        DrawFormat::Png => (raster::png(&g.draw().to_svg(&options))?, "png"),
    };
    match (output, format) {
        (None, DrawFormat::Mermaid) => {
            println!("{}", String::from_utf8_lossy(&bytes));
            Ok(())
        }
        (out, _) => {
            let out = out.unwrap_or_else(|| PathBuf::from(format!("{}.{ext}", entry.id)));
            std::fs::write(&out, &bytes).with_context(|| format!("cannot write {}", out.display()))?;
            println!("wrote {}", out.display());
            Ok(())
        }
    }
}

async fn main_inner(cli: Cli, graphs: &Graphs) -> anyhow::Result<()> {
    match cli.command {
        Cmd::Serve {
            config,
            db,
            addr,
            workers,
            api_keys,
            public_system_routes,
            lease_secs,
            heartbeat_secs,
            cors,
            otlp_endpoint,
            ops,
            jwt,
        } => {
            if let Some(config) = config.filter(|_| !graphs.own_models()) {
                bail!(
                    "--config {}: this graphloom binary serves Rust graphs only; Python graphs of a \
                     langgraph.json are served by the Python package's command \
                     (pip install graphloom, then graphloom serve --config {})",
                    config.display(),
                    config.display()
                );
            }
            let model = check_model()?;
            serve(
                ServeArgs {
                    model,
                    db,
                    addr,
                    workers,
                    api_keys,
                    public_system_routes,
                    lease_secs,
                    heartbeat_secs,
                    cors,
                    otlp_endpoint,
                    ops,
                    jwt,
                },
                graphs,
            )
            .await
        }
        Cmd::Run {
            graph,
            input,
            thread,
            resume,
            continue_,
            json,
            custom,
            full,
            db,
        } => {
            let entry = graphs.find(&graph)?;
            let model = model_line(&check_model()?);
            let given = input.map(|arg| parse_json_arg("input", &arg)).transpose()?;
            let resume = resume.map(|r| parse_json_arg("resume", &r)).transpose()?;
            if continue_ && thread.is_none() {
                bail!("--continue needs the --thread to continue");
            }
            let deps = open_deps(&db).await?;
            let g = (entry.factory)(&deps)?;
            if let Some(input) = &given {
                g.check_input(input)
                    .map_err(|e| anyhow::anyhow!("--input does not fit graph `{}`: {e}", entry.id))?;
            }
            let stopped_part_way = match &thread {
                Some(t) if given.is_none() && !continue_ => threads::stopped_part_way(&g, t).await?,
                _ => false,
            };
            let start = if continue_ || stopped_part_way {
                render::Start::Continue
            } else {
                render::Start::Input(given.unwrap_or_else(|| (entry.sample)()))
            };
            let show = render::Show { json, custom, full };
            if !render::run(g, entry.id, start, thread, resume, &model, show).await? {
                bail!("the graph finished and reports a failure");
            }
            Ok(())
        }
        Cmd::Threads { what, db } => threads::run(what, &db, graphs).await,
        Cmd::Draw {
            graph,
            format,
            output,
            expand,
        } => draw(graphs, &graph, format, output, expand).await,
        Cmd::New { path } => {
            let made = new_crate(&path)?;
            println!(
                "created {} (graph `{}`; graphloom from {})\n\n  cd {}\n  cargo test               # the graph's test, offline\n  cargo run -- run {}      # one run here, node by node\n  cargo run -- serve       # the LangGraph Server API on 127.0.0.1:2024, with graphloom serve's options",
                made.name,
                made.graph_id,
                made.graphloom_source,
                path.display(),
                made.graph_id
            );
            Ok(())
        }
        Cmd::Graphs => {
            for e in graphs.all() {
                println!("{:<22} {}", e.id, e.about);
            }
            Ok(())
        }
    }
}

/// Run the command with these graphs: parse the process's arguments, do what they say,
/// report an error on standard error. The exit code is 1 on error.
#[must_use]
pub fn main(graphs: Graphs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(main_async(graphs))
}

/// Like [`main`], with these arguments instead of the process's (the first one is the
/// program's name): what a host such as the Python package calls, its graphs marked
/// [`Graphs::with_own_models`]. Help and usage errors are printed, not exited on.
#[must_use]
pub fn main_from(graphs: Graphs, args: Vec<String>) -> ExitCode {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(async {
        match main_inner(cli, &graphs).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {}", error_line(&e));
                ExitCode::from(1)
            }
        }
    })
}

async fn main_async(graphs: Graphs) -> ExitCode {
    // `graphloom threads diff x | head` closes the pipe early: end quietly, as Unix tools do.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if msg.contains("Broken pipe") {
            std::process::exit(0);
        }
        default_hook(info);
    }));
    let cli = Cli::parse();
    match main_inner(cli, &graphs).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", error_line(&e));
            ExitCode::from(1)
        }
    }
}

/// Refuse an empty thread id early with a clear message.
pub(crate) fn require_thread(id: &str) -> anyhow::Result<()> {
    if id.trim().is_empty() {
        bail!("a thread id is required");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::error_line;

    #[derive(Debug)]
    struct Inner;
    impl std::fmt::Display for Inner {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("unable to open database file")
        }
    }
    impl std::error::Error for Inner {}

    /// Displays its cause too, and returns it as its source.
    #[derive(Debug)]
    struct Outer(Inner);
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "sqlite: {}", self.0)
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn each_cause_is_said_once() {
        let e = anyhow::Error::new(Outer(Inner)).context("cannot open x.db");
        assert_eq!(
            error_line(&e),
            "cannot open x.db: sqlite: unable to open database file"
        );
        let plain = anyhow::anyhow!("no such graph");
        assert_eq!(error_line(&plain), "no such graph");
    }
}
