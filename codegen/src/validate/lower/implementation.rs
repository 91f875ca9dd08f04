//! How each op runs, decided from its keys once they are lowered: the dtypes its kernels take,
//! its form on `Fusion<B>` and on Remote, and the inputs that route it.

use super::*;

/// The op's `dtypes` and `other_dtypes`, when it declares them. A name that spells no dtype, or
/// a mode that is neither, is `super::super::dtypes`'s to report; here it is left out.
pub(super) fn dtypes(spec: &OpSpec, cx: &OpContext<'_>) -> Option<crate::ir::Dtypes> {
    let list = spec.dtypes.as_ref()?;
    Some(crate::ir::Dtypes {
        list: list
            .value
            .iter()
            .filter_map(|name| crate::ir::FloatDtype::from_key(&name.value))
            .collect(),
        composition: spec
            .other_dtypes
            .as_ref()
            .is_some_and(|o| o.value == "composition"),
        location: format!("{}:{}", cx.manifest_name, cx.lines.line(list.span.start)),
    })
}

/// How an op runs on `Fusion<B>`: through its composition when it says `fusion =
/// "composition"`, else lazily when every output is a tensor with its shape and dtype
/// declared, else through its composition, else eagerly when its outputs can be handed back to
/// the fusion stream (the caller rules out its inputs that cannot). (An op routed to Cube that
/// can do none of these is [`super::super::rules`]'s to report.) An async op never runs lazily nor
/// eagerly: the fusion stream runs its operations synchronously, so only its composition can
/// run on `Fusion<B>`
/// ([`super::super::asynchrony`] reports one without).
pub(super) fn fusion_impl(
    mode: Option<&str>,
    backends: &[Backend],
    composite: bool,
    composition: bool,
    asynchronous: bool,
    output: &Output,
) -> FusionImpl {
    if composite || !backends.iter().any(|b| b.name == BackendId::Cube) {
        FusionImpl::None
    } else if mode == Some("composition") && composition {
        // (Without a `composition`, `fusion`'s rule reports it.)
        FusionImpl::Composition
    } else if lazy_outputs(output) && !asynchronous {
        FusionImpl::Lazy
    } else if composition {
        FusionImpl::Composition
    } else if !asynchronous && mode != Some("kernel") && eager_outputs(output) {
        // (Declared-type and quantized inputs are checked by the caller.)
        FusionImpl::Eager
    } else {
        FusionImpl::None
    }
}

/// Whether an eager call on `Fusion<B>` can hand `output` back to the fusion stream: tensors
/// (float, int or bool, in any container) and plain values, in tuples; not a declared type,
/// nor a quantized tensor.
pub(super) fn eager_outputs(output: &Output) -> bool {
    match output {
        Output::Tensor(t) => t.kind != TensorKind::Quantized,
        Output::Tuple(items) => items.iter().all(eager_outputs),
        Output::Unit | Output::Plain(_) => true,
        Output::Declared { .. } => false,
    }
}

/// How an op runs on Remote: as one custom operation when its outputs declare their metadata
/// (or `remote = "kernel"` says so), else through its composition. What cannot hold (no
/// metadata and no composition, a declared type, an argument the encoding cannot carry) is
/// [`super::super::remote`]'s to report; here the op just gets the form it asks for.
pub(super) fn remote_impl(
    spec: &crate::model::OpSpec,
    backends: &[Backend],
    composite: bool,
    composition: bool,
    asynchronous: bool,
    inputs: &[Input],
    output: &Output,
) -> RemoteImpl {
    if composite || !backends.iter().any(|b| b.name == BackendId::Remote) {
        return RemoteImpl::None;
    }
    match spec.remote.as_ref().map(|r| r.value.as_str()) {
        Some("composition") => RemoteImpl::Composition,
        Some("kernel") => RemoteImpl::Kernel,
        // An argument the encoding cannot carry is [`super::super::remote`]'s error, unless the op
        // says it runs its composition on Remote.
        _ if served(backends) && remote_kernel_possible(asynchronous, inputs, output) => {
            RemoteImpl::Kernel
        }
        _ if composition => RemoteImpl::Composition,
        _ => RemoteImpl::HandWritten,
    }
}

/// Every op of a trait whose Remote implementation the crate writes by hand (one of its ops
/// is [`RemoteImpl::HandWritten`]) runs on Remote as that implementation says.
pub(super) fn hand_written_remote(ops: &mut [Op]) {
    let hand_written: Vec<usize> = ops
        .iter()
        .filter(|op| op.remote == RemoteImpl::HandWritten)
        .map(|op| op.group)
        .collect();
    for op in ops.iter_mut() {
        if op.remote != RemoteImpl::None && hand_written.contains(&op.group) {
            op.remote = RemoteImpl::HandWritten;
        }
    }
}

/// Whether an op can run on Remote as one custom operation: every output a tensor with its
/// metadata (no declared type), synchronous, and, with a declared-type input, metadata that
/// names inputs (a metadata function gets the specs of tensor inputs only).
pub(in crate::validate) fn remote_kernel_possible(
    asynchronous: bool,
    inputs: &[Input],
    output: &Output,
) -> bool {
    let obstacle = asynchronous
        || output.has_declared()
        || (declared_input(inputs) && metadata_function(output));
    !obstacle && lazy_outputs(output)
}

/// Whether a Remote server can run an op routed to `backends` as one operation: the server runs
/// the op's kernel of its own backend, so the op is routed to a backend a server runs (`Flex`,
/// `Cube`), not to Remote alone.
pub(in crate::validate) fn served(backends: &[Backend]) -> bool {
    backends
        .iter()
        .any(|b| matches!(b.name, BackendId::Flex | BackendId::Cube))
}

/// Whether an op takes a declared-type input.
pub(in crate::validate) fn declared_input(inputs: &[Input]) -> bool {
    inputs.iter().any(|i| matches!(i.arg, Arg::Declared { .. }))
}

/// Whether an output's shape or dtype comes from a function.
pub(in crate::validate) fn metadata_function(output: &Output) -> bool {
    match output {
        Output::Tensor(t) => [&t.meta.shape, &t.meta.dtype]
            .into_iter()
            .flatten()
            .any(|m| matches!(m, crate::ir::MetaSource::Function(_))),
        Output::Tuple(items) => items.iter().any(metadata_function),
        Output::Declared { leaves, .. } => leaves.iter().any(|l| {
            [&l.tensor.meta.shape, &l.tensor.meta.dtype]
                .into_iter()
                .flatten()
                .any(|m| matches!(m, crate::ir::MetaSource::Function(_)))
        }),
        Output::Unit | Output::Plain(_) => false,
    }
}

/// Whether every output is a tensor with its shape and dtype declared (and there is one): a
/// declared struct's every tensor field, through nested structs (an enum's variant is not
/// known before the kernel runs).
pub(in crate::validate) fn lazy_outputs(output: &Output) -> bool {
    match output {
        Output::Tensor(t) => t.meta.complete(),
        // A declared struct only on its own (not inside a tuple).
        Output::Tuple(items) => items
            .iter()
            .all(|o| !matches!(o, Output::Declared { .. }) && lazy_outputs(o)),
        Output::Declared {
            leaves,
            tensors_only,
            ..
        } => *tensors_only && leaves.iter().all(|l| l.tensor.meta.complete()),
        Output::Unit | Output::Plain(_) => false,
    }
}

/// How an op is routed: by its tensors (and its device, when it has one), by its device alone,
/// or to its one backend. (Whether that is allowed is [`super::super::rules`]'s call.)
pub(super) fn route_by(inputs: &[Input], backends: &[Backend]) -> RouteBy {
    let tensors = inputs
        .iter()
        .any(|i| matches!(i.arg, Arg::Tensor(_) | Arg::Declared { .. }));
    let device = inputs.iter().any(|i| matches!(i.arg, Arg::Device));
    match (tensors, device) {
        (true, false) => RouteBy::Tensors,
        (true, true) => RouteBy::TensorsAndDevice,
        (false, true) => RouteBy::Device,
        (false, false) => RouteBy::Fixed(backends.first().map_or(BackendId::Flex, |b| b.name)),
    }
}
