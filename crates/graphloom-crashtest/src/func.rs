//! The entrypoint the functional-API crash test kills and resumes, and its worker loop.
//!
//! Each run of the entrypoint `batch` is one round of a thread: four waves of three task
//! calls awaited together. Every call of the task `work` first checks the saver: if its
//! own call id already has a saved result, the runtime is running a finished call again,
//! and it records a violation. It then appends its idempotency key to the external ledger
//! unless the key is there, and the call with index 4 fails the first time it runs in a
//! round (a failed entrypoint, continued by the next worker). The entrypoint returns the
//! round, which is saved as `previous`. The worker prints `STEP <n>` after each durable
//! checkpoint and `DONE` when the thread has finished all rounds.

use crate::{append_line, Files, WorkerEnd};
use futures::StreamExt;
use graphloom_core::checkpoint::{CheckpointConfig, DynCheckpointer};
use graphloom_core::func::{CompiledEntrypoint, Entrypoint, Task, TaskContext, RETURN};
use graphloom_core::{NodeError, Result, RunConfig, RunEvent, RunInput, StreamMode, StreamOptions};
use std::io::Write as _;
use std::sync::Arc;

/// Rounds (entrypoint runs) per thread.
pub const FUNC_ROUNDS: i64 = 4;
/// Waves of parallel calls per round.
pub const WAVES: usize = 4;
/// Calls per wave.
pub const WIDTH: usize = 3;

async fn check_not_rerun(
    saver: &Arc<dyn DynCheckpointer>,
    files: &Files,
    ctx: &TaskContext,
) -> Result<(), NodeError> {
    let thread = ctx_thread(ctx);
    let tuple = saver
        .get_tuple(&CheckpointConfig::thread(thread))
        .await
        .map_err(|e| NodeError::new(e.to_string()))?;
    let rerun = tuple.is_some_and(|t| {
        t.pending_writes
            .iter()
            .any(|w| w.task_id == ctx.task_id() && w.channel == RETURN)
    });
    if rerun {
        append_line(
            &files.violations(),
            &format!("finished call {} ({}) ran again", ctx.task_id(), ctx.name()),
        )
        .map_err(|e| NodeError::new(e.to_string()))?;
    }
    Ok(())
}

fn ctx_thread(ctx: &TaskContext) -> String {
    ctx.runtime().thread_id().unwrap_or_default().to_owned()
}

/// The entrypoint, persisting to `saver`.
pub fn entrypoint(saver: Arc<dyn DynCheckpointer>, files: Files) -> Result<CompiledEntrypoint<i64, i64>> {
    let (s, f) = (Arc::clone(&saver), files);
    let work = Task::new("work", move |(round, idx): (i64, usize), ctx: TaskContext| {
        let (saver, files) = (Arc::clone(&s), f.clone());
        async move {
            check_not_rerun(&saver, &files, &ctx).await?;
            if idx == 4 {
                let marker = files
                    .dir
                    .join(format!("{}-r{round}-work4-failed", ctx_thread(&ctx)));
                if std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&marker)
                    .is_ok()
                {
                    return Err(NodeError::fatal("call 4 fails once per round"));
                }
            }
            let key = ctx.idempotency_key("ledger");
            let existing = std::fs::read_to_string(files.ledger()).unwrap_or_default();
            if !existing.lines().any(|l| l == key) {
                append_line(&files.ledger(), &key).map_err(|e| NodeError::new(e.to_string()))?;
            }
            Ok(idx)
        }
    });
    Entrypoint::<i64, i64>::new("batch", move |round, ctx| {
        let work = work.clone();
        async move {
            let mut total = 0usize;
            for wave in 0..WAVES {
                let calls = (0..WIDTH).map(|k| ctx.call(&work, (round, wave * WIDTH + k)));
                total += futures::future::try_join_all(calls)
                    .await?
                    .into_iter()
                    .sum::<usize>();
            }
            let expected = (0..WAVES * WIDTH).sum::<usize>();
            if total != expected {
                return Err(NodeError::fatal(format!(
                    "calls returned {total}, expected {expected}"
                )));
            }
            Ok(round)
        }
    })
    .checkpointer_dyn(saver)
    .compile()
}

/// Start, continue or finish `thread`: run its rounds one after another, printing
/// `STEP <n>` after each durable checkpoint.
pub async fn work_func(ep: &CompiledEntrypoint<i64, i64>, thread: &str) -> Result<WorkerEnd> {
    let cfg = RunConfig::thread(thread);
    let mut out = std::io::stdout();
    loop {
        let st = ep.get_state(&cfg).await?;
        let input = if st.metadata.is_none() {
            ep.run_input(&1)?
        } else if !st.next.is_empty() {
            RunInput::Continue
        } else {
            let done = st.values.output().as_i64().unwrap_or(0);
            if done >= FUNC_ROUNDS {
                println!("DONE");
                return Ok(WorkerEnd::Done);
            }
            ep.run_input(&(done + 1))?
        };
        let mut events = ep.stream_input(
            input,
            cfg.clone(),
            StreamOptions::modes([StreamMode::Checkpoints]),
        );
        let mut ended = None;
        while let Some(ev) = events.next().await {
            match ev {
                RunEvent::Part(p) => {
                    if let Some(step) = p.data_json().ok().and_then(|v| v["metadata"]["step"].as_i64()) {
                        let _ = writeln!(out, "STEP {step}");
                        let _ = out.flush();
                    }
                }
                RunEvent::End(r) => ended = Some(r),
            }
        }
        match ended {
            Some(Ok(_)) => {}
            Some(Err(e)) => return Ok(WorkerEnd::Failed(e.to_string())),
            None => return Ok(WorkerEnd::Failed("stream ended without a result".into())),
        }
    }
}
