//! Who may do what: the [`Auth`] trait (authenticate a request, then authorise each action
//! on a resource), and its implementations [`ApiKeys`] and [`Jwt`].
//!
//! Every request to a route behind auth (all but `/ok`, and `/info`, `/metrics`,
//! `/openapi.json` when [`ServerConfig::public_system_routes`](crate::ServerConfig) is
//! set) is first *authenticated*: [`Auth::authenticate`] reads its headers and answers an
//! [`Identity`] or refuses with 401. The identity's [`Identity::identity`] is the owner of
//! what the request creates, and scopes everything it reads: another identity's thread,
//! run, assistant or store item is a 404 on every route, search and count included.
//!
//! Then each route is *authorised* as one [`Action`] on one [`Resource`] (the table is in
//! the README): [`Auth::authorize`] sees the identity, the resource, the action, the ids in
//! the path and the request body, and answers a [`Grant`] or refuses with 403. A grant may
//! carry a metadata filter (as LangGraph's `@auth.on` handlers return one): reads,
//! updates and deletes of a resource whose metadata does not match are 404, searches and
//! counts only see matching resources. A grant may also stamp metadata on what the
//! request creates or updates.
//!
//! The identity reaches the graphs: a run's `config.configurable` carries
//! `langgraph_auth_user_id`, `langgraph_auth_user` (the identity as JSON) and
//! `langgraph_auth_permissions`, set by the server (a client's own values for these keys
//! are dropped), and so does its context when the run has one.
//!
//! ```no_run
//! use graphloom_server::auth::{Action, Auth, AuthError, AuthRequest, Grant, Identity, Resource};
//! use graphloom_server::{Server, ServerConfig};
//!
//! /// Every user sees only the threads of their team, and only admins delete.
//! struct Teams;
//!
//! impl Auth for Teams {
//!     async fn authenticate(&self, req: &axum::http::request::Parts) -> Result<Identity, AuthError> {
//!         let user = req.headers.get("x-user").and_then(|v| v.to_str().ok());
//!         let user = user.ok_or_else(|| AuthError::unauthenticated("x-user is missing"))?;
//!         Ok(Identity::new("acme").with_permissions([format!("user:{user}")]))
//!     }
//!
//!     async fn authorize(&self, req: &AuthRequest<'_>) -> Result<Grant, AuthError> {
//!         if req.action == Action::Delete && !req.identity.has_permission("admin") {
//!             return Err(AuthError::forbidden("only admins delete"));
//!         }
//!         Ok(match req.resource {
//!             Resource::Threads => Grant::allow().filter("team", "red").stamp("team", "red"),
//!             _ => Grant::allow(),
//!         })
//!     }
//! }
//!
//! # async fn run() -> Result<(), graphloom_server::StartError> {
//! let server = Server::builder(ServerConfig::sqlite("graphloom.db")).auth(Teams).build().await?;
//! # Ok(()) }
//! ```

mod api_keys;
mod filter;
mod jwt;
pub(crate) mod rules;

pub use api_keys::ApiKeys;
pub use filter::Filter;
pub use jwt::{Jwt, JwtError};

use axum::http::request::Parts;
use futures::future::BoxFuture;
use serde_json::{json, Map, Value};
use std::future::Future;
use std::sync::Arc;

/// Who a request acts for, as [`Auth::authenticate`] found it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Identity {
    /// The principal: the owner of what the request creates, and the only owner whose
    /// resources it sees (`""` with auth off).
    pub identity: String,
    /// A name for people, if the authenticator knows one.
    pub display_name: Option<String>,
    /// What the principal may do, for [`Auth::authorize`] to read (a JWT's `permissions`
    /// or `scope`).
    pub permissions: Vec<String>,
    /// Whether the request was authenticated (false only with auth off).
    pub is_authenticated: bool,
    /// Everything else the authenticator keeps (a JWT's claims), handed to graphs.
    pub extra: Map<String, Value>,
}

impl Identity {
    /// An authenticated identity with no permissions.
    #[must_use]
    pub fn new(identity: impl Into<String>) -> Self {
        Self {
            identity: identity.into(),
            is_authenticated: true,
            ..Self::default()
        }
    }

    /// The identity of a request with auth off: owner `""`, not authenticated.
    #[must_use]
    pub fn anonymous() -> Self {
        Self::default()
    }

    /// With these permissions.
    #[must_use]
    pub fn with_permissions<I, S>(mut self, permissions: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.permissions = permissions.into_iter().map(Into::into).collect();
        self
    }

    /// With a display name.
    #[must_use]
    pub fn with_display_name(mut self, name: impl Into<String>) -> Self {
        self.display_name = Some(name.into());
        self
    }

    /// With one more extra field.
    #[must_use]
    pub fn with_extra(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.extra.insert(key.into(), value.into());
        self
    }

    /// Whether `permission` is one of [`permissions`](Self::permissions).
    #[must_use]
    pub fn has_permission(&self, permission: &str) -> bool {
        self.permissions.iter().any(|p| p == permission)
    }

    /// The identity as graphs read it (`langgraph_auth_user`): its extra fields, then
    /// `identity`, `display_name`, `is_authenticated` and `permissions`.
    #[must_use]
    pub fn to_json(&self) -> Value {
        let mut m = self.extra.clone();
        m.insert("identity".into(), json!(self.identity));
        m.insert(
            "display_name".into(),
            json!(self.display_name.as_deref().unwrap_or(&self.identity)),
        );
        m.insert("is_authenticated".into(), json!(self.is_authenticated));
        m.insert("permissions".into(), json!(self.permissions));
        Value::Object(m)
    }
}

/// What a route acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Resource {
    /// `/threads` and a thread's state and history.
    Threads,
    /// `/assistants`.
    Assistants,
    /// Runs, on a thread or stateless (`/runs`), and the assistants run as MCP tools and
    /// A2A agents.
    Runs,
    /// Cron jobs (`/runs/crons`, `/threads/{id}/runs/crons`).
    Crons,
    /// The long-term memory store (`/store`).
    Store,
}

impl Resource {
    /// Its name as LangGraph spells it (`threads`, `assistants`, ...).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Threads => "threads",
            Self::Assistants => "assistants",
            Self::Runs => "runs",
            Self::Crons => "crons",
            Self::Store => "store",
        }
    }
}

/// What a route does to its [`Resource`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Action {
    /// Create one (a run started, a store item put is an [`Update`](Self::Update)).
    Create,
    /// Read one (get, state, history, join, a run's stream).
    Read,
    /// Change one (patch, state update, cancel, store put).
    Update,
    /// Delete one (prune deletes each of its threads).
    Delete,
    /// Search, count or list.
    Search,
}

impl Action {
    /// Its name (`create`, `read`, ...).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Read => "read",
            Self::Update => "update",
            Self::Delete => "delete",
            Self::Search => "search",
        }
    }
}

/// One action a request asks for, handed to [`Auth::authorize`].
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct AuthRequest<'a> {
    /// Who asks.
    pub identity: &'a Identity,
    /// On what.
    pub resource: Resource,
    /// To do what.
    pub action: Action,
    /// The id the path names (`thread_id`, `assistant_id`, `run_id`, `cron_id`), if any.
    pub id: Option<&'a str>,
    /// The thread the path names, for runs and crons on a thread.
    pub thread_id: Option<&'a str>,
    /// The request's JSON body (`Null` without one): the metadata of what is created,
    /// the store item's namespace and key, a run's input.
    pub body: &'a Value,
    /// The request's query string, if any (`GET /store/items` names its item there).
    pub query: Option<&'a str>,
}

/// What [`Auth::authorize`] allows: everything the action names, or only the resources
/// whose metadata matches a [`Filter`]; and metadata to stamp on what is created or
/// updated.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Grant {
    /// Only resources whose metadata matches (empty: all of the identity's).
    pub filter: Filter,
    /// Merged into the metadata of what a create or an update writes (over the
    /// request's own keys).
    pub metadata: Map<String, Value>,
}

impl Grant {
    /// Allow the action on every resource of the identity.
    #[must_use]
    pub fn allow() -> Self {
        Self::default()
    }

    /// Only resources whose metadata has `key` equal to `value` (LangGraph's
    /// `{"key": value}` or `{"key": {"$eq": value}}`).
    #[must_use]
    pub fn filter(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.filter = self.filter.eq(key, value);
        self
    }

    /// Only resources whose metadata `key` is a list holding `value` (LangGraph's
    /// `{"key": {"$contains": value}}`).
    #[must_use]
    pub fn filter_contains(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.filter = self.filter.contains(key, value);
        self
    }

    /// Stamp `key: value` on the metadata of what a create or an update writes.
    #[must_use]
    pub fn stamp(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }
}

/// Why a request may not go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// No credentials, or credentials that do not hold (401).
    #[error("{0}")]
    Unauthenticated(String),
    /// Authenticated, but not allowed (403).
    #[error("{0}")]
    Forbidden(String),
    /// The authenticator itself failed (an identity provider that does not answer): 503,
    /// the cause logged, never answered.
    #[error("authentication is unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl AuthError {
    /// A 401 with this detail.
    #[must_use]
    pub fn unauthenticated(detail: impl Into<String>) -> Self {
        Self::Unauthenticated(detail.into())
    }

    /// A 403 with this detail.
    #[must_use]
    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::Forbidden(detail.into())
    }
}

impl From<AuthError> for crate::error::ServiceError {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::Unauthenticated(d) => Self::new(crate::error::ErrorKind::Unauthenticated, d),
            AuthError::Forbidden(d) => Self::new(crate::error::ErrorKind::Forbidden, d),
            AuthError::Unavailable(source) => {
                tracing::error!(error = %source, "the authenticator failed");
                Self::new(
                    crate::error::ErrorKind::Unavailable,
                    "authentication is unavailable",
                )
            }
        }
    }
}

/// Authentication and authorisation of the server's requests (see the [module
/// docs](self)). Set with [`ServerBuilder::auth`](crate::ServerBuilder::auth); without it
/// the server uses [`ApiKeys`] when [`ServerConfig::api_keys`](crate::ServerConfig) has
/// keys, else no auth (every request is owner `""`).
pub trait Auth: Send + Sync + 'static {
    /// Who the request is (its method, path, headers), or why not (401). Runs before the
    /// body is read.
    fn authenticate(&self, req: &Parts) -> impl Future<Output = Result<Identity, AuthError>> + Send;

    /// Whether `req.identity` may do `req.action` on `req.resource`: a [`Grant`] (maybe
    /// filtered), or [`AuthError::Forbidden`] (403). The default allows everything (the
    /// identity still sees only its own resources).
    fn authorize(&self, req: &AuthRequest<'_>) -> impl Future<Output = Result<Grant, AuthError>> + Send {
        let _ = req;
        async { Ok(Grant::allow()) }
    }

    /// Whether [`authorize`](Self::authorize) can refuse or filter anything. `false` (for
    /// an implementation that keeps the default `authorize`) lets the server skip it and
    /// leave request bodies unread until their handler. Default `true`.
    fn authorizes(&self) -> bool {
        true
    }
}

/// [`Auth`] with boxed futures, as the server keeps it.
pub(crate) trait DynAuth: Send + Sync {
    fn authenticate<'a>(&'a self, req: &'a Parts) -> BoxFuture<'a, Result<Identity, AuthError>>;
    fn authorize<'a>(&'a self, req: &'a AuthRequest<'a>) -> BoxFuture<'a, Result<Grant, AuthError>>;
    fn authorizes(&self) -> bool;
    /// Whether requests are authenticated at all (false: every request is anonymous).
    fn is_on(&self) -> bool;
}

impl<T: Auth> DynAuth for T {
    fn authenticate<'a>(&'a self, req: &'a Parts) -> BoxFuture<'a, Result<Identity, AuthError>> {
        Box::pin(Auth::authenticate(self, req))
    }
    fn authorize<'a>(&'a self, req: &'a AuthRequest<'a>) -> BoxFuture<'a, Result<Grant, AuthError>> {
        Box::pin(Auth::authorize(self, req))
    }
    fn authorizes(&self) -> bool {
        Auth::authorizes(self)
    }
    fn is_on(&self) -> bool {
        std::any::TypeId::of::<T>() != std::any::TypeId::of::<NoAuth>()
    }
}

/// Auth off: every request is [`Identity::anonymous`].
pub(crate) struct NoAuth;

impl Auth for NoAuth {
    async fn authenticate(&self, _req: &Parts) -> Result<Identity, AuthError> {
        Ok(Identity::anonymous())
    }
    fn authorizes(&self) -> bool {
        false
    }
}

/// The server's auth when the builder sets none: [`ApiKeys`] from the config's keys, or
/// none.
pub(crate) fn from_config(keys: &std::collections::HashMap<String, String>) -> Arc<dyn DynAuth> {
    if keys.is_empty() {
        Arc::new(NoAuth)
    } else {
        Arc::new(ApiKeys::from_map(keys.clone()))
    }
}

tokio::task_local! {
    /// The identity of the request this task is handling (set by the gate).
    static CURRENT: Arc<Identity>;
}

/// Run `fut` as a request of `identity`: what it enqueues carries the identity.
pub(crate) async fn scope<F: Future>(identity: Arc<Identity>, fut: F) -> F::Output {
    CURRENT.scope(identity, fut).await
}

/// The keys of a run's config that the server sets from the identity.
const RUN_KEYS: [&str; 3] = [
    "langgraph_auth_user",
    "langgraph_auth_user_id",
    "langgraph_auth_permissions",
];

/// Put the identity a run acts for into its `configurable` (and its context, when it has
/// one), dropping whatever the client sent under those keys: the identity of the request
/// being handled when it is `owner`'s, else (a run started by the server for `owner`,
/// as a cron's) `owner` alone. Nothing with auth off (`owner` `""`).
pub(crate) fn stamp_run(owner: &str, configurable: &mut Option<Value>, context: &mut Value) {
    let identity = if owner.is_empty() {
        None
    } else {
        let current = CURRENT.try_with(Arc::clone).ok().filter(|i| i.identity == owner);
        Some(current.unwrap_or_else(|| Arc::new(Identity::new(owner))))
    };
    let set = |m: &mut Map<String, Value>| {
        for k in RUN_KEYS {
            m.remove(k);
        }
        if let Some(i) = &identity {
            m.insert("langgraph_auth_user".into(), i.to_json());
            m.insert("langgraph_auth_user_id".into(), json!(i.identity));
            m.insert("langgraph_auth_permissions".into(), json!(i.permissions));
        }
    };
    match configurable {
        Some(Value::Object(m)) => set(m),
        _ if identity.is_some() => {
            let mut m = Map::new();
            set(&mut m);
            *configurable = Some(Value::Object(m));
        }
        _ => {}
    }
    if let Value::Object(m) = context {
        if !m.is_empty() {
            set(m);
        }
    }
}

/// Authorise one action of `identity` outside the routes' table (the MCP and A2A
/// endpoints run assistants and search them): the grant, or the 403.
pub(crate) async fn check(
    auth: &dyn DynAuth,
    identity: &Identity,
    resource: Resource,
    action: Action,
    id: Option<&str>,
    body: &Value,
) -> Result<Grant, crate::error::ServiceError> {
    if !auth.authorizes() {
        return Ok(Grant::allow());
    }
    let thread_id = if resource == Resource::Threads || resource == Resource::Runs {
        id
    } else {
        None
    };
    let req = AuthRequest {
        identity,
        resource,
        action,
        id,
        thread_id,
        body,
        query: None,
    };
    Ok(auth.authorize(&req).await?)
}

/// Which action on which resource a route of the server is authorised as (`path` as
/// the OpenAPI document writes it, with `{param}`s); `None` for the routes that act on
/// no resource (`/ok`, `/info`, `/metrics`, `/openapi.json`) and those that authorise
/// each call inside (`/mcp`, `/a2a/{assistant_id}`).
#[must_use]
pub fn route_action(method: &axum::http::Method, path: &str) -> Option<(Resource, Action)> {
    rules::rule_of(method, path).map(|r| (r.resource, r.action))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_run_carries_the_identity_it_acts_for_and_never_a_forged_one() {
        let forged = || Some(json!({"langgraph_auth_user_id": "root", "k": 1}));
        // Auth off: the forged keys go, nothing is added.
        let (mut conf, mut ctx) = (forged(), json!({"langgraph_auth_user": "root", "c": 2}));
        stamp_run("", &mut conf, &mut ctx);
        assert_eq!((conf, ctx), (Some(json!({"k": 1})), json!({"c": 2})));
        // A request's identity, whole.
        let ann = Arc::new(
            Identity::new("ann")
                .with_permissions(["w"])
                .with_extra("team", "red"),
        );
        let (mut conf, mut ctx) = (forged(), json!({}));
        scope(ann, async { stamp_run("ann", &mut conf, &mut ctx) }).await;
        let conf = conf.unwrap();
        assert_eq!(conf["langgraph_auth_user_id"], "ann");
        assert_eq!(conf["langgraph_auth_permissions"], json!(["w"]));
        assert_eq!(conf["langgraph_auth_user"]["team"], "red");
        assert_eq!(ctx, json!({}));
        // Outside a request (a run the server starts for an owner): the owner alone.
        let (mut conf, mut ctx) = (None, json!({"c": 2}));
        stamp_run("bob", &mut conf, &mut ctx);
        assert_eq!(conf.unwrap()["langgraph_auth_user"]["identity"], "bob");
        assert_eq!(ctx["langgraph_auth_user_id"], "bob");
    }
}
