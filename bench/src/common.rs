//! What every case shares: the run configuration of the suite, how one run is driven and
//! timed, and small random-data helpers.

use anyhow::{bail, Context as _};
use futures::future::BoxFuture;
use futures::StreamExt as _;
use graphloom_core::checkpoint::{DynCheckpointer, InMemorySaver};
use graphloom_core::{
    CompiledGraph, Durability, RunConfig, RunEvent, RunInput, RunOutput, State, StateGraph, StreamMode,
    StreamOptions,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// LangGraph's suite runs every graph with this recursion limit.
pub const RECURSION_LIMIT: usize = 1_000_000_000;

/// One timed run of a case: returns the measured duration.
pub type RunFn = Box<dyn Fn() -> BoxFuture<'static, anyhow::Result<Duration>> + Send + Sync>;

/// Builds a case's [`RunFn`] (graph construction and input preparation happen here, untimed).
pub type MakeFn = Box<dyn Fn(Harness) -> anyhow::Result<RunFn>>;

/// A registered case.
pub struct CaseDef {
    /// Case name, identical in the Rust and the Python runner.
    pub name: String,
    /// Builds the case.
    pub make: MakeFn,
}

impl CaseDef {
    /// A case named `name` built by `make`.
    pub fn new(name: impl Into<String>, make: impl Fn(Harness) -> anyhow::Result<RunFn> + 'static) -> Self {
        Self {
            name: name.into(),
            make: Box::new(make),
        }
    }
}

/// How a graph run is driven.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drive {
    /// Consume `stream(.., updates)` to the end, as LangGraph's harness does.
    StreamUpdates,
    /// Call `invoke` (no stream consumer).
    Invoke,
}

/// Settings every case receives.
#[derive(Clone, Copy, Debug)]
pub struct Harness {
    /// How graph runs are driven.
    pub drive: Drive,
}

/// The suite's run configuration: a fresh thread, the huge recursion limit, and `exit`
/// durability (only the final checkpoint is saved).
#[must_use]
pub fn fresh_config() -> RunConfig {
    RunConfig::thread(uuid4())
        .recursion_limit(RECURSION_LIMIT)
        .durability(Durability::Exit)
}

/// The durable checkpointer of a `_sqlite` / `_postgres` case (run with `sync` durability).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Saver {
    /// A [`graphloom_sqlite::SqliteSaver`] on a temp file (default `synchronous=FULL`, WAL),
    /// `sync` durability (`_sqlite` cases).
    Sqlite,
    /// A [`graphloom_postgres::PostgresSaver`] on a fresh database of `GRAPHLOOM_PG_URL`'s
    /// server (or a private server), `sync` durability (`_postgres` cases).
    Postgres,
}

impl Saver {
    /// The case-name suffix.
    #[must_use]
    pub fn suffix(self) -> &'static str {
        match self {
            Self::Sqlite => "_sqlite",
            Self::Postgres => "_postgres",
        }
    }
}

/// Keeps a durable saver's storage (temp dir or database) alive while its case runs.
pub type Keep = Box<dyn std::any::Any + Send + Sync>;

/// Run `fut` to completion from synchronous code inside the bench's multi-threaded runtime
/// (case builders are synchronous).
fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(fut))
}

/// Give `builder` the checkpointer `saver` names; returns what must outlive the graph.
///
/// # Errors
/// If the SQLite file or the PostgreSQL database cannot be created or opened.
pub fn attach_saver<S: State>(builder: StateGraph<S>, saver: Saver) -> anyhow::Result<(StateGraph<S>, Keep)> {
    let (s, keep) = open_saver(saver)?;
    Ok((builder.checkpointer_dyn(s), keep))
}

/// The checkpointer `saver` names, for graphs built by a prebuilt agent; returns what must
/// outlive the graph.
///
/// # Errors
/// If the SQLite file or the PostgreSQL database cannot be created or opened.
pub fn open_saver(saver: Saver) -> anyhow::Result<(Arc<dyn DynCheckpointer>, Keep)> {
    Ok(match saver {
        Saver::Sqlite => {
            let dir = tempfile::Builder::new()
                .prefix("graphloom-bench-")
                .tempdir()
                .context("creating a temp dir for the SQLite file")?;
            let path = dir.path().join("checkpoints.sqlite");
            let s =
                block_on(graphloom_sqlite::SqliteSaver::open(path)).context("opening the SQLite saver")?;
            (Arc::new(s), Box::new(dir))
        }
        Saver::Postgres => {
            let (url, db) = block_on(async {
                let server = graphloom_postgres::testing::server_url()?;
                graphloom_postgres::testing::create_database(&server).await
            })
            .map_err(|e| anyhow::anyhow!("{e}"))
            .context("creating a PostgreSQL database (set GRAPHLOOM_PG_URL or install postgresql)")?;
            let s = block_on(graphloom_postgres::PostgresSaver::connect(&url))
                .context("connecting the PostgreSQL saver")?;
            (Arc::new(s), Box::new(db))
        }
    })
}

/// A random UUIDv4 in its usual text form.
#[must_use]
pub fn uuid4() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// `n` random lowercase ASCII letters (`random.choice` of Python's non-cryptographic
/// generator; here a small fast generator per thread, seeded from the system's).
#[must_use]
pub fn random_lowercase(n: usize) -> String {
    use rand::{Rng, SeedableRng};
    thread_local! {
        static RNG: std::cell::RefCell<rand::rngs::SmallRng> =
            std::cell::RefCell::new(rand::rngs::SmallRng::from_rng(&mut rand::rng()));
    }
    RNG.with_borrow_mut(|rng| {
        let bytes: Vec<u8> = (0..n).map(|_| b'a' + rng.random_range(0..26u8)).collect();
        // Only ASCII letters: always valid UTF-8.
        String::from_utf8(bytes).unwrap_or_default()
    })
}

/// Run `graph` once on `input` with [`fresh_config`], the way `drive` says, and return its
/// output.
pub async fn run_graph<S: State>(
    graph: &CompiledGraph<S>,
    input: S::Update,
    config: RunConfig,
    drive: Drive,
) -> anyhow::Result<RunOutput<S>> {
    match drive {
        Drive::Invoke => Ok(graph.invoke(input, config).await?),
        Drive::StreamUpdates => {
            let opts = StreamOptions::modes([StreamMode::Updates]);
            let mut stream = graph.stream(RunInput::Update(input), config, opts);
            while let Some(ev) = stream.next().await {
                if let RunEvent::End(out) = ev {
                    return Ok(out?);
                }
            }
            bail!("the run's stream ended without its End event")
        }
    }
}

/// A [`RunFn`] that runs `graph` on a copy of `input` (the copy is made before the timer
/// starts). With a checkpointer, the run's thread is deleted afterwards, untimed, so the
/// saver does not grow across iterations.
pub fn graph_case<S: State>(graph: CompiledGraph<S>, input: S::Update, h: Harness) -> RunFn {
    durable_case(graph, input, h, Durability::Exit, Box::new(()))
}

/// [`graph_case`] with runs at `durability`; `keep` (a saver's storage) lives as long as
/// the case.
pub fn durable_case<S: State>(
    graph: CompiledGraph<S>,
    input: S::Update,
    h: Harness,
    durability: Durability,
    keep: Keep,
) -> RunFn {
    let keep = Arc::new(keep);
    Box::new(move || {
        let graph = graph.clone();
        let input = input.clone();
        let keep = Arc::clone(&keep);
        Box::pin(async move {
            let _keep = keep;
            let config = fresh_config().durability(durability);
            let thread = config.thread_id.clone();
            let start = Instant::now();
            let out = run_graph(&graph, input, config, h.drive).await?;
            drop(out);
            let took = start.elapsed();
            if let (Some(saver), Some(thread)) = (graph.checkpointer(), thread) {
                saver
                    .delete_thread(&thread)
                    .await
                    .context("deleting the run's thread")?;
            }
            Ok(took)
        })
    })
}

/// Give `builder` an [`InMemorySaver`] for `_checkpoint` variants.
pub fn with_saver<S: State>(builder: StateGraph<S>, checkpoint: bool) -> StateGraph<S> {
    if checkpoint {
        builder.checkpointer(InMemorySaver::new())
    } else {
        builder
    }
}

/// `name` or `name_checkpoint`.
#[must_use]
pub fn case_name(base: &str, checkpoint: bool) -> String {
    if checkpoint {
        format!("{base}_checkpoint")
    } else {
        base.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_has_the_usual_shape() {
        let u = uuid4();
        assert_eq!(u.len(), 36);
        assert_eq!(u.as_bytes()[14], b'4');
        assert_eq!(u.matches('-').count(), 4);
    }

    #[test]
    fn random_strings_are_lowercase() {
        let s = random_lowercase(300);
        assert_eq!(s.len(), 300);
        assert!(s.bytes().all(|b| b.is_ascii_lowercase()));
    }
}
