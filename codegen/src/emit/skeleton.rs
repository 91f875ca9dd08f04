//! Kernel stubs: every `impl` a crate must write for its manifest, with `todo!()` bodies, for
//! `burn-route-codegen skeleton` and [`crate::Builder::skeleton`]. Not one of the generated
//! modules: people copy it once and fill it in.

use super::code::Writer;
use super::{EmitConfig, Use, any_cfg, params, primitive_returns, signature, uses};
use crate::ir::{Ir, Op, Policy, TraitGroup};

pub(super) fn emit(ir: &Ir, config: &EmitConfig, w: &mut Writer) {
    // Each import is compiled where an `impl` below uses it, so a stub file whose impls are all
    // behind cfgs that are off has no unused import.
    let group_cfgs: Vec<Option<String>> = ir
        .groups
        .iter()
        .enumerate()
        .filter(|(_, group)| !group.composite)
        .map(|(index, group)| group_cfg(ir, index, group))
        .collect();
    let mut imports = Vec::new();
    if !group_cfgs.is_empty() {
        let runtime = Use::runtime(config);
        imports.push(match any_cfg(group_cfgs.iter().map(Option::as_deref)) {
            Some(cfg) => runtime.cfg(cfg),
            None => runtime,
        });
    }
    let module = &config.trait_module;
    for (index, group) in ir.groups.iter().enumerate() {
        if group.composite {
            continue;
        }
        let import = Use::new(format!("{module}::{}", group.name));
        imports.push(match group_cfg(ir, index, group) {
            Some(cfg) => import.cfg(cfg),
            None => import,
        });
        if ir.needs_autodiff_trait(index) {
            imports.push(
                Use::new(format!("{module}::{}", group.autodiff_name)).cfg(ir.autodiff_cfg.clone()),
            );
        }
    }
    uses(imports, w);
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
            w.impl_block(
                &format!(
                    "impl<B: {}, C: rt::CheckpointStrategy> {}",
                    group.name, group.autodiff_name
                ),
                "rt::Autodiff<B, C>",
                false,
            );
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
        primitive_returns(&op.output, "Self", " {"),
    ));
    // rustfmt keeps a macro's lone string literal on one line when it fits, and adds no
    // trailing comma when it breaks.
    w.line(super::code::cat([
        "todo!".into(),
        super::code::Doc::List {
            open: "(",
            items: vec![super::string_literal(what).into()],
            close: ")",
            limit: None,
            trailing_comma: false,
            hug: true,
        },
    ]));
    w.close("}");
}
