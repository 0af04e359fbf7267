//! A user's routes and middleware, mounted beside the server's own
//! ([`ServerBuilder::routes`](crate::ServerBuilder::routes),
//! [`public_routes`](crate::ServerBuilder::public_routes),
//! [`layer`](crate::ServerBuilder::layer)), and the interop endpoints (`/mcp`, `/a2a`).

use crate::state::AppRef;
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;

/// Wraps a router in one of the user's layers.
type LayerFn = Arc<dyn Fn(OpenApiRouter<AppRef>) -> OpenApiRouter<AppRef> + Send + Sync>;

/// What [`ServerBuilder`](crate::ServerBuilder) collected.
#[derive(Clone, Default)]
pub(crate) struct Custom {
    /// Behind the server's auth.
    pub routes: Vec<axum::Router>,
    /// Without auth.
    pub public: Vec<axum::Router>,
    /// Around every route, the server's and the user's; inside the auth gate, so they see
    /// the request's [`Identity`](crate::auth::Identity).
    pub layers: Vec<LayerFn>,
    /// What answers a request no route matches (without auth), instead of the JSON 404.
    pub fallback: Option<axum::Router>,
}

impl Custom {
    /// Add a layer.
    pub(crate) fn push_layer<L>(&mut self, layer: L)
    where
        L: tower::Layer<axum::routing::Route> + Clone + Send + Sync + 'static,
        L::Service: tower::Service<axum::extract::Request> + Clone + Send + Sync + 'static,
        <L::Service as tower::Service<axum::extract::Request>>::Response:
            axum::response::IntoResponse + 'static,
        <L::Service as tower::Service<axum::extract::Request>>::Error:
            Into<std::convert::Infallible> + 'static,
        <L::Service as tower::Service<axum::extract::Request>>::Future: Send + 'static,
    {
        self.layers.push(Arc::new(move |r| r.layer(layer.clone())));
    }
}

/// The routes behind auth: the server's `api`, the interop endpoints and the user's
/// routes, in the user's layers, behind the auth gate.
pub(crate) fn secured(api: OpenApiRouter<AppRef>, state: &AppRef, custom: &Custom) -> OpenApiRouter<AppRef> {
    let mut r = api.merge(OpenApiRouter::from(crate::api::interop(state)));
    for user in &custom.routes {
        r = r.merge(OpenApiRouter::from(user.clone().with_state::<AppRef>(())));
    }
    let r = wrap(r, custom);
    r.layer(axum::middleware::from_fn_with_state(
        Arc::clone(state),
        crate::api::gate::gate,
    ))
}

/// The routes without auth: the server's `open` ones and the user's public routes, in the
/// user's layers.
pub(crate) fn open(open: OpenApiRouter<AppRef>, custom: &Custom) -> OpenApiRouter<AppRef> {
    let mut r = open;
    for user in &custom.public {
        r = r.merge(OpenApiRouter::from(user.clone().with_state::<AppRef>(())));
    }
    wrap(r, custom)
}

fn wrap(mut r: OpenApiRouter<AppRef>, custom: &Custom) -> OpenApiRouter<AppRef> {
    for layer in &custom.layers {
        r = layer(r);
    }
    r
}
