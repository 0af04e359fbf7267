//! The console reads the server's own metrics: the text `/metrics` serves, parsed back into
//! samples, and latency percentiles estimated from histogram buckets.

use std::collections::BTreeMap;

/// One sample of the exposition: `name{labels} value`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// The samples of an OpenMetrics/Prometheus text exposition (comments skipped, lines
/// that do not parse ignored).
pub(crate) fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(parse_line)
        .collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let (head, value) = line.rsplit_once(' ')?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    let (name, labels) = match head.split_once('{') {
        Some((name, rest)) => (name, labels(rest.strip_suffix('}')?)?),
        None => (head, BTreeMap::new()),
    };
    Some(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// `a="x",b="y"` (values may hold escaped quotes and commas).
fn labels(text: &str) -> Option<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, n)) = chars.next() {
                        value.push(if n == 'n' { '\n' } else { n });
                    }
                }
                '"' => {
                    end = Some(i);
                    break;
                }
                c => value.push(c),
            }
        }
        let end = end?;
        out.insert(key.trim_start_matches(',').trim().to_owned(), value);
        rest = after[end + 1..].trim_start_matches(',');
    }
    Some(out)
}

/// The samples named `name` whose labels include `filter`.
pub(crate) fn select<'a>(
    samples: &'a [Sample],
    name: &'a str,
    filter: &'a [(&'a str, &'a str)],
) -> impl Iterator<Item = &'a Sample> + 'a {
    samples.iter().filter(move |s| {
        s.name == name
            && filter
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
    })
}

/// The `q` quantile (0..1) of histogram `base` (its `_bucket` samples matching `filter`),
/// interpolated inside its bucket; `None` with no observation. Past the last finite bucket
/// the answer is that bucket's bound.
pub(crate) fn quantile(samples: &[Sample], base: &str, filter: &[(&str, &str)], q: f64) -> Option<f64> {
    let name = format!("{base}_bucket");
    let mut buckets: Vec<(f64, f64)> = select(samples, &name, filter)
        .filter_map(|s| {
            let le = s.labels.get("le")?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, s.value))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let (mut lo, mut below) = (0.0, 0.0);
    for (le, count) in buckets {
        if count >= rank {
            if le.is_infinite() {
                return Some(lo);
            }
            let inside = count - below;
            let frac = if inside > 0.0 {
                (rank - below) / inside
            } else {
                1.0
            };
            return Some(lo + (le - lo) * frac);
        }
        lo = le;
        below = count;
    }
    Some(lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP graphloom_runs Runs
graphloom_runs{status="success"} 3
graphloom_model_tokens_by_model_total{model="gpt-4o,\"x\"",kind="input"} 12
graphloom_run_duration_seconds_bucket{le="0.1"} 1
graphloom_run_duration_seconds_bucket{le="0.2"} 3
graphloom_run_duration_seconds_bucket{le="+Inf"} 4
graphloom_run_duration_seconds_count 4
"#;

    #[test]
    fn parses_labels_and_estimates_quantiles() {
        let s = parse(TEXT);
        assert_eq!(s.len(), 6);
        let t: Vec<&Sample> =
            select(&s, "graphloom_model_tokens_by_model_total", &[("kind", "input")]).collect();
        assert_eq!(t[0].labels["model"], "gpt-4o,\"x\"");
        assert_eq!(t[0].value, 12.0);
        let p50 = quantile(&s, "graphloom_run_duration_seconds", &[], 0.5).unwrap();
        assert!((p50 - 0.15).abs() < 1e-9, "{p50}");
        assert_eq!(
            quantile(&s, "graphloom_run_duration_seconds", &[], 0.99),
            Some(0.2)
        );
        assert_eq!(quantile(&s, "nothing", &[], 0.5), None);
    }
}
