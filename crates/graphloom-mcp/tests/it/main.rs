//! The integration tests of graphloom-mcp: one binary, one module per behaviour; `common`
//! starts the test MCP server (`graphloom-mcp-test-server`) the modules talk to.

mod common;

mod http_tools;
mod python_server;
mod react_agent;
mod stdio_lifecycle;
mod stdio_tools;
