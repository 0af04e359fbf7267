//! The generated `impl State`.

use crate::attrs::{ReducerKind, StateSpec};
use crate::update::{reducer_qself, update_ident, update_ty, user_span};
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

            fn update_fields(&self, __gl_update: &Self::Update) -> ::std::vec::Vec<::std::string::String> {
                let mut __gl_out = ::std::vec::Vec::new();
                #(
                    if __gl_update.#idents.is_some() {
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
                #krate::__private::serde_json::to_value(__gl_update).map_err(|e| {
                    #krate::StateError::Decode {
                        field: ::std::string::String::new(),
                        message: ::std::string::ToString::to_string(&e),
                    }
                })
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
                            #names => {
                                __gl_update.#idents = ::std::option::Option::Some(
                                    #krate::state::decode_field::<#update_tys>(#names, __gl_v)?,
                                );
                            }
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
        quote! {
            if let ::std::option::Option::Some(__gl_value) = #value_var {
                let __gl_change = #reduce;
                #change_var = ::std::option::Option::Some(match #change_var {
                    ::std::option::Option::Some(prev) => prev.then(__gl_change),
                    ::std::option::Option::None => __gl_change,
                });
            }
        }
    });

    quote! {
        if __gl_updates.len() > 1 {
            #(#conflict_checks)*
        }
        #(
            let mut #change_vars: ::std::option::Option<#krate::FieldChange> =
                ::std::option::Option::None;
        )*
        for __gl_task in __gl_updates {
            let #update { #(#idents: #value_vars,)* } = __gl_task.update;
            #(#folds)*
        }
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
