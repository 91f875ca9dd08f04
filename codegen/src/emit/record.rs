//! The recording of an op's call as one custom operation, written once for the two targets
//! that run it so (the runtime's one `Recorder`): a deferred operation on `Fusion<B>`
//! (`rt::fusion::Lazy`, [`fusion`](super::fusion)) and an operation on a Remote server
//! (`rt::remote::Call`, [`remote`](super::remote)). Both start a call, record its inputs in
//! input order (plain arguments among them), compute the specs the output metadata reads and
//! declare the outputs; only how a call starts, which plain arguments it records and how it
//! ends differ, and [`Target`] says which.

use super::code::{Doc, Writer, args, call, cat};
use crate::ir::{Arg, Container, MetaSource, Op, Output, Step, TensorArg, TensorKind};
use crate::names::{self, CALL, LAZY, OUTPUTS};
use burn_route_core::primitive;

/// Where a recorded call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// One deferred operation on `Fusion<B>`, running `B`'s kernel from a closure.
    Fusion,
    /// One operation on a Remote server, running the server's kernel.
    Remote,
}

impl Target {
    /// The local of the call being recorded.
    pub(super) fn local(self) -> &'static str {
        match self {
            Target::Fusion => LAZY,
            Target::Remote => CALL,
        }
    }

    /// Whether every recorded input is kept (a deferred operation's closure reads them);
    /// otherwise only those whose spec is read.
    pub(super) fn keeps_inputs(self) -> bool {
        self == Target::Fusion
    }

    /// Whether declared outputs are kept (a deferred operation's closure publishes them).
    pub(super) fn keeps_outputs(self) -> bool {
        self == Target::Fusion
    }

    /// `let mut LOCAL = ...;`: a call of `name` started with `facts` (on Fusion `name` and
    /// where its metadata is declared; on Remote the operation's static), on `device` when
    /// given.
    pub(super) fn start(self, name: &str, facts: &[String], device: Option<&str>, w: &mut Writer) {
        let ctor = match (self, device) {
            (Target::Fusion, None) => "rt::fusion::Lazy::<B>::new",
            (Target::Fusion, Some(_)) => "rt::fusion::Lazy::<B>::on_device",
            (Target::Remote, None) => "rt::remote::Call::new",
            (Target::Remote, Some(_)) => "rt::remote::Call::on_device",
        };
        let mut arguments: Vec<String> = match self {
            Target::Fusion => vec![super::string_literal(name)],
            Target::Remote => Vec::new(),
        };
        arguments.extend(facts.iter().cloned());
        arguments.extend(device.map(str::to_owned));
        w.assign(
            format!("let mut {} = ", self.local()),
            call(ctor, arguments),
            ";",
        );
    }

    /// Records a plain argument `name` of type `ty` (on Fusion only the numbers and `bool`s,
    /// as scalars; on Remote every one, encoded exactly).
    pub(super) fn plain(self, name: &str, ty: &str, w: &mut Writer) {
        match self {
            // Burn's `Scalar` takes these; the kernel receives every plain argument from the
            // closure either way.
            Target::Fusion if primitive::is_fusion_scalar(ty) => {
                w.line(format!("{LAZY}.scalar({name});"));
            }
            Target::Fusion => {}
            Target::Remote => w.line(format!("{CALL}.arg(&{name});")),
        }
    }
}

/// The recording of a tensor input `value` in `container`: `LOCAL.input(x)`, `input_option`,
/// `inputs`.
pub(super) fn input_call(target: Target, container: Container, value: Doc) -> Doc {
    let method = match container {
        Container::One => "input",
        Container::Option => "input_option",
        Container::Vec => "inputs",
    };
    call(format!("{}.{method}", target.local()), [value])
}

/// `let mut LOCAL = ...;` for `op`'s call, then its inputs recorded in input order and the
/// specs its output metadata reads. `facts` as [`Target::start`].
pub(super) fn record_op(target: Target, op: &Op, facts: &[String], w: &mut Writer) {
    // On Fusion the first tensor input names the stream (an op that moves its input to the
    // device runs on the input's), the device only when there is none; on Remote the device
    // names the server the call goes to.
    let device = op
        .device_input()
        .filter(|_| target == Target::Remote || op.tensor_inputs().next().is_none())
        .map(|d| d.name.as_str());
    target.start(&op.name, facts, device, w);
    let read = spec_reads(op);
    for input in &op.inputs {
        match &input.arg {
            Arg::Tensor(t) => {
                let value = match (t.container, t.borrowed) {
                    (Container::One, true) => format!("{}.clone()", input.name),
                    (Container::Option, true) => format!("{}.cloned()", input.name),
                    _ => input.name.clone(),
                };
                let value = input_call(target, t.container, value.into());
                if target.keeps_inputs() || read.contains(&input.name.as_str()) {
                    w.assign(
                        format!("let {} = ", names::lazy_input(&input.name)),
                        value,
                        ";",
                    );
                } else {
                    w.line(cat([value, ";".into()]));
                }
            }
            Arg::Plain(ty) => target.plain(&input.name, ty, w),
            Arg::Device => {}
            Arg::Declared { borrowed, .. } => {
                debug_assert_eq!(
                    target,
                    Target::Remote,
                    "validation: declared types are not lazy"
                );
                w.line(format!(
                    "{}{}.{}(&mut {CALL});",
                    input.name,
                    if *borrowed { ".clone()" } else { "" },
                    names::SEND
                ));
            }
        }
    }
    for (input, t) in op.tensor_inputs() {
        if read.contains(&input.name.as_str()) {
            w.assign(
                format!("let {} = ", names::lazy_spec(&input.name)),
                spec_call(target, t.container, &names::lazy_input(&input.name)),
                ";",
            );
        }
    }
}

/// The spec of the recorded input held by `local`: `LOCAL.spec(&__in_x)`, `spec_option`,
/// `specs`.
pub(super) fn spec_call(target: Target, container: Container, local: &str) -> Doc {
    let (method, arg) = match container {
        Container::One => ("spec", format!("&{local}")),
        Container::Option => ("spec_option", format!("{local}.as_ref()")),
        Container::Vec => ("specs", format!("&{local}")),
    };
    call(format!("{}.{method}", target.local()), [arg])
}

/// The tensor inputs whose specs the output metadata reads: every one when a function takes
/// them all, else those an output names.
fn spec_reads(op: &Op) -> Vec<&str> {
    let tensors = output_tensors(&op.output);
    let sources = || {
        tensors
            .iter()
            .flat_map(|t| [&t.meta.shape, &t.meta.dtype])
            .flatten()
    };
    let all = sources().any(|s| matches!(s, MetaSource::Function(_)));
    op.tensor_inputs()
        .map(|(input, _)| input.name.as_str())
        .filter(|name| all || sources().any(|s| matches!(s, MetaSource::Input(n) if n == name)))
        .collect()
}

/// Declares `op`'s tensor outputs from their metadata, in order: `LOCAL.output(kind, path,
/// shape, dtype)` (`output_option`, `output_vec`), kept in `__out{suffix}` where the target
/// keeps outputs.
pub(super) fn declare_outputs(target: Target, op: &Op, outputs: &[LazyOutput<'_>], w: &mut Writer) {
    let local = target.local();
    // (Only a metadata function takes them; an op with a declared-type input has none.)
    let functions = outputs.iter().any(|o| {
        [&o.tensor.meta.shape, &o.tensor.meta.dtype]
            .into_iter()
            .flatten()
            .any(|s| matches!(s, MetaSource::Function(_)))
    });
    let metadata = if functions {
        metadata_args(op)
    } else {
        Vec::new()
    };
    for LazyOutput {
        path,
        suffix,
        tensor: t,
        ..
    } in outputs
    {
        let shape = match t.meta.shape.as_ref().expect("validated: declared metadata") {
            MetaSource::Input(name) => {
                Doc::from(format!("{}.shape.clone()", names::lazy_spec(name)))
            }
            MetaSource::Function(f) => call(f.as_str(), metadata.clone()),
            MetaSource::Default => unreachable!("validated: no default shape"),
        };
        let dtype = match t.meta.dtype.as_ref().expect("validated: declared metadata") {
            MetaSource::Input(name) => Doc::from(format!("{}.dtype", names::lazy_spec(name))),
            MetaSource::Function(f) => call(f.as_str(), metadata.clone()),
            MetaSource::Default => call(format!("{local}.default_dtype"), [kind_variant(t.kind)]),
        };
        let declare = match t.container {
            Container::One => "output",
            Container::Option => "output_option",
            Container::Vec => "output_vec",
        };
        let value = call(
            format!("{local}.{declare}"),
            [
                Doc::from(kind_variant(t.kind)),
                super::string_literal(path).into(),
                shape,
                dtype,
            ],
        );
        if target.keeps_outputs() {
            w.assign(format!("let {} = ", out_local(suffix)), value, ";");
        } else {
            w.line(cat([value, ";".into()]));
        }
    }
}

/// The local holding the declaration of the output with locals' suffix `suffix`.
pub(super) fn out_local(suffix: &str) -> String {
    format!("{}{suffix}", names::OUT)
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

/// Every tensor output of `out`, in order.
pub(super) fn outputs_of(out: &Output) -> Vec<LazyOutput<'_>> {
    let mut acc = Vec::new();
    outputs_with_paths(
        out,
        "output".to_owned(),
        String::new(),
        String::new(),
        &mut acc,
    );
    acc
}

fn outputs_with_paths<'a>(
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

/// `rt::TensorKind::...` of `kind`.
pub(super) fn kind_variant(kind: TensorKind) -> &'static str {
    match kind {
        TensorKind::Float => "rt::TensorKind::Float",
        TensorKind::Int => "rt::TensorKind::Int",
        TensorKind::Bool => "rt::TensorKind::Bool",
        TensorKind::Quantized => "rt::TensorKind::Quantized",
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

/// The method's return value: the outputs, taken in declaration order.
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
        Output::Unit | Output::Plain(_) => unreachable!("validated: recorded outputs are tensors"),
    }
}
