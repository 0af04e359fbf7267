//! JSON as the console shows it: a collapsible tree within a budget of nodes (a state too
//! large is cut, with a link to download it whole), and the difference between two states
//! key by key.

use maud::{html, Markup};
use serde_json::{Map, Value};

/// Nodes of a tree rendered at most; past it, the rest is elided.
pub(crate) const TREE_BUDGET: usize = 4000;
/// Characters of one string shown at most.
const STRING_MAX: usize = 2000;
/// Items of one array or object shown at most.
const ITEMS_MAX: usize = 200;
/// A state whose JSON is larger than this is rendered cut, with a download link.
pub(crate) const LARGE: usize = 512 * 1024;

/// `v` as a tree of `<details>`, opened `open_depth` levels deep; `budget` counts down the
/// nodes left to draw.
pub(crate) fn tree(v: &Value, open_depth: usize, budget: &mut usize) -> Markup {
    if *budget == 0 {
        return html! { span.jt-more { "…" } };
    }
    *budget -= 1;
    match v {
        Value::Null => html! { span.jt-null { "null" } },
        Value::Bool(b) => html! { span.jt-bool { (b) } },
        Value::Number(n) => html! { span.jt-num { (n) } },
        Value::String(s) => string(s),
        Value::Array(items) => {
            let shown = items.len().min(ITEMS_MAX);
            html! {
                details.jt open[open_depth > 0] {
                    summary { "[" (items.len()) (if items.len() == 1 { " item]" } else { " items]" }) }
                    ol.jt-items start="0" {
                        @for item in &items[..shown] {
                            li { (tree(item, open_depth.saturating_sub(1), budget)) }
                        }
                        @if items.len() > shown {
                            li.jt-more { "… " (items.len() - shown) " more" }
                        }
                    }
                }
            }
        }
        Value::Object(map) => object(map, open_depth, budget),
    }
}

fn object(map: &Map<String, Value>, open_depth: usize, budget: &mut usize) -> Markup {
    let hidden = map.len().saturating_sub(ITEMS_MAX);
    html! {
        details.jt open[open_depth > 0] {
            summary { "{" (map.len()) (if map.len() == 1 { " key}" } else { " keys}" }) }
            ul.jt-keys {
                @for (k, v) in map.iter().take(ITEMS_MAX) {
                    li { span.jt-key { (k) } ": " (tree(v, open_depth.saturating_sub(1), budget)) }
                }
                @if hidden > 0 {
                    li.jt-more { "… " (hidden) " more" }
                }
            }
        }
    }
}

fn string(s: &str) -> Markup {
    let n = s.chars().count();
    if n > STRING_MAX {
        let head: String = s.chars().take(STRING_MAX).collect();
        html! { span.jt-str { "\"" (head) "…\"" } span.jt-more { " (" (n) " characters)" } }
    } else {
        html! { span.jt-str { "\"" (s) "\"" } }
    }
}

/// `v` as indented JSON text, cut at `max` bytes (on a character boundary).
pub(crate) fn pretty(v: &Value, max: usize) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("\n…");
    }
    s
}

/// How one top-level key changed between two states.
pub(crate) enum Change<'a> {
    /// New key.
    Added(&'a Value),
    /// Key gone.
    Removed(&'a Value),
    /// A list that grew at its end: the new items.
    Appended(&'a [Value]),
    /// Any other change.
    Changed(&'a Value, &'a Value),
}

/// The keys that differ between `old` and `new` (objects; anything else is one change of
/// the whole under `""`), in key order.
pub(crate) fn diff<'a>(old: &'a Value, new: &'a Value) -> Vec<(String, Change<'a>)> {
    let (Value::Object(a), Value::Object(b)) = (old, new) else {
        return if old == new {
            Vec::new()
        } else {
            vec![(String::new(), Change::Changed(old, new))]
        };
    };
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out = Vec::new();
    for k in keys {
        match (a.get(k), b.get(k)) {
            (None, Some(v)) => out.push((k.clone(), Change::Added(v))),
            (Some(v), None) => out.push((k.clone(), Change::Removed(v))),
            (Some(x), Some(y)) if x != y => {
                let change = match (x, y) {
                    (Value::Array(xs), Value::Array(ys))
                        if ys.len() > xs.len() && ys[..xs.len()] == xs[..] =>
                    {
                        Change::Appended(&ys[xs.len()..])
                    }
                    _ => Change::Changed(x, y),
                };
                out.push((k.clone(), change));
            }
            _ => {}
        }
    }
    out
}

/// The difference as HTML: a row per changed key.
pub(crate) fn diff_view(changes: &[(String, Change<'_>)]) -> Markup {
    let mut budget = TREE_BUDGET;
    html! {
        @if changes.is_empty() {
            p.muted { "No change from the previous checkpoint." }
        } @else {
            table.diff {
                thead { tr { th { "key" } th { "change" } th { "value" } } }
                tbody {
                    @for (k, c) in changes {
                        tr {
                            td.jt-key { (if k.is_empty() { "(state)" } else { k }) }
                            @match c {
                                Change::Added(v) => { td.added { "added" } td { (tree(v, 1, &mut budget)) } }
                                Change::Removed(v) => { td.removed { "removed" } td { (tree(v, 1, &mut budget)) } }
                                Change::Appended(items) => {
                                    td.added { "+" (items.len()) (if items.len() == 1 { " item" } else { " items" }) }
                                    td { (tree(&Value::Array(items.to_vec()), 2, &mut budget)) }
                                }
                                Change::Changed(a, b) => {
                                    td.changed { "changed" }
                                    td { div.before { (tree(a, 1, &mut budget)) } div.after { (tree(b, 1, &mut budget)) } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn diff_finds_appends_and_changes() {
        let a = json!({"messages": [1, 2], "status": "a", "gone": 1});
        let b = json!({"messages": [1, 2, 3], "status": "b", "new": true});
        let d = diff(&a, &b);
        let keys: Vec<&str> = d.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["gone", "messages", "new", "status"]);
        assert!(matches!(d[1].1, Change::Appended(items) if items == [json!(3)]));
    }

    #[test]
    fn trees_escape_and_stay_within_budget() {
        let v = json!({"html": "<script>alert(1)</script>", "list": (0..10_000).collect::<Vec<_>>()});
        let mut budget = 50;
        let out = tree(&v, 2, &mut budget).into_string();
        assert!(!out.contains("<script>"), "{out}");
        assert!(out.contains("&lt;script&gt;"));
        assert_eq!(budget, 0);
        assert!(out.len() < 20_000, "{}", out.len());
    }
}
