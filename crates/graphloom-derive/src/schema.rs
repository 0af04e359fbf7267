//! The generated `State::json_schema`: one property per field, no other keys (the update
//! decoder refuses them too).

use crate::attrs::StateSpec;
use proc_macro2::TokenStream;
use quote::quote;

/// Body of `json_schema`: one schemars subschema per field, shared definitions in `$defs`.
pub(crate) fn schema_body(spec: &StateSpec) -> TokenStream {
    let krate = &spec.krate;
    let json = quote!(#krate::__private::serde_json);
    let title = spec.ident.to_string();
    let root_doc = spec.doc.as_ref().map(|d| {
        quote! {
            __gl_root.insert(
                ::std::string::String::from("description"),
                #json::Value::String(::std::string::String::from(#d)),
            );
        }
    });
    let props = spec.fields.iter().map(|f| {
        let ty = &f.ty;
        let name = &f.name;
        let describe = f.doc.as_ref().map(|d| {
            quote! {
                __gl_schema.ensure_object().insert(
                    ::std::string::String::from("description"),
                    #json::Value::String(::std::string::String::from(#d)),
                );
            }
        });
        quote! {
            {
                #[allow(unused_mut)]
                let mut __gl_schema = __gl_generator.subschema_for::<#ty>();
                #describe
                __gl_props.insert(::std::string::String::from(#name), __gl_schema.to_value());
            }
        }
    });
    quote! {
        let mut __gl_generator = #krate::__private::schemars::SchemaGenerator::default();
        #[allow(unused_mut)]
        let mut __gl_props = #json::Map::new();
        #(#props)*
        let __gl_defs = __gl_generator.take_definitions(true);
        let mut __gl_root = #json::Map::new();
        __gl_root.insert(
            ::std::string::String::from("type"),
            #json::Value::String(::std::string::String::from("object")),
        );
        __gl_root.insert(
            ::std::string::String::from("title"),
            #json::Value::String(::std::string::String::from(#title)),
        );
        #root_doc
        __gl_root.insert(::std::string::String::from("properties"), #json::Value::Object(__gl_props));
        // The update decoder refuses keys the state does not have; so does the schema.
        __gl_root.insert(
            ::std::string::String::from("additionalProperties"),
            #json::Value::Bool(false),
        );
        __gl_root.insert(::std::string::String::from("$defs"), #json::Value::Object(__gl_defs));
        #json::Value::Object(__gl_root)
    }
}
