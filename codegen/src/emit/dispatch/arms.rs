//! The match arms of a `route_` function: one per backend kind and autodiff state, each calling
//! the backend's kernel, its composition, or the `Autodiff<B, C>` implementation.

use super::*;

/// Every routing arm of an op, one per compiled backend and implementation, and the fallback.
pub(super) fn full_arms(ir: &Ir, op: &Op, w: &mut Writer, run_call: &dyn Fn(&str, &str) -> Doc) {
    let group = &ir.groups[op.group];
    for backend in &op.backends {
        concrete_arm(
            &group.name,
            op,
            backend,
            w,
            run_call,
            &format!("(rt::BackendId::{{}}, {RT}::Mode::Concrete)"),
        );
        if op.policy == Policy::Differentiable {
            let cfg = autodiff_backend_cfg(ir, backend);
            // Composite ops have no autodiff trait: their `Autodiff<B, C>` impl is the main
            // trait's default body.
            let autodiff_trait = if group.composite {
                &group.name
            } else {
                &group.autodiff_name
            };
            for (strategy, lane, checkpointing) in [
                (
                    "Disabled",
                    names::autodiff_alias(backend.name),
                    "NoCheckpointing",
                ),
                (
                    "Balanced",
                    names::balanced_alias(backend.name),
                    "BalancedCheckpointing",
                ),
            ] {
                // A generated `Autodiff<B, C>` kernel (from `backward` or the composition);
                // else the trait's.
                let kernel = if op.generated_autodiff() {
                    format!(
                        "{}::{}::<rt::{}, rt::{checkpointing}>",
                        names::AUTODIFF_MODULE,
                        op.name,
                        backend.name.key()
                    )
                } else {
                    format!("<{lane} as {autodiff_trait}>::{}", op.name)
                };
                w.cfg(Some(&cfg));
                let pattern = format!(
                    "(rt::BackendId::{}, {RT}::Mode::Autodiff(rt::Checkpointing::{strategy}))",
                    backend.name.key()
                );
                if op.generated_autodiff() {
                    bound_arm(
                        w,
                        &pattern,
                        &kernel,
                        (
                            &format!("{}::{}", names::AUTODIFF_MODULE, op.name),
                            names::DERIVED,
                            &format!("<rt::{}, rt::{checkpointing}>", backend.name.key()),
                        ),
                        &|kernel| run_call(&lane, kernel),
                    );
                } else {
                    // (A trait method's path has no `use` form to shorten it by.)
                    w.arm(&pattern, run_call(&lane, &kernel));
                }
            }
        }
        composition_arms(ir, op, backend, w, run_call);
    }
    // Planning refuses every other backend and mode with the error that names the routing
    // input (`__OP` lists the compiled arms).
    w.line(format!("_ => {ROUTE}.unrouted(),"));
}

/// `pattern => run(kernel)`, where `kernel` is `path` with `generics` (`(path, alias,
/// generics)`); a kernel too long for its line in the call is brought in by `use path as
/// alias` first, in a block (rustfmt would break the path's generics).
pub(super) fn bound_arm(
    w: &mut Writer,
    pattern: &str,
    kernel: &str,
    (path, alias, generics): (&str, &str, &str),
    run: &dyn Fn(&str) -> Doc,
) {
    if w.fits(&Doc::Text(format!("        {kernel},"))) {
        w.arm(pattern, run(kernel));
    } else {
        w.open(format!("{pattern} => {{"));
        w.line(format!("use {path} as {alias};"));
        w.line(run(&format!("{alias}::{generics}")));
        w.close("}");
    }
}

/// The arms that run the op's composition on `backend` for a dtype its kernels do not take
/// (`other_dtypes = "composition"`): on the concrete backend, and for a `differentiable` op on
/// `Autodiff<B, C>` too, where Burn's autodiff differentiates the composition.
pub(super) fn composition_arms(
    ir: &Ir,
    op: &Op,
    backend: &Backend,
    w: &mut Writer,
    run_call: &dyn Fn(&str, &str) -> Doc,
) {
    let (Some(dtypes), Some(composition)) = (&op.dtypes, &op.composition) else {
        return;
    };
    if !dtypes.composition {
        return;
    }
    let name = backend.name.key();
    let mut lanes = vec![(
        backend.cfg.clone(),
        format!("(rt::BackendId::{name}, {RT}::Mode::Fallback)"),
        format!("rt::{name}"),
    )];
    if op.policy == Policy::Differentiable {
        let cfg = autodiff_backend_cfg(ir, backend);
        for (strategy, lane) in [
            ("Disabled", names::autodiff_alias(backend.name)),
            ("Balanced", names::balanced_alias(backend.name)),
        ] {
            lanes.push((
                Some(cfg.clone()),
                format!(
                    "(rt::BackendId::{name}, {RT}::Mode::AutodiffFallback(rt::Checkpointing::{strategy}))"
                ),
                lane,
            ));
        }
    }
    for (cfg, pattern, lane) in lanes {
        w.cfg(cfg.as_deref());
        bound_arm(
            w,
            &pattern,
            &format!("{composition}::<{lane}>"),
            (composition, names::COMPOSITION, &format!("<{lane}>")),
            &|kernel| run_call(&lane, kernel),
        );
    }
}

/// The arm that calls `backend`'s concrete kernel, under the backend's cfg; `pattern` names the
/// backend at its `{}`.
pub(super) fn concrete_arm(
    group: &str,
    op: &Op,
    backend: &Backend,
    w: &mut Writer,
    run_call: &dyn Fn(&str, &str) -> Doc,
    pattern: &str,
) {
    let name = backend.name.key();
    w.cfg(backend.cfg.as_deref());
    w.arm(
        &pattern.replace("{}", name),
        run_call(
            &format!("rt::{name}"),
            &format!("<rt::{name} as {group}>::{}", op.name),
        ),
    );
}
