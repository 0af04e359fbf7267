//! Parsing of the input of `#[derive(State)]`: the struct, `#[state(...)]`,
//! `#[reducer(...)]` and doc comments.

use proc_macro2::Span;
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{
    Attribute, Data, DeriveInput, Error, Expr, ExprLit, Fields, Ident, Lit, LitStr, Meta, Path, Type,
    Visibility,
};

/// Appended to every reducer error so the user sees what is accepted.
const VALID_REDUCERS: &str =
    "valid reducers: `last`, `append`, `add`, `merge`, `add_messages`, `with = path`";

/// The reducer chosen for one field.
pub(crate) enum ReducerKind {
    /// A reducer type of the core crate, by type name (`LastValue`, `Append`, ...).
    Builtin(&'static str),
    /// `with = path`: a function `fn(&mut T, T)`.
    Custom(Path),
}

/// One field of the state struct.
pub(crate) struct FieldSpec {
    /// The field identifier (possibly raw, like `r#type`).
    pub ident: Ident,
    /// The field name as it appears in JSON and in `field_name` (raw prefix removed).
    pub name: String,
    /// The field's visibility, reused for the update field and its setter.
    pub vis: Visibility,
    /// The field type.
    pub ty: Type,
    /// Its reducer.
    pub reducer: ReducerKind,
    /// Where the reducer was named (the field type when implicit), for error messages.
    pub reducer_span: Span,
    /// The field's doc comment.
    pub doc: Option<String>,
}

/// The whole derive input.
pub(crate) struct StateSpec {
    /// The state struct's name.
    pub ident: Ident,
    /// The state struct's visibility.
    pub vis: Visibility,
    /// Path of the core crate in generated code.
    pub krate: Path,
    /// The struct's doc comment.
    pub doc: Option<String>,
    /// The fields in declaration order.
    pub fields: Vec<FieldSpec>,
}

/// Validate the input and collect what code generation needs. Reports every field error
/// at once.
pub(crate) fn parse(input: &DeriveInput) -> syn::Result<StateSpec> {
    let named = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(named) => named,
            Fields::Unnamed(_) | Fields::Unit => {
                return Err(Error::new(
                    input.ident.span(),
                    "#[derive(State)] needs a struct with named fields, like `struct S { a: i64 }`",
                ))
            }
        },
        Data::Enum(e) => {
            return Err(Error::new(
                e.enum_token.span,
                "#[derive(State)] works on structs with named fields, not enums",
            ))
        }
        Data::Union(u) => {
            return Err(Error::new(
                u.union_token.span,
                "#[derive(State)] works on structs with named fields, not unions",
            ))
        }
    };
    if !input.generics.params.is_empty() || input.generics.where_clause.is_some() {
        return Err(Error::new_spanned(
            &input.generics,
            "#[derive(State)] does not support generic parameters; use concrete field types",
        ));
    }

    let mut errors: Option<Error> = None;
    let mut push_err = |e: Error| match &mut errors {
        Some(all) => all.combine(e),
        None => errors = Some(e),
    };

    let krate = crate_path(&input.attrs).unwrap_or_else(|e| {
        push_err(e);
        syn::parse_quote!(::graphloom_core)
    });

    let mut fields = Vec::with_capacity(named.named.len());
    for field in &named.named {
        let Some(ident) = field.ident.clone() else {
            push_err(Error::new(field.span(), "expected a named field"));
            continue;
        };
        let name = ident.unraw().to_string();
        if name == "new" {
            push_err(Error::new(
                ident.span(),
                "a field named `new` would clash with the update builder's `new()`; rename it",
            ));
        }
        match reducer_of(&field.attrs, &field.ty) {
            Ok((reducer, reducer_span)) => fields.push(FieldSpec {
                ident,
                name,
                vis: field.vis.clone(),
                ty: field.ty.clone(),
                reducer,
                reducer_span,
                doc: doc_of(&field.attrs),
            }),
            Err(e) => push_err(e),
        }
    }

    if let Some(e) = errors {
        return Err(e);
    }
    Ok(StateSpec {
        ident: input.ident.clone(),
        vis: input.vis.clone(),
        krate,
        doc: doc_of(&input.attrs),
        fields,
    })
}

/// `#[state(crate = "path")]`, default `::graphloom_core`.
fn crate_path(attrs: &[Attribute]) -> syn::Result<Path> {
    let mut krate: Option<Path> = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("state")) {
        attr.parse_nested_meta(|meta| {
            if !meta.path.is_ident("crate") {
                return Err(meta.error("unknown #[state] option; expected `crate = \"path\"`"));
            }
            let lit: LitStr = meta.value()?.parse()?;
            if krate.is_some() {
                return Err(Error::new(lit.span(), "duplicate `crate` in #[state]"));
            }
            krate = Some(lit.parse::<Path>()?);
            Ok(())
        })?;
    }
    Ok(krate.unwrap_or_else(|| syn::parse_quote!(::graphloom_core)))
}

/// The reducer of a field: its `#[reducer(...)]` attribute, or `LastValue` when absent.
fn reducer_of(attrs: &[Attribute], ty: &Type) -> syn::Result<(ReducerKind, Span)> {
    let mut found: Option<(ReducerKind, Span)> = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("reducer")) {
        if found.is_some() {
            return Err(Error::new_spanned(
                attr,
                "duplicate #[reducer] attribute: a field has exactly one reducer",
            ));
        }
        found = Some(parse_reducer_attr(attr)?);
    }
    Ok(found.unwrap_or_else(|| (ReducerKind::Builtin("LastValue"), ty.span())))
}

/// Parse one `#[reducer(...)]`.
fn parse_reducer_attr(attr: &Attribute) -> syn::Result<(ReducerKind, Span)> {
    let Meta::List(list) = &attr.meta else {
        return Err(Error::new_spanned(
            attr,
            format!("expected `#[reducer(<name>)]`; {VALID_REDUCERS}"),
        ));
    };
    let mut out: Option<(ReducerKind, Span)> = None;
    list.parse_nested_meta(|meta| {
        if out.is_some() {
            return Err(meta.error(format!("a field has exactly one reducer; {VALID_REDUCERS}")));
        }
        let span = meta.path.span();
        if meta.path.is_ident("with") {
            let value = meta
                .value()
                .map_err(|e| Error::new(e.span(), "expected `with = path::to::function`"))?;
            let path = if value.peek(LitStr) {
                value.parse::<LitStr>()?.parse::<Path>()?
            } else {
                value.parse::<Path>()?
            };
            out = Some((ReducerKind::Custom(path), span));
            return Ok(());
        }
        let name = meta.path.to_token_stream().to_string().replace(' ', "");
        let ty = match name.as_str() {
            "last" => "LastValue",
            "append" => "Append",
            "add" => "Add",
            "merge" => "MergeMap",
            "add_messages" => "AddMessages",
            _ => {
                return Err(meta.error(format!("unknown reducer `{name}`; {VALID_REDUCERS}")));
            }
        };
        if !meta.input.is_empty() && !meta.input.peek(syn::Token![,]) {
            return Err(meta.error(format!("reducer `{name}` takes no arguments")));
        }
        out = Some((ReducerKind::Builtin(ty), span));
        Ok(())
    })?;
    out.ok_or_else(|| Error::new_spanned(attr, format!("empty #[reducer()]; {VALID_REDUCERS}")))
}

/// The doc comment of an item, one leading space per line removed, or `None` if empty.
pub(crate) fn doc_of(attrs: &[Attribute]) -> Option<String> {
    let mut lines: Vec<String> = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident("doc")) {
        if let Meta::NameValue(nv) = &attr.meta {
            if let Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) = &nv.value {
                let value = s.value();
                lines.extend(
                    value
                        .lines()
                        .map(|l| l.strip_prefix(' ').unwrap_or(l).trim_end().to_owned()),
                );
            }
        }
    }
    let text = lines.join("\n").trim().to_owned();
    (!text.is_empty()).then_some(text)
}
