//! Derive macros for graphloom.
//!
//! `#[derive(State)]` turns a struct with named fields into a graph state: it generates a
//! `<Name>Update` struct (every field optional, in the form its reducer accepts, with a
//! builder) and `impl graphloom_core::State`. Pick a field's reducer with
//! `#[reducer(last | append | add | merge | add_messages | with = path)]`; fields without
//! the attribute keep the last value written. `#[state(crate = "path")]` changes the path
//! of the core crate used in generated code (default `::graphloom_core`).

use proc_macro::TokenStream;
use syn::{parse_macro_input, DeriveInput};

mod attrs;
mod schema;
mod state;
mod tool;
mod update;

/// Derive `graphloom_core::State` for a struct with named fields.
///
/// ```ignore
/// use graphloom_core::{Message, Seq, State};
///
/// #[derive(State, Clone, Default, Debug)]
/// pub struct MyState {
///     /// The question asked (becomes the field's JSON Schema description).
///     pub question: String,
///     #[reducer(append)]
///     pub log: Seq<String>,
///     #[reducer(add)]
///     pub count: i64,
///     #[reducer(add_messages)]
///     pub messages: Seq<Message>,
///     #[reducer(with = keep_max)]
///     pub best: i64,
/// }
///
/// fn keep_max(current: &mut i64, new: i64) {
///     *current = (*current).max(new);
/// }
///
/// let update = MyStateUpdate::new().count(2).log(vec!["asked".into()]);
/// ```
///
/// The struct must also implement `Clone` and `Default`, and every field type
/// `Serialize`, `Deserialize` and `JsonSchema`.
///
/// `MyStateUpdate` has the visibility of `MyState`; each of its fields and setters has the
/// visibility of the state field it writes. In JSON an update is an object with one key per
/// written field (unknown keys are an error); a key whose value is `null` is a write of
/// `null`, so `{"other": null}` sets an `Option` field to `None`.
///
/// Every field with a reducer other than `last` also gets an overwrite setter,
/// `<field>_overwrite(value)` (LangGraph's `Overwrite(value)`): the field holds exactly
/// `value` after the step, past its reducer and whatever else the step wrote to it; two
/// overwrites of one field in a step are `StateError::OverwriteConflict`. In JSON it is
/// `{"log": {"__overwrite__": [..]}}` (`{"type": "__overwrite__", "value": ..}` is read too).
///
/// ```ignore
/// let trimmed = MyStateUpdate::new().log_overwrite(Seq::new());
/// ```
#[proc_macro_derive(State, attributes(reducer, state))]
pub fn derive_state(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match attrs::parse(&input) {
        Ok(spec) => {
            let update = update::generate(&spec);
            let state = state::generate(&spec);
            quote::quote!(#update #state).into()
        }
        Err(e) => e.to_compile_error().into(),
    }
}

/// Turn `async fn name(args: T, rt: ToolRuntime) -> Result<O, ToolError>` into a tool: the
/// function stays as written, and `fn name_tool() -> graphloom_prebuilt::FnTool` is added
/// (the name is the function's, the description its doc comment). Options:
/// `name = "..."`, `description = "..."`, `mutating` (pause for approval),
/// `injected = ["session_id", ...]`, `crate = "path"` (default `::graphloom_prebuilt`).
///
/// ```ignore
/// use graphloom_prebuilt::{tool, ToolError, ToolRuntime};
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Refund { order: String }
///
/// /// Refund an order.
/// #[tool(mutating)]
/// async fn refund(args: Refund, rt: ToolRuntime) -> Result<String, ToolError> {
///     Ok(format!("refunded {}", args.order))
/// }
///
/// let t = refund_tool();
/// ```
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    match tool::expand(attr.into(), item.into()) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}
