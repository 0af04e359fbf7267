//! No global lock: 32 graph threads checkpoint in parallel through one saver, all succeed,
//! and the saver really uses several connections at once (timed against the same work done
//! one thread after another).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::*;
use graphloom_postgres::testing::test_database;
use graphloom_postgres::{PgPoolOptions, PostgresSaver};
use std::time::{Duration, Instant};

#[derive(State, Clone, Default, Debug)]
struct Log {
    #[reducer(append)]
    steps: Seq<String>,
}

fn graph(saver: PostgresSaver) -> CompiledGraph<Log> {
    StateGraph::<Log>::new()
        .add_node("a", |_s, _rt| async {
            Ok(LogUpdate::new().steps(vec!["a".into()]))
        })
        .add_node("b", |_s, _rt| async {
            Ok(LogUpdate::new().steps(vec!["b".into()]))
        })
        .add_node("c", |_s, _rt| async {
            Ok(LogUpdate::new().steps(vec!["c".into()]))
        })
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", "c")
        .add_edge("c", END)
        .checkpointer(saver)
        .compile()
        .unwrap()
}

const THREADS: usize = 32;
const TURNS: usize = 3;

async fn one_thread(g: CompiledGraph<Log>, thread: String) {
    for turn in 0..TURNS {
        let out = g
            .invoke(LogUpdate::new(), RunConfig::thread(thread.clone()))
            .await
            .unwrap_or_else(|e| panic!("{thread} turn {turn}: {e}"));
        assert_eq!(out.values.steps.len(), 3 * (turn + 1), "{thread}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_two_threads_checkpoint_in_parallel() {
    let (url, _db) = test_database().await;
    let saver = PostgresSaver::connect_with(&url, PgPoolOptions::new().max_connections(16))
        .await
        .unwrap();
    saver.migrate().await.unwrap();
    let g = graph(saver.clone());

    // Serial baseline: the same work, one thread after another.
    let start = Instant::now();
    for i in 0..THREADS {
        one_thread(g.clone(), format!("serial-{i}")).await;
    }
    let serial = start.elapsed();

    // Parallel: every thread its own task on the multi-threaded runtime.
    let start = Instant::now();
    let tasks: Vec<_> = (0..THREADS)
        .map(|i| tokio::spawn(one_thread(g.clone(), format!("parallel-{i}"))))
        .collect();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .expect("a thread did not finish in 120 s")
            .expect("a thread failed");
    }
    let parallel = start.elapsed();

    let connections = saver.pool().size();
    println!(
        "{THREADS} threads x {TURNS} runs: serial {serial:?}, parallel {parallel:?} \
         ({:.2}x), pool connections {connections}",
        serial.as_secs_f64() / parallel.as_secs_f64()
    );
    assert!(
        connections > 1,
        "the parallel runs used {connections} connection(s): the saver serialises access"
    );
    for i in 0..THREADS {
        let st = g
            .get_state(&RunConfig::thread(format!("parallel-{i}")))
            .await
            .unwrap();
        assert_eq!(st.values.steps.len(), 3 * TURNS);
    }
}
