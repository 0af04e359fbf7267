//! The example's data, bundled with the crate: an order table (`data/orders.csv`) and a
//! help-centre article set (`data/kb.json`); the text matching `kb_search` ranks articles
//! with (BM25) and the verifier judges answers with ([`answers_question`]).

use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

/// The order table (CSV; fields hold no commas).
pub const ORDERS_CSV: &str = include_str!("../data/orders.csv");
/// The help-centre articles (JSON).
pub const KB_JSON: &str = include_str!("../data/kb.json");

/// Words that carry no topic.
const STOPWORDS: &[&str] = &[
    "a", "about", "all", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can",
    "could", "did", "do", "does", "for", "from", "had", "has", "have", "how", "i", "if", "in", "into", "is",
    "it", "its", "long", "me", "my", "no", "not", "of", "on", "or", "our", "please", "so", "some", "take",
    "tell", "that", "the", "their", "them", "then", "there", "this", "to", "too", "up", "us", "was", "we",
    "what", "when", "where", "which", "who", "why", "will", "with", "would", "you", "your",
];

/// The topic terms of a text: lower-cased words and numbers without stopwords, with plural
/// and `-ing` / `-ed` endings removed ("refunds" and "refund", "shipping" and "ship" are the
/// same term).
#[must_use]
pub fn terms(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .map(|w| stem(&w))
        .collect()
}

fn stem(w: &str) -> String {
    if w.chars().all(|c| c.is_ascii_digit()) {
        return w.to_owned();
    }
    let mut s = w.to_owned();
    for suffix in ["ing", "ed"] {
        if s.len() >= suffix.len() + 3 && s.ends_with(suffix) {
            s.truncate(s.len() - suffix.len());
            // "shipp" -> "ship"
            let b = s.as_bytes();
            if b.len() >= 2 && b[b.len() - 1] == b[b.len() - 2] && !b"aeiou".contains(&b[b.len() - 1]) {
                s.pop();
            }
            return s;
        }
    }
    if s.len() > 3 && s.ends_with('s') && !s.ends_with("ss") {
        s.pop();
    }
    s
}

/// A help-centre article.
#[derive(Debug, Clone, Deserialize)]
pub struct Article {
    /// Id.
    pub id: String,
    /// Title.
    pub title: String,
    /// Body.
    pub body: String,
}

/// The bundled articles (none if the bundled JSON were malformed).
#[must_use]
pub fn articles() -> &'static [Article] {
    static KB: OnceLock<Vec<Article>> = OnceLock::new();
    KB.get_or_init(|| serde_json::from_str(KB_JSON).unwrap_or_default())
}

/// The articles matching `query`, best first, at most `limit`, ranked by BM25 (k1 = 1.2,
/// b = 0.75) over title and body, the title counted twice. An article sharing no term with
/// the query is not returned.
#[must_use]
pub fn search(query: &str, limit: usize) -> Vec<(&'static Article, f64)> {
    let docs = articles();
    let q: BTreeSet<String> = terms(query).into_iter().collect();
    if q.is_empty() || docs.is_empty() {
        return Vec::new();
    }
    let tokenised: Vec<Vec<String>> = docs
        .iter()
        .map(|a| terms(&format!("{} {} {}", a.title, a.title, a.body)))
        .collect();
    let n = docs.len() as f64;
    let avg = tokenised.iter().map(Vec::len).sum::<usize>() as f64 / n;
    let df = |t: &str| tokenised.iter().filter(|d| d.iter().any(|w| w == t)).count() as f64;
    let (k1, b) = (1.2, 0.75);
    let mut scored: Vec<(&Article, f64)> = docs
        .iter()
        .zip(&tokenised)
        .map(|(a, d)| {
            let len = d.len() as f64;
            let score = q
                .iter()
                .map(|t| {
                    let tf = d.iter().filter(|w| *w == t).count() as f64;
                    if tf == 0.0 {
                        return 0.0;
                    }
                    let idf = ((n - df(t) + 0.5) / (df(t) + 0.5) + 1.0).ln();
                    idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * len / avg))
                })
                .sum::<f64>();
            (a, score)
        })
        .filter(|(_, s)| *s > 0.0)
        .collect();
    scored.sort_by(|x, y| y.1.total_cmp(&x.1));
    scored.truncate(limit);
    scored
}

/// An order row.
#[derive(Debug, Clone, PartialEq)]
pub struct Order {
    /// Order number.
    pub order_id: String,
    /// Whose order.
    pub user_id: String,
    /// `processing`, `shipped`, `out_for_delivery`, `delivered`, `cancelled`.
    pub status: String,
    /// Carrier, once shipped.
    pub carrier: Option<String>,
    /// Days until delivery, while on its way.
    pub eta_days: Option<u32>,
    /// Order date.
    pub placed_on: String,
    /// Items.
    pub items: String,
    /// Total.
    pub total_usd: f64,
    /// Customer e-mail (redacted before anyone sees it).
    pub customer_email: String,
    /// Card number (redacted before anyone sees it).
    pub card_number: String,
}

fn non_empty(s: &str) -> Option<String> {
    Some(s.trim().to_owned()).filter(|s| !s.is_empty())
}

/// The bundled order table.
#[must_use]
pub fn orders() -> &'static [Order] {
    static ORDERS: OnceLock<Vec<Order>> = OnceLock::new();
    ORDERS.get_or_init(|| {
        let mut lines = ORDERS_CSV.lines();
        let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
        lines
            .filter(|l| !l.trim().is_empty())
            .filter_map(|l| {
                let row: BTreeMap<&str, &str> = header.iter().copied().zip(l.split(',')).collect();
                let get = |k: &str| row.get(k).copied().unwrap_or_default();
                Some(Order {
                    order_id: non_empty(get("order_id"))?,
                    user_id: get("user_id").to_owned(),
                    status: get("status").to_owned(),
                    carrier: non_empty(get("carrier")),
                    eta_days: get("eta_days").trim().parse().ok(),
                    placed_on: get("placed_on").to_owned(),
                    items: get("items").to_owned(),
                    total_usd: get("total_usd").trim().parse().unwrap_or_default(),
                    customer_email: get("customer_email").to_owned(),
                    card_number: get("card_number").to_owned(),
                })
            })
            .collect()
    })
}

/// The order numbers named in a text: runs of three or more digits.
#[must_use]
pub fn order_numbers(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter(|w| w.len() >= 3)
        .map(str::to_owned)
        .collect()
}

/// An order as `order_lookup` returns it (before redaction).
#[must_use]
pub fn order_json(o: &Order) -> Value {
    json!({
        "order": o.order_id,
        "status": o.status,
        "carrier": o.carrier,
        "eta_days": o.eta_days,
        "placed_on": o.placed_on,
        "items": o.items,
        "total_usd": o.total_usd,
        "customer_email": o.customer_email,
        "payment": {"card_number": o.card_number, "note": format!("paid with {}", o.card_number)},
    })
}

fn strings(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push_str(s);
            out.push(' ');
        }
        Value::Number(n) => {
            out.push_str(&n.to_string());
            out.push(' ');
        }
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// Whether a tool result answers the user's question: it shares a topic term with it, and,
/// when the question names numbers (an order number), it contains one of them. A question
/// without topic terms ("do it all") is answered by any result.
#[must_use]
pub fn answers_question(question: &str, output: &Value) -> bool {
    let asked: BTreeSet<String> = terms(question).into_iter().collect();
    if asked.is_empty() {
        return true;
    }
    let mut text = String::new();
    strings(output, &mut text);
    let found: BTreeSet<String> = terms(&text).into_iter().collect();
    let numbers = order_numbers(question);
    if !numbers.is_empty() {
        return numbers.iter().any(|n| found.contains(n));
    }
    asked.iter().any(|t| found.contains(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_drop_stopwords_and_endings() {
        assert_eq!(terms("How do I reset my password?"), ["reset", "password"]);
        assert_eq!(terms("Shipping refunds shipped"), ["ship", "refund", "ship"]);
        assert_eq!(terms("order 1234"), ["order", "1234"]);
    }

    #[test]
    fn the_order_table_parses() {
        let o = orders();
        assert_eq!(o.len(), 6);
        assert_eq!(o[0].order_id, "1234");
        assert_eq!(o[0].eta_days, Some(2));
        assert_eq!(o[1].eta_days, None);
        assert_eq!(o[2].carrier, None);
        assert!((o[4].total_usd - 45.2).abs() < 1e-9);
    }
}
