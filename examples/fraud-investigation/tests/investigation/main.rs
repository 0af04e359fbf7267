//! Behaviour tests of the fraud investigation agent (TDD-002): one module per behaviour, in one test binary (one link, less disk).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod crash_resume;
mod happy_path;
mod limits;
mod planner_fallback;
mod postgres;
mod tool_failures;
