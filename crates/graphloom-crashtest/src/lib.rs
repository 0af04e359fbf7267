//! The graph the crash test kills and resumes, and the worker loop around it.
//!
//! Each round fans out to three nodes: `a` (plain), `b` (fails the first time it runs in a
//! round) and `ledger` (appends an idempotency key to an external file unless present).
//! A join then starts the next round. Every node first checks the saver: if its own task
//! already has saved writes, the runtime is running a finished task again, and the node
//! records a violation. The worker prints `STEP <n>` after each durable checkpoint and
//! `DONE` when the thread has finished all rounds.

pub mod func;
pub mod gated;

use graphloom_core::checkpoint::{self, CheckpointConfig, DynCheckpointer};
use graphloom_core::*;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Rounds per thread.
pub const ROUNDS: i64 = 12;

/// The state: a round counter and one entry per node run that reached the state.
#[derive(State, Clone, Default, Debug)]
pub struct Work {
    /// Completed rounds.
    #[reducer(add)]
    pub round: i64,
    /// `r<round>:<node>` for every applied node write.
    #[reducer(append)]
    pub done: Seq<String>,
}

/// Where the worker keeps its side effects.
#[derive(Clone, Debug)]
pub struct Files {
    /// Directory for the ledger, failure markers and violations.
    pub dir: PathBuf,
}

impl Files {
    /// The external ledger: one idempotency key per line.
    #[must_use]
    pub fn ledger(&self) -> PathBuf {
        self.dir.join("ledger.txt")
    }
    /// Lines written when a finished task ran again.
    #[must_use]
    pub fn violations(&self) -> PathBuf {
        self.dir.join("violations.txt")
    }
}

/// Append `line` and a newline to the file at `path` (created if missing) and sync it.
///
/// The line goes out in one `write` of the whole line: several processes or tasks
/// appending at once (`O_APPEND`) then never interleave between a line and its newline,
/// as two writes (`writeln!` on an unbuffered `File`) can.
///
/// # Errors
/// When the file cannot be opened, written or synced.
pub fn append_line(path: &Path, line: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    let mut buf = String::with_capacity(line.len() + 1);
    buf.push_str(line);
    buf.push('\n');
    f.write_all(buf.as_bytes())?;
    f.sync_all()
}

async fn check_not_rerun(
    saver: &Arc<dyn DynCheckpointer>,
    files: &Files,
    rt: &Runtime,
) -> Result<(), NodeError> {
    let cfg = CheckpointConfig::thread(rt.thread_id().unwrap_or_default());
    let tuple = saver
        .get_tuple(&cfg)
        .await
        .map_err(|e| NodeError::new(e.to_string()))?;
    let rerun = tuple.is_some_and(|t| {
        t.pending_writes.iter().any(|w| {
            w.task_id == rt.task_id()
                && !matches!(
                    w.channel.as_str(),
                    checkpoint::ERROR | checkpoint::INTERRUPT | checkpoint::RESUME
                )
        })
    });
    if rerun {
        append_line(
            &files.violations(),
            &format!("finished task {} ({}) ran again", rt.task_id(), rt.node()),
        )
        .map_err(|e| NodeError::new(e.to_string()))?;
    }
    Ok(())
}

fn entry(s: &Work, node: &str) -> WorkUpdate {
    WorkUpdate::new().done(vec![format!("r{}:{node}", s.round)])
}

/// The graph, persisting to `saver`.
pub fn graph(saver: Arc<dyn DynCheckpointer>, files: Files) -> Result<CompiledGraph<Work>> {
    let (s1, s2, s3) = (Arc::clone(&saver), Arc::clone(&saver), Arc::clone(&saver));
    let (f1, f2, f3) = (files.clone(), files.clone(), files);
    StateGraph::<Work>::new()
        .add_node("a", move |s: Arc<Work>, rt: Runtime| {
            let (saver, files) = (Arc::clone(&s1), f1.clone());
            async move {
                check_not_rerun(&saver, &files, &rt).await?;
                Ok(entry(&s, "a"))
            }
        })
        .add_node("b", move |s: Arc<Work>, rt: Runtime| {
            let (saver, files) = (Arc::clone(&s2), f2.clone());
            async move {
                check_not_rerun(&saver, &files, &rt).await?;
                let marker = files.dir.join(format!(
                    "{}-r{}-b-failed",
                    rt.thread_id().unwrap_or_default(),
                    s.round
                ));
                if std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&marker)
                    .is_ok()
                {
                    return Err(NodeError::fatal("b fails once per round"));
                }
                Ok(entry(&s, "b"))
            }
        })
        .add_node("ledger", move |s: Arc<Work>, rt: Runtime| {
            let (saver, files) = (Arc::clone(&s3), f3.clone());
            async move {
                check_not_rerun(&saver, &files, &rt).await?;
                let key = rt.idempotency_key("ledger");
                let existing = std::fs::read_to_string(files.ledger()).unwrap_or_default();
                if !existing.lines().any(|l| l == key) {
                    append_line(&files.ledger(), &key).map_err(|e| NodeError::new(e.to_string()))?;
                }
                Ok(entry(&s, "ledger"))
            }
        })
        .add_node("next", |_s, _rt| async { Ok(WorkUpdate::new().round(1)) })
        .add_edge(START, "a")
        .add_edge(START, "b")
        .add_edge(START, "ledger")
        .add_join(["a", "b", "ledger"], "next")
        .add_conditional_edges_map(
            "next",
            |s: &Work| {
                if s.round < ROUNDS {
                    vec!["a", "b", "ledger"]
                } else {
                    vec![END]
                }
            },
            [("a", "a"), ("b", "b"), ("ledger", "ledger"), (END, END)],
        )
        .checkpointer_dyn(saver)
        .compile()
}

/// What one worker run ended with.
#[derive(Debug, PartialEq, Eq)]
pub enum WorkerEnd {
    /// The thread has finished every round.
    Done,
    /// The run failed (a node error); run the worker again to resume.
    Failed(String),
}

/// Start or resume `thread`, printing `STEP <n>` after each durable checkpoint.
pub async fn work(g: &CompiledGraph<Work>, thread: &str) -> Result<WorkerEnd> {
    use futures::StreamExt;
    let cfg = RunConfig::thread(thread).recursion_limit(10_000);
    let st = g.get_state(&cfg).await?;
    let input = if st.metadata.is_none() {
        RunInput::Update(WorkUpdate::new())
    } else if st.next.is_empty() && st.values.round >= ROUNDS {
        println!("DONE");
        return Ok(WorkerEnd::Done);
    } else {
        RunInput::Continue
    };
    let mut events = g.stream(input, cfg, StreamOptions::modes([StreamMode::Checkpoints]));
    let mut out = std::io::stdout();
    while let Some(ev) = events.next().await {
        match ev {
            RunEvent::Part(p) => {
                if let Some(step) = p.data_json().ok().and_then(|v| v["metadata"]["step"].as_i64()) {
                    let _ = writeln!(out, "STEP {step}");
                    let _ = out.flush();
                }
            }
            RunEvent::End(Ok(_)) => {
                println!("DONE");
                return Ok(WorkerEnd::Done);
            }
            RunEvent::End(Err(e)) => return Ok(WorkerEnd::Failed(e.to_string())),
        }
    }
    Ok(WorkerEnd::Failed("stream ended without a result".into()))
}
