//! The backward kernels on Remote: each function-form `backward` that is a method of a trait
//! of the crate's (`BackwardKernels::f`) runs on the server as one custom operation, like the
//! ops' forward kernels. The client's `impl Trait for Remote` is [`super::super::kernels`]'s,
//! shared with `Fusion<B>`; here are the operations' statics and the server's calls.

use super::*;
use crate::emit::kernels::{BackwardKernel, SavedKind, kernel_call, summed_flags};

/// The text a client and a server must agree on for a backward kernel: its op's declaration,
/// the method and what it receives.
pub(super) fn backward_declaration(ir: &Ir, kernel: &BackwardKernel<'_>) -> String {
    let params: Vec<String> = kernel
        .params()
        .into_iter()
        .map(|(name, ty, _)| format!("{name}:{ty}"))
        .collect();
    format!(
        "{} backward {}({}) n={}",
        declaration(ir, kernel.op),
        kernel.op_name(),
        params.join(","),
        kernel.n
    )
}

/// One `static` per backward kernel that runs on Remote as one operation.
pub(super) fn backward_statics(ir: &Ir, kernels: &[BackwardKernel<'_>], w: &mut Writer) {
    for kernel in kernels {
        w.blank();
        w.doc(&[format!(
            "`{}`, the backward kernel of `{}`, as one operation on Remote.",
            kernel.op_name(),
            kernel.op.name
        )]);
        remote_static(
            &names::remote_backward_op(kernel.trait_name(), kernel.method),
            &kernel.op_name(),
            &backward_declaration(ir, kernel),
            w,
        );
    }
}

/// A backward kernel's call on the server's backend `B`: its saved values, the incoming
/// gradient and the tracked flags read as the client recorded them, the wanted gradients
/// registered (a saved input's summed back to its shape).
pub(super) fn backward_server_call(kernel: &BackwardKernel<'_>, w: &mut Writer) {
    let cfg = remote_backend(kernel.op).and_then(|b| b.cfg.as_deref());
    let n = kernel.n;
    let params = kernel.params();
    w.blank();
    w.doc(&[format!(
        "`{}` on a Remote server's backend `B`: reads the saved values, the incoming gradient and which inputs want one, runs the kernel, registers the gradients.",
        kernel.op_name()
    )]);
    w.cfg(cfg);
    w.line(signature(
        format!(
            "fn {}<B>",
            names::serve_backward(kernel.trait_name(), kernel.method),
        ),
        vec![super::super::param(ARGS, "&mut rt::remote::Args<'_, B>")],
        " -> Result<(), String>",
    ));
    super::super::autodiff::where_clause(
        &[format!("B: rt::remote::BackendIr + {}", kernel.trait_path)],
        w,
    );
    let mut args: Vec<Doc> = Vec::new();
    for (name, ty, kind) in &params {
        let read = match kind {
            SavedKind::Float(_) => read(TensorKind::Float),
            SavedKind::FloatOption(_) => format!("{ARGS}.float_option()?"),
            SavedKind::Tensor(kind, container) => {
                let kind = *kind;
                match container {
                    Container::One => read(kind),
                    Container::Option => format!("{ARGS}.{}_option()?", kind_fn(kind)),
                    Container::Vec => format!("{ARGS}.{}_vec()?", kind_fn(kind)),
                }
            }
            SavedKind::Plain => {
                let ty = ty.replace("Self", "B");
                w.line(format!(
                    "let {name}: {ty} = {ARGS}.arg({})?;",
                    string_literal(name)
                ));
                args.push(name.clone().into());
                continue;
            }
        };
        w.line(format!("let {name} = {read};"));
        args.push(name.clone().into());
    }
    w.line(format!(
        "let {} = {};",
        names::SAVED_GRAD,
        read(TensorKind::Float)
    ));
    args.push(names::SAVED_GRAD.into());
    if n > 1 {
        w.line(format!(
            "let {}: [bool; {n}] = {ARGS}.arg(\"tracked\")?;",
            names::TRACKED
        ));
        args.push(names::TRACKED.into());
    }
    kernel_call(kernel, args, w);
    // A gradient declared with its input's shape is summed back to it here.
    if n > 1 {
        w.line(format!(
            "{ARGS}.gradients_out({RESULT}, {}, {})",
            names::TRACKED,
            summed_flags(kernel)
        ));
    } else {
        w.line(format!(
            "{ARGS}.gradient_out({RESULT}, {})",
            summed_flags(kernel)
        ));
    }
    w.close("}");
}
