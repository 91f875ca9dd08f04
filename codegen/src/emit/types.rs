//! Declared types (`[[type]]`) at each level:
//!
//! - the backend level, in the traits module: `NamePrimitive<B: Backend>`, whose tensor fields
//!   are `B`'s primitives. Kernels take and return it; `NamePrimitive<Dispatch>` is the
//!   `Dispatch` level.
//! - the routing conversions, in the dispatch module: `__unwrap` (a `Dispatch` value's tensors
//!   for the routed backend, each named in errors by its path) and `__wrap` (a kernel's result
//!   back to `Dispatch` tensors under the route's autodiff context).
//! - the `Tensor<D>` level, in the tensor module: `Name<D..>` with `rt::Tensor` fields, and its
//!   `into_primitive` / `from_primitive` conversions.

use std::collections::BTreeSet;

use super::code::{Doc, Writer, call, cat};
use super::{Level, kind_fn};
use crate::ir::{
    Arg, Container, Ir, Leaf, Member, MemberType, Output, Step, TensorArg, TypeBody, TypeDef,
    VariantKind,
};
use crate::names::{
    self, FROM_PRIMITIVE, INTO_PRIMITIVE, LEAF_NAMES, PRIVATE_RUNTIME as RT, ROUTE, UNWRAP, VALUE,
    WRAP,
};

/// rustfmt's `struct_lit_width`: the widest struct literal (or pattern) body kept on one line.
pub(super) const STRUCT_LIT_WIDTH: usize = 18;
/// rustfmt's `struct_variant_width`: the widest struct variant body kept on one line.
const STRUCT_VARIANT_WIDTH: usize = 35;

/// A member's type at `level`.
fn member_type(ir: &Ir, m: &Member, level: Level<'_>) -> String {
    match &m.ty {
        MemberType::Tensor(t) => level.tensor(t),
        MemberType::Plain(ty) => ty.clone(),
        MemberType::Declared(name) => level.declared(name, &ir.type_def(name).ranks),
    }
}

/// The rustdoc of a declared type: the manifest's, then where it is declared and its other
/// level.
fn type_docs(def: &TypeDef, other: &str) -> Vec<String> {
    let mut lines = if def.doc.is_empty() {
        vec![format!("Declared type `{}`.", def.name)]
    } else {
        def.doc.clone()
    };
    lines.push(String::new());
    lines.push(format!("Declared at `{}`; {other}", def.location));
    lines
}

/// The fields of a struct or a struct variant, one per line, at `level`.
fn fields(ir: &Ir, members: &[Member], level: Level<'_>, public: bool, w: &mut Writer) {
    for m in members {
        w.doc(&m.doc);
        let name = m.name.as_deref().expect("named fields");
        let vis = if public { "pub " } else { "" };
        w.line(cat([
            Doc::from(vis),
            super::param(name, &member_type(ir, m, level)),
            ",".into(),
        ]));
    }
}

/// The type's definition at `level` (`Primitive("B")` or `Tensor`).
fn definition(
    ir: &Ir,
    def: &TypeDef,
    level: Level<'_>,
    name: &str,
    generics: &str,
    w: &mut Writer,
) {
    w.line("#[derive(Clone, Debug)]");
    match &def.body {
        TypeBody::Struct(members) => {
            w.open(format!("pub struct {name}{generics} {{"));
            fields(ir, members, level, true, w);
            w.close("}");
        }
        TypeBody::Enum(variants) => {
            // The manifest decides the variants and their names, and users match on them:
            // boxing a large one, or renaming one that repeats the enum's name, would change
            // the type they write.
            w.line("#[allow(clippy::large_enum_variant, clippy::enum_variant_names)]");
            w.open(format!("pub enum {name}{generics} {{"));
            // rustfmt puts a struct variant on one line when its body fits in
            // `struct_variant_width` (35), unless the enum mixes one-line and multi-line variants
            // (a doc comment makes a variant multi-line): then every struct variant breaks.
            let flat_fields = |v: &crate::ir::Variant| -> Option<String> {
                if v.kind != VariantKind::Struct || v.fields.iter().any(|m| !m.doc.is_empty()) {
                    return None;
                }
                let flat: Vec<String> = v
                    .fields
                    .iter()
                    .map(|m| {
                        let name = m.name.as_deref().expect("named fields");
                        format!("{name}: {}", member_type(ir, m, level))
                    })
                    .collect();
                let flat = flat.join(", ");
                (flat.len() <= STRUCT_VARIANT_WIDTH).then_some(flat)
            };
            let one_line: Vec<bool> = variants
                .iter()
                .map(|v| {
                    v.doc.is_empty()
                        && match v.kind {
                            VariantKind::Unit => true,
                            VariantKind::Struct => flat_fields(v).is_some(),
                            VariantKind::Tuple => {
                                let doc = tuple_variant(ir, v, level);
                                w.fits(&doc) && doc.flat_ok()
                            }
                        }
                })
                .collect();
            let mixed = one_line.contains(&true) && one_line.contains(&false);
            for v in variants {
                w.doc(&v.doc);
                match v.kind {
                    VariantKind::Unit => w.line(format!("{},", v.name)),
                    VariantKind::Tuple => w.line(tuple_variant(ir, v, level)),
                    VariantKind::Struct => {
                        if let Some(flat) = flat_fields(v).filter(|_| !mixed) {
                            w.line(format!("{} {{ {flat} }},", v.name));
                        } else {
                            w.open(format!("{} {{", v.name));
                            fields(ir, &v.fields, level, false, w);
                            w.close("},");
                        }
                    }
                }
            }
            w.close("}");
        }
    }
}

/// Every declared type at the backend level (the traits module).
pub(super) fn primitives(ir: &Ir, w: &mut Writer) {
    for def in &ir.types {
        w.blank();
        w.doc(&type_docs(
            def,
            &format!(
                "`{}` is its `Tensor<D>` form. Kernels take and return it with their backend's \
                 primitives; `Dispatch` routes it by its tensors, in declaration order.",
                def.name
            ),
        ));
        let name = names::primitive_type(&def.name);
        definition(ir, def, Level::Primitive("B"), &name, "<B: rt::Backend>", w);
    }
}

/// The `<..>` of a `Tensor<D>`-level type: `<const D: usize>`, or nothing.
fn const_params(def: &TypeDef) -> String {
    if def.ranks.is_empty() {
        String::new()
    } else {
        let params: Vec<String> = def
            .ranks
            .iter()
            .map(|r| format!("const {r}: usize"))
            .collect();
        format!("<{}>", params.join(", "))
    }
}

/// `Name<D..>` as the type's own impl names it.
fn tensor_self(def: &TypeDef) -> String {
    Level::Tensor.declared(&def.name, &def.ranks)
}

/// Every declared type at the `Tensor<D>` level (the tensor module), with its conversions.
pub(super) fn tensor_types(ir: &Ir, w: &mut Writer) {
    for def in &ir.types {
        let primitive = names::primitive_type(&def.name);
        w.blank();
        w.doc(&type_docs(
            def,
            &format!(
                "`{primitive}` is its backend-level form, which \
                 [`{INTO_PRIMITIVE}`]({}::{INTO_PRIMITIVE}) and \
                 [`{FROM_PRIMITIVE}`]({}::{FROM_PRIMITIVE}) convert to and from.",
                def.name, def.name
            ),
        ));
        definition(ir, def, Level::Tensor, &def.name, &const_params(def), w);
        w.blank();
        // rustfmt breaks an impl header that is too wide before the type, and puts the brace
        // on a line of its own.
        let head = format!("impl{}", const_params(def));
        let one_line = format!("{head} {} {{", tensor_self(def));
        if w.fits(&Doc::from(one_line.clone())) {
            w.open(one_line);
        } else {
            w.line(head);
            w.indent();
            w.line(tensor_self(def));
            w.dedent();
            w.open("{");
        }
        w.doc(&[
            "The value as `Dispatch` primitives: what the `Dispatch` methods and the `try_` \
                 functions of the dispatch module take."
                .to_owned(),
        ]);
        w.line("#[must_use]");
        w.open(format!(
            "pub fn {INTO_PRIMITIVE}(self) -> {} {{",
            Level::Dispatch.declared(&def.name, &[])
        ));
        convert(
            def,
            (&def.name, &primitive),
            "self",
            w,
            &|m, value| match &m.ty {
                MemberType::Tensor(t) => into_dispatch(t, value),
                MemberType::Plain(_) => value.into(),
                MemberType::Declared(_) => format!("{value}.{INTO_PRIMITIVE}()").into(),
            },
        );
        w.close("}");
        w.blank();
        w.doc(&[
            "A value of `Dispatch` primitives (what the dispatch module returns) as `Tensor`s."
                .to_owned(),
        ]);
        w.line("#[must_use]");
        w.open(format!(
            "pub fn {FROM_PRIMITIVE}({VALUE}: {}) -> Self {{",
            Level::Dispatch.declared(&def.name, &[])
        ));
        convert(
            def,
            (&primitive, &def.name),
            VALUE,
            w,
            &|m, value| match &m.ty {
                MemberType::Tensor(t) => from_dispatch(t, value),
                MemberType::Plain(_) => value.into(),
                MemberType::Declared(inner) => {
                    call(format!("{inner}::{FROM_PRIMITIVE}"), [value.to_owned()])
                }
            },
        );
        w.close("}");
        w.close("}");
    }
}

/// A `Tensor<D>`-level member as its `Dispatch` primitive.
fn into_dispatch(t: &TensorArg, value: &str) -> Doc {
    match t.container {
        Container::One => format!("{value}.into_dispatch()").into(),
        Container::Option => call(format!("{RT}::into_dispatch_opt"), [value.to_owned()]),
        Container::Vec => call(format!("{RT}::into_dispatch_vec"), [value.to_owned()]),
    }
}

/// A `Dispatch` primitive member as its `Tensor<D>` form.
fn from_dispatch(t: &TensorArg, value: &str) -> Doc {
    let function = match t.container {
        Container::One => "rt::Tensor::from_dispatch".to_owned(),
        Container::Option => format!("{RT}::from_dispatch_opt"),
        Container::Vec => format!("{RT}::from_dispatch_vec"),
    };
    call(function, [value.to_owned()])
}

/// The body of a conversion of `def`'s value `value` (of type `from`) into type `target` (both
/// names without generics): each member converted by `member` (given the member and the
/// expression that reads it), in declaration order.
/// A tuple variant of a declared enum's definition, with its trailing comma.
fn tuple_variant(ir: &Ir, v: &crate::ir::Variant, level: Level<'_>) -> Doc {
    let items: Vec<Doc> = v
        .fields
        .iter()
        .map(|m| super::type_doc(&member_type(ir, m, level)))
        .collect();
    cat([
        Doc::from(v.name.clone()),
        super::code::args("(", items, ")"),
        ",".into(),
    ])
}

fn convert(
    def: &TypeDef,
    (from, target): (&str, &str),
    value: &str,
    w: &mut Writer,
    member: &dyn Fn(&Member, &str) -> Doc,
) {
    match &def.body {
        TypeBody::Struct(members) => {
            w.open(format!("{target} {{"));
            for m in members {
                let name = m.name.as_deref().expect("named fields");
                w.line(cat([
                    format!("{name}: ").into(),
                    member(m, &format!("{value}.{name}")),
                    ",".into(),
                ]));
            }
            w.close("}");
        }
        TypeBody::Enum(variants) => {
            w.open(format!("match {value} {{"));
            for v in variants {
                match v.kind {
                    VariantKind::Unit => {
                        w.line(format!("{from}::{0} => {target}::{0},", v.name));
                    }
                    VariantKind::Tuple => {
                        let bindings: Vec<String> =
                            (0..v.fields.len()).map(names::tuple_binding).collect();
                        let values: Vec<Doc> = v
                            .fields
                            .iter()
                            .zip(&bindings)
                            .map(|(m, b)| member(m, b))
                            .collect();
                        let pattern = format!("{from}::{}({})", v.name, bindings.join(", "));
                        w.arm(&pattern, call(format!("{target}::{}", v.name), values));
                    }
                    VariantKind::Struct => {
                        let bindings: Vec<&str> = v
                            .fields
                            .iter()
                            .map(|m| m.name.as_deref().expect("named fields"))
                            .collect();
                        // rustfmt keeps a struct pattern on one line when its fields fit in
                        // `struct_lit_width` (18), and puts one per line otherwise.
                        let flat = bindings.join(", ");
                        if flat.len() <= STRUCT_LIT_WIDTH {
                            w.open(format!(
                                "{from}::{} {{ {flat} }} => {target}::{} {{",
                                v.name, v.name
                            ));
                        } else {
                            w.open(format!("{from}::{} {{", v.name));
                            for b in &bindings {
                                w.line(format!("{b},"));
                            }
                            w.dedent();
                            w.line(format!("}} => {target}::{} {{", v.name));
                            w.indent();
                        }
                        for m in &v.fields {
                            let name = m.name.as_deref().expect("named fields");
                            let value = member(m, name);
                            // A plain field passes through: the field init shorthand.
                            if matches!(&value, Doc::Text(t) if t == name) {
                                w.line(format!("{name},"));
                            } else {
                                w.line(cat([format!("{name}: ").into(), value, ",".into()]));
                            }
                        }
                        w.close("},");
                    }
                }
            }
            w.close("}");
        }
    }
}

/// The declared types reached from `roots` through nesting, in manifest order.
fn closure(ir: &Ir, roots: BTreeSet<String>) -> Vec<&TypeDef> {
    let mut reached = BTreeSet::new();
    let mut stack: Vec<String> = roots.into_iter().collect();
    while let Some(name) = stack.pop() {
        if !reached.insert(name.clone()) {
            continue;
        }
        for m in members(ir.type_def(&name)) {
            if let MemberType::Declared(inner) = &m.ty {
                stack.push(inner.clone());
            }
        }
    }
    ir.types
        .iter()
        .filter(|d| reached.contains(&d.name))
        .collect()
}

fn members(def: &TypeDef) -> Vec<&Member> {
    match &def.body {
        TypeBody::Struct(members) => members.iter().collect(),
        TypeBody::Enum(variants) => variants.iter().flat_map(|v| v.fields.iter()).collect(),
    }
}

/// The declared types some op takes (directly or nested).
pub(super) fn input_types(ir: &Ir) -> Vec<&TypeDef> {
    let roots = ir
        .ops
        .iter()
        .flat_map(|op| op.inputs.iter())
        .filter_map(|i| match &i.arg {
            Arg::Declared { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect();
    closure(ir, roots)
}

/// The declared types some op returns (directly or nested).
pub(super) fn output_types(ir: &Ir) -> Vec<&TypeDef> {
    fn visit(out: &Output, acc: &mut BTreeSet<String>) {
        match out {
            Output::Declared { name, .. } => {
                acc.insert(name.clone());
            }
            Output::Tuple(items) => items.iter().for_each(|o| visit(o, acc)),
            Output::Unit | Output::Tensor(_) | Output::Plain(_) => {}
        }
    }
    let mut roots = BTreeSet::new();
    for op in &ir.ops {
        visit(&op.output, &mut roots);
    }
    closure(ir, roots)
}

/// How many tensors member `m` holds (a nested type's, every variant's).
fn leaf_count(ir: &Ir, m: &Member) -> usize {
    match &m.ty {
        MemberType::Tensor(_) => 1,
        MemberType::Plain(_) => 0,
        MemberType::Declared(name) => crate::ir::leaves(&ir.types, name).len(),
    }
}

/// The routing conversions of every declared type an op takes or returns (the dispatch
/// module).
pub(super) fn conversions(ir: &Ir, w: &mut Writer) {
    for def in input_types(ir) {
        let primitive = names::primitive_type(&def.name);
        w.blank();
        w.open(format!("impl {primitive}<rt::Dispatch> {{"));
        w.doc(&[format!(
            "Unwraps every tensor for backend `B`, which planning chose after checking them \
             all; `{LEAF_NAMES}` are their names, in declaration order, for the messages of a \
             routing bug."
        )]);
        w.open(super::signature(
            format!("fn {UNWRAP}<B: {RT}::Target>"),
            vec![
                "self".into(),
                format!("{ROUTE}: &{RT}::Route").into(),
                format!("{LEAF_NAMES}: &[&'static str]").into(),
            ],
            format!(" -> {primitive}<B> {{"),
        ));
        let next = std::cell::Cell::new(0usize);
        let unwrap_body = |w: &mut Writer| {
            convert(def, (&primitive, &primitive), "self", w, &|m, value| {
                let at = next.get();
                let count = leaf_count(ir, m);
                next.set(at + count);
                match &m.ty {
                    MemberType::Tensor(t) => call(
                        format!("B::{}{}", kind_fn(t.kind), container_suffix(t.container)),
                        [
                            ROUTE.to_owned(),
                            format!("{LEAF_NAMES}[{at}]"),
                            value.to_owned(),
                        ],
                    ),
                    MemberType::Plain(_) => value.into(),
                    MemberType::Declared(_) => call(
                        format!("{value}.{UNWRAP}::<B>"),
                        [
                            ROUTE.to_owned(),
                            format!("&{LEAF_NAMES}[{at}..{}]", at + count),
                        ],
                    ),
                }
            })
        };
        unwrap_body(w);
        w.close("}");
        accessors(ir, def, w);
        w.close("}");
    }
    for def in output_types(ir) {
        let primitive = names::primitive_type(&def.name);
        w.blank();
        w.open(format!("impl<B: {RT}::Target> {primitive}<B> {{"));
        w.doc(&[
            "Wraps every tensor of a kernel's result as a `Dispatch` tensor, under the route's \
             autodiff context."
                .to_owned(),
        ]);
        w.open(format!(
            "fn {WRAP}(self, {ROUTE}: &{RT}::Route) -> {primitive}<rt::Dispatch> {{"
        ));
        convert(
            def,
            (&primitive, &primitive),
            "self",
            w,
            &|m, value| match &m.ty {
                MemberType::Tensor(t) => call(
                    format!(
                        "B::{}_out{}",
                        kind_fn(t.kind),
                        container_suffix(t.container)
                    ),
                    [ROUTE.to_owned(), value.to_owned()],
                ),
                MemberType::Plain(_) => value.into(),
                MemberType::Declared(_) => call(format!("{value}.{WRAP}"), [ROUTE.to_owned()]),
            },
        );
        w.close("}");
        w.close("}");
    }
}

fn container_suffix(container: Container) -> &'static str {
    match container {
        Container::One => "",
        Container::Option => "_opt",
        Container::Vec => "_vec",
    }
}

/// Whether a declared type has an `Option` or `Vec` of tensors (whose conversions are the
/// runtime's).
pub(super) fn has_container(ir: &Ir) -> bool {
    ir.types.iter().any(|def| {
        members(def)
            .iter()
            .any(|m| matches!(&m.ty, MemberType::Tensor(t) if t.container != Container::One))
    })
}

/// One accessor per tensor of `def` that only some values have (inside an enum variant):
/// `__leaf_N`, the tensor when the value has it. Routing reads such a tensor through it, like
/// an optional input; each accessor matches one level and asks a nested type's for the rest.
fn accessors(ir: &Ir, def: &TypeDef, w: &mut Writer) {
    let leaves = crate::ir::leaves(&ir.types, &def.name);
    for (i, leaf) in leaves.iter().enumerate() {
        if !leaf.refutable() {
            continue;
        }
        let first = &leaf.path[0];
        // The leaf's index within the member's own type: how many earlier leaves share its
        // first step.
        let inner = leaves[..i].iter().filter(|l| l.path[0] == *first).count();
        let (ret, found, absent) = access_forms(leaf.tensor.container);
        w.blank();
        w.doc(&[format!(
            "`{}`, when the value has it (routing reads it like an optional input).",
            leaf.label()
        )]);
        w.open(format!("fn {}(&self) -> {ret} {{", names::leaf_accessor(i)));
        match first {
            Step::Field { field, .. } => {
                // A struct field holding a declared type whose tensor is refutable.
                w.line(format!("self.{field}.{}()", names::leaf_accessor(inner)));
            }
            Step::Variant {
                ty,
                variant,
                field,
                index,
                named,
            } => {
                let path = format!("{}::{variant}", names::primitive_type(ty));
                let binding = names::LEAF;
                // A struct pattern as rustfmt lays it out: the field within `struct_lit_width`
                // on one line with `, ..`; the braces broken when that is wider; the field and
                // `..` on lines of their own when the field alone is wider.
                let mut broken: Option<Vec<String>> = None;
                let pattern = if *named {
                    let item = format!("{field}: {binding}");
                    let inner = format!("{item}, ..");
                    if inner.len() > STRUCT_LIT_WIDTH {
                        broken = Some(if item.len() <= STRUCT_LIT_WIDTH {
                            vec![inner.clone()]
                        } else {
                            vec![format!("{item},"), "..".to_owned()]
                        });
                    }
                    format!("{path} {{ {inner} }}")
                } else {
                    let mut items: Vec<String> = vec!["_".to_owned(); *index];
                    items.push(binding.to_owned());
                    items.push("..".to_owned());
                    format!("{path}({})", items.join(", "))
                };
                let value = if leaf.path.len() == 1 {
                    found(binding)
                } else {
                    let rest = Leaf {
                        path: leaf.path[1..].to_vec(),
                        tensor: leaf.tensor.clone(),
                    };
                    if rest.refutable() {
                        format!("{binding}.{}()", names::leaf_accessor(inner))
                    } else {
                        let mut place = binding.to_owned();
                        for step in &rest.path {
                            if let Step::Field { field, .. } = step {
                                place.push('.');
                                place.push_str(field);
                            }
                        }
                        // `as_ref()` / `as_slice()` borrow the place themselves; a single
                        // tensor is returned as a reference to it.
                        match leaf.tensor.container {
                            Container::One => found(&format!("&{place}")),
                            Container::Option | Container::Vec => found(&place),
                        }
                    }
                };
                w.open("match self {");
                match broken {
                    None => w.arm(&pattern, value.into()),
                    Some(lines) => {
                        w.open(format!("{path} {{"));
                        for line in lines {
                            w.line(line);
                        }
                        w.dedent();
                        w.line(format!("}} => {value},"));
                    }
                }
                w.arm("_", absent.into());
                w.close("}");
            }
        }
        w.close("}");
    }
}

/// An accessor's return type, how it returns a found tensor (given a reference to it), and
/// what it returns otherwise.
fn access_forms(container: Container) -> (&'static str, fn(&str) -> String, &'static str) {
    match container {
        Container::One => (
            "Option<&rt::DispatchTensor>",
            |t| format!("Some({t})"),
            "None",
        ),
        Container::Option => (
            "Option<&rt::DispatchTensor>",
            |t| format!("{t}.as_ref()"),
            "None",
        ),
        Container::Vec => (
            "&[rt::DispatchTensor]",
            |t| format!("{t}.as_slice()"),
            "&[]",
        ),
    }
}
