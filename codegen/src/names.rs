//! The one owner of names in generated code: what the generator introduces (traits, aliases,
//! functions, locals, generics) and what a manifest name may be so that it never collides with
//! them, with Rust's keywords, or with the prelude items generated code relies on.
//!
//! Validation asks this module what is reserved; emitters ask it what to write. Nothing else
//! spells a generated name.
//!
//! The rule for users is short: names follow Rust's case conventions (ops and inputs
//! `snake_case`, traits `UpperCamelCase`, ranks `UPPER_CASE`), are plain ASCII identifiers, are
//! not keywords, and do not start with [`RESERVED_PREFIX`], which belongs to the generator.

use crate::ir::BackendId;

/// The prefix of every local, nested function and static the generator introduces inside a
/// routing function (`__route`, `__run`, ...). No manifest name may start with it, so inputs
/// can be named freely otherwise.
pub const RESERVED_PREFIX: &str = "__";

/// The prefix of the derivative's field that keeps output element `path` (a non-float output
/// the backward pass reads): `__output_1`, `__output_0_2`.
pub const OUTPUT_FIELD: &str = "__output_";

/// The derivative's field that keeps output element `path` ([`OUTPUT_FIELD`]).
pub fn output_field(path: &[usize]) -> String {
    let parts: Vec<String> = path.iter().map(ToString::to_string).collect();
    format!("{OUTPUT_FIELD}{}", parts.join("_"))
}

/// The runtime generated code calls unless [`crate::Builder::runtime_path`] names another path:
/// the `burn-route-runtime` crate's `rt` module.
pub const RUNTIME_PATH: &str = "::burn_route_runtime::rt";
/// The runtime as `burn-route`, the crate of the shipped ops, re-exports it.
pub const SHIPPED_RUNTIME_PATH: &str = "::burn_route::rt";
/// The op-check runtime of a check whose runtime path cannot be named from a test.
pub const RUNTIME_CHECK: &str = "::burn_route_runtime::check";
/// The op check's alias of the runtime's `check` module, where an op named `check` would clash
/// with the module's own name.
pub const CHECK_ALIAS: &str = "__chk";

/// Alias of the runtime module in every generated module (`use <runtime path> as rt;`).
pub const RUNTIME: &str = "rt";
/// The runtime's hidden module (`rt::__private`): machinery only generated code names.
pub const PRIVATE: &str = "__private";
/// Alias of the runtime's hidden [`PRIVATE`] module (route planning, input unwrapping, the
/// error strategy, op facts) in the dispatch module: machinery only generated code names.
pub const PRIVATE_RUNTIME: &str = "__rt";

/// Alias of the dispatch module in the tensor module.
pub const DISPATCH_MODULE: &str = "dispatch";

/// The planned route, a local of the routing function.
pub const ROUTE: &str = "__route";
/// The kernel passed to the generic body.
pub const KERNEL: &str = "__kernel";
/// The generic body: unwrap the inputs for a backend, call the kernel, wrap the outputs.
pub const RUN: &str = "__run";
/// The module-level `__run` named for the first op that uses it (ops with the same body share
/// it).
pub fn run_fn(op: &str) -> String {
    format!("{RUN}_{op}")
}
/// The out-of-line path: the full planner, then the routing arms.
pub const PLANNED: &str = "__plan_and_run";
/// An async op's generic body for its hand-written `Autodiff<B, C>` kernel (`__run` calls the
/// concrete kernel).
pub const RUN_AUTODIFF: &str = "__run_autodiff";
/// An async op's routed call: the kernel's future (`rt::Pending`) or the routing outcome
/// (`rt::Planned`), a local of the `Tensor<D>`-level functions.
pub const PENDING: &str = "__pending";
/// What an async op's trait methods return: `impl rt::Async<T>` (`Future<Output = T> + Send`).
pub const ASYNC: &str = "rt::Async";
/// The routing outcome of an async op's call (`rt::Planned`), a local of its panicking forms.
pub const PLANNED_CALL: &str = "__planned";
/// The op's static facts (`rt::OpInfo`).
pub const OP_INFO: &str = "__OP";
/// The result of an op's shape-contract checks, a local of the routing function.
pub const SHAPES: &str = "__shapes";
/// The op check's binding of output leaf `index` (a declared struct's whole value).
pub fn check_output(index: usize) -> String {
    format!("{OUT}_{index}")
}

/// The op check's list of output values, when an enum output makes it grow by `match`.
pub const CHECK_LEAVES: &str = "__leaves";

/// The op check's binding of a declared value of op input `input`: `part` 0 is the argument,
/// the others the declared values nested in it.
pub fn check_arg(input: usize, part: usize) -> String {
    format!("__arg_{input}_{part}")
}

/// The error of a failed check, a local of the routing function.
pub const ERROR: &str = "__error";
/// Stem of the locals that destructure a tuple output (`__out_0`, `__out_1_0`, ...).
pub const OUT: &str = "__out";

/// The deferred call being built, a local of a lazy `Fusion<B>` method.
pub const LAZY: &str = "__lazy";
/// The eager call, a local of an eager `Fusion<B>` method: it resolves the inputs and hands the
/// outputs back to the fusion stream.
pub const EAGER: &str = "__eager";
/// The lazy outputs of a registered deferred call.
pub const OUTPUTS: &str = "__outputs";
/// The handles a deferred call's kernel reads and publishes, the closure's parameter.
pub const HANDLES: &str = "__handles";
/// What the kernel returned, a local of the deferred call's closure.
pub const RESULT: &str = "__result";

/// The generated module of the `Autodiff<B, C>` implementations written from declared
/// backward passes, in the ops file.
pub const AUTODIFF_MODULE: &str = "autodiff";
/// Alias of the runtime's backward-pass machinery (`rt::__private::grad`) in that module.
pub const GRAD_RUNTIME: &str = "__grad";
/// The float inputs on their way through an op's `Autodiff<B, C>` function.
pub const TAPE: &str = "__tape";
/// The op's float output, a local of its `Autodiff<B, C>` function.
pub const OUTPUT_LOCAL: &str = "__output";
/// The derivative value of a call, a local of its `Autodiff<B, C>` function.
pub const DERIVATIVE: &str = "__derivative";
/// What a backward pass reads (`Saved`), its parameter.
pub const SAVED: &str = "__saved";
/// The float inputs of a recomputation (`Saved`), its parameter.
pub const INPUTS: &str = "__inputs";
/// Which inputs get a gradient, a backward pass's parameter.
pub const TRACKED: &str = "__tracked";
/// The gradients being computed, a local of a formula backward pass.
pub const GRADS: &str = "__grads";
/// A backward function brought in by `use` where its path is too long for the call's line.
pub const BACKWARD_FN: &str = "__backward";
/// The trait of a backward method, brought in by `use` where its path is too long.
pub const BACKWARD_TRAIT: &str = "__BackwardKernels";
/// The op's trait, brought in by `use` where the kernel's call is too long for its line.
pub const OPS_TRAIT: &str = "__Ops";
/// A generated `Autodiff<B, C>` implementation brought in by `use` where its path is too long.
pub const DERIVED: &str = "__derived";
/// The composition an op check compares with, brought in by `use` where its path is too long.
pub const COMPOSITION: &str = "__composition";
/// The one input's gradient a one-input backward function returned.
pub const GRADIENT: &str = "__gradient";
/// The incoming gradient: the formula name, and the backward pass's parameter.
pub const GRAD_LOCAL: &str = "grad";

/// The `k`th number subexpression of a formula bound to a local (a long one, for rustfmt).
pub fn number_local(k: usize) -> String {
    format!("__n{k}")
}

/// The `k`th tensor subexpression a formula reads more than once, computed once into a local.
pub fn shared_local(k: usize) -> String {
    format!("__t{k}")
}

/// The derivative types of `ops` (in manifest order) in the generated autodiff module: each
/// op's name in `UpperCamelCase` with `Backward` (so none is a generic, `Some` or `Vec`), and the
/// op's index after it where two names would be the same (`conv2d` and `conv_2d`).
pub fn derivative_structs<'a>(ops: impl Iterator<Item = (usize, &'a str)>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (index, op) in ops {
        let mut name = format!("{}Backward", upper_camel(op));
        if out.contains(&name) {
            name.push_str(&index.to_string());
        }
        out.push(name);
    }
    out
}

/// The derivative value of one float field of an op's declared output (`member`: the field
/// names down to it), from the op's derivative name `ty`: `MomentsBackwardMean`.
pub fn member_derivative(ty: &str, member: &[String]) -> String {
    format!("{ty}{}", upper_camel(&member.join("_")))
}

/// The local holding the derivative value of a declared output's float field (`__derivative_mean`).
pub fn member_derivative_local(member: &[String]) -> String {
    format!("{DERIVATIVE}_{}", member.join("_"))
}

/// The local holding a declared output's float field on `Autodiff<B, C>` (`__output_mean`).
pub fn member_output_local(member: &[String]) -> String {
    format!("{OUTPUT_LOCAL}_{}", member.join("_"))
}

/// `snake_case` → `UpperCamelCase`.
fn upper_camel(snake: &str) -> String {
    snake
        .split('_')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

/// The recorded form of input `name` in a recorded call (`Fusion<B>`, `Remote`): `__in_x`, and
/// for a value the generator names (`__output`, `__grad`) that name with `_in`.
pub fn lazy_input(name: &str) -> String {
    if name.starts_with("__") {
        format!("{name}_in")
    } else {
        format!("__in_{name}")
    }
}

/// The spec (shape and dtype) of input `name` in a lazy `Fusion<B>` method.
pub fn lazy_spec(name: &str) -> String {
    format!("__spec_{name}")
}

/// The function a Remote server calls to serve the manifest's ops (in the dispatch module).
pub const SERVE_REMOTE: &str = "serve_remote_ops";
/// The call being built in an op's method on `Remote`.
pub const CALL: &str = "__call";
/// What a server-side kernel call reads its inputs from and writes its outputs to.
pub const ARGS: &str = "__args";
/// One tensor of an `option` or `vec` output, registered on the server.
pub const TENSOR: &str = "__tensor";
/// The registration of a crate's ops on a Remote server, in progress.
pub const SERVE: &str = "__serve";
/// The method of a backend-level declared type on `Remote` that records a value in an op's
/// operation (in the dispatch module).
pub const SEND: &str = "__send";
/// The function of a backend-level declared type that reads a value back on a Remote server.
pub const RECEIVE: &str = "__receive";
/// The variant of a declared enum, read on a Remote server.
pub const VARIANT_TAG: &str = "__variant";
/// A variant number the server does not know.
pub const OTHER_TAG: &str = "__other";

/// The static facts of op `name`'s custom operation on Remote.
pub fn remote_op(name: &str) -> String {
    format!("__REMOTE_{}", name.to_ascii_uppercase())
}

/// The server-side kernel call of op `name`.
pub fn serve_op(name: &str) -> String {
    format!("__serve_{name}")
}

/// The static facts of backward kernel `Trait::method`'s custom operation on Remote.
pub fn remote_backward_op(trait_name: &str, method: &str) -> String {
    format!(
        "__REMOTE_{}_{}",
        upper_snake(trait_name),
        method.to_ascii_uppercase()
    )
}

/// The server-side call of backward kernel `Trait::method`.
pub fn serve_backward(trait_name: &str, method: &str) -> String {
    format!(
        "__serve_{}_{method}",
        upper_snake(trait_name).to_ascii_lowercase()
    )
}

/// `UpperCamelCase` as `UPPER_SNAKE_CASE`.
fn upper_snake(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// A backward kernel's incoming gradient, a parameter of its method on `Remote` and
/// `Fusion<B>` (saved values
/// keep their input names, which never start with `__`).
pub const SAVED_GRAD: &str = "__grad";
/// The shape and dtype of a backward kernel's incoming gradient.
pub const GRAD_SPEC: &str = "__grad_spec";
/// The float output, a saved value of a backward kernel's method on `Remote` and `Fusion<B>`.
pub const SAVED_OUTPUT: &str = "__output";

/// The function that registers the ops a server's backend (`flex`, `cube`) runs.
pub fn serve_on(backend: BackendId) -> String {
    format!("__serve_on_{}", backend.key().to_ascii_lowercase())
}

/// Generic parameters generated code introduces: the backend of the generic body and of
/// `Autodiff<B, C>` impls, the checkpoint strategy, and the error strategy of routing functions.
/// A trait named like one would be shadowed by it.
pub const GENERICS: &[&str] = &["B", "C", "F"];

/// The cfg the generated autodiff routing is compiled under when the manifest sets no
/// `autodiff_cfg`. [`crate::Builder::build_script`] sets it when burn-route-runtime has autodiff
/// (it learns that from the runtime's build metadata), so the consuming crate follows it.
pub const AUTODIFF_CFG: &str = burn_route_core::route_cfg::AUTODIFF;

/// The cfg a backend's routes are compiled under when the manifest gives it none: the backends
/// that only some builds of burn-route have (set, like [`AUTODIFF_CFG`], by the build script).
pub fn backend_cfg(backend: BackendId) -> Option<&'static str> {
    backend.route_cfg()
}

/// Every cfg the generator itself may introduce, for `cargo::rustc-check-cfg`.
pub const RUNTIME_CFGS: &[&str] = burn_route_core::route_cfg::ALL;

/// The default rank generic of tensors without `dims`.
pub const DEFAULT_RANK: &str = "D";

/// The public fallible function of an op, in the dispatch and tensor modules.
pub fn try_fn(op: &str) -> String {
    format!("try_{op}")
}

/// The private routing function of an op in the dispatch module.
pub fn route_fn(op: &str) -> String {
    format!("route_{op}")
}

/// The backend-level form of declared type `name` (`DetectionsPrimitive<B>`), in the traits
/// module; `name` itself is the `Tensor<D>`-level form, in the tensor module.
pub fn primitive_type(name: &str) -> String {
    format!("{name}Primitive")
}

/// The method of a backend-level declared type, in the dispatch module, that unwraps its
/// `Dispatch` tensors for the routed backend.
pub const UNWRAP: &str = "__unwrap";
/// The method of a backend-level declared type, in the dispatch module, that wraps a kernel's
/// tensors back into `Dispatch` tensors.
pub const WRAP: &str = "__wrap";
/// The conversion of a `Tensor<D>`-level declared type to its `Dispatch` primitive.
pub const INTO_PRIMITIVE: &str = "into_primitive";
/// The conversion of a `Dispatch` primitive of a declared type to its `Tensor<D>` level.
pub const FROM_PRIMITIVE: &str = "from_primitive";
/// The accessor of a declared type's `index`th tensor when only some values have it (it is
/// inside an enum variant), in the dispatch module.
pub fn leaf_accessor(index: usize) -> String {
    format!("__leaf_{index}")
}

/// The binding of field `index` of a tuple variant in a declared type's conversions.
pub fn tuple_binding(index: usize) -> String {
    format!("__field_{index}")
}

/// The binding of the tensor a routing pattern reaches inside a declared enum.
pub const LEAF: &str = "__leaf";
/// The value a declared type's conversion takes apart.
pub const VALUE: &str = "__value";
/// The names of a declared input's tensors, handed to its unwrapping (`["p.x", "p.y"]`).
pub const LEAF_NAMES: &str = "__names";

/// The alias of `Autodiff<backend>` in the dispatch module.
pub fn autodiff_alias(backend: BackendId) -> String {
    format!("Autodiff{}", backend.key())
}

/// The alias of `Autodiff<backend, BalancedCheckpointing>` in the dispatch module.
pub fn balanced_alias(backend: BackendId) -> String {
    format!("Balanced{}", backend.key())
}

/// The trait of a group of ops: the main trait, plus the backends of an op-specific list, plus
/// `Composite` for composite ops.
pub fn group_trait(main: &str, backends: Option<&[BackendId]>, composite: bool) -> String {
    let mut name = main.to_owned();
    for backend in backends.unwrap_or_default() {
        name.push_str(backend.key());
    }
    if composite {
        name.push_str("Composite");
    }
    name
}

/// The default name of a trait's companion with the `Autodiff<B, C>` kernels.
pub fn autodiff_trait(group: &str) -> String {
    format!("{group}Autodiff")
}

/// Rust's keywords in edition 2024: strict and reserved (`gen` included), which cannot name an
/// item without the raw `r#` form.
pub const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
    "unsafe", "use", "where", "while", // reserved for future use
    "abstract", "become", "box", "do", "final", "gen", "macro", "override", "priv", "try",
    "typeof", "unsized", "virtual", "yield",
];

/// The names of Rust's 2024 prelude. Generated code uses several of them unqualified (`Option`,
/// `Result`, `Ok`, `Some`, `None`, `Vec`, `FnOnce`, `Iterator`'s methods...); a trait of the same
/// name imported into the generated modules would shadow them.
pub const PRELUDE: &[&str] = &[
    "AsMut",
    "AsRef",
    "AsyncFn",
    "AsyncFnMut",
    "AsyncFnOnce",
    "Box",
    "Clone",
    "Copy",
    "Default",
    "DoubleEndedIterator",
    "Drop",
    "Eq",
    "Err",
    "ExactSizeIterator",
    "Extend",
    "Fn",
    "FnMut",
    "FnOnce",
    "From",
    "FromIterator",
    "Future",
    "Into",
    "IntoFuture",
    "IntoIterator",
    "Iterator",
    "None",
    "Ok",
    "Option",
    "Ord",
    "PartialEq",
    "PartialOrd",
    "Result",
    "Send",
    "Sized",
    "Some",
    "String",
    "Sync",
    "ToOwned",
    "ToString",
    "TryFrom",
    "TryInto",
    "Unpin",
    "Vec",
];

/// The prelude's types a plain type may name with a single-segment path, besides the
/// primitives.
const PRELUDE_TYPES: &[&str] = &["Box", "Option", "Result", "String", "Vec"];

/// Whether a plain type may name `ty` with a single-segment path: a primitive or one of the
/// prelude's types. Any other type is not in scope in the generated modules and needs its full
/// path.
pub fn is_scoped_type(ty: &str) -> bool {
    burn_route_core::primitive::is_primitive(ty) || PRELUDE_TYPES.contains(&ty)
}

/// Traits a plain type's `dyn` or bound may name with a single-segment path (the prelude's).
pub const SCOPED_TRAITS: &[&str] = &[
    "AsMut",
    "AsRef",
    "Clone",
    "Copy",
    "Default",
    "DoubleEndedIterator",
    "Eq",
    "ExactSizeIterator",
    "Extend",
    "Fn",
    "FnMut",
    "FnOnce",
    "From",
    "FromIterator",
    "Into",
    "IntoIterator",
    "Iterator",
    "Ord",
    "PartialEq",
    "PartialOrd",
    "Send",
    "Sized",
    "Sync",
    "ToOwned",
    "ToString",
    "TryFrom",
    "TryInto",
    "Unpin",
];

/// What a manifest name names, which decides its case and what it may not collide with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameKind {
    /// An op: a trait method and free functions (`snake_case`).
    Op,
    /// An input: a parameter (`snake_case`).
    Input,
    /// A trait (`UpperCamelCase`).
    Trait,
    /// A rank const generic (`UPPER_CASE`).
    Rank,
    /// A declared type (`UpperCamelCase`).
    Type,
    /// A variant of a declared enum (`UpperCamelCase`; named through its enum, so prelude
    /// names are fine).
    Variant,
    /// A field of a declared type (`snake_case`).
    Field,
}

impl NameKind {
    /// The convention, as help text says it.
    pub fn convention(self) -> &'static str {
        match self {
            Self::Op | Self::Input | Self::Field => {
                "snake_case: lowercase ASCII letters, digits and single `_`"
            }
            Self::Trait | Self::Type | Self::Variant => {
                "UpperCamelCase: ASCII letters and digits, starting with an uppercase letter"
            }
            Self::Rank => {
                "UPPER_CASE: uppercase ASCII letters, digits and single `_`, starting with a letter"
            }
        }
    }
}

/// Why `name` cannot be a `kind` name in generated code, or `None` when it can. Checks the
/// exact text (no trimming): whitespace, comments or a raw `r#` prefix are refused as what they
/// are.
pub fn problem(name: &str, kind: NameKind) -> Option<String> {
    if name.is_empty() {
        return Some("is empty".to_owned());
    }
    if name.trim() != name {
        return Some("has surrounding whitespace".to_owned());
    }
    if name.contains("/*") || name.contains("//") {
        return Some("contains a comment".to_owned());
    }
    if name.contains(char::is_whitespace) {
        return Some("contains whitespace".to_owned());
    }
    if name.starts_with("r#") {
        return Some(
            "is a raw identifier (`r#`), which generated names cannot be built from".to_owned(),
        );
    }
    if !name.is_ascii() {
        return Some("is not ASCII (rustc warns about non-ASCII identifiers)".to_owned());
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Some("is not a Rust identifier".to_owned());
    }
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        return Some("starts with a digit, so it is not a Rust identifier".to_owned());
    }
    if KEYWORDS.contains(&name) {
        return Some("is a Rust keyword".to_owned());
    }
    if name == "_" {
        return Some("is `_`, which is not a name".to_owned());
    }
    if name.starts_with(RESERVED_PREFIX) {
        return Some(format!(
            "starts with `{RESERVED_PREFIX}`, which is reserved for the generator's own names"
        ));
    }
    let has_lower = name.chars().any(|c| c.is_ascii_lowercase());
    let has_upper = name.chars().any(|c| c.is_ascii_uppercase());
    let has_letter = has_lower || has_upper;
    match kind {
        NameKind::Op | NameKind::Input | NameKind::Field => {
            if has_upper || !has_letter || name.contains("__") {
                return Some("is not snake_case".to_owned());
            }
            // The trait method `fn new(..)` that does not return `Self` is clippy's
            // `new_ret_no_self`.
            if kind == NameKind::Op && name == "new" {
                return Some(
                    "would be a trait method `new` that does not return `Self`, which clippy refuses (`new_ret_no_self`)"
                        .to_owned(),
                );
            }
            if kind == NameKind::Op && name.starts_with('_') {
                return Some(
                    "starts with `_`: the generated `try_` and `route_` names would not be snake_case"
                        .to_owned(),
                );
            }
        }
        NameKind::Variant => {
            if name.contains('_') || !name.starts_with(|c: char| c.is_ascii_uppercase()) {
                return Some("is not UpperCamelCase".to_owned());
            }
        }
        NameKind::Trait | NameKind::Type => {
            if name.contains('_') || !name.starts_with(|c: char| c.is_ascii_uppercase()) {
                return Some("is not UpperCamelCase".to_owned());
            }
            if PRELUDE.contains(&name) {
                return Some(format!(
                    "is a name of Rust's prelude, which the generated modules use (`{name}`)"
                ));
            }
            if GENERICS.contains(&name) {
                return Some(format!(
                    "is a generic parameter of the generated code (`{}`)",
                    GENERICS.join("`, `")
                ));
            }
        }
        NameKind::Rank => {
            if has_lower
                || !name.starts_with(|c: char| c.is_ascii_uppercase())
                || name.contains("__")
            {
                return Some("is not UPPER_CASE, as const generics are named".to_owned());
            }
        }
    }
    None
}

/// A suggestion in `kind`'s case for a name that broke it, when one is easy to make.
pub fn suggestion(name: &str, kind: NameKind) -> Option<String> {
    // Dropping letters of another script, or a raw prefix, would change the name's meaning.
    if !name.is_ascii() || name.starts_with("r#") {
        return None;
    }
    let words: Vec<String> = split_words(name.trim());
    if words.is_empty() {
        return None;
    }
    let candidate = match kind {
        NameKind::Op | NameKind::Input | NameKind::Field => words.join("_").to_ascii_lowercase(),
        NameKind::Rank => words.join("_").to_ascii_uppercase(),
        NameKind::Trait | NameKind::Type | NameKind::Variant => words
            .iter()
            .map(|w| {
                let mut c = w.chars();
                c.next().map_or_else(String::new, |f| {
                    f.to_ascii_uppercase().to_string() + &c.as_str().to_ascii_lowercase()
                })
            })
            .collect(),
    };
    (candidate != name && problem(&candidate, kind).is_none()).then_some(candidate)
}

/// ASCII words of a name: split at non-alphanumerics and at lower→upper case changes.
fn split_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        current.push(c);
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// The local holding slot `input.fields...` of a declared backward pass in generated code: the
/// input's own name for a tensor input, `__p_scale` for field `scale` of input `p` (manifest
/// names never start with `__`, so no input is named like it; validation refuses two fields
/// of one op that would share a local, `p.a_b` and `p.a.b`).
pub fn slot_local(input: &str, fields: &[&str]) -> String {
    if fields.is_empty() {
        input.to_owned()
    } else {
        format!("__{input}_{}", fields.join("_"))
    }
}

/// The local of a formula name: a slot or number by its manifest path (`x`, `p.scale`), or a
/// name the generator chose (`grad`, `__t0`), which is its own local.
pub fn formula_local(name: &str) -> String {
    let mut parts = name.split('.');
    let input = parts.next().unwrap_or_default();
    let fields: Vec<&str> = parts.collect();
    slot_local(input, &fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_rust_conventions() {
        assert_eq!(problem("add_relu", NameKind::Op), None);
        assert_eq!(problem("_x", NameKind::Input), None);
        assert_eq!(problem("MyOps2", NameKind::Trait), None);
        assert_eq!(problem("E", NameKind::Rank), None);
        assert_eq!(problem("RANK_2", NameKind::Rank), None);
        for (bad, kind) in [
            (" add", NameKind::Op),
            ("add ", NameKind::Op),
            ("a b", NameKind::Op),
            ("x/*c*/", NameKind::Input),
            ("r#fn", NameKind::Op),
            ("gen", NameKind::Op),
            ("try", NameKind::Input),
            ("Add", NameKind::Op),
            ("xY", NameKind::Input),
            ("__x", NameKind::Input),
            ("a__b", NameKind::Input),
            ("_x", NameKind::Op),
            ("café", NameKind::Op),
            ("_", NameKind::Input),
            ("1x", NameKind::Input),
            ("ops", NameKind::Trait),
            ("My_Ops", NameKind::Trait),
            ("Result", NameKind::Trait),
            ("FnOnce", NameKind::Trait),
            ("B", NameKind::Trait),
            ("d", NameKind::Rank),
            ("Dim", NameKind::Rank),
            ("", NameKind::Rank),
        ] {
            assert!(problem(bad, kind).is_some(), "{bad:?} accepted as {kind:?}");
        }
    }

    #[test]
    fn suggestions_are_valid_names() {
        assert_eq!(
            suggestion("AddRelu", NameKind::Op).as_deref(),
            Some("add_relu")
        );
        assert_eq!(
            suggestion("my_ops", NameKind::Trait).as_deref(),
            Some("MyOps")
        );
        assert_eq!(suggestion("d", NameKind::Rank).as_deref(), Some("D"));
        assert_eq!(suggestion(" x ", NameKind::Input).as_deref(), Some("x"));
        assert_eq!(suggestion("gen", NameKind::Op), None);
    }
}
