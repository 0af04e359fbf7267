//! CIAR scoring (Certainty, Impact, Age, Recency) and fact extraction.
//!
//! The seed refers to a CIAR model (ADR-004) without giving its formula; this is a small,
//! explainable stand-in: the score is the product of four factors in `[0, 1]`, and a fact
//! scoring at least [`PROMOTION_THRESHOLD`] is promoted from session memory (L2) to the
//! user's long-term memory (L3).
//!
//! - **Certainty**: 0.5 for hedged statements ("maybe", "I think", ...), 0.9 otherwise.
//! - **Impact**: 0.9 for identity and lasting preferences ("my name", "favourite",
//!   "allergic", "always", ...), 0.5 otherwise.
//! - **Age**: halves every 30 days since the fact was stated (1.0 when written).
//! - **Recency**: halves every 7 days since the fact was last used (1.0 when written).
//!
//! Age and recency are taken at read time from the fact's `stated_at` and `last_used_at`
//! ([`crate::memory::current_ciar`]); the score stored with a fact is the one it had when
//! written.

/// Facts scoring at least this are promoted to long-term memory.
pub const PROMOTION_THRESHOLD: f64 = 0.6;

const HEDGES: [&str; 8] = [
    "maybe", "perhaps", "i think", "i guess", "probably", "might", "not sure", "possibly",
];

const LASTING: [&str; 16] = [
    "my name",
    "favourite",
    "favorite",
    "allergic",
    "allergy",
    "always",
    "never",
    "i prefer",
    "birthday",
    "i live",
    "i work",
    "my wife",
    "my husband",
    "my partner",
    "vegetarian",
    "vegan",
];

/// A CIAR score and its factors.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ciar {
    /// How sure the statement is.
    pub certainty: f64,
    /// How much it matters later.
    pub impact: f64,
    /// Age factor.
    pub age: f64,
    /// Recency factor.
    pub recency: f64,
    /// The product, rounded to three decimals.
    pub score: f64,
}

/// The CIAR score of `content` stated `age_days` ago and last used `idle_days` ago.
#[must_use]
pub fn score(content: &str, age_days: f64, idle_days: f64) -> Ciar {
    let lower = content.to_lowercase();
    let certainty = if HEDGES.iter().any(|h| lower.contains(h)) {
        0.5
    } else {
        0.9
    };
    let impact = if LASTING.iter().any(|h| lower.contains(h)) {
        0.9
    } else {
        0.5
    };
    let age = 0.5f64.powf(age_days.max(0.0) / 30.0);
    let recency = 0.5f64.powf(idle_days.max(0.0) / 7.0);
    let s = certainty * impact * age * recency;
    Ciar {
        certainty,
        impact,
        age,
        recency,
        score: (s * 1000.0).round() / 1000.0,
    }
}

const STORE_PREFIXES: [&str; 8] = [
    "please remember that",
    "please remember",
    "remember that",
    "remember:",
    "remember",
    "note that",
    "don't forget that",
    "keep in mind that",
];

/// The fact in a "remember ..." request: the request words stripped, the first person kept
/// ("Remember that my favourite colour is teal." → "my favourite colour is teal").
#[must_use]
pub fn extract_fact(text: &str) -> String {
    // ASCII lower-casing keeps byte offsets, so positions found in `lower` index `t`.
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let mut rest = t;
    for p in STORE_PREFIXES {
        if lower.starts_with(p) {
            rest = t.get(p.len()..).unwrap_or("");
            break;
        }
    }
    // "..., note that." at the end.
    let mut fact = rest.trim().trim_start_matches([':', ',']).trim().to_owned();
    for suffix in [", note that", ", remember that", " - remember that"] {
        if fact.to_ascii_lowercase().ends_with(&format!("{suffix}."))
            || fact.to_ascii_lowercase().ends_with(suffix)
        {
            let cut = fact.to_ascii_lowercase().rfind(suffix).unwrap_or(fact.len());
            fact.truncate(cut);
        }
    }
    fact.trim().trim_end_matches(['.', '!']).trim().to_owned()
}

/// A store key for a fact: its words, lower-cased, joined by `-` (so stating a fact again
/// updates it instead of duplicating it).
#[must_use]
pub fn fact_key(content: &str) -> String {
    let words: Vec<String> = content
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let mut key = words.join("-");
    if key.is_empty() {
        key.push_str("empty");
    }
    key.chars().take(120).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lasting_certain_facts_are_promoted_hedged_trivia_is_not() {
        let teal = score("my favourite colour is teal", 0.0, 0.0);
        assert!((teal.score - 0.81).abs() < 1e-9);
        assert!(teal.score >= PROMOTION_THRESHOLD);
        let pizza = score("maybe I'll get pizza tonight", 0.0, 0.0);
        assert!((pizza.score - 0.25).abs() < 1e-9);
        let old = score("my favourite colour is teal", 30.0, 0.0);
        assert!((old.score - 0.405).abs() < 1e-9, "halved after 30 days");
        let idle = score("my favourite colour is teal", 0.0, 7.0);
        assert!((idle.score - 0.405).abs() < 1e-9, "halved after a week unused");
    }

    #[test]
    fn facts_are_extracted_from_requests() {
        assert_eq!(
            extract_fact("Remember that my favourite colour is teal."),
            "my favourite colour is teal"
        );
        assert_eq!(
            extract_fact("please remember: I am allergic to peanuts!"),
            "I am allergic to peanuts"
        );
        assert_eq!(
            extract_fact("Maybe I'll get pizza tonight, note that."),
            "Maybe I'll get pizza tonight"
        );
        assert_eq!(
            fact_key("My favourite colour is TEAL."),
            "my-favourite-colour-is-teal"
        );
    }
}
