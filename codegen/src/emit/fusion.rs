//! `impl<B: FusionBackend + Trait> Trait for Fusion<B>`: what `Cube` runs when burn-cubecl's
//! `fusion` feature is on (`Cube` is then `Fusion<CubeBackend>`).
//!
//! An op with output metadata becomes one deferred operation: the method records its inputs,
//! declares its outputs from the metadata, and queues a closure that runs `B`'s kernel when the
//! fusion stream executes, checks what it returned and publishes it. An op with a
//! `composition` and no metadata keeps the trait's default body (its composition, which Burn
//! fuses on `Fusion<B>` directly).

use super::code::{Doc, Writer, args, call, cat};
use super::{allow_complex_output, kind_fn, params, primitive_returns, signature};
use crate::ir::{
    Arg, BackendName, Container, FusionImpl, Ir, MetaSource, Op, Output, TensorArg, TensorKind,
    TraitGroup,
};
use crate::ir::{Leaf, Step};
use crate::names::{self, EAGER, HANDLES, LAZY, OUTPUTS, RESULT};

/// Plain types recorded as scalars of the deferred operation (Burn's `Scalar` takes them).
const SCALARS: &[&str] = &[
    "f64", "f32", "i64", "i32", "i16", "i8", "u64", "u32", "u16", "u8", "bool", "isize", "usize",
];

/// The `Fusion<B>` impl of `group`, when it is routed to `Cube` and has no default bodies only.
pub(super) fn impls(ir: &Ir, index: usize, group: &TraitGroup, w: &mut Writer) {
    if group.composite {
        return;
    }
    let Some(cube) = group.backends.iter().find(|b| b.name == BackendName::Cube) else {
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

/// Every tensor output, in order (a declared struct's fields in declaration order).
pub(super) fn output_tensors(out: &Output) -> Vec<&TensorArg> {
    match out {
        Output::Tensor(t) => vec![t],
        Output::Tuple(items) => items.iter().flat_map(output_tensors).collect(),
        Output::Declared { leaves, .. } => leaves.iter().map(|l| &l.tensor).collect(),
        Output::Unit | Output::Plain(_) => Vec::new(),
    }
}

/// One tensor output: its manifest path (`output`, `output[1]`, `output.mean`), the suffix of
/// its locals (``, `_1`, `_1_0`), where the kernel's result holds it (``, `.1`, `.mean`), and
/// the tensor.
pub(super) struct LazyOutput<'a> {
    pub(super) path: String,
    pub(super) suffix: String,
    pub(super) access: String,
    pub(super) tensor: &'a TensorArg,
}

/// Every tensor output, in order.
pub(super) fn outputs_with_paths<'a>(
    out: &'a Output,
    path: String,
    suffix: String,
    access: String,
    acc: &mut Vec<LazyOutput<'a>>,
) {
    match out {
        Output::Tensor(t) => acc.push(LazyOutput {
            path,
            suffix,
            access,
            tensor: t,
        }),
        Output::Tuple(items) => {
            for (i, item) in items.iter().enumerate() {
                outputs_with_paths(
                    item,
                    format!("{path}[{i}]"),
                    format!("{suffix}_{i}"),
                    format!("{access}.{i}"),
                    acc,
                );
            }
        }
        Output::Declared { leaves, .. } => {
            for (i, leaf) in leaves.iter().enumerate() {
                let mut fields = String::new();
                for step in &leaf.path {
                    if let Step::Field { field, .. } = step {
                        fields.push('.');
                        fields.push_str(field);
                    }
                }
                acc.push(LazyOutput {
                    path: format!("{path}{fields}"),
                    suffix: format!("{suffix}_{i}"),
                    access: format!("{access}{fields}"),
                    tensor: &leaf.tensor,
                });
            }
        }
        Output::Unit | Output::Plain(_) => {}
    }
}

pub(super) fn kind_variant(kind: TensorKind) -> &'static str {
    match kind {
        TensorKind::Float => "rt::TensorKind::Float",
        TensorKind::Int => "rt::TensorKind::Int",
        TensorKind::Bool => "rt::TensorKind::Bool",
        TensorKind::Quantized => "rt::TensorKind::Quantized",
    }
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
    // The stream: the inputs' (the first tensor's), or the device's when there is no tensor.
    let has_tensor = op.tensor_inputs().next().is_some();
    let head = format!("let mut {LAZY} = ");
    let location = super::string_literal(&op.output_location);
    let name = super::string_literal(&op.name);
    match (has_tensor, op.device_input()) {
        (false, Some(device)) => w.assign(
            head,
            call(
                "rt::fusion::Lazy::<B>::on_device",
                [name, location, device.name.clone()],
            ),
            ";",
        ),
        _ => w.assign(
            head,
            call("rt::fusion::Lazy::<B>::new", [name, location]),
            ";",
        ),
    }
    for (input, t) in op.tensor_inputs() {
        let value = match (t.container, t.borrowed) {
            (Container::One, false) => call(format!("{LAZY}.input"), [input.name.as_str()]),
            (Container::One, true) => {
                call(format!("{LAZY}.input"), [format!("{}.clone()", input.name)])
            }
            (Container::Option, false) => {
                call(format!("{LAZY}.input_option"), [input.name.as_str()])
            }
            (Container::Option, true) => call(
                format!("{LAZY}.input_option"),
                [format!("{}.cloned()", input.name)],
            ),
            (Container::Vec, _) => call(format!("{LAZY}.inputs"), [input.name.as_str()]),
        };
        w.assign(
            format!("let {} = ", names::lazy_input(&input.name)),
            value,
            ";",
        );
    }
    for input in &op.inputs {
        if matches!(&input.arg, Arg::Plain(ty) if SCALARS.contains(&ty.as_str())) {
            w.line(format!("{LAZY}.scalar({});", input.name));
        }
    }
    specs(op, w);
    let mut outputs = Vec::new();
    outputs_with_paths(
        &op.output,
        "output".to_owned(),
        String::new(),
        String::new(),
        &mut outputs,
    );
    let metadata_args = metadata_args(op);
    for LazyOutput {
        path,
        suffix,
        tensor: t,
        ..
    } in &outputs
    {
        let shape = match t.meta.shape.as_ref().expect("validated: lazy") {
            MetaSource::Input(name) => {
                Doc::from(format!("{}.shape.clone()", names::lazy_spec(name)))
            }
            MetaSource::Function(f) => call(f.as_str(), metadata_args.clone()),
            MetaSource::Default => unreachable!("validated: no default shape"),
        };
        let dtype = match t.meta.dtype.as_ref().expect("validated: lazy") {
            MetaSource::Input(name) => Doc::from(format!("{}.dtype", names::lazy_spec(name))),
            MetaSource::Function(f) => call(f.as_str(), metadata_args.clone()),
            MetaSource::Default => call(format!("{LAZY}.default_dtype"), [kind_variant(t.kind)]),
        };
        let declare = match t.container {
            Container::One => "output",
            Container::Option => "output_option",
            Container::Vec => "output_vec",
        };
        w.assign(
            format!("let {} = ", out_local(suffix)),
            call(
                format!("{LAZY}.{declare}"),
                [
                    Doc::from(kind_variant(t.kind)),
                    super::string_literal(path).into(),
                    shape,
                    dtype,
                ],
            ),
            ";",
        );
    }
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
            Arg::Plain(_) => format!("rt::__private::cloned(&{})", input.name).into(),
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

/// The local holding the declaration of the output with locals' suffix `suffix`.
fn out_local(suffix: &str) -> String {
    format!("{}{suffix}", names::OUT)
}

/// The specs the metadata reads: every tensor input's when a function takes them all, else
/// those an output names.
fn specs(op: &Op, w: &mut Writer) {
    let tensors = output_tensors(&op.output);
    let sources = || {
        tensors
            .iter()
            .flat_map(|t| [&t.meta.shape, &t.meta.dtype])
            .flatten()
    };
    let all = sources().any(|s| matches!(s, MetaSource::Function(_)));
    for (input, t) in op.tensor_inputs() {
        let named = sources().any(|s| matches!(s, MetaSource::Input(n) if *n == input.name));
        if !all && !named {
            continue;
        }
        let recorded = names::lazy_input(&input.name);
        let value = match t.container {
            Container::One => call(format!("{LAZY}.spec"), [format!("&{recorded}")]),
            Container::Option => call(
                format!("{LAZY}.spec_option"),
                [format!("{recorded}.as_ref()")],
            ),
            Container::Vec => call(format!("{LAZY}.specs"), [format!("&{recorded}")]),
        };
        w.assign(
            format!("let {} = ", names::lazy_spec(&input.name)),
            value,
            ";",
        );
    }
}

/// What a metadata function is called with: each tensor input's spec and each plain argument,
/// by reference, in input order (devices left out).
pub(super) fn metadata_args(op: &Op) -> Vec<Doc> {
    op.inputs
        .iter()
        .filter_map(|input| match &input.arg {
            Arg::Tensor(t) => {
                let spec = names::lazy_spec(&input.name);
                Some(match t.container {
                    Container::Option => format!("{spec}.as_ref()"),
                    Container::One | Container::Vec => format!("&{spec}"),
                })
            }
            Arg::Plain(_) => Some(format!("&{}", input.name)),
            Arg::Device => None,
            Arg::Declared { .. } => unreachable!("validation: declared types are not lazy"),
        })
        .map(Doc::from)
        .collect()
}

/// The method's return value: the lazy outputs, taken in declaration order.
pub(super) fn return_expr(out: &Output) -> Doc {
    match out {
        Output::Declared { .. } => unreachable!("a struct output is written by `struct_return`"),
        Output::Tensor(t) => match t.container {
            Container::One => format!("{OUTPUTS}.one()").into(),
            Container::Option => format!("{OUTPUTS}.option()").into(),
            Container::Vec => format!("{OUTPUTS}.vec()").into(),
        },
        Output::Tuple(items) => {
            let items: Vec<Doc> = items.iter().map(return_expr).collect();
            if items.len() == 1 {
                cat([
                    "(".into(),
                    items.into_iter().next().expect("one"),
                    ",)".into(),
                ])
            } else {
                args("(", items, ")")
            }
        }
        Output::Unit | Output::Plain(_) => unreachable!("validated: lazy outputs are tensors"),
    }
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
