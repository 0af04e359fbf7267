//! The shell page and the pieces every page uses: status badges, ids, times, and messages
//! rendered as a chat.

use maud::{html, Markup, DOCTYPE};
use serde_json::Value;

/// The one page every console URL serves; its script loads the fragment of the URL.
pub(crate) fn shell() -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "graphloom console" }
                link rel="stylesheet" href="/ui/static/console.css";
                script src="/ui/static/console.js" defer {}
            }
            body {
                header.top {
                    a.brand href="/ui/graphs" data-nav { "graphloom" }
                    nav {
                        a href="/ui/graphs" data-nav data-section="graphs" { "Graphs" }
                        a href="/ui/threads" data-nav data-section="threads" { "Threads" }
                        a href="/ui/overview" data-nav data-section="overview" { "Overview" }
                    }
                    button #logout.link type="button" hidden { "Forget API key" }
                }
                section #login.card hidden {
                    h1 { "API key" }
                    p { "This server asks for an API key. It is kept in this browser tab only (session storage)." }
                    form #login-form {
                        input #login-key type="password" name="key" autocomplete="off" placeholder="API key" required;
                        button type="submit" { "Sign in" }
                    }
                    p #login-error.error hidden {}
                }
                div #banner hidden {}
                main #view { p.muted { "Loading…" } }
            }
        }
    }
}

/// A status as a coloured badge.
pub(crate) fn badge(status: &str) -> Markup {
    html! { span class={ "badge " (status) } { (status) } }
}

/// What tells an id apart from its neighbours: a UUID's last 8 characters (a UUIDv7 starts
/// with its creation time, the same for everything made in one second; it ends random), a
/// short id whole, a long one's head and tail.
pub(crate) fn distinct(id: &str) -> String {
    let b = id.as_bytes();
    let uuid = b.len() == 36 && [8, 13, 18, 23].iter().all(|&i| b[i] == b'-');
    let n = id.chars().count();
    if uuid {
        format!("…{}", &id[28..])
    } else if n <= 20 {
        id.to_owned()
    } else {
        let head: String = id.chars().take(10).collect();
        let tail: String = id.chars().skip(n - 6).collect();
        format!("{head}…{tail}")
    }
}

/// An id as [`distinct`] shows it, the whole as a tooltip; the console copies the whole
/// when it is clicked (outside a link).
pub(crate) fn short(id: &str) -> Markup {
    html! { code.id title=(id) data-copy=(id) { (distinct(id)) } }
}

/// An RFC 3339 time as `YYYY-MM-DD HH:MM:SS` (UTC), the whole as a tooltip.
pub(crate) fn time(t: &str) -> Markup {
    let shown: String = t.replace('T', " ").chars().take(19).collect();
    html! { time datetime=(t) title=(t) { (shown) } }
}

/// The text of a message's `content`: a string, or the text parts of a list.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.clone()),
                other => other.get("text").and_then(Value::as_str).map(str::to_owned),
            })
            .collect::<Vec<_>>()
            .join(""),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A message's role: LangChain's `type` or OpenAI's `role`.
fn role(m: &Value) -> &str {
    let r = m
        .get("type")
        .or_else(|| m.get("role"))
        .and_then(Value::as_str)
        .unwrap_or("message");
    match r {
        "user" => "human",
        "assistant" | "AIMessageChunk" => "ai",
        other => other,
    }
}

/// Messages as a chat: who said what, tool calls with their arguments, tool results with
/// the call they answer. Everything is text: HTML in a message is shown, never run.
pub(crate) fn chat(messages: &[Value]) -> Markup {
    html! {
        ol.chat {
            @for m in messages {
                @let r = role(m);
                li class={ "msg " (r) } {
                    div.who {
                        (r)
                        @if let Some(name) = m.get("name").and_then(Value::as_str) { " · " (name) }
                        @if let Some(id) = m.get("tool_call_id").and_then(Value::as_str) { " · result of " code { (id) } }
                    }
                    @let text = content_text(m.get("content").unwrap_or(&Value::Null));
                    @if !text.is_empty() { div.text { (text) } }
                    @if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
                        @for c in calls {
                            @let f = c.get("function");
                            @let name = c.get("name").or_else(|| f.and_then(|f| f.get("name"))).and_then(Value::as_str).unwrap_or("?");
                            @let args = c.get("args").or_else(|| f.and_then(|f| f.get("arguments"))).cloned().unwrap_or(Value::Null);
                            div.toolcall {
                                span.tool { "tool call " b { (name) } }
                                @if let Some(id) = c.get("id").and_then(Value::as_str) { " " code { (id) } }
                                pre { (super::json::pretty(&args, 4000)) }
                            }
                        }
                    }
                    @if let Some(u) = m.get("usage_metadata").filter(|u| u.is_object()) {
                        div.usage.muted {
                            "tokens: " (u.get("input_tokens").and_then(Value::as_u64).unwrap_or(0)) " in, "
                            (u.get("output_tokens").and_then(Value::as_u64).unwrap_or(0)) " out"
                            @if let Some(model) = m.pointer("/response_metadata/model_name").and_then(Value::as_str) { " · " (model) }
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
    fn chat_shows_html_as_text() {
        let m = json!([{"type": "human", "content": "<img src=x onerror=alert(1)>"},
                       {"type": "ai", "content": "", "tool_calls": [{"id": "c1", "name": "<u>", "args": {"q": "<i>"}}]},
                       {"type": "tool", "content": "ok", "tool_call_id": "c1"}]);
        let out = chat(m.as_array().unwrap()).into_string();
        assert!(
            !out.contains("<img") && !out.contains("<u>") && !out.contains("<i>"),
            "{out}"
        );
        assert!(out.contains("&lt;img src=x onerror=alert(1)&gt;"));
        assert!(out.contains("&lt;u&gt;") && out.contains("&lt;i&gt;"), "{out}");
        assert!(out.contains("result of"));
    }
}
