//! `impl<B: FusionBackend + Trait> Trait for Fusion<B>`: what `Cube` runs when burn-cubecl's
//! `fusion` feature is on (`Cube` is then `Fusion<CubeBackend>`).
//!
//! An op with output metadata becomes one deferred operation: the method records its inputs,
//! declares its outputs from the metadata, and queues a closure that runs `B`'s kernel when the
//! fusion stream executes, checks what it returned and publishes it. An op with a
//! `composition` and no metadata keeps the trait's default body (its composition, which Burn
//! fuses on `Fusion<B>` directly).

use super::code::{Doc, Writer, call, cat};
use super::record::{
    LazyOutput, Target, declare_outputs, out_local, output_tensors, outputs_of, record_op,
    return_expr,
};
use super::{allow_complex_output, kind_fn, params, primitive_returns, signature};
use crate::ir::{
    Arg, BackendId, Container, FusionImpl, Ir, Leaf, MetaSource, Op, Output, Step, TraitGroup,
};
use crate::names::{self, EAGER, HANDLES, LAZY, OUTPUTS, PRIVATE, RESULT, RUNTIME};

/// The `Fusion<B>` impl of `group`, when it is routed to `Cube` and has no default bodies only.
pub(super) fn impls(ir: &Ir, index: usize, group: &TraitGroup, w: &mut Writer) {
    if group.composite {
        return;
    }
    let Some(cube) = group.backends.iter().find(|b| b.name == BackendId::Cube) else {
        return;
    };
    let lazy: Vec<&Op> = ir
        .ops_of(index)
        .filter(|op| matches!(op.fusion, FusionImpl::Lazy | FusionImpl::Eager))
        .collect();
    w.blank();
    w.doc(&[
        format!(
            "[`{}`] on `Fusion<B>`: what `Cube` is when burn-cubecl's `fusion` feature is on.",
            group.name
        ),
        String::new(),
        "Each op with output metadata is one deferred operation that runs `B`'s kernel when the"
            .to_owned(),
        "fusion stream executes; an op with a `composition` runs it on `Fusion<B>`, which Burn"
            .to_owned(),
        "fuses; any other op runs `B`'s kernel at the call, on inputs read from the stream."
            .to_owned(),
    ]);
    w.cfg(cube.cfg.as_deref());
    w.impl_block(
        &format!(
            "impl<B: rt::fusion::FusionBackend + {}> {}",
            group.name, group.name
        ),
        "rt::fusion::Fusion<B>",
        lazy.is_empty(),
    );
    if lazy.is_empty() {
        return;
    }
    for (i, op) in lazy.iter().enumerate() {
        if i > 0 {
            w.blank();
        }
        if op.fusion == FusionImpl::Eager {
            eager_method(group, op, w);
        } else {
            method(group, op, w);
        }
    }
    w.close("}");
    let (eager, lazy): (Vec<&Op>, Vec<&Op>) = lazy
        .into_iter()
        .partition(|op| op.fusion == FusionImpl::Eager);
    if let Some(cfg) = cube.cfg.as_deref() {
        keep_functions_used(&lazy, Some(&format!("not({cfg})")), w);
    }
    // An eager op's partial metadata (a `shape` without its `dtype`) is called by nothing.
    keep_functions_used(&eager, None, w);
}

/// Keeps the metadata functions of `ops` from being dead code under `cfg` (`None`: in every
/// build): a lazy op's are called only where `Cube` is compiled in, an eager op's never.
fn keep_functions_used(ops: &[&Op], cfg: Option<&str>, w: &mut Writer) {
    let mut functions: Vec<&str> = Vec::new();
    for op in ops {
        for t in output_tensors(&op.output) {
            for source in [&t.meta.shape, &t.meta.dtype].into_iter().flatten() {
                if let MetaSource::Function(path) = source
                    && !functions.contains(&path.as_str())
                {
                    functions.push(path);
                }
            }
        }
    }
    if functions.is_empty() {
        return;
    }
    w.blank();
    w.line(if cfg.is_some() {
        "// The output metadata functions, which only the impl above calls."
    } else {
        "// The partial output metadata of the ops above that run eagerly, which nothing calls."
    });
    w.cfg(cfg);
    w.open("const _: () = {");
    for f in functions {
        w.line(format!("let _ = {f};"));
    }
    w.close("};");
}

/// An op without output metadata or composition: its inputs resolved from the fusion stream,
/// `B`'s kernel run at the call, its tensor outputs handed back to the stream
/// (`rt::fusion::Eager`).
fn eager_method(group: &TraitGroup, op: &Op, w: &mut Writer) {
    allow_complex_output(op, w);
    w.open(signature(
        format!("fn {}", op.name),
        params(op, "Self"),
        primitive_returns(&op.output, "Self", " {"),
    ));
    w.assign(
        format!("let {EAGER} = "),
        call(
            "rt::fusion::Eager::<B>::new",
            [super::string_literal(&op.name)],
        ),
        ";",
    );
    let kernel_args: Vec<Doc> = op
        .inputs
        .iter()
        .map(|input| match &input.arg {
            Arg::Tensor(t) => {
                let kind = kind_fn(t.kind);
                let name = &input.name;
                match (t.container, t.borrowed) {
                    (Container::One, false) => format!("{EAGER}.{kind}({name})"),
                    (Container::One, true) => format!("&{EAGER}.{kind}_ref({name})"),
                    (Container::Option, false) => format!("{EAGER}.{kind}_option({name})"),
                    (Container::Option, true) => {
                        format!("{EAGER}.{kind}_option_ref({name}).as_ref()")
                    }
                    (Container::Vec, _) => format!("{EAGER}.{kind}_vec({name})"),
                }
                .into()
            }
            Arg::Plain(_) | Arg::Device => input.name.as_str().into(),
            Arg::Declared { .. } => unreachable!("validation: declared types are not eager"),
        })
        .collect();
    let kernel = call(format!("<B as {}>::{}", group.name, op.name), kernel_args);
    // Plain values and `()` come back as they are; tensors go back to the stream.
    if !has_tensor_output(&op.output) {
        w.line(kernel);
        w.close("}");
        return;
    }
    w.assign(format!("let {RESULT} = "), kernel, ";");
    w.line(super::output_expr(
        &op.output,
        RESULT,
        &|t, value| {
            let suffix = match t.container {
                Container::One => "",
                Container::Option => "_option",
                Container::Vec => "_vec",
            };
            call(format!("{EAGER}.{}_out{suffix}", kind_fn(t.kind)), [value])
        },
        &|_, _| unreachable!("validation: declared types are not eager"),
    ));
    w.close("}");
}

/// Whether `out` holds a tensor.
fn has_tensor_output(out: &Output) -> bool {
    match out {
        Output::Tensor(_) | Output::Declared { .. } => true,
        Output::Tuple(items) => items.iter().any(has_tensor_output),
        Output::Unit | Output::Plain(_) => false,
    }
}

fn method(group: &TraitGroup, op: &Op, w: &mut Writer) {
    allow_complex_output(op, w);
    w.open(signature(
        format!("fn {}", op.name),
        params(op, "Self"),
        primitive_returns(&op.output, "Self", " {"),
    ));
    let location = super::string_literal(&op.output_location);
    record_op(Target::Fusion, op, &[location], w);
    let outputs = outputs_of(&op.output);
    declare_outputs(Target::Fusion, op, &outputs, w);
    if let Some(device) = op.device_input() {
        w.line(format!("let {0} = {0}.clone();", device.name));
    }
    w.open(format!(
        "let mut {OUTPUTS} = {LAZY}.register(move |{HANDLES}| {{"
    ));
    let kernel_args: Vec<Doc> = op
        .inputs
        .iter()
        .map(|input| match &input.arg {
            Arg::Tensor(t) => {
                let read = format!(
                    "{HANDLES}.{}(&{})",
                    kind_fn(t.kind),
                    names::lazy_input(&input.name)
                );
                match (t.container, t.borrowed) {
                    (Container::One, true) => format!("&{read}"),
                    (Container::Option, true) => format!("{read}.as_ref()"),
                    _ => read,
                }
                .into()
            }
            Arg::Plain(_) => format!("{RUNTIME}::{PRIVATE}::cloned(&{})", input.name).into(),
            Arg::Device => format!("&{}", input.name).into(),
            Arg::Declared { .. } => unreachable!("validation: declared types are not lazy"),
        })
        .collect();
    w.assign(
        format!("let {RESULT} = "),
        call(format!("<B as {}>::{}", group.name, op.name), kernel_args),
        ";",
    );
    let result = |access: &str| format!("{RESULT}{access}");
    for LazyOutput { suffix, access, .. } in &outputs {
        w.line(cat([
            call(
                format!("{HANDLES}.check"),
                [
                    format!("&{}", out_local(suffix)),
                    format!("&{}", result(access)),
                ],
            ),
            "?;".into(),
        ]));
    }
    for LazyOutput {
        suffix,
        access,
        tensor: t,
        ..
    } in &outputs
    {
        w.line(cat([
            call(
                format!("{HANDLES}.publish_{}", kind_fn(t.kind)),
                [format!("&{}", out_local(suffix)), result(access)],
            ),
            ";".into(),
        ]));
    }
    w.line("Ok(())");
    w.close("});");
    match &op.output {
        Output::Declared { leaves, .. } => struct_return(leaves, w),
        out => w.line(return_expr(out)),
    }
    w.close("}");
}

/// The method's return value when it is a declared struct: its literal, each tensor field taken
/// from the lazy outputs in declaration order (validation: structs of tensors only, so the
/// tensors alone say every field).
fn struct_return(leaves: &[Leaf], w: &mut Writer) {
    let all: Vec<&Leaf> = leaves.iter().collect();
    struct_literal(&all, 0, None, w);
}

/// The literal of the struct at `level` of `leaves`' paths (`field: Name {` when nested).
fn struct_literal(leaves: &[&Leaf], level: usize, field: Option<&str>, w: &mut Writer) {
    let Step::Field { ty, .. } = &leaves[0].path[level] else {
        unreachable!("validation: lazy declared outputs are structs")
    };
    let head = names::primitive_type(ty);
    match field {
        Some(field) => w.open(format!("{field}: {head} {{")),
        None => w.open(format!("{head} {{")),
    }
    let mut i = 0;
    while i < leaves.len() {
        let Step::Field { field, .. } = &leaves[i].path[level] else {
            unreachable!("validation: lazy declared outputs are structs")
        };
        let group: Vec<&Leaf> = leaves[i..]
            .iter()
            .take_while(|l| matches!(&l.path[level], Step::Field { field: f, .. } if f == field))
            .copied()
            .collect();
        i += group.len();
        if group.len() == 1 && group[0].path.len() == level + 1 {
            let take = match group[0].tensor.container {
                Container::One => "one",
                Container::Option => "option",
                Container::Vec => "vec",
            };
            w.line(format!("{field}: {OUTPUTS}.{take}(),"));
        } else {
            struct_literal(&group, level + 1, Some(field), w);
        }
    }
    w.close(if field.is_some() { "}," } else { "}" });
}
