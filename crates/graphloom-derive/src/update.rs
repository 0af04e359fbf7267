//! The generated `<Name>Update` struct and its builder.

use crate::attrs::{FieldSpec, ReducerKind, StateSpec};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::{Ident, LitStr};

/// Name of the update struct: the state's name followed by `Update`.
pub(crate) fn update_ident(spec: &StateSpec) -> Ident {
    format_ident!("{}Update", spec.ident)
}

/// The hidden struct holding a partial update's overwrites (one `Option` per field with a
/// reducer), boxed in the update so updates that overwrite nothing stay small.
pub(crate) fn overwrites_ident(spec: &StateSpec) -> Ident {
    format_ident!("__GraphloomOverwrites{}", spec.ident)
}

/// A span that points at user code (for error messages) but belongs to the macro expansion,
/// so lints treat the generated code as generated.
pub(crate) fn user_span(span: Span) -> Span {
    Span::call_site().located_at(span)
}

/// `<Krate::Reducer as Krate::Reducer<T>>` for a built-in reducer, `None` for `with = f`.
pub(crate) fn reducer_qself(spec: &StateSpec, f: &FieldSpec) -> Option<TokenStream> {
    let ReducerKind::Builtin(name) = &f.reducer else {
        return None;
    };
    let krate = &spec.krate;
    let ty = &f.ty;
    let span = user_span(f.reducer_span);
    let r = Ident::new(name, span);
    Some(quote_spanned!(span=> <#krate::#r as #krate::Reducer<#ty>>))
}

/// The type a node writes to field `f`.
pub(crate) fn update_ty(spec: &StateSpec, f: &FieldSpec) -> TokenStream {
    match reducer_qself(spec, f) {
        Some(qself) => quote_spanned!(user_span(f.reducer_span)=> #qself::Update),
        None => {
            let ty = &f.ty;
            quote!(#ty)
        }
    }
}

/// Fields a node may overwrite past their reducer (LangGraph's `Overwrite`): every field
/// whose reducer is not `last`. With each, the hidden update field holding the overwrite
/// and the setter's name.
pub(crate) fn overwrite_fields(spec: &StateSpec) -> Vec<(&FieldSpec, Ident, Ident)> {
    spec.fields
        .iter()
        .filter(|f| !matches!(f.reducer, ReducerKind::Builtin("LastValue")))
        .map(|f| {
            (
                f,
                format_ident!("__overwrite_{}", f.name),
                format_ident!("{}_overwrite", f.name),
            )
        })
        .collect()
}

/// A human-readable name of the field's reducer, for docs.
fn reducer_label(f: &FieldSpec) -> String {
    match &f.reducer {
        ReducerKind::Builtin("LastValue") => "keeps the last value; one writer per step".into(),
        ReducerKind::Builtin("Append") => "appends the written items".into(),
        ReducerKind::Builtin("Add") => "adds the written value".into(),
        ReducerKind::Builtin("MergeMap") => "merges the written map, later keys winning".into(),
        ReducerKind::Builtin("AddMessages") => "merges the written messages by id".into(),
        ReducerKind::Builtin(other) => format!("reducer `{other}`"),
        ReducerKind::Custom(path) => {
            format!("folded with `{}`", quote!(#path).to_string().replace(' ', ""))
        }
    }
}

/// The update struct, its `new()` and one setter per field.
pub(crate) fn generate(spec: &StateSpec) -> TokenStream {
    let krate = &spec.krate;
    let vis = &spec.vis;
    let state = &spec.ident;
    let update = update_ident(spec);
    let serde_crate = LitStr::new(&quote!(#krate::__private::serde).to_string(), Span::call_site());
    let struct_doc = format!(
        "A partial update of `{state}`: every field optional, in the form its reducer \
         accepts. Build one with `{update}::new()` and the setters, or from JSON."
    );

    // A present key is a write even when its value is `null` (a write of `None` to an
    // `Option` field); plain `Option` deserialisation would read it as "not written".
    let present = LitStr::new(&format!("{update}::__graphloom_present"), Span::call_site());
    let fields = spec.fields.iter().map(|f| {
        let ident = &f.ident;
        let fvis = &f.vis;
        let ty = update_ty(spec, f);
        let mut doc = format!("Write to `{}` ({}).", f.name, reducer_label(f));
        if let Some(d) = &f.doc {
            doc.push_str("\n\n");
            doc.push_str(d);
        }
        quote! {
            #[doc = #doc]
            #[serde(
                default,
                skip_serializing_if = "::std::option::Option::is_none",
                deserialize_with = #present
            )]
            #fvis #ident: ::std::option::Option<#ty>,
        }
    });

    let setters = spec.fields.iter().map(|f| {
        let ident = &f.ident;
        let fvis = &f.vis;
        let ty = update_ty(spec, f);
        let doc = format!("Set the write to `{}` ({}).", f.name, reducer_label(f));
        quote! {
            #[doc = #doc]
            #[must_use]
            #fvis fn #ident(mut self, value: #ty) -> Self {
                self.#ident = ::std::option::Option::Some(value);
                self
            }
        }
    });

    let overwrites = overwrite_fields(spec);
    let ow_struct = overwrites_ident(spec);
    let ow_decl = if overwrites.is_empty() {
        quote!()
    } else {
        let ow_fields = overwrites.iter().map(|(f, ow, _)| {
            let ty = &f.ty;
            quote!(#vis #ow: ::std::option::Option<#ty>,)
        });
        quote! {
            #[doc(hidden)]
            #[allow(non_camel_case_types)]
            #[derive(::std::clone::Clone, ::std::default::Default)]
            #vis struct #ow_struct {
                #(#ow_fields)*
            }
        }
    };
    let ow_field = if overwrites.is_empty() {
        quote!()
    } else {
        quote! {
            #[doc(hidden)]
            #[serde(skip)]
            #vis __graphloom_overwrites: ::std::option::Option<::std::boxed::Box<#ow_struct>>,
        }
    };
    let ow_setters = overwrites.iter().map(|(f, ow, setter)| {
        let fvis = &f.vis;
        let ty = &f.ty;
        let doc = format!(
            "Replace `{}` with `value`, past its reducer (LangGraph's `Overwrite`): the field \
             holds exactly `value` after this step, whatever else the step wrote to it. Two \
             overwrites of it in one step are `StateError::OverwriteConflict`. In JSON: \
             `{{\"{}\": {{\"__overwrite__\": value}}}}`.",
            f.name, f.name
        );
        quote! {
            #[doc = #doc]
            #[must_use]
            #fvis fn #setter(mut self, value: #ty) -> Self {
                self.__graphloom_overwrites
                    .get_or_insert_with(::std::default::Default::default)
                    .#ow = ::std::option::Option::Some(value);
                self
            }
        }
    });
    let ow_names: Vec<String> = overwrites
        .iter()
        .map(|(f, _, _)| format!("{}_overwrite", f.name))
        .collect();
    let ow_idents = overwrites.iter().map(|(_, ow, _)| ow);

    let update_name = update.to_string();
    let names = spec.fields.iter().map(|f| f.name.as_str());
    let idents = spec.fields.iter().map(|f| &f.ident);
    let json = quote!(#krate::__private::serde_json);

    quote! {
        #[doc = #struct_doc]
        #[derive(
            ::std::clone::Clone,
            ::std::default::Default,
            #krate::__private::serde::Serialize,
            #krate::__private::serde::Deserialize,
        )]
        #[serde(crate = #serde_crate)]
        #[serde(deny_unknown_fields)]
        #vis struct #update {
            #(#fields)*
            #ow_field
        }

        #ow_decl

        #[automatically_derived]
        impl #update {
            #[doc(hidden)]
            fn __graphloom_present<'de, D, T>(
                deserializer: D,
            ) -> ::std::result::Result<::std::option::Option<T>, D::Error>
            where
                D: #krate::__private::serde::Deserializer<'de>,
                T: #krate::__private::serde::Deserialize<'de>,
            {
                <T as #krate::__private::serde::Deserialize<'de>>::deserialize(deserializer)
                    .map(::std::option::Option::Some)
            }

            /// An update that writes nothing.
            #[must_use]
            pub fn new() -> Self {
                <Self as ::std::default::Default>::default()
            }
            #(#setters)*
            #(#ow_setters)*
        }

        /// Shows each written value as JSON (update types need not implement `Debug`).
        #[automatically_derived]
        impl ::std::fmt::Debug for #update {
            fn fmt(&self, __gl_f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                __gl_f.debug_struct(#update_name)
                    #(.field(#names, &self.#idents.as_ref().map(|v| {
                        #json::to_value(v).unwrap_or_else(|e| {
                            #json::Value::String(::std::format!("<not serializable: {e}>"))
                        })
                    })))*
                    #(.field(#ow_names, &self.__graphloom_overwrites.as_ref().and_then(|o| o.#ow_idents.as_ref()).map(|v| {
                        #json::to_value(v).unwrap_or_else(|e| {
                            #json::Value::String(::std::format!("<not serializable: {e}>"))
                        })
                    })))*
                    .finish()
            }
        }
    }
}
