//! Request bodies parsed once, at the edge: [`Body`] for any JSON body, [`RunBody`] for a
//! run request, checked against the bounds of [`super::bounds`] as well.

use super::bounds;
use crate::api::error::{ApiError, ApiResult};
use crate::run::RunRequest;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use std::time::Duration;

/// A JSON body parsed into `T`. An empty body reads as `{}`; one that does not parse
/// answers 422 `invalid body: <field path>: <why> at line L column C`.
pub(crate) struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        // Too large, or cut off: the layer's status (413, 400), made JSON by `json_errors`.
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(IntoResponse::into_response)?;
        parse(&bytes).map(Body).map_err(IntoResponse::into_response)
    }
}

/// Parse a JSON body into `T`, naming the field's path on failure.
fn parse<T: DeserializeOwned>(body: &[u8]) -> ApiResult<T> {
    let body: &[u8] = if body.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        body
    };
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            ApiError::invalid(format!("invalid body: {}", e.inner()))
        } else {
            ApiError::invalid(format!("invalid body: {path}: {}", e.inner()))
        }
    })?;
    de.end()
        .map_err(|e| ApiError::invalid(format!("invalid body: {e}")))?;
    Ok(value)
}

/// A run request, parsed and checked: the bounds of `after_seconds` (here its delay) and of
/// `config`, and input and command not both.
pub(crate) struct RunBody {
    pub request: RunRequest,
    /// When the run may start (`after_seconds`; `None`: now).
    pub delay: Option<Duration>,
}

impl RunBody {
    pub(super) fn check(request: RunRequest) -> ApiResult<Self> {
        let delay = bounds::after_seconds(request.after_seconds)?;
        bounds::run_config(request.config.as_ref())?;
        if request.has_input_and_command() {
            return Err(ApiError::invalid("give either input or command, not both"));
        }
        Ok(Self { request, delay })
    }
}

impl<S: Send + Sync> FromRequest<S> for RunBody {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let Body(request) = Body::<RunRequest>::from_request(req, state).await?;
        Self::check(request).map_err(IntoResponse::into_response)
    }
}

/// Several run requests (`/runs/batch`), each parsed and checked as a [`RunBody`].
pub(crate) struct RunBodies(pub Vec<RunBody>);

impl<S: Send + Sync> FromRequest<S> for RunBodies {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let Body(requests) = Body::<Vec<RunRequest>>::from_request(req, state).await?;
        let checked = requests
            .into_iter()
            .map(RunBody::check)
            .collect::<ApiResult<_>>()
            .map_err(IntoResponse::into_response)?;
        Ok(Self(checked))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(v: serde_json::Value) -> ApiResult<RunBody> {
        RunBody::check(parse(v.to_string().as_bytes())?)
    }

    #[test]
    fn a_bad_field_is_named_by_its_path() {
        let detail = |v| run(v).err().map(|e| (e.status.as_u16(), e.detail)).unwrap();
        let (st, d) = detail(json!({"assistant_id": "a", "multitask_strategy": "later"}));
        assert_eq!(st, 422);
        assert!(
            d.starts_with("invalid body: multitask_strategy: unknown variant `later`"),
            "{d}"
        );
        let (_, d) = detail(json!({"assistant_id": "a", "stream_mode": ["values", "telepathy"]}));
        assert!(
            d.starts_with("invalid body: stream_mode[1]: unknown variant `telepathy`"),
            "{d}"
        );
        let (_, d) = detail(json!({"assistant_id": "a", "command": {"goto": [{"node": 3}]}}));
        assert!(
            d.starts_with("invalid body: command.goto[0]: a node name or a Send"),
            "{d}"
        );
        let (_, d) = detail(json!({"assistant_id": "a", "interrupt_before": "agent"}));
        assert!(
            d.starts_with("invalid body: interrupt_before: invalid value"),
            "{d}"
        );
        let (_, d) = detail(json!({"input": {}}));
        assert!(d.contains("missing field `assistant_id`"), "{d}");
        let (_, d) = detail(json!({"assistant_id": "a", "input": {}, "command": {"resume": 1}}));
        assert_eq!(d, "give either input or command, not both");
        let (_, d) = detail(json!({"assistant_id": "a", "config": "fast"}));
        assert_eq!(d, "config must be an object, not a string");
        let (_, d) = detail(json!({"assistant_id": "a", "after_seconds": 1e20}));
        assert!(d.starts_with("after_seconds must be"), "{d}");
    }

    #[test]
    fn a_good_request_reads_typed() {
        let b = run(json!({
            "assistant_id": "a", "stream_mode": "updates", "after_seconds": 1.5,
            "interrupt_before": "*", "durability": "exit", "on_disconnect": "cancel",
            "checkpoint": {"checkpoint_id": "c1", "thread_id": "t"},
        }))
        .unwrap();
        assert_eq!(b.delay, Some(Duration::from_millis(1500)));
        assert_eq!(b.request.start_checkpoint().as_deref(), Some("c1"));
        assert_eq!(b.request.durability, Some(crate::run::Durability::Exit));
        assert!(run(json!(null)).is_err());
        assert!(
            parse::<RunRequest>(b"  ").is_err(),
            "an empty body is {{}}: no assistant"
        );
        assert!(parse::<serde_json::Value>(b"{} {}").is_err(), "trailing data");
    }
}
