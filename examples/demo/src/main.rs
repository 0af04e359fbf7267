//! `graphloom` with the five seed examples.

use std::process::ExitCode;

/// mimalloc instead of glibc's malloc: the server allocates many small JSON values per
/// request (interleaved A/B of bench_server, SQLite on tmpfs: runs/wait 983/1,089 ->
/// 1,220/1,171 runs/s, server CPU 1.41-1.55 -> 1.29-1.42 ms per run). Off (feature
/// `mimalloc`) only for heap profilers that hook the system allocator.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    graphloom_cli::main(graphloom_demo::all())
}
