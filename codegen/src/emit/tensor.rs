//! `Tensor<D>`-level functions, and their `try_` twins: the API most users call.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::{
    EmitConfig, const_generics, convert_output, ident, map_output_type, op_docs, returns,
    through_container, use_runtime,
};
use crate::ir::{Arg, Container, Ir, Op, Output, Rank, TensorArg, TensorKind};

pub(super) fn emit(ir: &Ir, config: &EmitConfig) -> TokenStream {
    let use_rt = use_runtime(config);
    let dispatch = &config.dispatch_module;
    let fns = ir.ops.iter().map(tensor_fns);
    quote! {
        #use_rt
        use #dispatch as dispatch;

        #(#fns)*
    }
}

fn tensor_fns(op: &Op) -> TokenStream {
    let name = ident(&op.name);
    let try_name = format_ident!("try_{}", op.name);
    let generics: Vec<TokenStream> = const_generics(op)
        .into_iter()
        .map(|g| {
            let g = format_ident!("{}", g);
            quote!(const #g: usize)
        })
        .collect();
    let generics = if generics.is_empty() {
        TokenStream::new()
    } else {
        quote!(<#(#generics),*>)
    };
    let params: Vec<TokenStream> = op
        .inputs
        .iter()
        .map(|i| {
            let id = ident(&i.name);
            let ty = match &i.arg {
                Arg::Tensor(t) => super::contained(t, tensor_type(t)),
                Arg::Plain(ty) => quote!(#ty),
                Arg::Device => quote!(&rt::Device),
            };
            quote!(#id: #ty)
        })
        .collect();
    let args = op.inputs.iter().map(|i| {
        let id = ident(&i.name);
        match &i.arg {
            Arg::Tensor(t) => into_dispatch(t, quote!(#id)),
            Arg::Plain(_) => quote!(#id),
            Arg::Device => quote!(#id.as_dispatch()),
        }
    });
    let args: Vec<TokenStream> = args.collect();
    let args_again = op.inputs.iter().map(|i| ident(&i.name));
    let out_ty = map_output_type(&op.output, &|t| super::contained(t, tensor_type(t)));
    let ret = returns(&op.output, &out_ty);
    let call = quote!(dispatch::#try_name(#(#args),*)?);
    let from_dispatch = |t: &TensorArg, value: TokenStream| {
        through_container(t, value, quote!(rt::Tensor::from_dispatch))
    };
    let try_body = match &op.output {
        Output::Unit => quote!(#call; Ok(())),
        Output::Plain(_) => quote!(Ok(#call)),
        Output::Tensor(t) => {
            let converted = from_dispatch(t, call);
            quote!(Ok(#converted))
        }
        Output::Tuple(_) => {
            let (pat, expr) = convert_output(&op.output, "out", &from_dispatch);
            quote!(let #pat = #call; Ok(#expr))
        }
    };
    let result_ty = map_output_type(&op.output, &|t| super::contained(t, tensor_type(t)));
    let docs = op_docs(
        op,
        &[
            String::new(),
            "# Panics".to_owned(),
            String::new(),
            "When the inputs break the routing contract; the message names the input and the fix"
                .to_owned(),
            format!("(see `ERRORS.md`). [`{try_name}`] returns the error instead."),
        ],
    );
    let try_docs = op_docs(
        op,
        &[
            String::new(),
            "# Errors".to_owned(),
            String::new(),
            format!(
                "The [`rt::RouteError`] for inputs that break the routing contract; [`{}`] panics",
                op.name
            ),
            "with its message instead.".to_owned(),
        ],
    );
    // The value is the point of calling a non-unit op.
    let must_use = match &op.output {
        Output::Unit => TokenStream::new(),
        _ => quote!(#[must_use]),
    };
    quote! {
        #docs
        #must_use
        pub fn #name #generics(#(#params),*) #ret {
            rt::expect(#try_name(#(#args_again),*))
        }

        #try_docs
        pub fn #try_name #generics(#(#params),*) -> Result<#result_ty, rt::RouteError> {
            #try_body
        }
    }
}

/// The `Tensor<D>`-level type of one tensor.
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
        TensorKind::Float | TensorKind::Quantized => quote!(rt::Tensor<#rank>),
        TensorKind::Int => quote!(rt::Tensor<#rank, rt::Int>),
        TensorKind::Bool => quote!(rt::Tensor<#rank, rt::Bool>),
    }
}

/// Converts a `Tensor<D>`-level argument for the `Dispatch` level.
fn into_dispatch(t: &TensorArg, value: TokenStream) -> TokenStream {
    match (t.container, t.borrowed) {
        (Container::One, false) => quote!(#value.into_dispatch()),
        (Container::One, true) => quote!(&#value.clone().into_dispatch()),
        (Container::Option, false) => quote!(#value.map(rt::Tensor::into_dispatch)),
        (Container::Option, true) => {
            quote!(#value.map(|t| t.clone().into_dispatch()).as_ref())
        }
        (Container::Vec, _) => quote!(#value.into_iter().map(rt::Tensor::into_dispatch).collect()),
    }
}
