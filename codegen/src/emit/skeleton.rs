//! Kernel stubs: every `impl` a crate must write for its manifest, with `todo!()` bodies, for
//! `burn-route-codegen skeleton` and [`crate::Builder::skeleton`]. Not one of the generated
//! modules: people copy it once and fill it in.

use super::code::Writer;
use super::{EmitConfig, any_cfg, output_type, params, returns, signature, use_runtime};
use crate::ir::{Ir, Op, Policy, TraitGroup};

pub(super) fn emit(ir: &Ir, config: &EmitConfig, w: &mut Writer) {
    // Each import is compiled where an `impl` below uses it, so a stub file whose impls are all
    // behind cfgs that are off has no unused import.
    let uses: Vec<Option<String>> = ir
        .groups
        .iter()
        .enumerate()
        .filter(|(_, group)| !group.composite)
        .map(|(index, group)| group_cfg(ir, index, group))
        .collect();
    if !uses.is_empty() {
        w.cfg(any_cfg(uses.iter().map(Option::as_deref)).as_deref());
        w.line(use_runtime(config));
    }
    let module = &config.trait_module;
    for (index, group) in ir.groups.iter().enumerate() {
        if group.composite {
            continue;
        }
        w.cfg(group_cfg(ir, index, group).as_deref());
        w.line(format!("use {module}::{};", group.name));
        if ir.needs_autodiff_trait(index) {
            w.cfg(Some(&ir.autodiff_cfg));
            w.line(format!("use {module}::{};", group.autodiff_name));
        }
    }
    for (index, group) in ir.groups.iter().enumerate() {
        // Composite traits are implemented by the generated code.
        if group.composite {
            continue;
        }
        for backend in &group.backends {
            let name = backend.name.as_str();
            w.blank();
            w.cfg(backend.cfg.as_deref());
            w.open(format!("impl {} for rt::{name} {{", group.name));
            for op in ir.ops_of(index) {
                stub(op, w, &format!("`{}` on {name}", op.name));
            }
            w.close("}");
        }
        if ir.needs_autodiff_trait(index) {
            w.blank();
            w.doc(&[
                "The forward pass on `B`, plus a backward pass registered with burn-autodiff."
                    .to_owned(),
            ]);
            w.cfg(Some(&ir.autodiff_cfg));
            w.open(format!(
                "impl<B: {}, C: rt::CheckpointStrategy> {} for rt::Autodiff<B, C> {{",
                group.name, group.autodiff_name
            ));
            for op in ir
                .ops_of(index)
                .filter(|op| op.policy == Policy::Differentiable)
            {
                stub(
                    op,
                    w,
                    &format!(
                        "`{}` on Autodiff<B, C>: forward on `B`, then the backward pass",
                        op.name
                    ),
                );
            }
            w.close("}");
        }
    }
}

/// Where the impls of a trait group are compiled: any of its backends, or its `Autodiff<B, C>`
/// impl (which names the trait as a bound). `None`: always.
fn group_cfg(ir: &Ir, index: usize, group: &TraitGroup) -> Option<String> {
    let mut cfgs: Vec<Option<&str>> = group.backends.iter().map(|b| b.cfg.as_deref()).collect();
    if ir.needs_autodiff_trait(index) {
        cfgs.push(Some(&ir.autodiff_cfg));
    }
    any_cfg(cfgs.into_iter())
}

fn stub(op: &Op, w: &mut Writer, what: &str) {
    w.open(signature(
        format!("fn {}", op.name),
        params(op, "Self"),
        format!(
            "{} {{",
            returns(&op.output, &output_type(&op.output, "Self"))
        ),
    ));
    w.line(format!("todo!({})", super::string_literal(what)));
    w.close("}");
}
