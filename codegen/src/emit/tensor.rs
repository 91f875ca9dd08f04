//! `Tensor<D>`-level functions: the API most users call.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::{EmitConfig, const_generics, ident, op_docs, use_runtime};
use crate::ir::{Arg, Ir, Output, Rank, TensorArg, TensorKind};

pub(super) fn emit(ir: &Ir, config: &EmitConfig) -> TokenStream {
    let use_rt = use_runtime(config);
    let module = &config.trait_module;
    let trait_name = ident(&ir.trait_name);
    let fns = ir.ops.iter().map(|op| {
        let name = ident(&op.name);
        let docs = op_docs(op, &[
            String::new(),
            "# Panics".to_owned(),
            String::new(),
            "When the inputs break the routing contract; the message names the input and the fix".to_owned(),
            format!("(see `ERRORS.md`). The `Dispatch`-level `try_{}` returns the error instead.", op.name),
        ]);
        let generics = const_generics(op).into_iter().map(|g| {
            let g = format_ident!("{}", g);
            quote!(const #g: usize)
        });
        let generics: Vec<_> = generics.collect();
        let generics = if generics.is_empty() { TokenStream::new() } else { quote!(<#(#generics),*>) };
        let params = op.inputs.iter().map(|i| {
            let id = ident(&i.name);
            let ty = match &i.arg {
                Arg::Tensor(t) if t.borrowed => {
                    let ty = tensor_type(t);
                    quote!(&#ty)
                }
                Arg::Tensor(t) => tensor_type(t),
                Arg::Plain(ty) => quote!(#ty),
            };
            quote!(#id: #ty)
        });
        let args = op.inputs.iter().map(|i| {
            let id = ident(&i.name);
            match &i.arg {
                Arg::Tensor(t) if t.borrowed => quote!(&#id.clone().into_dispatch()),
                Arg::Tensor(_) => quote!(#id.into_dispatch()),
                Arg::Plain(_) => quote!(#id),
            }
        });
        let call = quote!(<rt::Dispatch as #trait_name>::#name(#(#args),*));
        let out_ty = output_type(&op.output);
        let ret = super::returns(&op.output, &out_ty);
        let body = match &op.output {
            Output::Unit => quote!(#call;),
            Output::Plain(_) => call,
            Output::Tensor(_) => quote!(rt::Tensor::from_dispatch(#call)),
            Output::Tuple(_) => {
                let (pat, expr) = wrap(&op.output, "out");
                quote!(let #pat = #call; #expr)
            }
        };
        quote! {
            #docs
            pub fn #name #generics(#(#params),*) #ret {
                #body
            }
        }
    });
    quote! {
        #use_rt
        use #module::#trait_name;

        #(#fns)*
    }
}

fn tensor_type(t: &TensorArg) -> TokenStream {
    let rank = match &t.rank {
        Rank::Generic(g) => {
            let g = format_ident!("{}", g);
            quote!(#g)
        }
        Rank::Fixed(n) => {
            let n = proc_macro2::Literal::usize_unsuffixed(*n);
            quote!(#n)
        }
    };
    match t.kind {
        TensorKind::Float => quote!(rt::Tensor<#rank>),
        TensorKind::Int => quote!(rt::Tensor<#rank, rt::Int>),
        TensorKind::Bool => quote!(rt::Tensor<#rank, rt::Bool>),
    }
}

fn output_type(out: &Output) -> TokenStream {
    match out {
        Output::Unit => quote!(()),
        Output::Tensor(t) => tensor_type(t),
        Output::Plain(ty) => quote!(#ty),
        Output::Tuple(items) => {
            let items = items.iter().map(output_type);
            quote!((#(#items,)*))
        }
    }
}

fn wrap(out: &Output, name: &str) -> (TokenStream, TokenStream) {
    let id = format_ident!("{}", name);
    match out {
        Output::Unit => (quote!(()), quote!(())),
        Output::Plain(_) => (quote!(#id), quote!(#id)),
        Output::Tensor(_) => (quote!(#id), quote!(rt::Tensor::from_dispatch(#id))),
        Output::Tuple(items) => {
            let (pats, exprs): (Vec<_>, Vec<_>) = items
                .iter()
                .enumerate()
                .map(|(i, item)| wrap(item, &format!("{name}_{i}")))
                .unzip();
            (quote!((#(#pats,)*)), quote!((#(#exprs,)*)))
        }
    }
}
