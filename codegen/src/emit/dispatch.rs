//! `impl Trait for Dispatch` and the `try_` routing function of every op.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::{
    EmitConfig, backend_cfg, ident, input_type, op_docs, output_type, params, use_runtime,
};
use crate::ir::{Arg, Ir, Op, Output, Policy, TensorKind};

pub(super) fn emit(ir: &Ir, config: &EmitConfig) -> TokenStream {
    let rt = quote!(rt);
    let use_rt = use_runtime(config);
    let module = &config.trait_module;
    let trait_name = ident(&ir.trait_name);
    let use_autodiff_trait = if ir.has_differentiable() {
        let cfg = &ir.autodiff_cfg;
        let ad = ident(&ir.autodiff_trait);
        quote!(#[cfg(#cfg)] use #module::#ad;)
    } else {
        TokenStream::new()
    };
    let this = quote!(Self);
    let methods = ir.ops.iter().map(|op| {
        let name = ident(&op.name);
        let try_name = format_ident!("try_{}", op.name);
        let params = params(&rt, op, &this);
        let out = output_type(&rt, &op.output, &this);
        let ret = super::returns(&op.output, &out);
        let args = op.inputs.iter().map(|i| ident(&i.name));
        let docs = super::doc_attrs(&[format!(
            "Routes to [`{try_name}`] and panics with its error."
        )]);
        quote! {
            #docs
            fn #name(#(#params),*) #ret {
                rt::expect(#try_name(#(#args),*))
            }
        }
    });
    let try_fns = ir.ops.iter().map(|op| try_fn(ir, op));
    quote! {
        #use_rt
        use #module::#trait_name;
        #use_autodiff_trait

        impl #trait_name for rt::Dispatch {
            #(#methods)*
        }

        #(#try_fns)*
    }
}

/// The primitive type of an input or output at the `Dispatch` level.
fn dispatch_input(arg: &Arg) -> TokenStream {
    match arg {
        Arg::Tensor(t) if t.borrowed => quote!(&rt::DispatchTensor),
        Arg::Tensor(_) => quote!(rt::DispatchTensor),
        Arg::Plain(ty) => quote!(#ty),
    }
}

fn dispatch_output(out: &Output) -> TokenStream {
    match out {
        Output::Unit => quote!(()),
        Output::Tensor(_) => quote!(rt::DispatchTensor),
        Output::Plain(ty) => quote!(#ty),
        Output::Tuple(items) => {
            let items = items.iter().map(dispatch_output);
            quote!((#(#items,)*))
        }
    }
}

fn kind_name(kind: TensorKind) -> &'static str {
    match kind {
        TensorKind::Float => "float",
        TensorKind::Int => "int",
        TensorKind::Bool => "bool",
    }
}

fn contains_tensor(out: &Output) -> bool {
    match out {
        Output::Tensor(_) => true,
        Output::Tuple(items) => items.iter().any(contains_tensor),
        Output::Unit | Output::Plain(_) => false,
    }
}

/// A destructuring pattern for `out` and the expression that re-wraps it for `Dispatch`.
fn wrap_output(out: &Output, name: &str) -> (TokenStream, TokenStream) {
    match out {
        Output::Unit => (quote!(()), quote!(())),
        Output::Plain(_) => {
            let id = format_ident!("{}", name);
            (quote!(#id), quote!(#id))
        }
        Output::Tensor(t) => {
            let id = format_ident!("{}", name);
            let wrap = format_ident!("{}_out", kind_name(t.kind));
            (quote!(#id), quote!(B::#wrap(route, #id)))
        }
        Output::Tuple(items) => {
            let (pats, exprs): (Vec<_>, Vec<_>) = items
                .iter()
                .enumerate()
                .map(|(i, item)| wrap_output(item, &format!("{name}_{i}")))
                .unzip();
            (quote!((#(#pats,)*)), quote!((#(#exprs,)*)))
        }
    }
}

fn try_fn(ir: &Ir, op: &Op) -> TokenStream {
    let rt = quote!(rt);
    let b = quote!(B);
    let name = &op.name;
    let try_name = format_ident!("try_{}", op.name);
    let location = &op.location;
    let policy = match op.policy {
        Policy::Differentiable => quote!(rt::Policy::Differentiable),
        Policy::Detach => quote!(rt::Policy::Detach),
        Policy::Reject => quote!(rt::Policy::Reject),
    };
    let docs = op_docs(op, &[
        String::new(),
        "# Errors".to_owned(),
        String::new(),
        "Returns a [`rt::RouteError`] when the inputs break the routing contract: see the variants".to_owned(),
        "and `ERRORS.md`.".to_owned(),
    ]);

    let dispatch_params = op.inputs.iter().map(|i| {
        let id = ident(&i.name);
        let ty = dispatch_input(&i.arg);
        quote!(#id: #ty)
    });
    let dispatch_params: Vec<TokenStream> = dispatch_params.collect();
    let dispatch_out = dispatch_output(&op.output);
    let args: Vec<_> = op.inputs.iter().map(|i| ident(&i.name)).collect();

    // The generic body: unwrap every input for backend `B`, call, re-wrap.
    let kernel_params = op.inputs.iter().map(|i| input_type(&rt, &i.arg, &b));
    let kernel_out = output_type(&rt, &op.output, &b);
    let kernel_ret = super::returns(&op.output, &kernel_out);
    let unwraps = op.inputs.iter().filter_map(|i| {
        let Arg::Tensor(t) = &i.arg else { return None };
        let id = ident(&i.name);
        let func = if t.borrowed {
            format_ident!("{}_ref", kind_name(t.kind))
        } else {
            format_ident!("{}", kind_name(t.kind))
        };
        let input = &i.name;
        Some(quote!(let #id = B::#func(route, #input, #id)?;))
    });
    let call_args = op.inputs.iter().map(|i| {
        let id = ident(&i.name);
        match &i.arg {
            Arg::Tensor(t) if t.borrowed => quote!(&#id),
            _ => quote!(#id),
        }
    });
    let call = quote!(kernel(#(#call_args),*));
    let body = match &op.output {
        Output::Unit => quote!(#call; Ok(())),
        Output::Plain(_) => quote!(Ok(#call)),
        Output::Tensor(t) => {
            let wrap = format_ident!("{}_out", kind_name(t.kind));
            quote!(Ok(B::#wrap(route, #call)))
        }
        Output::Tuple(_) => {
            let (pat, wrap) = wrap_output(&op.output, "out");
            quote!(let #pat = #call; Ok(#wrap))
        }
    };
    let uses_route = op.tensor_inputs().next().is_some() || contains_tensor(&op.output);
    let route_param = if uses_route {
        quote!(route)
    } else {
        quote!(_route)
    };

    // Plan: pick the backend and the autodiff mode from the tensor inputs.
    let plan_inputs: Vec<TokenStream> = op
        .tensor_inputs()
        .map(|(i, t)| {
            let id = ident(&i.name);
            let ctor = format_ident!("{}", kind_name(t.kind));
            let input = &i.name;
            if t.borrowed {
                quote!(rt::Input::#ctor(#input, #id))
            } else {
                quote!(rt::Input::#ctor(#input, &#id))
            }
        })
        .collect();
    let plan = if plan_inputs.is_empty() {
        let only = op.backends[0].name.as_str();
        let only = format_ident!("{}", only);
        quote!(let route = rt::Route::fixed(&OP, rt::BackendId::#only);)
    } else {
        quote!(let route = rt::Route::plan(&OP, &[#(#plan_inputs),*])?;)
    };

    let trait_name = ident(&ir.trait_name);
    let ad_trait = ident(&ir.autodiff_trait);
    let ad_cfg = &ir.autodiff_cfg;
    let op_ident = ident(&op.name);
    let mut arms = Vec::new();
    for backend in &op.backends {
        let cfg = backend_cfg(backend);
        let id = format_ident!("{}", backend.name.as_str());
        arms.push(quote! {
            #cfg
            (rt::BackendId::#id, rt::Mode::Concrete) => {
                run::<rt::#id>(&route, <rt::#id as #trait_name>::#op_ident, #(#args),*)
            }
        });
        if op.policy == Policy::Differentiable {
            let cfg = match &backend.cfg {
                Some(meta) => quote!(#[cfg(all(#ad_cfg, #meta))]),
                None => quote!(#[cfg(#ad_cfg)]),
            };
            for (strategy, ty) in [
                (quote!(Disabled), quote!(rt::Autodiff<rt::#id>)),
                (
                    quote!(Balanced),
                    quote!(rt::Autodiff<rt::#id, rt::BalancedCheckpointing>),
                ),
            ] {
                arms.push(quote! {
                    #cfg
                    (rt::BackendId::#id, rt::Mode::Autodiff(rt::Checkpointing::#strategy)) => {
                        run::<#ty>(&route, <#ty as #ad_trait>::#op_ident, #(#args),*)
                    }
                });
            }
        }
    }

    quote! {
        #docs
        pub fn #try_name(#(#dispatch_params),*) -> Result<#dispatch_out, rt::RouteError> {
            static OP: rt::OpInfo = rt::OpInfo::new(#name, #policy, #location);

            fn run<B: rt::Lane>(
                #route_param: &rt::Route,
                kernel: impl FnOnce(#(#kernel_params),*) #kernel_ret,
                #(#dispatch_params),*
            ) -> Result<#dispatch_out, rt::RouteError> {
                #(#unwraps)*
                #body
            }

            #plan
            match route.target() {
                #(#arms)*
                _ => Err(route.unserved()),
            }
        }
    }
}
