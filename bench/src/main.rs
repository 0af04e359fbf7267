//! graphloom-bench: LangGraph's benchmark suite rebuilt on graphloom-core.
//!
//! `graphloom-bench [--filter a,b] [--min-iters N] [--min-time SECS] [--json FILE]` times
//! every case and prints the median and fastest run; `bench/compare.sh` runs the Python
//! LangGraph suite in `bench/langgraph/` next to it.

mod agent;
mod common;
mod fanout;
mod react;
mod react_loop;
mod runner;
mod sequential;
mod wide_dict;
mod wide_state;

use clap::Parser;
use std::path::PathBuf;

/// Command-line arguments.
#[derive(Parser, Debug)]
#[command(
    name = "graphloom-bench",
    about = "LangGraph's benchmark suite on graphloom-core"
)]
struct Args {
    /// Minimum timed iterations per case.
    #[arg(long, default_value_t = 10)]
    min_iters: usize,
    /// Minimum timed seconds per case.
    #[arg(long, default_value_t = 2.0)]
    min_time: f64,
    /// Untimed warm-up runs per case.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Run only cases whose name contains this substring (comma-separated for several).
    #[arg(long, value_delimiter = ',')]
    filter: Vec<String>,
    /// Match filter entries against whole case names instead of substrings.
    #[arg(long)]
    exact: bool,
    /// Write `{"case": median_seconds}` JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Call `invoke` instead of consuming the `updates` stream (LangGraph's harness streams).
    #[arg(long)]
    invoke: bool,
    /// List the selected case names and exit.
    #[arg(long)]
    list: bool,
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    runner::run(&runner::Options {
        min_iters: a.min_iters,
        min_time: a.min_time,
        warmup: a.warmup,
        filter: a.filter,
        exact: a.exact,
        json: a.json,
        invoke: a.invoke,
        list: a.list,
    })
}
