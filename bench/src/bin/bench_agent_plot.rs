//! `bench_agent_plot`: the agent cases' time per tool round against the number of rounds
//! (both axes log-scaled), from the `{"case": median_seconds}` JSON of `graphloom-bench --json`, as an SVG. A flat
//! line is an agent whose step cost does not grow with the conversation. With a second
//! JSON (an earlier build's run of the same cases), its lines are drawn dashed beside.
//!
//! ```text
//! cargo run --release -p graphloom-bench -- --exact \
//!     --filter create_agent_react_10x,create_agent_react_100x,create_agent_react_1000x,react_agent_10x,react_agent_100x,react_agent_1000x,react_loop_10x,react_loop_100x,react_loop_1000x \
//!     --json bench/out/agent_rounds.json
//! cargo run --release -p graphloom-bench --bin bench_agent_plot -- \
//!     bench/out/agent_rounds.json bench/agent_rounds.svg [bench/out/agent_rounds_before.json]
//! ```

use anyhow::{bail, Context};
use plotters::prelude::*;
use std::collections::BTreeMap;

/// The case families drawn, each measured at these rounds.
const FAMILIES: [&str; 3] = ["create_agent_react", "react_agent", "react_loop"];
const ROUNDS: [u32; 3] = [10, 100, 1000];

/// Microseconds per tool round by family, for the rounds the JSON has.
fn read(path: &str) -> anyhow::Result<BTreeMap<&'static str, Vec<(f64, f64)>>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
    let medians: BTreeMap<String, f64> =
        serde_json::from_str(&text).with_context(|| format!("{path} is not a {{case: seconds}} map"))?;
    let mut out = BTreeMap::new();
    for family in FAMILIES {
        let points: Vec<(f64, f64)> = ROUNDS
            .iter()
            .filter_map(|&n| {
                let secs = medians.get(&format!("{family}_{n}x"))?;
                Some((f64::from(n), secs * 1e6 / f64::from(n)))
            })
            .collect();
        if !points.is_empty() {
            out.insert(family, points);
        }
    }
    if out.is_empty() {
        bail!("{path} has none of the {FAMILIES:?} cases at {ROUNDS:?} rounds");
    }
    Ok(out)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(json), Some(svg)) = (args.first(), args.get(1)) else {
        bail!("usage: bench_agent_plot <after.json> <out.svg> [before.json]");
    };
    let after = read(json)?;
    let before = args.get(2).map(|p| read(p)).transpose()?;
    let values = || {
        after
            .values()
            .chain(before.iter().flat_map(BTreeMap::values))
            .flatten()
            .map(|p| p.1)
    };
    // Both axes log-scaled: a flat line stays flat, and a before 10x above is still legible.
    let top = values().fold(1.0, f64::max) * 1.5;
    let bottom = values().fold(top, f64::min) / 1.5;
    let root = SVGBackend::new(svg, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "graphloom agents: time per tool round against rounds",
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((8.0f64..1250.0f64).log_scale(), (bottom..top).log_scale())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("tool rounds per run (log scale)")
        .y_desc("microseconds per round (median run / rounds, log scale)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    for (i, family) in FAMILIES.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        if let Some(points) = after.get(family) {
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .label(*family)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        if let Some(points) = before.as_ref().and_then(|b| b.get(family)) {
            chart
                .draw_series(DashedLineSeries::new(points.clone(), 6, 4, color.stroke_width(1)))
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .label(format!("{family} (before)"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(1)));
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    println!("wrote {svg}");
    Ok(())
}
