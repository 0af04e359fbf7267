//! Namespace helpers shared by every store backend.

use super::{invalid_input, ListNamespaces};
use crate::error::Result;
use std::collections::BTreeSet;

/// Label reserved for graphloom's (and LangGraph's) own use; no namespace may start with it.
pub const RESERVED_LABEL: &str = "langgraph";

/// Label of [`ListNamespaces::prefix`] / [`ListNamespaces::suffix`] matching any label.
pub const WILDCARD: &str = "*";

/// Build a namespace from labels: `namespace(["users", "42"])`.
pub fn namespace<I, S>(labels: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    labels.into_iter().map(Into::into).collect()
}

/// Check that a namespace can hold items: at least one label, no empty label, no `.` in a
/// label, and a first label other than `"langgraph"`.
///
/// # Errors
/// [`crate::BackendErrorKind::InvalidInput`] saying which rule the namespace breaks.
pub fn validate_namespace(namespace: &[String]) -> Result<()> {
    if namespace.is_empty() {
        return Err(invalid_input("namespace must have at least one label"));
    }
    for (i, label) in namespace.iter().enumerate() {
        if label.is_empty() {
            return Err(invalid_input(format!(
                "namespace label {i} is empty (namespace {namespace:?})"
            )));
        }
        if label.contains('.') {
            return Err(invalid_input(format!(
                "namespace label {label:?} contains '.', which is not allowed (namespace {namespace:?})"
            )));
        }
    }
    if namespace[0] == RESERVED_LABEL {
        return Err(invalid_input(format!(
            "namespaces may not start with the reserved label {RESERVED_LABEL:?} (namespace {namespace:?})"
        )));
    }
    Ok(())
}

/// Whether `namespace` starts with `prefix` (plain labels, no wildcard), as
/// [`super::Store::search`] selects namespaces.
#[must_use]
pub fn has_prefix(namespace: &[String], prefix: &[String]) -> bool {
    namespace.len() >= prefix.len() && namespace.iter().zip(prefix).all(|(n, p)| n == p)
}

fn pattern_matches<'a>(
    labels: impl Iterator<Item = &'a String>,
    pattern: impl Iterator<Item = &'a String>,
) -> bool {
    labels.zip(pattern).all(|(l, p)| p == WILDCARD || l == p)
}

impl ListNamespaces {
    /// Check the options.
    ///
    /// # Errors
    /// [`crate::BackendErrorKind::InvalidInput`] if `max_depth` is 0.
    pub fn validate(&self) -> Result<()> {
        if self.max_depth == Some(0) {
            return Err(invalid_input("list_namespaces: max_depth must be at least 1"));
        }
        Ok(())
    }

    /// Whether `namespace` matches `prefix` and `suffix` (with `"*"` wildcards).
    #[must_use]
    pub fn matches(&self, namespace: &[String]) -> bool {
        if let Some(prefix) = &self.prefix {
            if namespace.len() < prefix.len() || !pattern_matches(namespace.iter(), prefix.iter()) {
                return false;
            }
        }
        if let Some(suffix) = &self.suffix {
            if namespace.len() < suffix.len() || !pattern_matches(namespace.iter().rev(), suffix.iter().rev())
            {
                return false;
            }
        }
        true
    }

    /// The answer to these options from every namespace holding a live item (in any order,
    /// duplicates allowed): match, cut to `max_depth`, deduplicate, sort, page.
    #[must_use]
    pub fn apply<I>(&self, namespaces: I) -> Vec<Vec<String>>
    where
        I: IntoIterator<Item = Vec<String>>,
    {
        let cut: BTreeSet<Vec<String>> = namespaces
            .into_iter()
            .filter(|ns| self.matches(ns))
            .map(|mut ns| {
                if let Some(depth) = self.max_depth {
                    ns.truncate(depth);
                }
                ns
            })
            .collect();
        cut.into_iter().skip(self.offset).take(self.limit).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(labels: &[&str]) -> Vec<String> {
        namespace(labels.iter().copied())
    }

    #[test]
    fn validation_rules() {
        assert!(validate_namespace(&ns(&["users", "42"])).is_ok());
        for bad in [ns(&[]), ns(&["a", ""]), ns(&["a.b"]), ns(&["langgraph", "x"])] {
            let err = validate_namespace(&bad).unwrap_err();
            assert!(
                matches!(err, crate::Error::Backend(ref e) if e.kind() == crate::BackendErrorKind::InvalidInput),
                "{bad:?}: {err}"
            );
        }
        // Only the first label is reserved.
        assert!(validate_namespace(&ns(&["x", "langgraph"])).is_ok());
    }

    #[test]
    fn list_matching_and_paging() {
        let all = vec![
            ns(&["a", "b", "c"]),
            ns(&["a", "x", "c"]),
            ns(&["a", "b", "d"]),
            ns(&["z"]),
        ];
        let got = ListNamespaces::new().prefix(["a", "*", "c"]).apply(all.clone());
        assert_eq!(got, vec![ns(&["a", "b", "c"]), ns(&["a", "x", "c"])]);
        let got = ListNamespaces::new().suffix(["d"]).apply(all.clone());
        assert_eq!(got, vec![ns(&["a", "b", "d"])]);
        let got = ListNamespaces::new().max_depth(2).apply(all.clone());
        assert_eq!(got, vec![ns(&["a", "b"]), ns(&["a", "x"]), ns(&["z"])]);
        let got = ListNamespaces::new()
            .max_depth(2)
            .offset(1)
            .limit(1)
            .apply(all.clone());
        assert_eq!(got, vec![ns(&["a", "x"])]);
        let got = ListNamespaces::new().prefix(["a", "b", "c", "d"]).apply(all);
        assert!(got.is_empty());
        assert!(ListNamespaces::new().max_depth(0).validate().is_err());
    }
}
