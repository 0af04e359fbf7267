//! Tools of a real MCP server process (the crate's rmcp test server) over stdio: loading,
//! results, errors the model reads, filters, prefixes, environment.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{bounded, call, find, server_bin, stdio, stdio_server, text};
use graphloom_mcp::{Error, McpClient, ServerConfig, StdioServer};
use graphloom_prebuilt::ToolErrorCode;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn tools_carry_the_servers_name_description_and_schema() {
    let tools = bounded(McpClient::new().server("t", stdio_server()).load_tools())
        .await
        .unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    assert!(
        names.contains(&"echo") && names.contains(&"add") && names.contains(&"hang"),
        "{names:?}"
    );
    let echo = find(&tools, "echo");
    assert_eq!(echo.description(), "Echo the text back");
    assert_eq!(echo.schema()["required"], json!(["text"]));
    assert_eq!(echo.spec().name, "echo");
}

#[tokio::test]
async fn calls_answer_with_text_and_structured_content() {
    let tools = bounded(McpClient::new().server("t", stdio_server()).load_tools())
        .await
        .unwrap();
    assert_eq!(
        text(&find(&tools, "echo"), json!({"text": "hello"})).await,
        "hello"
    );
    let sum = call(&find(&tools, "add"), json!({"a": 2, "b": 40}))
        .await
        .unwrap();
    assert_eq!(sum.content, json!({"sum": 42}));
    // Arguments given as a JSON string (as some providers send them) work too.
    assert_eq!(text(&find(&tools, "echo"), json!("{\"text\": \"s\"}")).await, "s");
}

#[tokio::test]
async fn images_and_resources_are_described_in_the_text() {
    let tools = bounded(McpClient::new().server("t", stdio_server()).load_tools())
        .await
        .unwrap();
    assert_eq!(
        text(&find(&tools, "image"), json!({})).await,
        "a tiny picture\n[image: image/png, 70 bytes]"
    );
    let res = text(&find(&tools, "resources"), json!({})).await;
    assert_eq!(
        res,
        "[resource file:///notes.txt (text/plain)]\nremember the milk\n\
         [resource file:///logo.png: image/png, 70 bytes]\n\
         [resource link: file:///reports/q3.pdf (q3.pdf, application/pdf)]"
    );
}

#[tokio::test]
async fn server_errors_are_tool_errors_for_the_model() {
    let tools = bounded(McpClient::new().server("t", stdio_server()).load_tools())
        .await
        .unwrap();
    let e = call(
        &find(&tools, "fail"),
        json!({"message": "order 7 does not exist"}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, ToolErrorCode::Execution);
    assert_eq!(e.message, "order 7 does not exist");

    let e = call(&find(&tools, "rpc_error"), json!({})).await.unwrap_err();
    assert_eq!(e.code, ToolErrorCode::Execution);
    assert!(e.message.contains("the database is on fire"), "{}", e.message);
    assert!(e.message.contains("-32603"), "{}", e.message);

    // A listed tool the server no longer knows: its JSON-RPC error, for the model.
    let e = call(&find(&tools, "ghost"), json!({})).await.unwrap_err();
    assert_eq!(e.code, ToolErrorCode::Execution);
    assert!(e.message.contains("no tool `ghost`"), "{}", e.message);

    // The session is still fine afterwards.
    assert_eq!(
        text(&find(&tools, "echo"), json!({"text": "still here"})).await,
        "still here"
    );
}

#[tokio::test]
async fn arguments_violating_the_schema_never_reach_the_server() {
    let tools = bounded(McpClient::new().server("t", stdio_server()).load_tools())
        .await
        .unwrap();
    let add = find(&tools, "add");
    let e = call(&add, json!({"a": "two", "b": 3})).await.unwrap_err();
    assert_eq!(e.code, ToolErrorCode::Validation);
    assert!(e.message.contains("/a"), "{}", e.message);
    let e = call(&add, json!({"a": 1, "b": 2, "c": 3})).await.unwrap_err();
    assert_eq!(e.code, ToolErrorCode::Validation);
    let e = call(&add, json!([1, 2])).await.unwrap_err();
    assert_eq!(e.code, ToolErrorCode::Validation);
    let e = call(&add, json!("{not json")).await.unwrap_err();
    assert_eq!(e.code, ToolErrorCode::Validation);
}

#[tokio::test]
async fn a_big_result_comes_through_whole() {
    let tools = bounded(McpClient::new().server("t", stdio_server()).load_tools())
        .await
        .unwrap();
    let out = text(&find(&tools, "big"), json!({"bytes": 1_000_000})).await;
    assert_eq!(out.len(), 1_000_000);
}

#[tokio::test]
async fn a_result_over_the_transport_limit_is_a_tool_error() {
    // rmcp drops a stdio line over 16 MiB rather than buffer it: memory stays bounded, and
    // the call, never answered, ends at its timeout.
    let cfg = stdio_server().tool_timeout("big", Duration::from_secs(3));
    let tools = bounded(McpClient::new().server("t", cfg).load_tools())
        .await
        .unwrap();
    let e = call(&find(&tools, "big"), json!({"bytes": 20_000_000}))
        .await
        .unwrap_err();
    assert_eq!(e.code, ToolErrorCode::Timeout, "{e:?}");
    assert_eq!(
        text(&find(&tools, "echo"), json!({"text": "after"})).await,
        "after"
    );
}

#[tokio::test]
async fn allow_and_deny_lists_filter_the_tools() {
    let tools = bounded(
        McpClient::new()
            .server("t", stdio_server().allow(["echo", "add", "fail"]).deny(["fail"]))
            .load_tools(),
    )
    .await
    .unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    names.sort_unstable();
    assert_eq!(names, ["add", "echo"]);

    let err = bounded(
        McpClient::new()
            .server("t", stdio_server().allow(["echo", "ecko"]))
            .connect(),
    )
    .await
    .unwrap_err();
    let Error::MissingTools {
        server,
        missing,
        available,
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(
        (server.as_str(), missing.as_slice()),
        ("t", ["ecko".to_owned()].as_slice())
    );
    assert!(available.contains(&"echo".to_owned()));
}

#[tokio::test]
async fn several_servers_with_prefixed_names() {
    let client = McpClient::new()
        .server("left", stdio_server().allow(["echo"]))
        .server("right", stdio_server().allow(["echo", "add"]))
        .prefix_tool_names(true);
    let conns = bounded(client.connect()).await.unwrap();
    let names: Vec<String> = conns.tools().iter().map(|t| t.name().to_owned()).collect();
    assert_eq!(names, ["left_echo", "right_echo", "right_add"]);
    let right = conns.server_tools("right").unwrap();
    assert_eq!(right.len(), 2);
    assert!(matches!(
        conns.server_tools("middle"),
        Err(Error::UnknownServer { .. })
    ));
    let t = &conns.mcp_tools()[0];
    assert_eq!((t.server_name(), t.remote_name()), ("left", "echo"));
    assert_eq!(
        text(&find(&conns.tools(), "right_echo"), json!({"text": "r"})).await,
        "r"
    );
}

#[tokio::test]
async fn the_same_tool_name_from_two_servers_is_refused_without_prefixes() {
    let client = McpClient::new()
        .server("left", stdio_server().allow(["echo"]))
        .server("right", stdio_server().allow(["echo"]));
    let err = bounded(client.connect()).await.unwrap_err();
    assert!(
        matches!(&err, Error::DuplicateTool { name, server, other } if name == "echo" && server == "right" && other == "left"),
        "{err:?}"
    );
    // One server's own prefix setting resolves it.
    let client = client.server("right", stdio_server().allow(["echo"]).prefix_tool_names(true));
    let tools = bounded(client.load_tools()).await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    assert_eq!(names, ["echo", "right_echo"]);
}

#[tokio::test]
async fn env_and_cwd_reach_the_process_and_secrets_do_not() {
    let dir = std::env::temp_dir();
    let cfg = ServerConfig::stdio(stdio("stdio").env("GREETING", "hej").cwd(&dir));
    let tools = bounded(McpClient::new().server("t", cfg).load_tools())
        .await
        .unwrap();
    let env = find(&tools, "env");
    assert_eq!(text(&env, json!({"name": "GREETING"})).await, "hej");
    assert_eq!(
        text(&env, json!({"name": "PATH"})).await,
        std::env::var("PATH").unwrap()
    );
    // Set for this test process by cargo, not passed on by default.
    assert!(std::env::var("CARGO_MANIFEST_DIR").is_ok());
    assert_eq!(text(&env, json!({"name": "CARGO_MANIFEST_DIR"})).await, "<unset>");
    let cwd = text(&find(&tools, "cwd"), json!({})).await;
    assert_eq!(
        std::fs::canonicalize(cwd).unwrap(),
        std::fs::canonicalize(dir).unwrap()
    );

    let cfg = ServerConfig::stdio(stdio("stdio").inherit_env(true));
    let tools = bounded(McpClient::new().server("t", cfg).load_tools())
        .await
        .unwrap();
    assert_eq!(
        text(&find(&tools, "env"), json!({"name": "CARGO_MANIFEST_DIR"})).await,
        std::env::var("CARGO_MANIFEST_DIR").unwrap()
    );
}

#[tokio::test]
async fn stderr_can_go_to_a_file() {
    let log = std::env::temp_dir().join(format!("graphloom-mcp-stderr-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let script = format!("echo 'server starting' >&2; exec '{}' stdio", server_bin());
    let cfg = ServerConfig::stdio(
        StdioServer::new("sh")
            .args(["-c", &script])
            .stderr(graphloom_mcp::Stderr::File(log.clone())),
    );
    let tools = bounded(McpClient::new().server("t", cfg).load_tools())
        .await
        .unwrap();
    assert_eq!(text(&find(&tools, "echo"), json!({"text": "x"})).await, "x");
    // The line was written before the handshake, which has completed.
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "server starting\n");
    std::fs::remove_file(&log).unwrap();
}

#[tokio::test]
async fn a_config_from_json_loads_tools() {
    let client = McpClient::from_json(json!({
        "calc": {
            "transport": "stdio",
            "command": server_bin(),
            "args": ["stdio"],
            "allow": ["add"],
            "call_timeout_ms": 5000,
            "tool_timeouts_ms": {"add": 7000}
        }
    }))
    .unwrap();
    let conns = bounded(client.connect()).await.unwrap();
    let add = &conns.mcp_tools()[0];
    assert_eq!(add.remote_name(), "add");
    assert_eq!(add.call_timeout().as_millis(), 7000);
    assert_eq!(
        call(&conns.tools()[0], json!({"a": 1, "b": 1}))
            .await
            .unwrap()
            .content,
        json!({"sum": 2})
    );
}

#[tokio::test]
async fn a_bad_json_config_is_a_typed_error() {
    let err = McpClient::from_json(json!({"x": {"transport": "carrier-pigeon", "url": "coo"}})).unwrap_err();
    assert!(err.to_string().contains("carrier-pigeon"), "{err}");
    let err = McpClient::from_json(json!({"x": {"transport": "stdio"}})).unwrap_err();
    assert!(err.to_string().contains("command"), "{err}");
    let _ = StdioServer::new("unused");
}
