//! `#[scenario]`: an end-to-end scenario is an `async fn NAME(ctx: Ctx) -> Result` and nothing
//! else. The attribute makes it an ignored `#[tokio::test]` (run by scripts/e2e.sh with
//! `--ignored`) that runs the body in a temporary namespace named after the function
//! (`tusk_e2e::with_temp_ns`), so the name cannot drift from the function and no scenario
//! repeats the wrapper.

use proc_macro::TokenStream;
use quote::quote;
use syn::spanned::Spanned;
use syn::{FnArg, ItemFn, parse_macro_input};

/// `#[scenario]`, or `#[scenario(multi_thread)]` for a scenario that serves requests from its
/// own process (a server other processes call while the body waits).
#[proc_macro_attribute]
pub fn scenario(args: TokenStream, item: TokenStream) -> TokenStream {
    let args = proc_macro2::TokenStream::from(args);
    let runtime = match args.to_string().as_str() {
        "" => quote! { #[::tokio::test] },
        "multi_thread" => quote! { #[::tokio::test(flavor = "multi_thread")] },
        _ => {
            return syn::Error::new(args.span(), "#[scenario] takes nothing or `multi_thread`")
                .to_compile_error()
                .into();
        }
    };
    let function = parse_macro_input!(item as ItemFn);
    expand(function, runtime)
        .unwrap_or_else(|e| e.to_compile_error())
        .into()
}

fn expand(
    function: ItemFn,
    runtime: proc_macro2::TokenStream,
) -> syn::Result<proc_macro2::TokenStream> {
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = function;
    if sig.asyncness.is_none() {
        return Err(syn::Error::new(sig.span(), "a scenario is an `async fn`"));
    }
    let mut inputs = sig.inputs.iter();
    let (Some(FnArg::Typed(ctx)), None) = (inputs.next(), inputs.next()) else {
        return Err(syn::Error::new(
            sig.inputs.span(),
            "a scenario takes exactly one argument: `ctx: Ctx`",
        ));
    };
    let syn::ReturnType::Type(_, output) = &sig.output else {
        return Err(syn::Error::new(sig.span(), "a scenario returns `Result`"));
    };
    let (pattern, ty) = (&ctx.pat, &ctx.ty);
    let name = &sig.ident;
    let scenario = name.to_string();
    Ok(quote! {
        #(#attrs)*
        #runtime
        #[ignore = "needs a cluster: scripts/e2e.sh"]
        #vis async fn #name() {
            ::tusk_e2e::with_temp_ns(#scenario, |#pattern: #ty| async move {
                // The declared return type, so that `?` in the body converts into it.
                let outcome: #output = #block;
                outcome
            })
            .await;
        }
    })
}
