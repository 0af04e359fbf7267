//! `#[tool]`: a `graphloom_prebuilt::FnTool` constructor from an async function.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::{Expr, ExprArray, ItemFn, Lit, LitStr, Meta, Path};

/// Options of `#[tool(...)]`.
#[derive(Default)]
struct ToolArgs {
    name: Option<LitStr>,
    description: Option<LitStr>,
    mutating: bool,
    injected: Vec<LitStr>,
    krate: Option<Path>,
}

fn parse_args(attr: TokenStream) -> syn::Result<ToolArgs> {
    let mut args = ToolArgs::default();
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("name") {
            args.name = Some(meta.value()?.parse()?);
        } else if meta.path.is_ident("description") {
            args.description = Some(meta.value()?.parse()?);
        } else if meta.path.is_ident("mutating") {
            args.mutating = true;
        } else if meta.path.is_ident("injected") {
            let list: ExprArray = meta.value()?.parse()?;
            for e in list.elems {
                match e {
                    Expr::Lit(syn::ExprLit { lit: Lit::Str(s), .. }) => args.injected.push(s),
                    other => return Err(syn::Error::new_spanned(other, "expected a string literal")),
                }
            }
        } else if meta.path.is_ident("crate") {
            let s: LitStr = meta.value()?.parse()?;
            args.krate = Some(s.parse()?);
        } else {
            return Err(meta.error("expected `name`, `description`, `mutating`, `injected` or `crate`"));
        }
        Ok(())
    });
    syn::parse::Parser::parse2(parser, attr)?;
    Ok(args)
}

fn doc_text(f: &ItemFn) -> String {
    let lines: Vec<String> = f
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(syn::ExprLit { lit: Lit::Str(s), .. }) => Some(s.value().trim().to_owned()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    lines.join("\n").trim().to_owned()
}

/// Expand `#[tool(...)]` on `async fn name(args: T, rt: ToolRuntime) -> Result<O, ToolError>`.
pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let args = parse_args(attr)?;
    let func: ItemFn = syn::parse2(item)?;
    if func.sig.asyncness.is_none() {
        return Err(syn::Error::new_spanned(
            func.sig.fn_token,
            "#[tool] needs an `async fn`",
        ));
    }
    if func.sig.inputs.len() != 2 {
        return Err(syn::Error::new_spanned(
            &func.sig.inputs,
            "#[tool] functions take two parameters: the typed arguments and a `ToolRuntime`",
        ));
    }
    let ident = &func.sig.ident;
    let vis = &func.vis;
    let name = args
        .name
        .unwrap_or_else(|| LitStr::new(&ident.to_string(), ident.span()));
    let description = match args.description {
        Some(d) => d,
        None => {
            let doc = doc_text(&func);
            if doc.is_empty() {
                return Err(syn::Error::new_spanned(
                    ident,
                    "#[tool] needs a description: add a doc comment or `description = \"...\"`",
                ));
            }
            LitStr::new(&doc, ident.span())
        }
    };
    let krate = args
        .krate
        .unwrap_or_else(|| syn::parse_quote!(::graphloom_prebuilt));
    let ctor = format_ident!("{}_tool", ident);
    let mutating = args.mutating.then(|| quote!(.mark_mutating()));
    let injected = (!args.injected.is_empty()).then(|| {
        let names = &args.injected;
        quote!(.inject([#(#names),*]))
    });
    let doc = format!("The `{}` tool: [`{ident}`] as a `FnTool`.", name.value());
    Ok(quote! {
        #func

        #[doc = #doc]
        #vis fn #ctor() -> #krate::FnTool {
            #krate::FnTool::new(#name, #description, #ident) #mutating #injected
        }
    })
}
