//! `graphloom run`: the stream of a local run rendered for a person (or as JSON lines).

use futures::StreamExt;
use graphloom_core::StreamMode;
use graphloom_server::hosted::{HostedGraph, JsonCommand, JsonRunEvent, JsonRunRequest};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn short(v: &Value, max: usize) -> String {
    let s = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if s.chars().count() > max {
        format!("{}…", s.chars().take(max).collect::<String>())
    } else {
        s
    }
}

/// What one run of the loop ended with.
enum Ended {
    Done(Value),
    Interrupted(Vec<Value>),
}

/// How `graphloom run` shows a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Show {
    /// Raw events as JSON lines, for scripts.
    pub json: bool,
    /// Print the graph's custom stream events too (they often repeat the tokens and tool
    /// calls already shown).
    pub custom: bool,
    /// End with the whole final state instead of a summary.
    pub full: bool,
}

struct View {
    show: Show,
    spinners: HashMap<String, (ProgressBar, Instant, String)>,
    streaming: bool,
    /// Tool calls and tool results already printed (a subgraph's update and its parent
    /// node's update carry the same messages).
    seen: HashSet<String>,
    /// The text of the last message streamed token by token.
    last_stream: String,
    /// Custom events not printed.
    hidden_custom: usize,
    /// Supersteps' node runs that finished.
    tasks_done: usize,
    started: Instant,
}

impl View {
    fn spinner(&self, name: &str) -> ProgressBar {
        let pb = if std::io::stderr().is_terminal() {
            ProgressBar::new_spinner()
        } else {
            ProgressBar::hidden()
        };
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
            pb.set_style(style);
        }
        pb.set_message(format!("running {name}"));
        pb.enable_steady_tick(Duration::from_millis(100));
        pb
    }

    fn end_tokens(&mut self) {
        if self.streaming {
            println!();
            self.streaming = false;
        }
    }

    fn part(&mut self, mode: StreamMode, ns: &[String], data: &Value) {
        if self.show.json {
            println!("{}", json!({"mode": mode.as_str(), "ns": ns, "data": data}));
            return;
        }
        let indent = "  ".repeat(ns.len());
        match mode {
            StreamMode::Tasks => {
                let id = data
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let name = data.get("name").and_then(Value::as_str).unwrap_or("?").to_owned();
                if data.get("triggers").is_some() || data.get("input").is_some() {
                    let pb = self.spinner(&name);
                    self.spinners.insert(id, (pb, Instant::now(), name));
                } else if let Some((pb, t0, name)) = self.spinners.remove(&id) {
                    pb.finish_and_clear();
                    self.tasks_done += 1;
                    self.end_tokens();
                    let ms = t0.elapsed().as_millis();
                    match data.get("error").filter(|e| !e.is_null()) {
                        Some(e) => println!("{indent}✗ {name} failed after {ms} ms: {}", short(e, 200)),
                        None if data
                            .get("interrupts")
                            .and_then(Value::as_array)
                            .is_some_and(|i| !i.is_empty()) =>
                        {
                            println!("{indent}⏸ {name} paused ({ms} ms)");
                        }
                        None => println!("{indent}✓ {name} ({ms} ms)"),
                    }
                }
            }
            StreamMode::Messages => {
                let chunk = data.get(0).unwrap_or(&Value::Null);
                // Tokens only: whole messages a node returned show with its update.
                let is_chunk = chunk
                    .get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| t.ends_with("Chunk"));
                if let Some(text) = chunk
                    .get("content")
                    .filter(|_| is_chunk)
                    .and_then(Value::as_str)
                    .filter(|t| !t.is_empty())
                {
                    if !self.streaming {
                        let node = data
                            .get(1)
                            .and_then(|m| m.get("langgraph_node"))
                            .and_then(Value::as_str)
                            .unwrap_or("model");
                        print!("{indent}  {node} ▸ ");
                        self.streaming = true;
                        self.last_stream.clear();
                    }
                    self.last_stream.push_str(text);
                    print!("{text}");
                    let _ = std::io::stdout().flush();
                }
            }
            StreamMode::Updates => {
                let Some(obj) = data.as_object() else { return };
                for (node, update) in obj {
                    if node == "__interrupt__" {
                        continue;
                    }
                    let msgs = update
                        .get("messages")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    for m in msgs {
                        for call in m
                            .get("tool_calls")
                            .and_then(Value::as_array)
                            .cloned()
                            .unwrap_or_default()
                        {
                            let key = call
                                .get("id")
                                .and_then(Value::as_str)
                                .map(|id| format!("call {id}"));
                            if key.as_ref().is_some_and(|k| !self.seen.insert(k.clone())) {
                                continue;
                            }
                            self.end_tokens();
                            println!(
                                "{indent}  → {}({})",
                                call.get("name").and_then(Value::as_str).unwrap_or("?"),
                                short(call.get("args").unwrap_or(&Value::Null), 120)
                            );
                        }
                        if m.get("type").and_then(Value::as_str) == Some("tool") {
                            let key = m
                                .get("tool_call_id")
                                .or_else(|| m.get("id"))
                                .and_then(Value::as_str)
                                .map(|id| format!("result {id}"));
                            if key.as_ref().is_some_and(|k| !self.seen.insert(k.clone())) {
                                continue;
                            }
                            self.end_tokens();
                            println!(
                                "{indent}  ← {}: {}",
                                m.get("name").and_then(Value::as_str).unwrap_or("tool"),
                                short(m.get("content").unwrap_or(&Value::Null), 160)
                            );
                        }
                    }
                }
            }
            StreamMode::Custom if self.show.custom => {
                self.end_tokens();
                println!("{indent}  • {}", short(data, 200));
            }
            StreamMode::Custom => self.hidden_custom += 1,
            _ => {}
        }
    }
}

/// Ask a person what to resume an interrupt with.
fn prompt(interrupts: &[Value]) -> anyhow::Result<Value> {
    for i in interrupts {
        println!(
            "⏸ interrupt {}:",
            i.get("id").and_then(Value::as_str).unwrap_or("")
        );
        println!(
            "{}",
            serde_json::to_string_pretty(i.get("value").unwrap_or(&Value::Null))?
        );
    }
    let stdin = std::io::stdin();
    loop {
        print!("[a]pprove, [r]eject, [e]dit, or a JSON value > ");
        std::io::stdout().flush()?;
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            anyhow::bail!("no answer on standard input");
        }
        let line = line.trim();
        match line {
            "a" | "approve" => return Ok(json!({"decision": "approve"})),
            "r" | "reject" => {
                print!("reason > ");
                std::io::stdout().flush()?;
                let mut reason = String::new();
                stdin.lock().read_line(&mut reason)?;
                return Ok(json!({"decision": "reject", "reason": reason.trim()}));
            }
            "e" | "edit" => {
                print!("new arguments (JSON) > ");
                std::io::stdout().flush()?;
                let mut args = String::new();
                stdin.lock().read_line(&mut args)?;
                match serde_json::from_str::<Value>(args.trim()) {
                    Ok(a) => return Ok(json!({"decision": "edit", "args": a})),
                    Err(e) => println!("not JSON: {e}"),
                }
            }
            other => match serde_json::from_str::<Value>(other) {
                Ok(v) => return Ok(v),
                Err(e) => println!("not an answer or JSON ({e}); try again"),
            },
        }
    }
}

/// One pass of a run: stream it to the view; how it ended (a failed run is an error).
async fn pass(graph: &Arc<dyn HostedGraph>, req: JsonRunRequest, view: &mut View) -> anyhow::Result<Ended> {
    let mut stream = graph.stream(req);
    let mut ended = None;
    while let Some(ev) = stream.next().await {
        match ev {
            JsonRunEvent::Part { mode, ns, data } => view.part(mode, &ns, &data),
            JsonRunEvent::End(Ok(out)) => {
                ended = Some(if out.interrupted {
                    Ended::Interrupted(out.interrupts.iter().map(|i| json!(i)).collect())
                } else {
                    Ended::Done(out.values)
                });
            }
            JsonRunEvent::End(Err(e)) => {
                view.end_tokens();
                for (_, (pb, _, _)) in view.spinners.drain() {
                    pb.finish_and_clear();
                }
                if view.show.json {
                    println!("{}", json!({"end": "error", "error": e.to_string()}));
                }
                return Err(e.into());
            }
        }
    }
    view.end_tokens();
    ended.ok_or_else(|| anyhow::anyhow!("the run ended without a result"))
}

/// Field names whose value says how a graph's own work turned out.
const STATUS_FIELDS: &[&str] = &["status", "outcome", "state", "result_status"];

/// A status value that means the graph's work failed, though the run itself finished.
fn is_failure(status: &str) -> bool {
    let s = status.to_ascii_lowercase();
    ["fail", "error", "abort"].iter().any(|w| s.contains(w))
}

/// Why a finished run's own state says it failed: its status field, with its `error`.
#[must_use]
pub fn reported_failure(values: &Value) -> Option<String> {
    let status = STATUS_FIELDS
        .iter()
        .find_map(|f| values.get(*f).and_then(Value::as_str).map(|v| (*f, v)))
        .filter(|(_, v)| is_failure(v));
    let error = values
        .get("error")
        .filter(|e| !e.is_null() && e.as_str() != Some(""));
    match (status, error) {
        (Some((f, v)), Some(e)) => Some(format!("{f} {v}: {}", short(e, 300))),
        (Some((f, v)), None) => Some(format!("{f} {v}")),
        _ => None,
    }
}

/// A short view of a final state: each scalar field on a line, collections by size.
#[must_use]
pub fn summary(values: &Value) -> Vec<String> {
    let Some(obj) = values.as_object() else {
        return vec![short(values, 200)];
    };
    let mut lines = Vec::new();
    let mut sizes = Vec::new();
    for (k, v) in obj {
        match v {
            Value::Null => {}
            Value::Array(a) if !a.is_empty() => sizes.push(format!("{k} [{}]", a.len())),
            Value::Object(o) if !o.is_empty() => sizes.push(format!("{k} {{{} keys}}", o.len())),
            Value::Array(_) | Value::Object(_) => {}
            Value::String(s) if s.is_empty() => {}
            other => lines.push(format!("  {k}: {}", short(other, 100))),
        }
    }
    if !sizes.is_empty() {
        lines.push(format!("  also: {}", sizes.join(", ")));
    }
    lines
}

fn last_answer(values: &Value) -> Option<String> {
    values
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| {
            m.iter()
                .rev()
                .find(|m| m.get("type").and_then(Value::as_str) == Some("ai"))
        })
        .and_then(|m| m.get("content"))
        .filter(|c| c.as_str().is_none_or(|s| !s.is_empty()))
        .map(|c| short(c, 2000))
}

/// What the person sees when a run finished: the outcome first, then a short view.
fn finished(view: &View, values: &Value) -> anyhow::Result<bool> {
    let secs = view.started.elapsed().as_secs_f64();
    let failure = reported_failure(values);
    match &failure {
        Some(why) => println!(
            "✗ failed: the graph finished and reports {why} ({} node runs, {secs:.1} s)",
            view.tasks_done
        ),
        None => println!("✓ done ({} node runs, {secs:.1} s)", view.tasks_done),
    }
    if view.show.full {
        println!("{}", serde_json::to_string_pretty(values)?);
    } else {
        match last_answer(values) {
            // Streamed token by token above: not again.
            Some(text) if text.trim() == view.last_stream.trim() => {}
            Some(text) => println!("last answer:\n{text}"),
            None => {
                for l in summary(values) {
                    println!("{l}");
                }
                println!("(--full prints the whole state)");
            }
        }
    }
    if view.hidden_custom > 0 {
        println!(
            "({} custom stream events not shown; --custom shows them)",
            view.hidden_custom
        );
    }
    Ok(failure.is_none())
}

/// Where a run starts from.
pub enum Start {
    /// New input (a new run on the thread).
    Input(Value),
    /// No input: continue from the thread's last checkpoint (after a failure, a drain, or
    /// a paused interrupt).
    Continue,
}

/// Run `graph` on `thread`, resuming interrupts interactively or with `resume`. A thread
/// paused at an interrupt is resumed instead of given new input. The first line names the
/// graph, the thread and the model that answers (`model`); the last says how the run
/// ended. `Ok(false)` when the graph finished but its state reports a failure.
pub async fn run(
    graph: Arc<dyn HostedGraph>,
    graph_id: &str,
    start: Start,
    thread: Option<String>,
    mut resume: Option<Value>,
    model: &str,
    show: Show,
) -> anyhow::Result<bool> {
    let thread = thread.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    crate::require_thread(&thread)?;
    let json = show.json;
    if json {
        eprintln!("graph {graph_id} · thread {thread} · model {model}");
    } else {
        println!("graph {graph_id} · thread {thread} · model {model}");
    }
    let mut view = View {
        show,
        spinners: HashMap::new(),
        streaming: false,
        seen: HashSet::new(),
        last_stream: String::new(),
        hidden_custom: 0,
        tasks_done: 0,
        started: Instant::now(),
    };
    let mut metadata = Map::new();
    metadata.insert("graph_id".into(), json!(graph_id));
    let pending: Vec<Value> = graph
        .get_state(&thread, None)
        .await?
        .and_then(|s| s.get("interrupts").and_then(Value::as_array).cloned())
        .unwrap_or_default();
    if matches!(start, Start::Continue) && !json {
        println!("↻ continuing from the thread's last checkpoint");
    }
    let mut input = match start {
        Start::Input(v) if pending.is_empty() => Some(v),
        _ => None,
    };
    let mut command: Option<JsonCommand> = None;
    let mut ended = (!pending.is_empty()).then_some(Ended::Interrupted(pending));
    loop {
        let this = match ended.take() {
            Some(e) => e,
            None => {
                let req = JsonRunRequest {
                    input: input.take(),
                    command: command.take(),
                    thread_id: Some(thread.clone()),
                    metadata: metadata.clone(),
                    modes: vec![
                        StreamMode::Updates,
                        StreamMode::Messages,
                        StreamMode::Custom,
                        StreamMode::Tasks,
                    ],
                    subgraphs: true,
                    ..JsonRunRequest::default()
                };
                match pass(&graph, req, &mut view).await {
                    Ok(e) => e,
                    Err(e) if json => return Err(e.context("run failed")),
                    Err(e) => {
                        println!(
                            "✗ failed ({} node runs, {:.1} s): {e}",
                            view.tasks_done,
                            view.started.elapsed().as_secs_f64()
                        );
                        println!(
                            "where it stopped: graphloom threads show {thread}\n\
                             continue it:      graphloom run {graph_id} --thread {thread} --continue"
                        );
                        anyhow::bail!("the run failed");
                    }
                }
            }
        };
        match this {
            Ended::Done(values) => {
                if json {
                    println!("{}", json!({"end": "done", "values": values}));
                    return Ok(reported_failure(&values).is_none());
                }
                return finished(&view, &values);
            }
            Ended::Interrupted(ints) => {
                if json {
                    println!("{}", json!({"end": "interrupted", "interrupts": ints}));
                }
                let value = match resume.take() {
                    Some(v) => v,
                    None if std::io::stdin().is_terminal() && !json => prompt(&ints)?,
                    None => {
                        if !json {
                            println!("⏸ paused at an interrupt: {}", short(&json!(ints), 400));
                        }
                        let hint = format!(
                            "resume with: graphloom run {graph_id} --thread {thread} --resume '<json>'"
                        );
                        if json {
                            eprintln!("{hint}");
                        } else {
                            println!("{hint}");
                        }
                        return Ok(true);
                    }
                };
                command = Some(JsonCommand {
                    resume: Some(value),
                    ..JsonCommand::default()
                });
            }
        }
    }
}
