//! What a custom [`Auth`](crate::auth::Auth) lets the console show, decided as the JSON API
//! decides it: the fragment asks [`authorize`](crate::auth::Auth::authorize) for the action
//! its API route would be (reading a thread, searching threads, reading a run) and applies
//! the grant's metadata filter the same way: a thread it hides is a 404 page, a search only
//! lists the threads it lets through, a refusal is the refusal's page.

use crate::api::error::ApiError;
use crate::auth::{Action, AuthRequest, Filter, Identity, Resource};
use crate::state::AppRef;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde_json::{Map, Value};

/// Who a fragment is rendered for: the identity the auth gate authenticated.
#[derive(Clone, Debug)]
pub(crate) struct Viewer(pub Identity);

impl FromRequestParts<AppRef> for Viewer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppRef) -> Result<Self, ApiError> {
        if let Some(identity) = parts.extensions.get::<Identity>() {
            return Ok(Self(identity.clone()));
        }
        Ok(Self(state.auth.authenticate(parts).await?))
    }
}

impl Viewer {
    /// The owner whose resources the fragment reads.
    pub(crate) fn owner(&self) -> &str {
        &self.0.identity
    }

    /// The grant's filter for `action` on `resource` (`id`: the run or thread the route
    /// names); empty when the server's auth does not authorise.
    pub(crate) async fn filter(
        &self,
        state: &AppRef,
        resource: Resource,
        action: Action,
        id: Option<&str>,
        thread_id: Option<&str>,
    ) -> Result<Filter, ApiError> {
        if !state.auth.authorizes() {
            return Ok(Filter::default());
        }
        let ask = AuthRequest {
            identity: &self.0,
            resource,
            action,
            id,
            thread_id,
            body: &Value::Null,
            query: None,
        };
        Ok(state.auth.authorize(&ask).await?.filter)
    }

    /// Whether the grant for `action` on `resource` of thread `thread_id` (and run `run_id`)
    /// lets the thread be seen: 404 when its filter hides the thread, as on the API.
    pub(crate) async fn may(
        &self,
        state: &AppRef,
        resource: Resource,
        action: Action,
        thread_id: &str,
        run_id: Option<&str>,
    ) -> Result<(), ApiError> {
        let filter = self
            .filter(
                state,
                resource,
                action,
                Some(run_id.unwrap_or(thread_id)),
                Some(thread_id),
            )
            .await?;
        if filter.is_empty() {
            return Ok(());
        }
        let thread = crate::service::threads::load(state, self.owner(), thread_id).await?;
        if filter.matches(&thread.metadata) {
            Ok(())
        } else {
            Err(ApiError::not_found(format!("thread {thread_id}")))
        }
    }

    /// A thread search's metadata filter within the grant's: `None` when no thread can
    /// match both (the list is empty).
    pub(crate) async fn search_needle(
        &self,
        state: &AppRef,
        asked: &Map<String, Value>,
    ) -> Result<Option<Map<String, Value>>, ApiError> {
        let filter = self
            .filter(state, Resource::Threads, Action::Search, None, None)
            .await?;
        Ok(filter.within(asked))
    }
}
