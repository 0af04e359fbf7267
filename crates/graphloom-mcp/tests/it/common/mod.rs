//! Helpers shared by the MCP tests: the test server binary, calls with a bound, process
//! checks.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use graphloom_mcp::{HttpServer, ServerConfig, StdioServer};
use graphloom_prebuilt::{Tool, ToolError, ToolOutput, ToolRuntime};
use serde_json::Value;
use std::future::Future;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The bound on anything a test awaits.
pub const WAIT: Duration = Duration::from_secs(30);

/// The test server binary.
pub fn server_bin() -> &'static str {
    env!("CARGO_BIN_EXE_graphloom-mcp-test-server")
}

/// The test server over stdio in `mode`.
pub fn stdio(mode: &str) -> StdioServer {
    StdioServer::new(server_bin()).arg(mode)
}

/// The test server over stdio, as a server config.
pub fn stdio_server() -> ServerConfig {
    ServerConfig::stdio(stdio("stdio"))
}

/// Await `fut`, failing the test after [`WAIT`].
pub async fn bounded<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, fut)
        .await
        .expect("did not finish in time")
}

/// Call `tool` outside a graph.
pub async fn call(tool: &Arc<dyn Tool>, args: Value) -> Result<ToolOutput, ToolError> {
    bounded(tool.call(args, ToolRuntime::detached(Value::Null, "call-1"))).await
}

/// Call `tool` and return its text, failing the test on an error.
pub async fn text(tool: &Arc<dyn Tool>, args: Value) -> String {
    call(tool, args).await.expect("the call succeeds").to_text()
}

/// The tool named `name`.
pub fn find(tools: &[Arc<dyn Tool>], name: &str) -> Arc<dyn Tool> {
    tools
        .iter()
        .find(|t| t.name() == name)
        .cloned()
        .unwrap_or_else(|| panic!("no tool `{name}`"))
}

/// Whether process `pid` is alive (a zombie counts as dead).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // The state follows the parenthesised command name.
            let state = stat
                .rsplit_once(')')
                .map(|(_, rest)| rest.trim_start())
                .unwrap_or("");
            !state.starts_with('Z') && !state.starts_with('X')
        }
        Err(_) => false,
    }
}

/// Wait (bounded) until process `pid` is gone.
pub async fn gone(pid: u32) {
    bounded(async {
        while alive(pid) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

/// Kill process `pid` with SIGKILL.
pub fn kill(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -9 {pid} failed");
}

/// A server process started by the test itself (for HTTP), killed on drop.
pub struct Process {
    pub child: tokio::process::Child,
    pub url: String,
}

impl Process {
    pub fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }
    pub async fn kill(&mut self) {
        self.child.kill().await.expect("kill");
    }
}

/// Start `program args..` and wait for its `listening <url>` line.
pub async fn listening(program: &str, args: &[&str]) -> Process {
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start the server");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let url = bounded(async {
        loop {
            let line = lines
                .next_line()
                .await
                .expect("read")
                .expect("the server printed its address");
            if let Some(url) = line.strip_prefix("listening ") {
                return url.trim().to_owned();
            }
        }
    })
    .await;
    // Keep draining stdout so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Process { child, url }
}

/// The Rust test server over streamable HTTP, on `addr` (`127.0.0.1:0` for any port).
pub async fn http_process(addr: &str) -> Process {
    listening(server_bin(), &["http", addr]).await
}

/// The server config for the HTTP server at `url`.
pub fn http_server(url: &str) -> ServerConfig {
    ServerConfig::http(HttpServer::new(url))
}
