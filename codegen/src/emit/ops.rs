//! The extension traits: one method per op for concrete backends, and one per differentiable op
//! for `Autodiff<B, C>`.

use proc_macro2::TokenStream;
use quote::quote;

use super::{EmitConfig, doc_attrs, ident, op_docs, output_type, params};
use crate::ir::{Ir, Policy};

pub(super) fn emit(ir: &Ir, config: &EmitConfig) -> TokenStream {
    let rt = &quote!(rt);
    let use_rt = super::use_runtime(config);
    let this = quote!(Self);
    let trait_name = ident(&ir.trait_name);
    let trait_doc = doc_attrs(&[
        format!("Routed ops declared in `{}`.", ir.manifest_name),
        String::new(),
        "Implement it for every concrete backend the manifest lists (`Flex`, and `Cube` or `Remote`".to_owned(),
        "where enabled); `Dispatch` gets a generated implementation that routes each call.".to_owned(),
    ]);
    let methods = ir.ops.iter().map(|op| {
        let name = ident(&op.name);
        let docs = op_docs(op, &[]);
        let params = params(rt, op, &this);
        let out = output_type(rt, &op.output, &this);
        let ret = super::returns(&op.output, &out);
        quote! {
            #docs
            fn #name(#(#params),*) #ret;
        }
    });

    let autodiff = if ir.has_differentiable() {
        let cfg = &ir.autodiff_cfg;
        let ad_name = ident(&ir.autodiff_trait);
        let ad_doc = doc_attrs(&[
            format!("`Autodiff<B, C>` kernels of the differentiable ops in `{}`.", ir.manifest_name),
            String::new(),
            "Implement it for `Autodiff<B, C>` (forward on `B`, plus a backward pass). The generated".to_owned(),
            format!("`Dispatch` routing calls it when a float input carries an enabled autodiff context; `{}`", ir.trait_name),
            "is used otherwise.".to_owned(),
        ]);
        let methods = ir
            .ops
            .iter()
            .filter(|op| op.policy == Policy::Differentiable)
            .map(|op| {
                let name = ident(&op.name);
                let docs = op_docs(op, &[]);
                let params = params(rt, op, &this);
                let out = output_type(rt, &op.output, &this);
                let ret = super::returns(&op.output, &out);
                quote! {
                    #docs
                    fn #name(#(#params),*) #ret;
                }
            });
        quote! {
            #ad_doc
            #[cfg(#cfg)]
            pub trait #ad_name: #rt::Backend {
                #(#methods)*
            }
        }
    } else {
        TokenStream::new()
    };

    quote! {
        #use_rt

        #trait_doc
        pub trait #trait_name: #rt::Backend {
            #(#methods)*
        }

        #autodiff
    }
}
