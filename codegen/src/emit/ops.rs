//! The extension traits: one per group of ops that share a backend list (plus a companion trait
//! with the hand-written `Autodiff<B, C>` kernels), and the impls of composite traits.

use proc_macro2::TokenStream;
use quote::quote;

use super::{
    EmitConfig, autodiff_backend_cfg, backend_cfg, doc_attrs, ident, op_docs, output_type, params,
    returns, use_runtime,
};
use crate::ir::{Ir, Policy, TraitGroup};

pub(super) fn emit(ir: &Ir, config: &EmitConfig) -> TokenStream {
    let use_rt = use_runtime(config);
    let traits = ir.groups.iter().enumerate().map(|(index, group)| {
        let main = group_trait(ir, index, group);
        let autodiff = if ir.needs_autodiff_trait(index) {
            autodiff_trait(ir, index, group)
        } else {
            TokenStream::new()
        };
        let impls = if group.composite {
            composite_impls(ir, group)
        } else {
            TokenStream::new()
        };
        quote!(#main #autodiff #impls)
    });
    quote! {
        #use_rt

        #(#traits)*
    }
}

fn backend_list(group: &TraitGroup) -> String {
    group
        .backends
        .iter()
        .map(|b| format!("`{}`", b.name.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn group_trait(ir: &Ir, index: usize, group: &TraitGroup) -> TokenStream {
    let name = ident(&group.name);
    let doc = if group.composite {
        doc_attrs(&[
            format!("Composite ops declared in `{}`.", ir.manifest_name),
            String::new(),
            "Each method's default body calls the op's composite function, built from backend"
                .to_owned(),
            format!(
                "primitives, so it runs on {} and on `Autodiff<B, C>` (where its gradient",
                backend_list(group)
            ),
            "comes from the composition); the impls below are generated.".to_owned(),
        ])
    } else {
        doc_attrs(&[
            format!("Routed ops declared in `{}`.", ir.manifest_name),
            String::new(),
            format!(
                "Implement it for {}; `Dispatch` gets a generated implementation that routes",
                backend_list(group)
            ),
            "each call to the backend of its inputs.".to_owned(),
        ])
    };
    let this = quote!(Self);
    let methods = ir.ops_of(index).map(|op| {
        let method = ident(&op.name);
        let docs = op_docs(op, &[]);
        let params = params(op, &this);
        let ret = returns(&op.output, &output_type(&op.output, &this));
        match &op.composite {
            Some(path) => {
                let args = op.inputs.iter().map(|input| ident(&input.name));
                let must_use = if ret.is_empty() {
                    TokenStream::new()
                } else {
                    quote!(#[must_use])
                };
                quote! {
                    #docs
                    #must_use
                    fn #method(#(#params),*) #ret {
                        #path::<Self>(#(#args),*)
                    }
                }
            }
            None => quote! {
                #docs
                fn #method(#(#params),*) #ret;
            },
        }
    });
    quote! {
        #doc
        pub trait #name: rt::Backend {
            #(#methods)*
        }
    }
}

fn autodiff_trait(ir: &Ir, index: usize, group: &TraitGroup) -> TokenStream {
    let cfg = &ir.autodiff_cfg;
    let name = ident(&group.autodiff_name);
    let doc = doc_attrs(&[
        format!(
            "`Autodiff<B, C>` kernels of the differentiable ops of [`{}`].",
            group.name
        ),
        String::new(),
        "Implement it for `Autodiff<B, C>`: the forward pass on `B` plus a backward pass. The"
            .to_owned(),
        "generated `Dispatch` routing calls it when an input carries an enabled autodiff context."
            .to_owned(),
    ]);
    let this = quote!(Self);
    let methods = ir
        .ops_of(index)
        .filter(|op| op.policy == Policy::Differentiable)
        .map(|op| {
            let method = ident(&op.name);
            let docs = op_docs(op, &[]);
            let params = params(op, &this);
            let ret = returns(&op.output, &output_type(&op.output, &this));
            quote! {
                #docs
                fn #method(#(#params),*) #ret;
            }
        });
    quote! {
        #doc
        #[cfg(#cfg)]
        pub trait #name: rt::Backend {
            #(#methods)*
        }
    }
}

/// Composite traits are implemented for every listed backend and for `Autodiff<B, C>`: the
/// default bodies do the work.
fn composite_impls(ir: &Ir, group: &TraitGroup) -> TokenStream {
    let name = ident(&group.name);
    let concrete = group.backends.iter().map(|backend| {
        let cfg = backend_cfg(backend);
        let ty = ident(backend.name.as_str());
        quote! {
            #cfg
            impl #name for rt::#ty {}
        }
    });
    let autodiff = group.backends.first().map(|first| {
        // `Autodiff<B, C>` over any backend: one impl, compiled when autodiff is.
        let cfg = autodiff_backend_cfg(ir, first);
        let cfg = if group.backends.len() == 1 {
            cfg
        } else {
            let ad = &ir.autodiff_cfg;
            quote!(#[cfg(#ad)])
        };
        quote! {
            #cfg
            impl<B: rt::Backend, C: rt::CheckpointStrategy> #name for rt::Autodiff<B, C> {}
        }
    });
    quote! {
        #(#concrete)*
        #autodiff
    }
}
