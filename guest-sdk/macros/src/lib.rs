//! The `#[tool]` attribute of `toolcage-guest`.
//!
//! `#[tool]` leaves the function it decorates untouched and adds, beside it,
//! a hidden module of the same name with one function, `definition()`, that
//! builds the tool's `ToolDef`. Functions and modules live in different
//! namespaces, so `export!(my_tool)` can name the module while the crate keeps
//! calling `my_tool(..)` as before. The description defaults to the doc
//! comment, which is why this has to be a procedural macro.

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, FnArg, ItemFn, Lit, LitStr, Meta, Token};

/// Turns a function `fn(Args) -> Result<T, E>` (or `fn() -> Result<T, E>`)
/// into a toolcage tool. See the `toolcage-guest` crate docs.
///
/// Options: `name = "..."` (default: the function name), `title = "..."`,
/// `description = "..."` (default: the doc comment), the annotation flags
/// `read_only`, `destructive`, `idempotent`, `open_world`, and (contract
/// 0.2.0) `icon = "https://..."` (repeatable), `task = "optional"` or
/// `"required"`, `task_start = "on_begin_task"`, and
/// `needs(sampling, elicitation, roots)`.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let options = syn::parse_macro_input!(attr as ToolOptions);
    let function = syn::parse_macro_input!(item as ItemFn);
    match expand(options, function) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}

#[derive(Default)]
struct ToolOptions {
    name: Option<LitStr>,
    title: Option<LitStr>,
    description: Option<LitStr>,
    read_only: bool,
    destructive: bool,
    idempotent: bool,
    open_world: bool,
    icons: Vec<LitStr>,
    task: Option<LitStr>,
    task_start: Option<LitStr>,
    needs: Vec<syn::Ident>,
}

impl Parse for ToolOptions {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut options = ToolOptions::default();
        let metas = Punctuated::<Meta, Token![,]>::parse_terminated(input)?;
        for meta in metas {
            let Some(key) = meta.path().get_ident().map(ToString::to_string) else {
                return Err(syn::Error::new_spanned(meta.path(), "unknown tool option"));
            };
            match (&meta, key.as_str()) {
                (Meta::Path(_), "read_only") => options.read_only = true,
                (Meta::Path(_), "destructive") => options.destructive = true,
                (Meta::Path(_), "idempotent") => options.idempotent = true,
                (Meta::Path(_), "open_world") => options.open_world = true,
                (Meta::List(list), "needs") => {
                    let names = list
                        .parse_args_with(Punctuated::<syn::Ident, Token![,]>::parse_terminated)?;
                    for name in names {
                        if !["sampling", "elicitation", "roots"]
                            .contains(&name.to_string().as_str())
                        {
                            return Err(syn::Error::new_spanned(
                                &name,
                                "`needs` takes `sampling`, `elicitation` and `roots`",
                            ));
                        }
                        options.needs.push(name);
                    }
                }
                (Meta::NameValue(nv), "icon" | "task" | "task_start") => {
                    let Expr::Lit(ExprLit {
                        lit: Lit::Str(value),
                        ..
                    }) = &nv.value
                    else {
                        return Err(syn::Error::new_spanned(
                            &nv.value,
                            format!("`{key}` takes a string literal"),
                        ));
                    };
                    match key.as_str() {
                        "icon" => options.icons.push(value.clone()),
                        "task" => {
                            if !["forbidden", "optional", "required"]
                                .contains(&value.value().as_str())
                            {
                                return Err(syn::Error::new_spanned(
                                    value,
                                    "`task` is \"forbidden\", \"optional\" or \"required\"",
                                ));
                            }
                            options.task = Some(value.clone());
                        }
                        _ => {
                            if !["with_call", "on_begin_task"].contains(&value.value().as_str()) {
                                return Err(syn::Error::new_spanned(
                                    value,
                                    "`task_start` is \"with_call\" or \"on_begin_task\"",
                                ));
                            }
                            options.task_start = Some(value.clone());
                        }
                    }
                }
                (Meta::NameValue(nv), "name" | "title" | "description") => {
                    let Expr::Lit(ExprLit {
                        lit: Lit::Str(value),
                        ..
                    }) = &nv.value
                    else {
                        return Err(syn::Error::new_spanned(
                            &nv.value,
                            format!("`{key}` takes a string literal"),
                        ));
                    };
                    let slot = match key.as_str() {
                        "name" => &mut options.name,
                        "title" => &mut options.title,
                        _ => &mut options.description,
                    };
                    *slot = Some(value.clone());
                }
                _ => {
                    return Err(syn::Error::new_spanned(
                        &meta,
                        format!(
                            "unknown tool option `{key}`; expected `name = \"..\"`, \
                             `title = \"..\"`, `description = \"..\"`, `read_only`, \
                             `destructive`, `idempotent`, `open_world`, `icon = \"..\"`, \
                             `task = \"..\"`, `task_start = \"..\"` or `needs(..)`"
                        ),
                    ));
                }
            }
        }
        Ok(options)
    }
}

fn expand(options: ToolOptions, function: ItemFn) -> syn::Result<proc_macro2::TokenStream> {
    let ident = &function.sig.ident;
    let visibility = &function.vis;
    if function.sig.asyncness.is_some() {
        return Err(syn::Error::new_spanned(
            function.sig.asyncness,
            "tools are synchronous functions",
        ));
    }
    let name = options
        .name
        // A raw identifier (`r#where`) names the tool without its `r#`.
        .unwrap_or_else(|| {
            LitStr::new(
                &syn::ext::IdentExt::unraw(ident).to_string(),
                Span::call_site(),
            )
        });
    let description = match options.description {
        Some(description) => description.value(),
        None => doc_comment(&function),
    };
    if description.is_empty() {
        return Err(syn::Error::new_spanned(
            ident,
            "a tool needs a description a model can read: add a doc comment \
             or `#[tool(description = \"..\")]`",
        ));
    }
    let title = match options.title {
        Some(title) => quote!(::core::option::Option::Some(#title)),
        None => quote!(::core::option::Option::None),
    };
    let (read_only, destructive, idempotent, open_world) = (
        options.read_only,
        options.destructive,
        options.idempotent,
        options.open_world,
    );
    // The output type's declared shape (`ObjectOutput`), resolved here,
    // where the function's concrete output type is known.
    let probe = if function.sig.inputs.is_empty() {
        quote!(::toolcage_guest::__OutputProbe::of_nullary(&super::#ident))
    } else {
        quote!(::toolcage_guest::__OutputProbe::of(&super::#ident))
    };
    let handler = match function.sig.inputs.len() {
        0 => quote!(|_: ::toolcage_guest::NoArguments| super::#ident()),
        1 => match function.sig.inputs.first() {
            Some(FnArg::Typed(_)) => quote!(super::#ident),
            _ => {
                return Err(syn::Error::new_spanned(
                    &function.sig.inputs,
                    "a tool is a free function, not a method",
                ));
            }
        },
        _ => {
            return Err(syn::Error::new_spanned(
                &function.sig.inputs,
                "a tool takes one argument, a struct deriving `Deserialize` and \
                 `JsonSchema` whose fields are the tool's arguments",
            ));
        }
    };
    let icons = options.icons.iter();
    let task = match options.task.as_ref().map(LitStr::value).as_deref() {
        Some("optional") => quote!(::toolcage_guest::TaskSupport::Optional),
        Some("required") => quote!(::toolcage_guest::TaskSupport::Required),
        _ => quote!(::toolcage_guest::TaskSupport::Forbidden),
    };
    let task_start = match options.task_start.as_ref().map(LitStr::value).as_deref() {
        Some("on_begin_task") => quote!(::toolcage_guest::TaskStart::OnBeginTask),
        _ => quote!(::toolcage_guest::TaskStart::WithCall),
    };
    let needs = options.needs.iter().map(|name| {
        let flag = syn::Ident::new(&name.to_string().to_uppercase(), name.span());
        quote!(| ::toolcage_guest::ClientNeeds::#flag)
    });
    Ok(quote! {
        #function

        #[doc(hidden)]
        #[allow(non_snake_case)]
        #visibility mod #ident {
            /// The definition `toolcage_guest::export!` collects.
            pub fn definition() -> ::toolcage_guest::ToolDef {
                ::toolcage_guest::ToolDef::new(#name, #description, #handler)
                    .title(#title)
                    .annotations(::toolcage_guest::Annotations {
                        read_only: #read_only,
                        destructive: #destructive,
                        idempotent: #idempotent,
                        open_world: #open_world,
                    })
                    #(.icon(::toolcage_guest::Icon::new(#icons)))*
                    .task(#task)
                    .task_start(#task_start)
                    .needs(::toolcage_guest::ClientNeeds::empty() #(#needs)*)
                    .__output_shape({
                        #[allow(unused_imports)]
                        use ::toolcage_guest::{__DeclaredObject as _, __UndeclaredShape as _};
                        (&&#probe).__output_shape()
                    })
            }
        }
    })
}

/// The doc comment as Markdown text: `///` lines joined, the one leading
/// space rustdoc strips removed.
fn doc_comment(function: &ItemFn) -> String {
    let lines: Vec<String> = function
        .attrs
        .iter()
        .filter(|attr| attr.path().is_ident("doc"))
        .filter_map(|attr| match &attr.meta {
            Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(ExprLit {
                    lit: Lit::Str(s), ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .map(|line| {
            line.strip_prefix(' ')
                .unwrap_or(&line)
                .trim_end()
                .to_owned()
        })
        .collect();
    lines.join("\n").trim().to_owned()
}
