//! `bench_soak_plot`: draws the CSV of `bench_soak` as an SVG: the server's RSS (MiB)
//! against runs, one line per kind of run (and model), the `thread` kind's database size
//! dashed beside it.
//!
//! ```text
//! cargo run --release -p graphloom-bench --bin bench_soak_plot -- bench/out/soak.csv bench/soak.svg
//! ```

use anyhow::{bail, Context};
use plotters::prelude::*;
use std::collections::BTreeMap;

/// One `load` row of the CSV.
struct Row {
    runs: f64,
    rss: f64,
    db: f64,
}

/// Rows by series name (`kind` or `kind (model)` when the CSV holds several models).
fn read(path: &str) -> anyhow::Result<BTreeMap<String, Vec<Row>>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().context("empty CSV")?.split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .with_context(|| format!("no column {name}"))
    };
    let (kind, model, phase, runs, rss, db) = (
        col("kind")?,
        col("model")?,
        col("phase")?,
        col("runs")?,
        col("rss_mib")?,
        col("db_mib")?,
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let models: std::collections::BTreeSet<&str> =
        rows.iter().filter_map(|r| r.get(model).copied()).collect();
    let mut out: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    for r in &rows {
        let get = |i: usize| r.get(i).copied().unwrap_or_default();
        if get(phase) != "load" {
            continue;
        }
        let name = if models.len() > 1 {
            format!("{} ({})", get(kind), get(model))
        } else {
            get(kind).to_owned()
        };
        let num = |i: usize| get(i).parse::<f64>().unwrap_or(f64::NAN);
        out.entry(name).or_default().push(Row {
            runs: num(runs),
            rss: num(rss),
            db: num(db),
        });
    }
    if out.is_empty() {
        bail!("no `load` rows in {path}");
    }
    Ok(out)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(csv), Some(svg)) = (args.first(), args.get(1)) else {
        bail!("usage: bench_soak_plot <soak.csv> <out.svg>");
    };
    let series = read(csv)?;
    let max_runs = series.values().flatten().map(|r| r.runs).fold(1.0, f64::max);
    let max_mib = series
        .values()
        .flatten()
        .flat_map(|r| [r.rss, r.db])
        .filter(|v| v.is_finite())
        .fold(1.0, f64::max)
        * 1.1;
    let root = SVGBackend::new(svg, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "graphloom serve: resident memory against runs",
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..max_runs, 0.0..max_mib)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("runs")
        .y_desc("MiB")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    for (i, (name, rows)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let points: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.rss.is_finite())
            .map(|r| (r.runs, r.rss))
            .collect();
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .label(format!("{name}: RSS"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        if name.starts_with("thread") {
            let points: Vec<(f64, f64)> = rows.iter().map(|r| (r.runs, r.db)).collect();
            chart
                .draw_series(DashedLineSeries::new(points, 6, 4, color.stroke_width(1)))
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .label(format!("{name}: database file"))
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
