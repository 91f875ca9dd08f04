//! The extension traits: one per group of ops that share a backend list (plus a companion trait
//! with the hand-written `Autodiff<B, C>` kernels), and the impls of composite traits.

use super::code::Writer;
use super::{
    EmitConfig, Use, allow_complex_output, autodiff_backend_cfg, forward_call, op_docs, op_returns,
    params, signature, uses,
};
use crate::ir::{BackendId, Ir, TraitGroup};

pub(super) fn emit(ir: &Ir, config: &EmitConfig, w: &mut Writer) {
    uses(vec![Use::runtime(config)], w);
    super::types::primitives(ir, w);
    for (index, group) in ir.groups.iter().enumerate() {
        group_trait(ir, index, group, w);
        if ir.needs_autodiff_trait(index) {
            autodiff_trait(ir, index, group, w);
        }
        if group.composite {
            composite_impls(ir, group, w);
        }
        super::fusion::impls(ir, index, group, w);
    }
    let target = super::record::Target::Fusion;
    super::kernels::impls(ir, target, &super::kernels::kernels(ir, target), w);
    super::autodiff::module(ir, w);
}

fn backend_list(group: &TraitGroup) -> String {
    group
        .backends
        .iter()
        .map(|b| format!("`{}`", b.name.key()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn group_trait(ir: &Ir, index: usize, group: &TraitGroup, w: &mut Writer) {
    w.blank();
    if group.composite {
        w.doc(&[
            format!("Composite ops declared in `{}`.", ir.manifest_name),
            String::new(),
            "Each method's default body calls the op's composite function, built from backend"
                .to_owned(),
            format!(
                "primitives, so it runs on {} and on `Autodiff<B, C>` (where its gradient",
                backend_list(group)
            ),
            "comes from the composition); the impls below are generated.".to_owned(),
        ]);
    } else {
        let implementors: Vec<String> = group
            .backends
            .iter()
            .map(|b| match b.name {
                BackendId::Cube => "`CubeBackend`".to_owned(),
                other => format!("`{}`", other.key()),
            })
            .collect();
        let mut lines = vec![
            format!("Routed ops declared in `{}`.", ir.manifest_name),
            String::new(),
            format!(
                "Implement it for {}; `Dispatch` gets a generated implementation that routes",
                implementors.join(", ")
            ),
            "each call to the backend of its inputs.".to_owned(),
        ];
        if group.backends.iter().any(|b| b.name == BackendId::Cube) {
            lines.extend([
                String::new(),
                "`Cube` is `CubeBackend`, or `Fusion<CubeBackend>` when fusion is on: the"
                    .to_owned(),
                "`Fusion<B>` implementation below is generated.".to_owned(),
            ]);
        }
        w.doc(&lines);
    }
    w.open(format!("pub trait {}: rt::Backend {{", group.name));
    for op in ir.ops_of(index) {
        w.doc(&op_docs(op, &[]));
        allow_complex_output(op, w);
        super::allow_many_arguments(op.inputs.len(), w);
        let sig = |tail: &str| {
            signature(
                format!("fn {}", op.name),
                params(op, "Self"),
                op_returns(op, "Self", tail),
            )
        };
        match op.composite.as_ref().or(op.composition.as_ref()) {
            Some(path) => {
                // (A future is `#[must_use]` already.)
                if super::must_use(&op.output) && !op.asynchronous {
                    w.line("#[must_use]");
                }
                w.open(sig(" {"));
                w.line(forward_call(&format!("{path}::<Self>"), op));
                w.close("}");
            }
            None => w.line(sig(";")),
        }
    }
    w.close("}");
}

fn autodiff_trait(ir: &Ir, index: usize, group: &TraitGroup, w: &mut Writer) {
    w.blank();
    w.doc(&[
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
    w.cfg(Some(&ir.autodiff_cfg));
    w.open(format!("pub trait {}: rt::Backend {{", group.autodiff_name));
    // Ops with a declared backward pass have a generated implementation instead.
    for op in ir.ops_of(index).filter(|op| op.hand_written_autodiff()) {
        w.doc(&[format!(
            "The `Autodiff<B, C>` kernel of [`{}::{}`].",
            group.name, op.name
        )]);
        allow_complex_output(op, w);
        super::allow_many_arguments(op.inputs.len(), w);
        w.line(signature(
            format!("fn {}", op.name),
            params(op, "Self"),
            op_returns(op, "Self", ";"),
        ));
    }
    w.close("}");
}

/// Composite traits are implemented for every listed backend and for `Autodiff<B, C>`: the
/// default bodies do the work.
fn composite_impls(ir: &Ir, group: &TraitGroup, w: &mut Writer) {
    for backend in &group.backends {
        w.blank();
        w.cfg(backend.cfg.as_deref());
        w.impl_block(
            &format!("impl {}", group.name),
            &format!("rt::{}", backend.name.key()),
            true,
        );
    }
    if let Some(first) = group.backends.first() {
        // `Autodiff<B, C>` over any backend: one impl, compiled when autodiff is.
        let cfg = if group.backends.len() == 1 {
            autodiff_backend_cfg(ir, first)
        } else {
            ir.autodiff_cfg.clone()
        };
        w.blank();
        w.cfg(Some(&cfg));
        w.impl_block(
            &format!(
                "impl<B: rt::Backend, C: rt::CheckpointStrategy> {}",
                group.name
            ),
            "rt::Autodiff<B, C>",
            true,
        );
    }
}
