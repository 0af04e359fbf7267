//! A thread's page: pending interrupts with their forms, runs, the checkpoint timeline a
//! page at a time, and the state at the chosen checkpoint (chat, tree, difference from its
//! parent) with the form that forks from it.

use super::access::Viewer;
use super::html::{badge, chat, short, time};
use super::json::{diff, diff_view, pretty, tree, LARGE, TREE_BUDGET};
use super::{error_page, fragment, Q};
use crate::api::error::ApiError;
use crate::auth::{Action, Resource};
use crate::service::{runs, threads};
use crate::state::AppRef;
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use maud::{html, Markup};
use serde_json::{Map, Value};

/// Checkpoints per page of the timeline.
pub(crate) const PAGE: usize = 50;

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// The names in a JSON list of strings.
fn names(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// `GET /ui/frag/threads/{thread_id}?before=<checkpoint>&at=<checkpoint>`.
pub(crate) async fn page(
    State(state): State<AppRef>,
    viewer: Viewer,
    Path(thread_id): Path<String>,
    q: Q,
) -> Response {
    if let Err(e) = viewer
        .may(&state, Resource::Threads, Action::Read, &thread_id, None)
        .await
    {
        return error_page(e);
    }
    match render(&state, viewer.owner(), &thread_id, &q).await {
        Ok(m) => fragment(m),
        Err(e) => error_page(e),
    }
}

async fn render(state: &AppRef, owner: &str, thread_id: &str, q: &Q) -> Result<Markup, ApiError> {
    let t = threads::load(state, owner, thread_id).await?;
    let graph_id = t
        .metadata
        .get("graph_id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let before = q.get("before").filter(|b| !b.is_empty()).cloned();
    let history = threads::history(
        state,
        owner,
        thread_id,
        Some(PAGE + 1),
        before.clone(),
        Map::new(),
    )
    .await?;
    let latest = threads::state_at(state, owner, thread_id, None).await?;
    let at = q.get("at").filter(|a| !a.is_empty());
    let selected = match at {
        Some(id) => match history.iter().find(|h| text(h, "/checkpoint_id") == id.as_str()) {
            Some(h) => h.clone(),
            None => threads::state_at(state, owner, thread_id, Some(id)).await?,
        },
        None => latest.clone(),
    };
    let parent_id = text(&selected, "/parent_checkpoint_id").to_owned();
    let parent = if parent_id.is_empty() {
        None
    } else {
        match history.iter().find(|h| text(h, "/checkpoint_id") == parent_id) {
            Some(h) => Some(h.clone()),
            None => threads::state_at(state, owner, thread_id, Some(&parent_id))
                .await
                .ok(),
        }
    };
    let run_list = runs::list(state, owner, thread_id, None, (20, 0)).await?;
    let interrupts: Vec<Value> = latest
        .get("interrupts")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let interrupted = t.status == crate::models::ThreadStatus::Interrupted && !interrupts.is_empty();
    Ok(html! {
        div.thread data-thread=(thread_id) data-graph=(graph_id) {
            h1 { "Thread " (short(thread_id)) " " (badge(t.status.as_str())) }
            p.muted {
                "graph " b { (if graph_id.is_empty() { "—" } else { &graph_id }) }
                " · created " (time(&t.created_at)) " · updated " (time(&t.updated_at))
                " · id " code { (thread_id) }
            }
            @if !t.metadata.is_empty() {
                details.meta { summary { "metadata" } pre { (pretty(&Value::Object(t.metadata.clone()), 4000)) } }
            }
            @if interrupted {
                section.card.interrupts {
                    h2 { "Waiting for you" }
                    @for i in &interrupts { (interrupt_form(i, interrupts.len())) }
                }
            }
            section.card.runs {
                h2 { "Runs" }
                (runs_table(thread_id, &run_list))
                @if !graph_id.is_empty() {
                    details.start-run {
                        summary { "New run on this thread" }
                        form.start-run data-graph=(graph_id) data-thread=(thread_id) {
                            label { "Input (JSON)" textarea name="input" rows="5" spellcheck="false" { "{}" } }
                            button type="submit" { "Start run" }
                            span.form-error.error {}
                        }
                    }
                }
            }
            div.columns {
                section.card.timeline {
                    h2 { "Checkpoints" }
                    (timeline(thread_id, &history, text(&selected, "/checkpoint_id"), before.as_deref()))
                }
                section.card.checkpoint {
                    (checkpoint_view(thread_id, &selected, parent.as_ref()))
                }
            }
        }
    })
}

fn runs_table(thread_id: &str, runs: &[crate::models::Run]) -> Markup {
    html! {
        @if runs.is_empty() { p.muted { "No run yet." } } @else {
            table.runs {
                thead { tr { th { "run" } th { "status" } th { "created" } th { "updated" } th {} } }
                tbody {
                    @for r in runs {
                        tr data-run=(r.run_id) data-status=(r.status.as_str()) {
                            td { a href={ "/ui/runs/" (thread_id) "/" (r.run_id) } data-nav { (short(&r.run_id)) } }
                            td { (badge(r.status.as_str())) }
                            td { (time(&r.created_at)) }
                            td { (time(&r.updated_at)) }
                            td {
                                @if !r.status.is_final() {
                                    button.cancel type="button" data-run=(r.run_id) { "Cancel" }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The timeline: a row per checkpoint, newest first; the nodes that wrote it are the
/// `next` of its parent, its writes the keys that differ from its parent.
fn timeline(thread_id: &str, history: &[Value], selected: &str, before: Option<&str>) -> Markup {
    let shown = &history[..history.len().min(PAGE)];
    let more = history.len() > PAGE;
    let link = |at: &str| match before {
        Some(b) => format!("/ui/threads/{thread_id}?before={b}&at={at}"),
        None => format!("/ui/threads/{thread_id}?at={at}"),
    };
    html! {
        @if shown.is_empty() { p.muted { "No checkpoint yet." } } @else {
            table.timeline {
                thead { tr { th { "step" } th { "node(s)" } th { "time" } th { "writes" } th { "checkpoint" } } }
                tbody {
                    @for (i, h) in shown.iter().enumerate() {
                        @let id = text(h, "/checkpoint_id");
                        @let parent_id = text(h, "/parent_checkpoint_id");
                        @let older = history.get(i + 1);
                        @let parent = older.filter(|o| !parent_id.is_empty() && text(o, "/checkpoint_id") == parent_id);
                        @let source = text(h, "/metadata/source");
                        @let nodes = match (source, parent) {
                            ("loop", Some(p)) => names(p.get("next")).join(", "),
                            ("loop", None) => "…".to_owned(),
                            (s, _) => s.to_owned(),
                        };
                        @let writes = parent.map(|p| {
                            diff(p.get("values").unwrap_or(&Value::Null), h.get("values").unwrap_or(&Value::Null))
                                .into_iter().map(|(k, _)| k).collect::<Vec<_>>().join(", ")
                        });
                        @let branch = older.is_some() && parent.is_none() && !parent_id.is_empty();
                        tr.selected[id == selected] data-checkpoint=(id) data-source=(source) {
                            td { (h.pointer("/metadata/step").and_then(Value::as_i64).unwrap_or(0)) }
                            td.nodes { (nodes)
                                @if branch { " " span.branch title={ "parent " (parent_id) } { "↳ fork of " (short(parent_id)) } }
                            }
                            td { (time(text(h, "/created_at"))) }
                            td.writes { (writes.unwrap_or_else(|| "—".to_owned())) }
                            td { a href=(link(id)) data-nav { (short(id)) } }
                        }
                    }
                }
            }
            nav.pager {
                @if before.is_some() { a href={ "/ui/threads/" (thread_id) } data-nav { "← newest" } }
                @if more {
                    @if let Some(last) = shown.last() {
                        a href={ "/ui/threads/" (thread_id) "?before=" (text(last, "/checkpoint_id")) } data-nav rel="next" { "older →" }
                    }
                }
            }
        }
    }
}

fn checkpoint_view(thread_id: &str, s: &Value, parent: Option<&Value>) -> Markup {
    let id = text(s, "/checkpoint_id");
    if id.is_empty() {
        return html! { h2 { "State" } p.muted { "This thread has no checkpoint yet." } };
    }
    let values = s.get("values").cloned().unwrap_or(Value::Null);
    let size = serde_json::to_string(&values).map(|t| t.len()).unwrap_or(0);
    let large = size > LARGE;
    let budget_all = if large { TREE_BUDGET / 4 } else { TREE_BUDGET };
    let mut budget = budget_all;
    let messages = values
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let next = names(s.get("next"));
    let source = text(s, "/metadata/source");
    let as_node = parent
        .map(|p| names(p.get("next")))
        .filter(|n| n.len() == 1 && source == "loop")
        .and_then(|mut n| n.pop())
        .unwrap_or_default();
    html! {
        h2 { "Checkpoint " (short(id)) }
        p.muted {
            "step " (s.pointer("/metadata/step").and_then(Value::as_i64).unwrap_or(0))
            " · " (source) " · " (time(text(s, "/created_at")))
            @if !next.is_empty() { " · next: " b { (next.join(", ")) } }
        }
        @if large {
            p.warning.large-state {
                "This state is too large to render whole (" (size / 1024) " KB): it is cut below. "
                a href="#" data-download={ "/ui/frag/threads/" (thread_id) "/state/" (id) } data-filename={ "state-" (id) ".json" } { "Download it as JSON" }
            }
        }
        @if !messages.is_empty() {
            details.messages open {
                summary { "Messages (" (messages.len()) ")" }
                @let tail = messages.len().saturating_sub(if large { 20 } else { 200 });
                @if tail > 0 { p.muted { (tail) " earlier messages not shown" } }
                (chat(&messages[tail..]))
            }
        }
        details.values open {
            summary { "State" }
            div.state-tree { (tree(&values, 1, &mut budget)) }
        }
        details.diff open {
            summary { "Changes from the previous checkpoint" }
            @match parent {
                Some(p) => (diff_view(&diff(p.get("values").unwrap_or(&Value::Null), &values))),
                None => p.muted { "The first checkpoint of its branch." },
            }
        }
        details.fork {
            summary { "Fork from this checkpoint" }
            form.fork data-checkpoint=(id) {
                p.muted { "The fields to change, as the node below would write them (reducers apply). A new checkpoint branches from this one; the old branch stays." }
                label { "Values (JSON object)" textarea name="values" rows="5" spellcheck="false" { "{}" } }
                label { "As node " input name="as_node" value=(as_node) placeholder="node name (optional)"; }
                label.inline { input type="checkbox" name="run"; " then run from the fork" }
                button type="submit" { "Fork" }
                span.form-error.error {}
            }
        }
    }
}

/// One pending interrupt: LangChain's HITL request gets a decision per action (approve,
/// edit, reject, respond, as its review config allows); any other value a JSON answer.
fn interrupt_form(i: &Value, count: usize) -> Markup {
    let id = text(i, "/id");
    let value = i.get("value").cloned().unwrap_or(Value::Null);
    let actions = value.get("action_requests").and_then(Value::as_array).cloned();
    let configs = value
        .get("review_configs")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    html! {
        div.interrupt data-interrupt=(id) {
            h3 { "Interrupt " (short(id)) }
            @match actions {
                Some(actions) => {
                    form.resume data-kind="hitl" data-interrupt=(id) data-count=(count) {
                        @for (n, a) in actions.iter().enumerate() {
                            @let name = text(a, "/name");
                            @let args = a.get("args").or_else(|| a.get("arguments")).cloned().unwrap_or(Value::Null);
                            @let allowed = configs.iter()
                                .find(|c| text(c, "/action_name") == name)
                                .map(|c| names(c.get("allowed_decisions")))
                                .filter(|d| !d.is_empty())
                                .unwrap_or_else(|| vec!["approve".into(), "edit".into(), "reject".into()]);
                            fieldset.action data-index=(n) data-name=(name) {
                                legend { "Action " b { (name) } }
                                @if let Some(d) = a.get("description").and_then(Value::as_str) { p.description { (d) } }
                                pre.args { (pretty(&args, 8000)) }
                                div.decisions {
                                    @for (k, d) in allowed.iter().enumerate() {
                                        label.inline { input type="radio" name={ "decision-" (n) } value=(d) checked[k == 0]; " " (d) }
                                    }
                                }
                                @if allowed.iter().any(|d| d == "edit") {
                                    label.edit { "Edited arguments (for edit)" textarea name={ "args-" (n) } rows="4" spellcheck="false" { (pretty(&args, 8000)) } }
                                }
                                @if allowed.iter().any(|d| d == "reject" || d == "respond") {
                                    label { "Message (for reject or respond) " input name={ "message-" (n) } placeholder="why, or your answer"; }
                                }
                            }
                        }
                        button type="submit" { "Send decision" }
                        span.form-error.error {}
                    }
                }
                None => {
                    div.value { (tree(&value, 2, &mut TREE_BUDGET.clone())) }
                    form.resume data-kind="json" data-interrupt=(id) data-count=(count) {
                        label { "Answer (any JSON value)" textarea name="value" rows="3" spellcheck="false" {} }
                        button type="submit" { "Resume" }
                        span.form-error.error {}
                    }
                }
            }
        }
    }
}

/// `GET /ui/frag/threads/{thread_id}/state/{checkpoint_id}`: a checkpoint's values whole,
/// as a JSON download (what a state too large to render links to).
pub(crate) async fn full_state(
    State(state): State<AppRef>,
    viewer: Viewer,
    Path((thread_id, checkpoint_id)): Path<(String, String)>,
) -> Response {
    if let Err(e) = viewer
        .may(&state, Resource::Threads, Action::Read, &thread_id, None)
        .await
    {
        return error_page(e);
    }
    match threads::state_at(&state, viewer.owner(), &thread_id, Some(&checkpoint_id)).await {
        Ok(s) => {
            let body = serde_json::to_vec_pretty(s.get("values").unwrap_or(&Value::Null)).unwrap_or_default();
            let disposition = format!(
                "attachment; filename=\"state-{}.json\"",
                checkpoint_id.replace(['"', '\\'], "")
            );
            (
                [
                    (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
                    (
                        header::CONTENT_DISPOSITION,
                        HeaderValue::from_str(&disposition).unwrap_or(HeaderValue::from_static("attachment")),
                    ),
                ],
                body,
            )
                .into_response()
        }
        Err(e) => error_page(e),
    }
}
