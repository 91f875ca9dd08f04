//! `impl Trait for Dispatch` and the `try_` routing function of every op.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::{
    EmitConfig, autodiff_backend_cfg, backend_cfg, contained, convert_output, doc_attrs, ident,
    input_type, kind_fn, map_output_type, op_docs, output_type, params, returns, use_runtime,
};
use crate::ir::{Arg, Backend, Container, Ir, Op, Output, Policy, TensorArg};

pub(super) fn emit(ir: &Ir, config: &EmitConfig) -> TokenStream {
    let use_rt = use_runtime(config);
    let module = &config.trait_module;
    let mut uses = Vec::new();
    for (index, group) in ir.groups.iter().enumerate() {
        let name = ident(&group.name);
        uses.push(quote!(use #module::#name;));
        if ir.needs_autodiff_trait(index) {
            let cfg = &ir.autodiff_cfg;
            let ad = ident(&group.autodiff_name);
            uses.push(quote!(#[cfg(#cfg)] use #module::#ad;));
        }
    }
    let impls = ir.groups.iter().enumerate().map(|(index, group)| {
        let name = ident(&group.name);
        let methods = ir.ops_of(index).map(dispatch_method);
        quote! {
            impl #name for rt::Dispatch {
                #(#methods)*
            }
        }
    });
    let try_fns = ir.ops.iter().map(|op| try_fn(ir, op));
    // Short names for the two `Autodiff<B, C>` implementations of each backend that serves a
    // differentiable op, so the routing arms read `run::<AutodiffFlex>(...)`.
    let mut aliased: Vec<&Backend> = Vec::new();
    for op in ir
        .ops
        .iter()
        .filter(|op| op.policy == Policy::Differentiable)
    {
        for backend in &op.backends {
            if !aliased.iter().any(|b| b.name == backend.name) {
                aliased.push(backend);
            }
        }
    }
    let aliases = aliased.iter().map(|backend| {
        let cfg = autodiff_backend_cfg(ir, backend);
        let id = ident(backend.name.as_str());
        let plain = format_ident!("Autodiff{}", backend.name.as_str());
        let balanced = format_ident!("Balanced{}", backend.name.as_str());
        let doc_plain = format!(
            " `Autodiff<{0}>`: the route for tracked {0} tensors.",
            backend.name.as_str()
        );
        let doc_balanced = format!(
            " `Autodiff<{}>` with balanced gradient checkpointing.",
            backend.name.as_str()
        );
        quote! {
            #[doc = #doc_plain]
            #cfg
            type #plain = rt::Autodiff<rt::#id>;
            #[doc = #doc_balanced]
            #cfg
            type #balanced = rt::Autodiff<rt::#id, rt::BalancedCheckpointing>;
        }
    });
    quote! {
        #use_rt
        #(#uses)*

        #(#aliases)*

        #(#impls)*

        #(#try_fns)*
    }
}

fn dispatch_method(op: &Op) -> TokenStream {
    let this = quote!(Self);
    let name = ident(&op.name);
    let try_name = format_ident!("try_{}", op.name);
    let params = params(op, &this);
    let ret = returns(&op.output, &output_type(&op.output, &this));
    let args = op.inputs.iter().map(|i| ident(&i.name));
    let docs = doc_attrs(&[format!(
        "Routes to [`{try_name}`] and panics with its error."
    )]);
    quote! {
        #docs
        fn #name(#(#params),*) #ret {
            rt::expect(#try_name(#(#args),*))
        }
    }
}

/// A parameter's type at the `Dispatch` level.
fn dispatch_input(arg: &Arg) -> TokenStream {
    match arg {
        Arg::Tensor(t) => contained(t, quote!(rt::DispatchTensor)),
        Arg::Plain(ty) => quote!(#ty),
        Arg::Device => quote!(&rt::DispatchDevice),
    }
}

/// Unwraps one input inside the generic `run::<B>` body.
fn unwrap_input(name: &str, t: &TensorArg) -> TokenStream {
    let id = ident(name);
    let func = if t.borrowed {
        format_ident!("{}_ref", kind_fn(t.kind))
    } else {
        format_ident!("{}", kind_fn(t.kind))
    };
    match t.container {
        Container::One => quote!(let #id = B::#func(route, #name, #id)?;),
        Container::Option => {
            quote!(let #id = #id.map(|t| B::#func(route, #name, t)).transpose()?;)
        }
        Container::Vec => quote! {
            let #id = #id
                .into_iter()
                .map(|t| B::#func(route, #name, t))
                .collect::<Result<Vec<_>, _>>()?;
        },
    }
}

/// How the kernel receives an unwrapped input.
fn kernel_arg(name: &str, arg: &Arg) -> TokenStream {
    let id = ident(name);
    match arg {
        Arg::Tensor(t) if t.borrowed && t.container == Container::Option => quote!(#id.as_deref()),
        Arg::Tensor(t) if t.borrowed => quote!(&#id),
        Arg::Device => quote!(&#id),
        Arg::Tensor(_) | Arg::Plain(_) => quote!(#id),
    }
}

/// The planner's view of the tensor inputs: an iterator of `rt::Input`s.
fn plan_inputs(op: &Op) -> TokenStream {
    let mut segments: Vec<TokenStream> = Vec::new();
    let mut singles: Vec<TokenStream> = Vec::new();
    for (input, t) in op.tensor_inputs() {
        let id = ident(&input.name);
        let name = &input.name;
        let ctor = format_ident!("{}", kind_fn(t.kind));
        match t.container {
            Container::One if t.borrowed => singles.push(quote!(rt::Input::#ctor(#name, #id))),
            Container::One => singles.push(quote!(rt::Input::#ctor(#name, &#id))),
            Container::Option => {
                if !singles.is_empty() {
                    segments.push(quote!([#(#singles),*]));
                    singles.clear();
                }
                let source = if t.borrowed {
                    quote!(#id)
                } else {
                    quote!(#id.as_ref())
                };
                segments.push(quote!(#source.map(|t| rt::Input::#ctor(#name, t))));
            }
            Container::Vec => {
                if !singles.is_empty() {
                    segments.push(quote!([#(#singles),*]));
                    singles.clear();
                }
                segments.push(quote! {
                    #id.iter().enumerate().map(|(i, t)| rt::Input::#ctor(#name, t).at(i))
                });
            }
        }
    }
    if !singles.is_empty() {
        segments.push(quote!([#(#singles),*]));
    }
    let mut segments = segments.into_iter();
    let first = segments.next().expect("an op with tensor inputs");
    let rest: Vec<TokenStream> = segments.collect();
    if rest.is_empty() {
        first
    } else {
        quote!(#first.into_iter()#(.chain(#rest))*)
    }
}

fn try_fn(ir: &Ir, op: &Op) -> TokenStream {
    let b = quote!(B);
    let name = &op.name;
    let try_name = format_ident!("try_{}", op.name);
    let location = &op.location;
    let backends_location = &op.backends_location;
    let policy = match op.policy {
        Policy::Differentiable => quote!(rt::Policy::Differentiable),
        Policy::Detach => quote!(rt::Policy::Detach),
        Policy::Reject => quote!(rt::Policy::Reject),
    };
    let docs = op_docs(
        op,
        &[
            String::new(),
            "# Errors".to_owned(),
            String::new(),
            "A [`rt::RouteError`] when the inputs break the routing contract: a tracked input to"
                .to_owned(),
            "a `reject` op, a backend the op is not routed to, inputs on different backends or"
                .to_owned(),
            "with different checkpointing, a malformed dispatch tensor (see `ERRORS.md`)."
                .to_owned(),
        ],
    );

    let dispatch_params: Vec<TokenStream> = op
        .inputs
        .iter()
        .map(|i| {
            let id = ident(&i.name);
            let ty = dispatch_input(&i.arg);
            quote!(#id: #ty)
        })
        .collect();
    let dispatch_out = map_output_type(&op.output, &|t| contained(t, quote!(rt::DispatchTensor)));
    let args: Vec<_> = op.inputs.iter().map(|i| ident(&i.name)).collect();

    // The generic body: unwrap every input for backend `B`, call, re-wrap.
    let kernel_params = op.inputs.iter().map(|i| input_type(&i.arg, &b));
    let kernel_ret = returns(&op.output, &output_type(&op.output, &b));
    let mut unwraps: Vec<TokenStream> = op
        .tensor_inputs()
        .map(|(input, t)| unwrap_input(&input.name, t))
        .collect();
    if let Some(device) = op.device_input() {
        let id = ident(&device.name);
        let name = &device.name;
        unwraps.push(quote!(let #id = B::device(route, #name, #id)?;));
    }
    let call_args = op.inputs.iter().map(|i| kernel_arg(&i.name, &i.arg));
    let call = quote!(kernel(#(#call_args),*));
    let wrap = |t: &TensorArg, value: TokenStream| {
        let f = format_ident!("{}_out", kind_fn(t.kind));
        match t.container {
            Container::One => quote!(B::#f(route, #value)),
            Container::Option => quote!(#value.map(|t| B::#f(route, t))),
            Container::Vec => quote!(#value.into_iter().map(|t| B::#f(route, t)).collect()),
        }
    };
    let body = match &op.output {
        Output::Unit => quote!(#call; Ok(())),
        Output::Plain(_) => quote!(Ok(#call)),
        Output::Tensor(t) => {
            let wrapped = wrap(t, call);
            quote!(Ok(#wrapped))
        }
        Output::Tuple(_) => {
            let (pat, wrapped) = convert_output(&op.output, "out", &wrap);
            quote!(let #pat = #call; Ok(#wrapped))
        }
    };
    let uses_route = !unwraps.is_empty() || contains_tensor(&op.output);
    let route_param = if uses_route {
        quote!(route)
    } else {
        quote!(_route)
    };

    let plan = if op.tensor_inputs().next().is_some() {
        let inputs = plan_inputs(op);
        match op.device_input() {
            Some(device) => {
                let id = ident(&device.name);
                let name = &device.name;
                quote!(let route = rt::Route::plan_with_device(&OP, #inputs, #name, #id)?;)
            }
            None => quote!(let route = rt::Route::plan(&OP, #inputs)?;),
        }
    } else if let Some(device) = op.device_input() {
        let id = ident(&device.name);
        let name = &device.name;
        quote!(let route = rt::Route::plan_device(&OP, #name, #id)?;)
    } else {
        let only = ident(op.backends[0].name.as_str());
        quote!(let route = rt::Route::fixed(&OP, rt::BackendId::#only);)
    };

    let method = ident(&op.name);
    let mut arms = Vec::new();
    for backend in &op.backends {
        let cfg = backend_cfg(backend);
        let id = ident(backend.name.as_str());
        arms.push(quote! {
            #cfg
            (rt::BackendId::#id, rt::Mode::Concrete) => {
                run::<rt::#id>(&route, rt::#id::#method, #(#args),*)
            }
        });
        if op.policy == Policy::Differentiable {
            // With the autodiff cfg off, a listed backend still answers autodiff routing with
            // the "autodiff feature" error rather than "not routed to this backend".
            let ad = &ir.autodiff_cfg;
            let off = match &backend.cfg {
                Some(meta) => quote!(#[cfg(all(not(#ad), #meta))]),
                None => quote!(#[cfg(not(#ad))]),
            };
            arms.push(quote! {
                #off
                (rt::BackendId::#id, rt::Mode::Autodiff(_)) => Err(route.autodiff_off()),
            });
            let cfg = autodiff_backend_cfg(ir, backend);
            let plain = format_ident!("Autodiff{}", backend.name.as_str());
            let balanced = format_ident!("Balanced{}", backend.name.as_str());
            for (strategy, ty) in [
                (quote!(Disabled), quote!(#plain)),
                (quote!(Balanced), quote!(#balanced)),
            ] {
                arms.push(quote! {
                    #cfg
                    (rt::BackendId::#id, rt::Mode::Autodiff(rt::Checkpointing::#strategy)) => {
                        run::<#ty>(&route, #ty::#method, #(#args),*)
                    }
                });
            }
        }
    }

    // When every backend of the op is behind a cfg, a build with none of them has no arm that
    // calls `run`.
    let cfgs: Vec<&syn::Meta> = op.backends.iter().filter_map(|b| b.cfg.as_ref()).collect();
    let run_allow = if cfgs.len() == op.backends.len() {
        quote!(#[cfg_attr(not(any(#(#cfgs),*)), allow(dead_code))])
    } else {
        TokenStream::new()
    };

    quote! {
        #docs
        pub fn #try_name(#(#dispatch_params),*) -> Result<#dispatch_out, rt::RouteError> {
            static OP: rt::OpInfo = rt::OpInfo::new(#name, #policy, #location, #backends_location);

            #run_allow
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

fn contains_tensor(out: &Output) -> bool {
    match out {
        Output::Tensor(_) => true,
        Output::Tuple(items) => items.iter().any(contains_tensor),
        Output::Unit | Output::Plain(_) => false,
    }
}
