//! `graphloom run`: the stream of a local run rendered for a person (or as JSON lines).

use futures::StreamExt;
use graphloom_core::StreamMode;
use graphloom_server::hosted::{HostedGraph, JsonCommand, JsonRunEvent, JsonRunRequest};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
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

struct View {
    json: bool,
    spinners: HashMap<String, (ProgressBar, Instant, String)>,
    streaming: bool,
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
        if self.json {
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
                    }
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
                            self.end_tokens();
                            println!(
                                "{indent}  → {}({})",
                                call.get("name").and_then(Value::as_str).unwrap_or("?"),
                                short(call.get("args").unwrap_or(&Value::Null), 120)
                            );
                        }
                        if m.get("type").and_then(Value::as_str) == Some("tool") {
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
            StreamMode::Custom => {
                self.end_tokens();
                println!("{indent}  • {}", short(data, 200));
            }
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

/// One pass of a run: stream it to the view; how it ended.
async fn pass(graph: &Arc<dyn HostedGraph>, req: JsonRunRequest, view: &mut View) -> anyhow::Result<Ended> {
    let thread = req.thread_id.clone().unwrap_or_default();
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
                if view.json {
                    println!("{}", json!({"end": "error", "error": e.to_string()}));
                }
                anyhow::bail!("run failed: {e} (`graphloom threads show {thread}` shows where it stopped)");
            }
        }
    }
    view.end_tokens();
    ended.ok_or_else(|| anyhow::anyhow!("the run ended without a result"))
}

/// Run `graph` on `thread`, resuming interrupts interactively or with `resume`. A thread
/// paused at an interrupt is resumed instead of given new input.
pub async fn run(
    graph: Arc<dyn HostedGraph>,
    graph_id: &str,
    input: Value,
    thread: Option<String>,
    mut resume: Option<Value>,
    json: bool,
) -> anyhow::Result<()> {
    let thread = thread.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    crate::require_thread(&thread)?;
    if !json {
        println!("graph {graph_id} · thread {thread}");
    }
    let mut view = View {
        json,
        spinners: HashMap::new(),
        streaming: false,
    };
    let mut metadata = Map::new();
    metadata.insert("graph_id".into(), json!(graph_id));
    let pending: Vec<Value> = graph
        .get_state(&thread, None)
        .await?
        .and_then(|s| s.get("interrupts").and_then(Value::as_array).cloned())
        .unwrap_or_default();
    let mut input = pending.is_empty().then_some(input);
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
                pass(&graph, req, &mut view).await?
            }
        };
        match this {
            Ended::Done(values) => {
                if json {
                    println!("{}", json!({"end": "done", "values": values}));
                    return Ok(());
                }
                let last = values
                    .get("messages")
                    .and_then(Value::as_array)
                    .and_then(|m| {
                        m.iter()
                            .rev()
                            .find(|m| m.get("type").and_then(Value::as_str) == Some("ai"))
                    })
                    .and_then(|m| m.get("content"))
                    .map(|c| short(c, 2000));
                match last {
                    Some(text) => println!("done. last answer:\n{text}"),
                    None => println!("done. final state:\n{}", serde_json::to_string_pretty(&values)?),
                }
                return Ok(());
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
                            println!("paused at an interrupt: {}", short(&json!(ints), 400));
                        }
                        let hint = format!(
                            "resume with: graphloom run {graph_id} --thread {thread} --resume '<json>'"
                        );
                        if json {
                            eprintln!("{hint}");
                        } else {
                            println!("{hint}");
                        }
                        return Ok(());
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
