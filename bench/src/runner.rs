//! The runner: pick cases, warm up, time each until both the iteration and the time
//! minimum are reached, print a table and optionally write `{"case": median_seconds}`.

use crate::common::{CaseDef, Drive, Harness};
use crate::{agent, fanout, react, react_loop, sequential, wide_dict, wide_state};
use anyhow::Context as _;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What to run and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// Minimum timed iterations per case.
    pub min_iters: usize,
    /// Minimum timed seconds per case.
    pub min_time: f64,
    /// Untimed runs before timing.
    pub warmup: usize,
    /// Only cases whose name contains one of these (comma-separated on the command line).
    pub filter: Vec<String>,
    /// Filter entries name whole cases instead of substrings.
    pub exact: bool,
    /// Write `{"case": median_seconds}` here.
    pub json: Option<PathBuf>,
    /// Call `invoke` instead of consuming the `updates` stream.
    pub invoke: bool,
    /// Only list the case names.
    pub list: bool,
}

/// Every case, in the suite's order.
#[must_use]
pub fn all_cases() -> Vec<CaseDef> {
    let mut v = fanout::cases();
    v.extend(react::cases());
    v.extend(react_loop::cases());
    v.extend(wide_state::cases());
    v.extend(wide_dict::cases());
    v.extend(sequential::cases());
    v.extend(agent::cases());
    v
}

/// One case's result.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Case name.
    pub name: String,
    /// Timed iterations.
    pub iters: usize,
    /// Median seconds.
    pub median: f64,
    /// Fastest seconds.
    pub min: f64,
}

/// Median of a non-empty sample (mean of the two middle values for even sizes).
#[must_use]
pub fn median(samples: &[f64]) -> f64 {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => s[n / 2],
        _ => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

fn human(secs: f64) -> String {
    if secs >= 1.0 {
        format!("{secs:.3} s")
    } else if secs >= 1e-3 {
        format!("{:.3} ms", secs * 1e3)
    } else {
        format!("{:.1} us", secs * 1e6)
    }
}

async fn measure(case: &CaseDef, opts: &Options, h: Harness) -> anyhow::Result<Measured> {
    let run = (case.make)(h).with_context(|| format!("building case `{}`", case.name))?;
    for _ in 0..opts.warmup {
        run()
            .await
            .with_context(|| format!("warm-up of `{}`", case.name))?;
    }
    let min_time = Duration::from_secs_f64(opts.min_time.max(0.0));
    let mut samples = Vec::new();
    let started = Instant::now();
    while samples.len() < opts.min_iters.max(1) || started.elapsed() < min_time {
        let took = run().await.with_context(|| format!("running `{}`", case.name))?;
        samples.push(took.as_secs_f64());
    }
    let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
    Ok(Measured {
        name: case.name.clone(),
        iters: samples.len(),
        median: median(&samples),
        min,
    })
}

/// Run the suite.
pub fn run(opts: &Options) -> anyhow::Result<()> {
    let cases: Vec<CaseDef> = all_cases()
        .into_iter()
        .filter(|c| {
            opts.filter.is_empty()
                || opts.filter.iter().any(|f| {
                    if opts.exact {
                        c.name == *f
                    } else {
                        c.name.contains(f.as_str())
                    }
                })
        })
        .collect();
    if opts.list {
        for c in &cases {
            println!("{}", c.name);
        }
        return Ok(());
    }
    anyhow::ensure!(!cases.is_empty(), "no case matches the filter {:?}", opts.filter);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let h = Harness {
        drive: if opts.invoke {
            Drive::Invoke
        } else {
            Drive::StreamUpdates
        },
    };
    println!("{:<40} {:>6} {:>12} {:>12}", "case", "iters", "median", "min");
    let mut results = Vec::new();
    for case in &cases {
        let m = rt.block_on(measure(case, opts, h))?;
        println!(
            "{:<40} {:>6} {:>12} {:>12}",
            m.name,
            m.iters,
            human(m.median),
            human(m.min)
        );
        results.push(m);
    }
    if let Some(path) = &opts.json {
        let map: BTreeMap<&str, f64> = results.iter().map(|m| (m.name.as_str(), m.median)).collect();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let text = serde_json::to_string_pretty(&map)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_names_are_unique_and_complete() {
        let names: Vec<String> = all_cases().into_iter().map(|c| c.name).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
        assert_eq!(names.len(), 45);
        for n in [
            "fanout_to_subgraph_100x_checkpoint",
            "react_agent_10x",
            "wide_state_9x1200_checkpoint",
            "wide_dict_25x300",
            "sequential_1000",
            "sequential_1000_compilation",
            "wide_state_15x600_compilation",
            "first_event_latency_sequential_1000",
            "react_agent_100x_sqlite",
            "react_agent_100x_postgres",
            "react_agent_1000x",
            "react_loop_100x",
            "react_loop_100x_sqlite",
            "create_agent_react_1000x",
            "fanout_to_subgraph_100x_sqlite",
            "fanout_to_subgraph_100x_postgres",
        ] {
            assert!(names.iter().any(|x| x == n), "{n}");
        }
    }

    #[test]
    fn median_of_odd_and_even_samples() {
        assert!((median(&[3.0, 1.0, 2.0]) - 2.0).abs() < 1e-12);
        assert!((median(&[4.0, 1.0, 2.0, 3.0]) - 2.5).abs() < 1e-12);
    }
}
