//! The threads page: the owner's threads with their status, searched by metadata and
//! status, a page at a time.

use super::access::Viewer;
use super::html::{badge, short, time};
use super::{error_page, fragment, Q};
use crate::api::error::ApiError;
use crate::models::ThreadStatus;
use crate::state::AppRef;
use axum::extract::State;
use axum::response::Response;
use graphloom_server_db::ThreadQuery;
use maud::html;
use serde_json::{Map, Value};

/// Threads per page.
const PAGE: i64 = 20;

/// A metadata filter from the search box: a JSON object, or `key=value` pairs separated by
/// spaces or commas (a value that parses as JSON is that value, else a string).
pub(crate) fn metadata_filter(text: &str) -> Result<Map<String, Value>, ApiError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(Map::new());
    }
    if text.starts_with('{') {
        return match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => Ok(m),
            _ => Err(ApiError::invalid("the metadata filter is not a JSON object")),
        };
    }
    let mut out = Map::new();
    for pair in text.split([' ', ',']).filter(|p| !p.is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(ApiError::invalid(format!(
                "`{pair}`: write key=value, or a JSON object"
            )));
        };
        let v = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_owned()));
        out.insert(k.to_owned(), v);
    }
    Ok(out)
}

/// `GET /ui/frag/threads?status=&q=&graph=&offset=`.
pub(crate) async fn page(State(state): State<AppRef>, viewer: Viewer, q: Q) -> Response {
    let text = q.get("q").cloned().unwrap_or_default();
    let mut metadata = match metadata_filter(&text) {
        Ok(m) => m,
        Err(e) => return error_page(e),
    };
    let graph = q.get("graph").filter(|g| !g.is_empty()).cloned();
    if let Some(g) = &graph {
        metadata.insert("graph_id".into(), Value::String(g.clone()));
    }
    let status_text = q.get("status").cloned().unwrap_or_default();
    let status = match status_text.as_str() {
        "" => None,
        s => match ThreadStatus::parse(s) {
            Some(s) => Some(s),
            None => return error_page(ApiError::invalid(format!("unknown status `{s}`"))),
        },
    };
    let offset = q
        .get("offset")
        .and_then(|o| o.parse::<i64>().ok())
        .unwrap_or(0)
        .clamp(0, i64::from(u32::MAX));
    // A custom Auth's filter narrows the search, as on `POST /threads/search`.
    let (metadata, none) = match viewer.search_needle(&state, &metadata).await {
        Ok(Some(needle)) => (needle, false),
        Ok(None) => (metadata, true),
        Err(e) => return error_page(e),
    };
    let query = ThreadQuery {
        metadata,
        status,
        limit: PAGE,
        offset,
        sort_by: Some("updated_at".into()),
        ..ThreadQuery::default()
    };
    let (threads, total) = if none {
        (Vec::new(), 0)
    } else {
        match crate::service::threads::search(&state, viewer.owner(), &query).await {
            Ok(r) => r,
            Err(e) => return error_page(e),
        }
    };
    let link = |off: i64| {
        let mut qs = vec![format!("offset={off}")];
        for (k, v) in [("q", &text), ("status", &status_text)] {
            if !v.is_empty() {
                qs.push(format!(
                    "{k}={}",
                    percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC)
                ));
            }
        }
        if let Some(g) = &graph {
            qs.push(format!(
                "graph={}",
                percent_encoding::utf8_percent_encode(g, percent_encoding::NON_ALPHANUMERIC)
            ));
        }
        format!("/ui/threads?{}", qs.join("&"))
    };
    fragment(html! {
        h1 { "Threads" }
        form.search data-search="/ui/threads" {
            label { "Metadata " input name="q" value=(text) placeholder="key=value or {\"key\": ...}"; }
            label { "Status "
                select name="status" {
                    option value="" selected[status.is_none()] { "any" }
                    @for s in ["idle", "busy", "interrupted", "error"] {
                        option value=(s) selected[status_text == s] { (s) }
                    }
                }
            }
            @if let Some(g) = &graph { input type="hidden" name="graph" value=(g); }
            button type="submit" { "Search" }
        }
        p.muted.thread-count {
            (total) (if total == 1 { " thread" } else { " threads" })
            @if let Some(g) = &graph { " of graph " b { (g) } }
            @if total > 0 { " · showing " (offset + 1) "–" (offset + threads.len() as i64) }
        }
        table.threads {
            thead { tr { th { "thread" } th { "graph" } th { "status" } th { "updated" } th { "metadata" } } }
            tbody {
                @for t in &threads {
                    tr data-thread=(t.thread_id) {
                        td { a href={ "/ui/threads/" (t.thread_id) } data-nav { (short(&t.thread_id)) } }
                        td { (t.metadata.get("graph_id").and_then(Value::as_str).unwrap_or("—")) }
                        td { (badge(t.status.as_str())) }
                        td { (time(&t.updated_at)) }
                        td.meta { (super::json::pretty(&Value::Object(t.metadata.clone()), 300)) }
                    }
                }
            }
        }
        nav.pager {
            @if offset > 0 { a href=(link((offset - PAGE).max(0))) data-nav rel="prev" { "← newer" } }
            @if offset + PAGE < total { a href=(link(offset + PAGE)) data-nav rel="next" { "older →" } }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_read_pairs_and_json() {
        let m = metadata_filter("graph_id=permit_filing n=3").unwrap();
        assert_eq!(m["graph_id"], "permit_filing");
        assert_eq!(m["n"], 3);
        assert_eq!(
            metadata_filter(r#"{"a": [1]}"#).unwrap()["a"],
            serde_json::json!([1])
        );
        assert!(metadata_filter("oops").is_err());
        assert!(metadata_filter("[1]").is_err());
    }
}
