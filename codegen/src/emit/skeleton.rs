//! Kernel stubs: every `impl` a crate must write for its manifest, with `todo!()` bodies, for
//! `burn-route-codegen skeleton` and [`crate::Builder::skeleton`]. Not one of the generated
//! modules: people copy it once and fill it in.

use super::code::Writer;
use super::{EmitConfig, Use, any_cfg, params, primitive_returns, signature, uses};
use crate::ir::{
    Arg, BackendId, Backward, BackwardForm, Container, FieldSource, Ir, MetaSource, Op, Output,
    SavedValue, TensorArg, TraitGroup,
};

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
    let functions = functions(ir);
    let mut imports = Vec::new();
    if !functions.is_empty() || !backward_trait_methods(ir).is_empty() {
        imports.push(Use::runtime(config));
    } else if !group_cfgs.is_empty() {
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
        // A trait whose every impl is generated is not named by the stubs.
        if stubbed_backends(ir, index, group).next().is_none() && !ir.needs_autodiff_trait(index) {
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
    imports.extend(declared_imports(ir, module, &functions));
    uses(imports, w);
    for (index, group) in ir.groups.iter().enumerate() {
        // Composite traits are implemented by the generated code.
        if group.composite {
            continue;
        }
        for backend in stubbed_backends(ir, index, group) {
            // `Cube` is `Fusion<CubeBackend>` when fusion is on: the generated `Fusion<B>` impl
            // runs `CubeBackend`'s kernels.
            let name = match backend.name {
                BackendId::Cube => "CubeBackend",
                other => other.key(),
            };
            // Ops with a `composition` have it as their default body.
            let ops: Vec<&Op> = ir
                .ops_of(index)
                .filter(|op| op.composition.is_none())
                .collect();
            w.blank();
            w.cfg(backend.cfg.as_deref());
            if ops.is_empty() {
                w.line(format!("impl {} for rt::{name} {{}}", group.name));
                continue;
            }
            w.open(format!("impl {} for rt::{name} {{", group.name));
            for op in ops {
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
            for op in ir.ops_of(index).filter(|op| op.hand_written_autodiff()) {
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
    function_stubs(ir, w);
    backward_traits(ir, w);
    backward_bound_impls(ir, w);
}

/// A function the manifest names, for a stub: its last path segment, and what it is.
enum Function<'a> {
    /// An output's `shape` or `dtype` function.
    Meta {
        op: &'a Op,
        field: &'static str,
        output: String,
        container: Container,
    },
    /// An op's `composition`.
    Composition(&'a Op),
    /// An op's function-form `backward` (a free function, not a trait method).
    Backward(&'a Op),
}

/// The declared types an op names in its signature (not those nested inside them).
fn declared_in_signature(op: &Op) -> Vec<&str> {
    fn outputs<'a>(out: &'a Output, acc: &mut Vec<&'a str>) {
        match out {
            Output::Declared { name, .. } => acc.push(name),
            Output::Tuple(items) => items.iter().for_each(|item| outputs(item, acc)),
            Output::Unit | Output::Tensor(_) | Output::Plain(_) => {}
        }
    }
    let mut acc: Vec<&str> = op
        .inputs
        .iter()
        .filter_map(|input| match &input.arg {
            Arg::Declared { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    outputs(&op.output, &mut acc);
    acc
}

/// `use` of each declared type's primitive (`PairPrimitive`) that a stub names, compiled where
/// one of those stubs is (no unused import when every impl naming it is cfg'd out).
fn declared_imports(ir: &Ir, module: &str, functions: &[(String, Function<'_>)]) -> Vec<Use> {
    let mut places: Vec<(&str, Option<String>)> = Vec::new();
    for (index, group) in ir.groups.iter().enumerate() {
        if group.composite {
            continue;
        }
        let backends = any_cfg(group.backends.iter().map(|b| b.cfg.as_deref()));
        for op in ir.ops_of(index) {
            let names = declared_in_signature(op);
            if op.composition.is_none() {
                places.extend(names.iter().map(|n| (*n, backends.clone())));
            }
            if ir.needs_autodiff_trait(index) && op.hand_written_autodiff() {
                places.extend(names.iter().map(|n| (*n, Some(ir.autodiff_cfg.clone()))));
            }
        }
    }
    for (_, function) in functions {
        if let Function::Composition(op) = function {
            places.extend(declared_in_signature(op).into_iter().map(|n| (n, None)));
        }
    }
    let mut names: Vec<&str> = places.iter().map(|(n, _)| *n).collect();
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let import = Use::new(format!("{module}::{}", crate::names::primitive_type(name)));
            let cfgs = places
                .iter()
                .filter(|(n, _)| *n == name)
                .map(|(_, cfg)| cfg.as_deref());
            match any_cfg(cfgs) {
                Some(cfg) => import.cfg(cfg),
                None => import,
            }
        })
        .collect()
}

/// Every metadata and composition function the manifest names, once per name, in order.
fn functions(ir: &Ir) -> Vec<(String, Function<'_>)> {
    fn tensor<'a>(op: &'a Op, t: &'a TensorArg, path: &str, acc: &mut Vec<(String, Function<'a>)>) {
        for (field, source) in [("shape", &t.meta.shape), ("dtype", &t.meta.dtype)] {
            if let Some(MetaSource::Function(f)) = source {
                acc.push((
                    f.clone(),
                    Function::Meta {
                        op,
                        field,
                        output: path.to_owned(),
                        container: t.container,
                    },
                ));
            }
        }
    }
    fn outputs<'a>(
        op: &'a Op,
        out: &'a Output,
        path: String,
        acc: &mut Vec<(String, Function<'a>)>,
    ) {
        match out {
            Output::Tensor(t) => tensor(op, t, &path, acc),
            Output::Tuple(items) => {
                for (i, item) in items.iter().enumerate() {
                    outputs(op, item, format!("{path}[{i}]"), acc);
                }
            }
            // A declared struct's fields declare their metadata in the type.
            Output::Declared { leaves, .. } => {
                for leaf in leaves {
                    tensor(op, &leaf.tensor, &format!("{path}.{}", leaf.label()), acc);
                }
            }
            Output::Unit | Output::Plain(_) => {}
        }
    }
    let mut acc = Vec::new();
    for op in &ir.ops {
        if let Some(path) = &op.composition {
            acc.push((path.clone(), Function::Composition(op)));
        }
        if let Some(Backward {
            form:
                BackwardForm::Function {
                    path,
                    method_of: None,
                    ..
                },
            ..
        }) = &op.backward
        {
            acc.push((path.clone(), Function::Backward(op)));
        }
        outputs(op, &op.output, "output".to_owned(), &mut acc);
    }
    let mut seen: Vec<String> = Vec::new();
    acc.into_iter()
        .filter_map(|(path, f)| {
            let name = path.rsplit("::").next().unwrap_or(&path).to_owned();
            if seen.contains(&name) {
                return None;
            }
            seen.push(name.clone());
            Some((name, f))
        })
        .collect()
}

/// Stubs of the functions the manifest names by path, to put at those paths.
fn function_stubs(ir: &Ir, w: &mut Writer) {
    for (name, function) in functions(ir) {
        w.blank();
        match function {
            Function::Composition(op) => {
                w.doc(&[format!(
                    "The composition of `{}`: its default body, and what it runs on `Fusion<B>`.",
                    op.name
                )]);
                super::allow_complex_output(op, w);
                super::allow_many_arguments(op.inputs.len(), w);
                // It takes what the trait method takes; a trait's `&mut Vec<T>` escapes
                // clippy's `ptr_arg`, a free function's does not.
                let mutably_borrows_owned = op.inputs.iter().any(|i| {
                    matches!(&i.arg, Arg::Plain(ty) if ["&mut Vec<", "&mut String", "&mut PathBuf", "&mut std::path::PathBuf"]
                        .iter()
                        .any(|p| ty.starts_with(p)))
                });
                if mutably_borrows_owned {
                    w.line("#[allow(clippy::ptr_arg)]");
                }
                let keyword = if op.asynchronous { "async fn" } else { "fn" };
                w.open(signature(
                    format!("pub {keyword} {name}<B: rt::Backend>"),
                    params(op, "B"),
                    primitive_returns(&op.output, "B", " {"),
                ));
                todo_line(&format!("the composition of `{}`", op.name), w);
                w.close("}");
            }
            Function::Backward(op) => backward_stub(&name, op, w),
            Function::Meta {
                op,
                field,
                output,
                container,
            } => {
                w.doc(&[format!(
                    "The `{field}` of `{}`'s `{output}`, from its input specs and plain arguments.",
                    op.name
                )]);
                let ret = match (field, container) {
                    ("dtype", _) => "rt::DType",
                    (_, Container::One) => "rt::Shape",
                    (_, Container::Option) => "Option<rt::Shape>",
                    (_, Container::Vec) => "Vec<rt::Shape>",
                };
                let params: Vec<super::code::Doc> = op
                    .inputs
                    .iter()
                    .filter_map(|input| {
                        let ty = match &input.arg {
                            Arg::Tensor(t) => match t.container {
                                Container::One => "&rt::TensorSpec".to_owned(),
                                Container::Option => "Option<&rt::TensorSpec>".to_owned(),
                                Container::Vec => "&[rt::TensorSpec]".to_owned(),
                            },
                            Arg::Plain(ty) => borrowed_plain(ty),
                            Arg::Device => return None,
                            Arg::Declared { .. } => {
                                unreachable!("validation: no output metadata with declared types")
                            }
                        };
                        Some(super::param(&input.name, &ty))
                    })
                    .collect();
                if op.complex_types {
                    w.line("#[allow(clippy::type_complexity)]");
                }
                super::allow_many_arguments(params.len(), w);
                w.open(signature(
                    format!("pub fn {name}"),
                    params,
                    format!(" -> {ret} {{"),
                ));
                todo_line(&format!("the {field} of `{}`'s {output}", op.name), w);
                w.close("}");
            }
        }
    }
}

/// The stub of a function-form backward pass: the saved values, the incoming gradient and
/// (with several float inputs) which are tracked; the gradients.
fn backward_stub(name: &str, op: &Op, w: &mut Writer) {
    backward_stub_on(op, "B", format!("pub fn {name}<B: rt::Backend>"), w);
}

/// The stub of op's function-form backward pass on backend `backend` (`B` for a free function,
/// `Self` for a trait method), after `header` (`pub fn name<B: rt::Backend>`, `fn name`).
fn backward_stub_on(op: &Op, backend: &str, header: String, w: &mut Writer) {
    let Some(backward) = &op.backward else { return };
    let BackwardForm::Function { args, .. } = &backward.form else {
        return;
    };
    let n = backward.reads.len();
    let slots: Vec<crate::ir::Slot<'_>> = op.float_slots().collect();
    let field_source = |field: &String| {
        backward
            .fields
            .iter()
            .find(|f| &f.name == field)
            .map(|f| f.source.clone())
            .unwrap_or(FieldSource::Input(field.clone()))
    };
    // Each saved value's parameter name: the op's output values first (`output`, `output_1`),
    // then the inputs (a struct's field `p.scale` is `p_scale`). An input whose name is taken
    // by one of them, by `grad` or by `tracked` gets `_input` (then a number) appended, so
    // the stub always compiles.
    let from_output = |arg: &SavedValue| match arg {
        SavedValue::Output => true,
        SavedValue::Field(field) => matches!(
            field_source(field),
            FieldSource::Output(_) | FieldSource::OutputMember(_)
        ),
        SavedValue::Float(_) => false,
    };
    let base = |arg: &SavedValue| match arg {
        SavedValue::Float(i) => slots[*i].name.replace('.', "_"),
        SavedValue::Output => "output".to_owned(),
        SavedValue::Field(field) => field.trim_start_matches('_').replace('.', "_"),
    };
    let mut used: Vec<String> = vec!["grad".to_owned()];
    if n > 1 {
        used.push("tracked".to_owned());
    }
    let mut param_names: Vec<Option<String>> = vec![None; args.len()];
    for outputs_first in [true, false] {
        for (i, arg) in args.iter().enumerate() {
            if from_output(arg) != outputs_first {
                continue;
            }
            let base = base(arg);
            let name = std::iter::once(base.clone())
                .chain(std::iter::once(format!("{base}_input")))
                .chain((2..).map(|k| format!("{base}_input{k}")))
                .find(|candidate| !used.contains(candidate))
                .expect("an unbounded list of names");
            used.push(name.clone());
            param_names[i] = Some(name);
        }
    }
    let mut params: Vec<super::code::Doc> = args
        .iter()
        .zip(param_names)
        .map(|(arg, name)| {
            let name = name.expect("every saved value is named");
            match arg {
                SavedValue::Float(i) => {
                    let ty = if slots[*i].tensor.container == Container::Option {
                        format!("Option<rt::FloatTensor<{backend}>>")
                    } else {
                        format!("rt::FloatTensor<{backend}>")
                    };
                    super::param(&name, &ty)
                }
                SavedValue::Output => super::param(&name, &format!("rt::FloatTensor<{backend}>")),
                SavedValue::Field(field) => super::param(
                    &name,
                    &super::autodiff::field_type_on(op, &field_source(field), backend),
                ),
            }
        })
        .collect();
    params.push(super::param("grad", &format!("rt::FloatTensor<{backend}>")));
    let ret = if n > 1 {
        params.push(super::param("tracked", &format!("[bool; {n}]")));
        format!(" -> [Option<rt::FloatTensor<{backend}>>; {n}] {{")
    } else {
        format!(" -> rt::FloatTensor<{backend}> {{")
    };
    let doc = if n > 1 {
        [
            format!(
                "The backward pass of `{}`: from the saved values, the incoming gradient of its",
                op.name
            ),
            "output and which inputs are tracked, one gradient per tracked input.".to_owned(),
        ]
    } else {
        [
            format!(
                "The backward pass of `{}`: its float input's gradient, from the saved values and",
                op.name
            ),
            "the incoming gradient of its output.".to_owned(),
        ]
    };
    w.doc(&doc);
    super::allow_many_arguments(params.len(), w);
    w.open(signature(header, params, ret));
    todo_line(&format!("the backward pass of `{}`", op.name), w);
    w.close("}");
}

/// The traits that trait-method backward passes name (`backward = "crate::m::Trait::f"`), by
/// their last path segment, each with its methods and the first op naming each.
fn backward_trait_methods(ir: &Ir) -> Vec<(String, Vec<(String, &Op)>)> {
    let mut traits: Vec<(String, Vec<(String, &Op)>)> = Vec::new();
    for op in &ir.ops {
        let Some(Backward {
            form:
                BackwardForm::Function {
                    path,
                    method_of: Some(trait_path),
                    ..
                },
            ..
        }) = &op.backward
        else {
            continue;
        };
        let method = path.rsplit("::").next().unwrap_or(path).to_owned();
        let name = trait_path
            .rsplit("::")
            .next()
            .unwrap_or(trait_path)
            .to_owned();
        match traits.iter_mut().find(|(n, _)| *n == name) {
            Some((_, methods)) => {
                if !methods.iter().any(|(m, _)| *m == method) {
                    methods.push((method, op));
                }
            }
            None => traits.push((name, vec![(method, op)])),
        }
    }
    traits
}

/// Stubs of the traits of trait-method backward passes, to put at their paths: each method
/// with a `todo!()` default body (the composition every backend runs unless it overrides it),
/// and an empty `impl` for each backend with kernels of its own (`Flex`, and `CubeBackend` for
/// Cube); the recording backends' impls are generated.
fn backward_traits(ir: &Ir, w: &mut Writer) {
    for (name, methods) in backward_trait_methods(ir) {
        w.blank();
        w.doc(&[
            "Backward kernels: each default body runs on every backend that does not override it."
                .to_owned(),
        ]);
        w.open(format!("pub trait {name}: rt::Backend {{"));
        for (i, (method, op)) in methods.iter().enumerate() {
            if i > 0 {
                w.blank();
            }
            backward_stub_on(op, "Self", format!("fn {method}"), w);
        }
        w.close("}");
        let mut backends: Vec<(&str, Option<String>)> = Vec::new();
        for (_, op) in &methods {
            for backend in &op.backends {
                let ty = match backend.name {
                    BackendId::Flex => "Flex",
                    BackendId::Cube => "CubeBackend",
                    _ => continue,
                };
                if !backends.iter().any(|(t, _)| *t == ty) {
                    backends.push((ty, backend.cfg.clone()));
                }
            }
        }
        for (ty, cfg) in backends {
            w.blank();
            w.cfg(cfg.as_deref());
            w.line(format!("impl {name} for rt::{ty} {{}}"));
        }
    }
}

/// What `routing.backward_bounds` asks of the crate, as comments: each listed trait
/// implemented for every backend a backward pass runs on, the recording ones included (the
/// generator writes none of these impls, and does not know the traits' methods).
fn backward_bound_impls(ir: &Ir, w: &mut Writer) {
    // (A trait-method backward pass's own trait is in the bounds too, but its recording
    // backends' impls are generated: `backward_traits` stubs the rest.)
    let method_traits: Vec<&str> = ir
        .ops
        .iter()
        .filter_map(|op| match &op.backward {
            Some(Backward {
                form:
                    BackwardForm::Function {
                        method_of: Some(trait_path),
                        ..
                    },
                ..
            }) => Some(trait_path.as_str()),
            _ => None,
        })
        .collect();
    let mut bounds: Vec<&str> = Vec::new();
    let mut backends: Vec<(BackendId, Option<String>)> = Vec::new();
    for op in ir.ops.iter().filter(|op| op.backward.is_some()) {
        let Some(backward) = &op.backward else {
            continue;
        };
        for bound in &backward.bounds {
            if !bounds.contains(&bound.as_str()) && !method_traits.contains(&bound.as_str()) {
                bounds.push(bound);
            }
        }
        for backend in &op.backends {
            if !backends.iter().any(|(b, _)| *b == backend.name) {
                backends.push((backend.name, backend.cfg.clone()));
            }
        }
    }
    if bounds.is_empty() {
        return;
    }
    w.blank();
    w.line("// `routing.backward_bounds`: the backend of every generated `Autodiff<B, C>`");
    w.line("// implementation implements these traits, and the generator writes none of their");
    w.line(
        "// impls. Each backend the backward passes run on needs one (with the traits' methods):",
    );
    for bound in bounds {
        for (backend, cfg) in &backends {
            let cfg = cfg
                .as_deref()
                .map(|c| format!("#[cfg({c})] "))
                .unwrap_or_default();
            let targets: &[&str] = match backend {
                BackendId::Flex => &["impl {T} for rt::Flex {}"],
                BackendId::Cube => &[
                    "impl {T} for rt::CubeBackend {}",
                    "impl<B: rt::fusion::FusionBackend> {T} for rt::fusion::Fusion<B> {} // fusion on",
                ],
                BackendId::Remote => &["impl {T} for rt::Remote {}"],
                BackendId::Other => continue,
            };
            for target in targets {
                w.line(format!("//   {cfg}{}", target.replace("{T}", bound)));
            }
        }
    }
}

/// How a metadata function takes a plain argument the generated call passes as `&value`: by a
/// reference it deref-coerces to, in the form clippy asks for (`&[T]` for a `Vec<T>`, `&str` for
/// a `String`, `&T` for a `Box<T>` or a reference).
fn borrowed_plain(ty: &str) -> String {
    let mut inner = ty.trim();
    if let Some(rest) = inner.strip_prefix('&') {
        inner = rest.trim_start();
        inner = inner.strip_prefix("'static").unwrap_or(inner).trim_start();
        inner = inner.strip_prefix("mut ").unwrap_or(inner).trim_start();
    }
    let generic = |outer: &str| {
        inner
            .strip_prefix(outer)
            .and_then(|rest| rest.strip_prefix('<'))
            .and_then(|rest| rest.strip_suffix('>'))
    };
    if let Some(element) = generic("Vec") {
        format!("&[{element}]")
    } else if let Some(boxed) = generic("Box") {
        format!("&{boxed}")
    } else if inner == "String" {
        "&str".to_owned()
    } else {
        format!("&{inner}")
    }
}

/// Where the impls of a trait group are compiled: any of its backends, or its `Autodiff<B, C>`
/// impl (which names the trait as a bound). `None`: always.
/// The backends whose impl of trait `group` the crate writes: `Remote`'s is generated (each op
/// one operation the server runs, or its composition), unless an op of the trait can run there
/// neither way.
fn stubbed_backends<'a>(
    ir: &Ir,
    index: usize,
    group: &'a TraitGroup,
) -> impl Iterator<Item = &'a crate::ir::Backend> {
    let remote_by_hand = ir
        .ops_of(index)
        .any(|op| op.remote == crate::ir::RemoteImpl::HandWritten);
    group
        .backends
        .iter()
        .filter(move |b| b.name != BackendId::Remote || remote_by_hand)
}

fn group_cfg(ir: &Ir, index: usize, group: &TraitGroup) -> Option<String> {
    let mut cfgs: Vec<Option<&str>> = stubbed_backends(ir, index, group)
        .map(|b| b.cfg.as_deref())
        .collect();
    if ir.needs_autodiff_trait(index) {
        cfgs.push(Some(&ir.autodiff_cfg));
    }
    any_cfg(cfgs.into_iter())
}

fn stub(op: &Op, w: &mut Writer, what: &str) {
    // An async op's kernel is an `async fn`, which implements the trait's
    // `fn op(..) -> impl Future<Output = T> + Send`.
    let keyword = if op.asynchronous { "async fn" } else { "fn" };
    w.open(signature(
        format!("{keyword} {}", op.name),
        params(op, "Self"),
        primitive_returns(&op.output, "Self", " {"),
    ));
    todo_line(what, w);
    w.close("}");
}

fn todo_line(what: &str, w: &mut Writer) {
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
}
