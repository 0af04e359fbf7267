//! [`TodoList`]: a `write_todos` tool the model plans with, the plan kept in the state's
//! `todos` field, and instructions on using it added to the system prompt (LangChain's
//! `TodoListMiddleware`). The tool answers with a command that writes `todos` and its
//! tool message in one update.

use super::{Hook, Hooks, Middleware, ModelNext, ModelRequest, ModelResponse};
use crate::create_agent::StateField;
use crate::tool::{FnTool, Tool, ToolCommand, ToolError, ToolOutput};
use futures::future::BoxFuture;
use graphloom_core::{JsonReducer, Message, NodeError};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;

/// Added to the system prompt.
pub const WRITE_TODOS_SYSTEM_PROMPT: &str =
    "## `write_todos`\n\nYou have access to the `write_todos` tool to \
help you manage and plan complex objectives. Use this tool for complex objectives to ensure that you are \
tracking each necessary step and giving the user visibility into your progress. Mark todos as completed as \
soon as you are done with a step. For simple objectives that only require a few steps, it is better to just \
complete the objective directly and NOT use this tool.";

/// The tool's description.
pub const WRITE_TODOS_DESCRIPTION: &str =
    "Use this tool to create and manage a structured task list for your \
current work session. Each call replaces the whole list: send every todo with its status (pending, \
in_progress, completed).";

/// A status of a todo.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

/// One item of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Todo {
    /// What to do.
    pub content: String,
    /// Where it stands.
    pub status: TodoStatus,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct WriteTodos {
    /// The whole updated list.
    todos: Vec<Todo>,
}

/// The `write_todos` tool and its state; see the [module docs](self).
#[derive(Debug, Clone)]
#[must_use]
pub struct TodoList {
    system_prompt: String,
}

impl Default for TodoList {
    fn default() -> Self {
        Self::new()
    }
}

impl TodoList {
    /// With the default instructions.
    pub fn new() -> Self {
        Self {
            system_prompt: WRITE_TODOS_SYSTEM_PROMPT.to_owned(),
        }
    }
    /// Other instructions for the system prompt.
    pub fn system_prompt(mut self, text: impl Into<String>) -> Self {
        self.system_prompt = text.into();
        self
    }
}

/// The `write_todos` tool.
#[must_use]
pub fn write_todos_tool() -> Arc<dyn Tool> {
    FnTool::new(
        "write_todos",
        WRITE_TODOS_DESCRIPTION,
        |a: WriteTodos, rt| async move {
            let listing = serde_json::to_string(&a.todos).map_err(|e| ToolError::execution(e.to_string()))?;
            let mut answer =
                Message::tool(format!("Updated todo list to {listing}"), rt.tool_call_id.clone());
            answer.name = Some("write_todos".to_owned());
            Ok::<_, ToolError>(ToolOutput::command(
                ToolCommand::new()
                    .update("todos", json!(a.todos))
                    .update("messages", json!([answer])),
            ))
        },
    )
    .arc()
}

impl Middleware for TodoList {
    fn name(&self) -> &str {
        "TodoListMiddleware"
    }
    fn hooks(&self) -> Hooks {
        Hooks::of(&[Hook::WrapModelCall])
    }
    fn state_fields(&self) -> Vec<StateField> {
        vec![StateField::new::<Vec<Todo>>("todos", JsonReducer::LastValue)]
    }
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        vec![write_todos_tool()]
    }
    fn wrap_model_call<'a>(
        &'a self,
        mut request: ModelRequest,
        next: ModelNext,
    ) -> BoxFuture<'a, Result<ModelResponse, NodeError>> {
        request.system_prompt = Some(match request.system_prompt.take() {
            Some(p) => format!("{p}\n\n{}", self.system_prompt),
            None => self.system_prompt.clone(),
        });
        next.call(request)
    }
}
