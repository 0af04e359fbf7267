//! The server's HTTP app, assembled: the API's own routes ([`crate::api`]), the interop
//! endpoints and the user's routes behind the auth gate, the open routes, and the console
//! ([`crate::ui`]), under the server's one stack of layers.

use crate::custom::Custom;
use crate::state::AppRef;
use axum::Router;

/// The router of the whole server.
pub(crate) fn router(state: AppRef, custom: &Custom) -> Router {
    let own = crate::api::routes(&state);
    let secured: Vec<String> = own.secured.get_openapi().paths.paths.keys().cloned().collect();
    // With the interop endpoints and the user's routes, behind the auth gate.
    let api = crate::custom::secured(own.secured, &state, custom);
    let open = crate::custom::open(own.open, custom);
    let (routes, doc) = api.merge(open).split_for_parts();
    // The console at /ui (not part of the OpenAPI document).
    let routes = routes.merge(crate::ui::routes(&state));
    let secured: Vec<&str> = secured.iter().map(String::as_str).collect();
    crate::api::finish(routes, &doc, &secured, state, custom.fallback.clone())
}
