//! The generated `impl State`.

use crate::attrs::{ReducerKind, StateSpec};
use crate::update::{overwrite_fields, overwrites_ident, reducer_qself, update_ident, update_ty, user_span};
use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote, quote_spanned};

/// `impl State for <Name>`.
pub(crate) fn generate(spec: &StateSpec) -> TokenStream {
    let krate = &spec.krate;
    let state = &spec.ident;
    let update = update_ident(spec);
    let count = spec.fields.len();
    let names: Vec<&str> = spec.fields.iter().map(|f| f.name.as_str()).collect();
    let idents: Vec<_> = spec.fields.iter().map(|f| &f.ident).collect();
    let indices: Vec<Literal> = (0..count).map(Literal::usize_unsuffixed).collect();
    let update_tys: Vec<TokenStream> = spec.fields.iter().map(|f| update_ty(spec, f)).collect();
    let all_names = if names.is_empty() {
        "no fields".to_owned()
    } else {
        names.join(", ")
    };

    let overwrites = overwrite_fields(spec);
    let ow_names: Vec<&str> = overwrites.iter().map(|(f, _, _)| f.name.as_str()).collect();
    let ow_idents: Vec<_> = overwrites.iter().map(|(_, ow, _)| ow).collect();
    let ow_plain: Vec<_> = overwrites.iter().map(|(f, _, _)| &f.ident).collect();
    let ow_tys: Vec<_> = overwrites.iter().map(|(f, _, _)| &f.ty).collect();
    let ow_update_tys: Vec<TokenStream> = overwrites.iter().map(|(f, _, _)| update_ty(spec, f)).collect();
    let plain: Vec<(&str, &syn::Ident, &TokenStream)> = spec
        .fields
        .iter()
        .zip(&update_tys)
        .filter(|(f, _)| !ow_names.contains(&f.name.as_str()))
        .map(|(f, t)| (f.name.as_str(), &f.ident, t))
        .collect();
    let plain_names: Vec<&str> = plain.iter().map(|p| p.0).collect();
    let plain_idents: Vec<&syn::Ident> = plain.iter().map(|p| p.1).collect();
    let plain_tys: Vec<&TokenStream> = plain.iter().map(|p| p.2).collect();

    let written: Vec<TokenStream> = spec
        .fields
        .iter()
        .map(|f| {
            let ident = &f.ident;
            match overwrites.iter().find(|(g, _, _)| g.name == f.name) {
                Some((_, ow, _)) => quote! {
                    __gl_update.#ident.is_some()
                        || __gl_update
                            .__graphloom_overwrites
                            .as_ref()
                            .is_some_and(|o| o.#ow.is_some())
                },
                None => quote!(__gl_update.#ident.is_some()),
            }
        })
        .collect();

    let reducer_names: Vec<&str> = spec
        .fields
        .iter()
        .map(|f| match &f.reducer {
            ReducerKind::Builtin("LastValue") => "last",
            ReducerKind::Builtin("Append") => "append",
            ReducerKind::Builtin("Add") => "add",
            ReducerKind::Builtin("MergeMap") => "merge",
            ReducerKind::Builtin("AddMessages") => "add_messages",
            ReducerKind::Builtin(_) | ReducerKind::Custom(_) => "custom",
        })
        .collect();

    let ow_messages = if overwrites.is_empty() {
        quote!()
    } else {
        quote! {
            if let ::std::option::Option::Some(__gl_ows) = &mut __gl_update.__graphloom_overwrites {
                #( #krate::state::update_messages(&mut __gl_ows.#ow_idents, &mut __gl_out); )*
            }
        }
    };
    let ow_to_json = if overwrites.is_empty() {
        quote!()
    } else {
        quote! {
            // Overwrites in LangGraph's serialised form, in place of the plain write.
            if let (
                #krate::__private::serde_json::Value::Object(__gl_map),
                ::std::option::Option::Some(__gl_ows),
            ) = (&mut __gl_json, &__gl_update.__graphloom_overwrites)
            {
                #(
                    if let ::std::option::Option::Some(__gl_v) = &__gl_ows.#ow_idents {
                        __gl_map.insert(
                            ::std::string::String::from(#ow_names),
                            #krate::state::overwrite_to_json(#ow_names, __gl_v)?,
                        );
                    }
                )*
                let _ = (__gl_map, __gl_ows);
            }
        }
    };
    let merge = merge_body(spec);
    let tail_arms = tail_arms(spec);
    let schema = crate::schema::schema_body(spec);

    quote! {
        #[automatically_derived]
        impl ::core::convert::From<#update> for #krate::NodeOutput<#state> {
            fn from(update: #update) -> Self {
                #krate::NodeOutput::Update(update)
            }
        }

        #[automatically_derived]
        impl #krate::State for #state {
            type Update = #update;

            fn field_count(&self) -> usize {
                #count
            }

            fn field_name(&self, __gl_idx: usize) -> &str {
                const FIELDS: [&str; #count] = [#(#names),*];
                match FIELDS.get(__gl_idx) {
                    ::std::option::Option::Some(name) => *name,
                    ::std::option::Option::None => "",
                }
            }

            fn merge(
                &mut self,
                __gl_updates: ::std::vec::Vec<#krate::TaskUpdate<'_, Self::Update>>,
                __gl_changes: &mut ::std::vec::Vec<#krate::Changed>,
            ) -> ::std::result::Result<(), #krate::StateError> {
                #merge
            }

            fn field_reducer(&self, __gl_idx: usize) -> ::std::option::Option<&'static str> {
                const REDUCERS: [&str; #count] = [#(#reducer_names),*];
                REDUCERS.get(__gl_idx).copied()
            }

            fn update_fields(&self, __gl_update: &Self::Update) -> ::std::vec::Vec<::std::string::String> {
                let mut __gl_out = ::std::vec::Vec::new();
                #(
                    if #written {
                        __gl_out.push(::std::string::String::from(#names));
                    }
                )*
                __gl_out
            }

            fn field_to_json(
                &self,
                __gl_idx: usize,
            ) -> ::std::result::Result<#krate::__private::serde_json::Value, #krate::StateError> {
                match __gl_idx {
                    #( #indices => #krate::state::encode_field(#names, &self.#idents), )*
                    _ => ::std::result::Result::Err(#krate::StateError::UnknownField(
                        ::std::string::ToString::to_string(&__gl_idx),
                    )),
                }
            }

            fn field_shared_items(
                &self,
                __gl_idx: usize,
            ) -> ::std::option::Option<::std::vec::Vec<::std::sync::Arc<#krate::__private::serde_json::Value>>> {
                match __gl_idx {
                    #( #indices => #krate::state::shared_items(&self.#idents), )*
                    _ => ::std::option::Option::None,
                }
            }

            fn field_tail_to_json(
                &self,
                __gl_idx: usize,
                __gl_n: usize,
            ) -> ::std::option::Option<::std::result::Result<
                ::std::vec::Vec<#krate::__private::serde_json::Value>,
                #krate::StateError,
            >> {
                match __gl_idx {
                    #tail_arms
                    _ => ::std::option::Option::None,
                }
            }

            fn set_field_from_json(
                &mut self,
                __gl_idx: usize,
                __gl_value: #krate::__private::serde_json::Value,
            ) -> ::std::result::Result<(), #krate::StateError> {
                match __gl_idx {
                    #(
                        #indices => {
                            self.#idents = #krate::state::decode_field(#names, __gl_value)?;
                            ::std::result::Result::Ok(())
                        }
                    )*
                    _ => ::std::result::Result::Err(#krate::StateError::UnknownField(
                        ::std::string::ToString::to_string(&__gl_idx),
                    )),
                }
            }

            fn update_to_json(
                &self,
                __gl_update: &Self::Update,
            ) -> ::std::result::Result<#krate::__private::serde_json::Value, #krate::StateError> {
                #[allow(unused_mut)]
                let mut __gl_json = #krate::__private::serde_json::to_value(__gl_update).map_err(|e| {
                    #krate::StateError::Decode {
                        field: ::std::string::String::new(),
                        message: ::std::string::ToString::to_string(&e),
                    }
                })?;
                #ow_to_json
                ::std::result::Result::Ok(__gl_json)
            }

            fn update_from_json(
                &self,
                __gl_value: #krate::__private::serde_json::Value,
            ) -> ::std::result::Result<Self::Update, #krate::StateError> {
                // Field by field, so an error names the field (or the key no field has).
                let #krate::__private::serde_json::Value::Object(__gl_map) = __gl_value else {
                    return ::std::result::Result::Err(#krate::StateError::Decode {
                        field: ::std::string::String::new(),
                        message: ::std::format!("an update must be a JSON object, got {}", __gl_value),
                    });
                };
                let mut __gl_update = <#update as ::std::default::Default>::default();
                for (__gl_key, __gl_v) in __gl_map {
                    match __gl_key.as_str() {
                        #(
                            #plain_names => {
                                __gl_update.#plain_idents = ::std::option::Option::Some(
                                    #krate::state::decode_field::<#plain_tys>(#plain_names, __gl_v)?,
                                );
                            }
                        )*
                        #(
                            #ow_names => match #krate::state::split_overwrite(__gl_v) {
                                ::std::result::Result::Ok(__gl_v) => {
                                    __gl_update
                                        .__graphloom_overwrites
                                        .get_or_insert_with(::std::default::Default::default)
                                        .#ow_idents = ::std::option::Option::Some(
                                        #krate::state::decode_field::<#ow_tys>(#ow_names, __gl_v)?,
                                    );
                                }
                                ::std::result::Result::Err(__gl_v) => {
                                    __gl_update.#ow_plain = ::std::option::Option::Some(
                                        #krate::state::decode_field::<#ow_update_tys>(#ow_names, __gl_v)?,
                                    );
                                }
                            },
                        )*
                        _ => {
                            return ::std::result::Result::Err(#krate::StateError::Decode {
                                message: ::std::format!(
                                    "unknown field `{}`; the state has: {}",
                                    __gl_key,
                                    #all_names,
                                ),
                                field: __gl_key,
                            });
                        }
                    }
                }
                ::std::result::Result::Ok(__gl_update)
            }

            fn json_schema(&self) -> #krate::__private::serde_json::Value {
                #schema
            }

            fn update_messages(
                &self,
                __gl_update: &mut Self::Update,
            ) -> ::std::vec::Vec<#krate::__private::serde_json::Value> {
                #[allow(unused_mut)]
                let mut __gl_out = ::std::vec::Vec::new();
                #( #krate::state::update_messages(&mut __gl_update.#idents, &mut __gl_out); )*
                #ow_messages
                __gl_out
            }

            fn has_message(&self, __gl_id: &str) -> bool {
                false #( || #krate::state::holds_message(&self.#idents, __gl_id) )*
            }

            fn empty_like(&self) -> Self {
                <Self as ::std::default::Default>::default()
            }
        }
    }
}

/// Body of `merge`: conflict checks for single-writer fields, then the fold in order.
fn merge_body(spec: &StateSpec) -> TokenStream {
    let krate = &spec.krate;
    let update = update_ident(spec);

    let conflict_checks = spec.fields.iter().filter_map(|f| {
        let qself = reducer_qself(spec, f)?;
        let ident = &f.ident;
        let name = &f.name;
        Some(quote! {
            if #qself::SINGLE_WRITER
                && __gl_updates.iter().filter(|u| u.update.#ident.is_some()).nth(1).is_some()
            {
                return ::std::result::Result::Err(#krate::StateError::Conflict {
                    field: ::std::string::String::from(#name),
                    nodes: __gl_updates
                        .iter()
                        .filter(|u| u.update.#ident.is_some())
                        .map(|u| ::std::string::String::from(u.node))
                        .collect(),
                });
            }
        })
    });

    let change_vars: Vec<_> = (0..spec.fields.len())
        .map(|i| format_ident!("__gl_change_{}", i))
        .collect();
    let value_vars: Vec<_> = (0..spec.fields.len())
        .map(|i| format_ident!("__gl_value_{}", i))
        .collect();
    let idents: Vec<_> = spec.fields.iter().map(|f| &f.ident).collect();
    let indices: Vec<Literal> = (0..spec.fields.len()).map(Literal::usize_unsuffixed).collect();

    let folds = spec.fields.iter().enumerate().map(|(i, f)| {
        let ident = &f.ident;
        let name = &f.name;
        let ty = &f.ty;
        let value_var = &value_vars[i];
        let change_var = &change_vars[i];
        let reduce = match (&f.reducer, reducer_qself(spec, f)) {
            (_, Some(qself)) => quote! {
                #qself::reduce(&mut self.#ident, __gl_value).map_err(|e| {
                    #krate::StateError::Reducer {
                        field: ::std::string::String::from(#name),
                        message: ::std::string::ToString::to_string(&e),
                    }
                })?
            },
            (ReducerKind::Custom(path), None) => {
                let span = user_span(f.reducer_span);
                let func = quote_spanned!(span=> let __gl_fn: fn(&mut #ty, #ty) = #path;);
                quote! {{
                    #func
                    __gl_fn(&mut self.#ident, __gl_value);
                    #krate::FieldChange::Replaced
                }}
            }
            (ReducerKind::Builtin(_), None) => quote!(#krate::FieldChange::Replaced),
        };
        let fold = quote! {
            if let ::std::option::Option::Some(__gl_value) = #value_var {
                let __gl_change = #reduce;
                #change_var = ::std::option::Option::Some(match #change_var {
                    ::std::option::Option::Some(prev) => prev.then(__gl_change),
                    ::std::option::Option::None => __gl_change,
                });
            }
        };
        if matches!(f.reducer, ReducerKind::Builtin("LastValue")) {
            fold
        } else {
            let var = format_ident!("__gl_ow_{}", f.name);
            quote!(if #var.is_none() { #fold })
        }
    });

    let overwrites = overwrite_fields(spec);
    let ow_checks = overwrites.iter().map(|(f, ow, _)| {
        let name = &f.name;
        let has = quote! {
            |u: &&#krate::TaskUpdate<'_, #update>| {
                u.update.__graphloom_overwrites.as_ref().is_some_and(|o| o.#ow.is_some())
            }
        };
        quote! {
            if __gl_updates.iter().filter(#has).nth(1).is_some() {
                return ::std::result::Result::Err(#krate::StateError::OverwriteConflict {
                    field: ::std::string::String::from(#name),
                    nodes: __gl_updates
                        .iter()
                        .filter(#has)
                        .map(|u| ::std::string::String::from(u.node))
                        .collect(),
                });
            }
        }
    });
    // Checked only when some update of the step overwrites: most steps have none.
    let ow_checks = if overwrites.is_empty() {
        quote!()
    } else {
        quote! {
            if __gl_updates.iter().any(|u| u.update.__graphloom_overwrites.is_some()) {
                #(#ow_checks)*
            }
        }
    };
    // An overwrite replaces the field and every other write to it in the step, whatever
    // their order: taken out first, applied after the fold.
    let ow_take = if overwrites.is_empty() {
        quote!()
    } else {
        let ow_vars = overwrites
            .iter()
            .map(|(f, _, _)| format_ident!("__gl_ow_{}", f.name));
        let ow_idents: Vec<_> = overwrites.iter().map(|(_, ow, _)| ow).collect();
        let ow_struct = overwrites_ident(spec);
        quote! {
            let mut __gl_updates = __gl_updates;
            let mut __gl_ows: ::std::option::Option<#ow_struct> = ::std::option::Option::None;
            for __gl_task in &mut __gl_updates {
                if let ::std::option::Option::Some(__gl_o) = __gl_task.update.__graphloom_overwrites.take() {
                    let __gl_o = *__gl_o;
                    let __gl_acc = __gl_ows.get_or_insert_with(::std::default::Default::default);
                    #(
                        if __gl_o.#ow_idents.is_some() {
                            __gl_acc.#ow_idents = __gl_o.#ow_idents;
                        }
                    )*
                }
            }
            #(
                let #ow_vars = match &mut __gl_ows {
                    ::std::option::Option::Some(__gl_acc) => __gl_acc.#ow_idents.take(),
                    ::std::option::Option::None => ::std::option::Option::None,
                };
            )*
        }
    };
    let ow_apply = overwrites.iter().map(|(f, _, _)| {
        let var = format_ident!("__gl_ow_{}", f.name);
        let ident = &f.ident;
        let i = spec.fields.iter().position(|g| g.name == f.name).unwrap_or(0);
        let change_var = &change_vars[i];
        quote! {
            if let ::std::option::Option::Some(__gl_value) = #var {
                self.#ident = __gl_value;
                #change_var = ::std::option::Option::Some(#krate::FieldChange::Replaced);
            }
        }
    });

    quote! {
        if __gl_updates.len() > 1 {
            #(#conflict_checks)*
            #ow_checks
        }
        #ow_take
        #(
            let mut #change_vars: ::std::option::Option<#krate::FieldChange> =
                ::std::option::Option::None;
        )*
        for __gl_task in __gl_updates {
            let #update { #(#idents: #value_vars,)* .. } = __gl_task.update;
            #(#folds)*
        }
        #(#ow_apply)*
        #(
            if let ::std::option::Option::Some(change) = #change_vars {
                __gl_changes.push(#krate::Changed { field: #indices, change });
            }
        )*
        ::std::result::Result::Ok(())
    }
}

/// Match arms of `field_tail_to_json` for fields with a built-in reducer.
fn tail_arms(spec: &StateSpec) -> TokenStream {
    let krate = &spec.krate;
    let arms = spec.fields.iter().enumerate().filter_map(|(i, f)| {
        let qself = reducer_qself(spec, f)?;
        let idx = Literal::usize_unsuffixed(i);
        let ident = &f.ident;
        let name = &f.name;
        Some(quote! {
            #idx => #qself::tail_json(&self.#ident, __gl_n).map(|r| {
                r.map_err(|e| #krate::StateError::Decode {
                    field: ::std::string::String::from(#name),
                    message: ::std::string::ToString::to_string(&e),
                })
            }),
        })
    });
    quote!(#(#arms)*)
}
