//! Lowering: each manifest value to its IR form. A value that cannot be lowered is reported
//! here, with its position; what relates values to each other is in [`super::rules`].

use std::collections::BTreeMap;
use std::ops::Range;

mod backends;
mod cfg_predicate;
mod decl;
mod implementation;
mod signature;

pub(crate) use cfg_predicate::is_well_known_cfg;
use cfg_predicate::*;
use implementation::*;
pub(super) use implementation::{
    declared_input, lazy_outputs, metadata_function, remote_kernel_possible, served,
};

pub(super) use decl::{Declared, unused};

use super::Options;
use super::text;
use super::types::{self, Position};
use crate::canon::{cfg_text, path_text, type_text};
use crate::diag::{Diagnostic, Diagnostics, LineIndex, did_you_mean, page};
use crate::ir::{
    Arg, Backend, BackendId, Container, FusionImpl, Input, Ir, MetaSource, Op, Output, OutputMeta,
    Policy, Rank, RemoteImpl, RouteBy, ShapeContract, ShapeRule, TensorArg, TensorKind, TraitGroup,
};
use crate::model::{
    ArgSpec, BackendSpec, Dims, Manifest, MetaSpec, OpSpec, OutputSpec, Sp, TensorSpec,
};
use crate::names::{self, NameKind};

const KINDS: &[&str] = crate::ir::TensorKind::KEYS;
const CONTAINERS: &[&str] = crate::keys::CONTAINER;
/// The deepest bracket nesting accepted in Rust text from the manifest (types, paths, cfgs).
const MAX_NESTING: usize = 32;
/// The deepest output tuple nesting accepted.
const MAX_TUPLE_NESTING: usize = 8;

/// Manifest text as a message shows it: control and bidirectional characters escaped (they
/// would reorder or hide the message), everything else as written.
fn shown(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() || super::text::is_bidi(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// The error reference's section for a name's problem, as [`names::problem`] words it: a
/// keyword or a name the generated code already uses, the generator's reserved prefix, or one
/// of the other name rules.
fn name_page(problem: &str) -> &'static str {
    if problem == "is a Rust keyword"
        || problem.starts_with("is a name of Rust's prelude")
        || problem.starts_with("is a generic parameter")
    {
        page::KEYWORD
    } else if problem.starts_with(&format!("starts with `{}`", names::RESERVED_PREFIX)) {
        page::RESERVED_INPUT
    } else {
        page::NOT_IDENTIFIER
    }
}

/// The lowered `[routing]` table.
#[derive(Clone, Debug)]
pub(super) struct Routing {
    pub trait_name: String,
    pub autodiff_trait: String,
    pub autodiff_cfg: String,
    pub backends: Vec<Backend>,
}

/// What lowering produced: the routing table and every op that lowered, with its spec (the
/// problems are in the run's [`Diagnostics`]).
pub(super) struct Lowered<'m> {
    pub routing: Option<Routing>,
    /// Where the main trait's name comes from (the manifest key or the builder option), for
    /// rules about generated names.
    pub trait_key: (Range<usize>, String),
    pub defaults: Vec<Backend>,
    pub ops: Vec<(&'m OpSpec, Op)>,
    /// The declared types that lowered.
    pub declared: Declared,
    /// Whether every op lowered (a failed one may have been reported by parsing).
    pub complete: bool,
}

/// Lowers everything that can be lowered, reporting the rest.
pub(super) fn lower<'m>(
    manifest: &'m Manifest,
    options: &Options<'_>,
    source: &str,
    lines: &LineIndex,
    diags: &mut Diagnostics,
) -> Lowered<'m> {
    let mut v = Lowerer {
        diags,
        backend_cfgs: BTreeMap::new(),
        source,
        declared: Declared::default(),
    };
    // Types first: op inputs and outputs name them.
    let declared = v.types(manifest, lines, options.manifest_name);
    let types_complete = declared.defs.len() == declared.names.len();
    v.declared = declared;
    let routing = &manifest.routing;
    let trait_span = routing
        .trait_name
        .as_ref()
        .map_or(routing.span.clone(), |t| t.span.clone());
    let (trait_name, trait_key) = match options.trait_name {
        // The builder's override meets the same rules as the manifest's value; its problems
        // point at `routing.trait`, which it replaces.
        Some(name) => (
            v.name(
                &Sp::new(name.to_owned(), trait_span.clone()),
                NameKind::Trait,
                "Builder::trait_name",
            ),
            "Builder::trait_name",
        ),
        None => (
            routing
                .trait_name
                .as_ref()
                .and_then(|n| v.name(n, NameKind::Trait, "routing.trait")),
            "routing.trait",
        ),
    };
    let autodiff_trait = match &routing.autodiff_trait {
        Some(n) => v.name(n, NameKind::Trait, "routing.autodiff_trait"),
        None => trait_name.as_deref().map(names::autodiff_trait),
    };
    // The user's cfg, and burn-route having autodiff at all (the generated code names
    // `rt::Autodiff`, which only exists then).
    let autodiff_cfg = match &routing.autodiff_cfg {
        Some(cfg) => v
            .cfg(cfg, "routing.autodiff_cfg")
            .map(|meta| format!("all({meta}, {})", names::AUTODIFF_CFG)),
        None => Some(names::AUTODIFF_CFG.to_owned()),
    };
    let defaults = routing
        .backends
        .as_ref()
        .map(|b| v.backends(b, "routing.backends", &[]))
        .unwrap_or_default();
    let defaults_location = routing.backends.as_ref().map_or_else(
        || format!("{}:1", options.manifest_name),
        |b| format!("{}:{}", options.manifest_name, lines.line(b.span.start)),
    );
    let bounds: Vec<String> = routing
        .backward_bounds
        .as_ref()
        .map(|list| {
            list.value
                .iter()
                .enumerate()
                .filter_map(|(i, b)| {
                    v.function_path(
                        b,
                        &format!("routing.backward_bounds[{i}]"),
                        "trait",
                        "crate::kernels::BackwardKernels",
                        page::MANIFEST,
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let cx = OpContext {
        bounds: &bounds,
        defaults: &defaults,
        defaults_location: &defaults_location,
        manifest_name: options.manifest_name,
        lines,
    };
    let mut ops = Vec::new();
    let mut complete = types_complete;
    for spec in &manifest.ops {
        match v.op(spec, &cx) {
            Some(op) => ops.push((spec, op)),
            None => complete = false,
        }
    }
    let routing = match (trait_name, autodiff_trait, autodiff_cfg) {
        (Some(trait_name), Some(autodiff_trait), Some(autodiff_cfg)) => Some(Routing {
            trait_name,
            autodiff_trait,
            autodiff_cfg,
            backends: defaults.clone(),
        }),
        _ => None,
    };
    Lowered {
        routing,
        trait_key: (trait_span, trait_key.to_owned()),
        defaults,
        ops,
        declared: v.declared,
        complete,
    }
}

/// The IR of a manifest that passed every rule.
pub(super) fn finish(
    routing: Routing,
    ops: Vec<(&OpSpec, Op)>,
    options: &Options<'_>,
    defaults: Vec<Backend>,
    declared: Declared,
) -> Ir {
    let mut ops: Vec<Op> = ops.into_iter().map(|(_, op)| op).collect();
    let groups = assign_groups(
        &mut ops,
        &defaults,
        &routing.trait_name,
        &routing.autodiff_trait,
    );
    hand_written_remote(&mut ops);
    Ir {
        manifest_name: options.manifest_name.to_owned(),
        trait_name: routing.trait_name,
        autodiff_trait: routing.autodiff_trait,
        autodiff_cfg: routing.autodiff_cfg,
        backends: routing.backends,
        ops,
        groups,
        types: declared.defs,
    }
}

/// Puts every op in its trait: one per (backend list, composite) pair, in order of first use.
/// Each op's `group` is set to its trait's index.
pub(super) fn assign_groups(
    ops: &mut [Op],
    defaults: &[Backend],
    trait_name: &str,
    autodiff_trait: &str,
) -> Vec<TraitGroup> {
    let names =
        |backends: &[Backend]| -> Vec<BackendId> { backends.iter().map(|b| b.name).collect() };
    let default_names = names(defaults);
    let mut keys: Vec<(Vec<BackendId>, bool)> = Vec::new();
    let mut groups = Vec::new();
    for op in ops.iter_mut() {
        let key = (names(&op.backends), op.composite.is_some());
        let index = keys.iter().position(|k| *k == key).unwrap_or_else(|| {
            let own = (key.0 != default_names).then_some(key.0.as_slice());
            let name = names::group_trait(trait_name, own, key.1);
            let autodiff_name = if name == trait_name {
                autodiff_trait.to_owned()
            } else {
                names::autodiff_trait(&name)
            };
            groups.push(TraitGroup {
                name,
                autodiff_name,
                backends: op.backends.clone(),
                composite: key.1,
            });
            keys.push(key);
            keys.len() - 1
        });
        op.group = index;
    }
    groups
}

/// Manifest-wide facts an op needs while it is lowered.
struct OpContext<'a> {
    /// `routing.backward_bounds`, lowered.
    bounds: &'a [String],
    defaults: &'a [Backend],
    defaults_location: &'a str,
    manifest_name: &'a str,
    lines: &'a LineIndex,
}

struct Lowerer<'s, 'd> {
    /// The run's diagnostics, which every problem is pushed into.
    diags: &'d mut Diagnostics,
    /// The cfg each backend was first given: one backend, one cfg.
    backend_cfgs: BTreeMap<BackendId, String>,
    source: &'s str,
    /// The declared types, lowered before the ops that use them.
    declared: Declared,
}

impl Lowerer<'_, '_> {
    fn push(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    /// A manifest name, checked as what Rust will see ([`names::problem`]).
    fn name(&mut self, name: &Sp<String>, kind: NameKind, key: &str) -> Option<String> {
        let Some(problem) = names::problem(&name.value, kind) else {
            return Some(name.value.clone());
        };
        let what = match kind {
            NameKind::Op => "op name",
            NameKind::Input => "input name",
            NameKind::Trait => "trait name",
            NameKind::Rank => "rank name",
            NameKind::Type => "type name",
            NameKind::Variant => "variant name",
            NameKind::Field => "field name",
        };
        let help = match names::suggestion(&name.value, kind) {
            None if kind == NameKind::Rank
                && !name.value.is_empty()
                && name.value.chars().all(|c| c.is_ascii_digit()) =>
            {
                format!("write a fixed rank as a number: `dims = {}`", name.value)
            }
            Some(s) => format!("did you mean `{s}`? names are {}", kind.convention()),
            None if kind == NameKind::Op && name.value == "new" => {
                "name what the op makes, e.g. `new_tensor` or `make_ramp`".to_owned()
            }
            None if matches!(kind, NameKind::Trait | NameKind::Type)
                && (names::PRELUDE.contains(&name.value.as_str())
                    || names::GENERICS.contains(&name.value.as_str())) =>
            {
                format!(
                    "choose a name of your own, e.g. `{}{}`",
                    name.value.trim_matches('_'),
                    if kind == NameKind::Type {
                        "Value"
                    } else {
                        "Ops"
                    }
                )
            }
            None => format!(
                "use a name in {}, not a keyword, not starting with `{}`",
                kind.convention(),
                names::RESERVED_PREFIX
            ),
        };
        self.push(
            Diagnostic::new(
                name.span.clone(),
                key,
                format!("{what} `{}` {problem}", shown(&name.value)),
            )
            .page(name_page(&problem))
            .help(help),
        );
        None
    }

    /// Whether Rust text from the manifest nests few enough brackets to be parsed (the parser
    /// recurses once per level; a pathological string would overflow the build script's stack).
    fn shallow(&mut self, text: &Sp<String>, key: &str, page: &'static str) -> bool {
        let mut depth = 0usize;
        let mut deepest = 0usize;
        // References, pointers and `-> R` nest without brackets (`&&&u8`, `fn() -> fn() -> u8`):
        // the parser recurses for each of them too.
        let mut prefixes = 0usize;
        let mut previous = ' ';
        for c in text.value.chars() {
            match c {
                '>' if previous == '-' => prefixes += 1,
                '&' | '*' => prefixes += 1,
                '<' | '(' | '[' | '{' => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                '>' | ')' | ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
            previous = c;
        }
        if prefixes > 2 * MAX_NESTING {
            self.push(
                Diagnostic::new(
                    text.span.clone(),
                    key,
                    format!(
                        "`{key}` chains {prefixes} references, pointers and `->` return types; at most {} are accepted",
                        2 * MAX_NESTING
                    ),
                )
                .page(page)
                .help("name the inner type with a type alias by its path (e.g. `crate::Inner`)"),
            );
            return false;
        }
        if deepest <= MAX_NESTING {
            return true;
        }
        self.push(
            Diagnostic::new(
                text.span.clone(),
                key,
                format!("`{key}` nests brackets {deepest} levels deep; at most {MAX_NESTING} are accepted"),
            )
            .page(page)
            .help("name the inner type with a type alias by its path (e.g. `crate::Inner`)"),
        );
        false
    }

    fn policy(&mut self, spec: &OpSpec, path: &str) -> Option<Policy> {
        let Some(p) = &spec.autodiff else {
            return Some(Policy::Reject);
        };
        match Policy::from_key(&p.value) {
            Some(policy) => Some(policy),
            None => {
                let other = p.value.as_str();
                let keys: Vec<&str> = Policy::ALL.iter().map(|p| p.key()).collect();
                let help = match did_you_mean(other, &keys) {
                    Some(close) => format!("did you mean `{close}`? one of: {}", keys.join(", ")),
                    None => format!("use one of: {}", keys.join(", ")),
                };
                self.push(
                    Diagnostic::new(
                        p.span.clone(),
                        format!("{path}.autodiff"),
                        format!("unknown autodiff policy `{}`", shown(other)),
                    )
                    .page(page::UNKNOWN_POLICY)
                    .help(help),
                );
                None
            }
        }
    }

    /// `composite` or `composition`: the path of a function generic over `B: Backend`.
    fn function_key(
        &mut self,
        value: Option<&Sp<String>>,
        path: &str,
        key: &str,
    ) -> Result<Option<String>, ()> {
        let Some(c) = value else {
            return Ok(None);
        };
        // `composite` has its section of the error reference; `composition` has none.
        let page = if key == "composite" {
            page::BAD_COMPOSITE
        } else {
            page::MANIFEST
        };
        self.function_path(
            c,
            &format!("{path}.{key}"),
            key,
            "crate::composite::softplus",
            page,
        )
        .map(Some)
        .ok_or(())
    }

    /// A function named by its path (checked: a path, no generic arguments).
    fn function_path(
        &mut self,
        c: &Sp<String>,
        key: &str,
        what: &str,
        example: &str,
        page: &'static str,
    ) -> Option<String> {
        if !self.shallow(c, key, page::MANIFEST) {
            return None;
        }
        let problem = match syn::parse_str::<syn::Path>(&c.value) {
            Err(err) => format!("is not a Rust path: {err}"),
            Ok(p) => match types::function_path_problem(&p) {
                None => return Some(path_text(&p)),
                Some(problem) => problem,
            },
        };
        self.push(
            Diagnostic::new(
                c.span.clone(),
                key,
                format!("{what} `{}` {problem}", shown(&c.value)),
            )
            .page(page)
            .help(format!(
                "name the function by its full path without generic arguments, e.g. \"{example}\""
            )),
        );
        None
    }

    /// An output's `shape` and `dtype`: an input's name (resolved by the rules), a function
    /// path (with `::`), or for `dtype`, `"default"`.
    fn output_meta(&mut self, meta: Option<&MetaSpec>, key: &str) -> Option<OutputMeta> {
        let Some(meta) = meta else {
            return Some(OutputMeta::default());
        };
        let mut ok = true;
        let mut source = |value: Option<&Sp<String>>, field: &str| {
            let value = value?;
            let key = format!("{key}.{field}");
            let text = value.value.trim();
            let lowered = if text == "default" && field == "dtype" {
                Some(MetaSource::Default)
            } else if text == "default" {
                self.push(
                    Diagnostic::new(value.span.clone(), key, "`shape = \"default\"`: only `dtype` has a default")
                        .page(page::OUTPUT_METADATA)
                        .help("name a single tensor input (the output has its shape) or a function path such as \"crate::meta::out_shape\""),
                );
                None
            } else if text.contains("::") {
                self.function_path(
                    value,
                    &key,
                    field,
                    "crate::meta::topk_shape",
                    page::OUTPUT_METADATA,
                )
                .map(MetaSource::Function)
            } else if syn::parse_str::<syn::Ident>(text).is_ok() {
                Some(MetaSource::Input(text.to_owned()))
            } else {
                let sep = if field == "dtype" { "," } else { ", or" };
                let default = if field == "dtype" {
                    ", or `\"default\"` (the device's default dtype for the output's kind)"
                } else {
                    ""
                };
                self.push(
                    Diagnostic::new(
                        value.span.clone(),
                        key,
                        format!(
                            "`{field} = \"{}\"` names neither an input nor a function",
                            shown(&value.value)
                        ),
                    )
                    .page(page::OUTPUT_METADATA)
                    .help(format!(
                        "write the name of a tensor input{of_kind} (the output's {field} is that input's){sep} a function path such as \"crate::meta::out_{field}\"{default}",
                        of_kind = if field == "dtype" { " of the output's kind" } else { "" }
                    )),
                );
                None
            };
            ok &= lowered.is_some();
            lowered
        };
        let shape = source(meta.shape.as_ref(), "shape");
        let dtype = source(meta.dtype.as_ref(), "dtype");
        ok.then_some(OutputMeta { shape, dtype })
    }

    fn op(&mut self, spec: &OpSpec, cx: &OpContext<'_>) -> Option<Op> {
        let path = format!("op[{}]", spec.index);
        let (backends, backends_location) = match &spec.backends {
            Some(list) => (
                self.backends(list, &format!("{path}.backends"), cx.defaults),
                format!("{}:{}", cx.manifest_name, cx.lines.line(list.span.start)),
            ),
            None => (cx.defaults.to_vec(), cx.defaults_location.to_owned()),
        };
        let name = spec
            .name
            .as_ref()
            .and_then(|n| self.name(n, NameKind::Op, &format!("{path}.name")));
        let policy = self.policy(spec, &path);
        let composite = self.function_key(spec.composite.as_ref(), &path, "composite");
        let composition = self.function_key(spec.composition.as_ref(), &path, "composition");
        let inputs = self.inputs(spec, &path, cx);
        let output = match &spec.output {
            None => Some(Output::Unit),
            Some(out) => self.output(out, &format!("{path}.output")),
        };
        let doc = match &spec.doc {
            None => Some(Vec::new()),
            Some(doc) => match text::doc_lines(doc, self.source, &format!("{path}.doc")) {
                Ok(lines) => Some(lines),
                Err(d) => {
                    self.push(d);
                    None
                }
            },
        };
        let deprecated = match &spec.deprecated {
            None => Some(None),
            Some(note) => {
                match text::deprecation_note(note, self.source, &format!("{path}.deprecated")) {
                    Ok(note) => Some(Some(note)),
                    Err(d) => {
                        self.push(d);
                        None
                    }
                }
            }
        };
        let (name, policy, inputs, output, doc) = (name?, policy?, inputs?, output?, doc?);
        let deprecated = deprecated?;
        let (composite, composition) = (composite.ok()?, composition.ok()?);
        if !self.plain_types(spec, &path, &inputs, &output) {
            return None;
        }
        let route_by = route_by(&inputs, &backends);
        // clippy scores trait objects and function pointers high; with the nesting generated
        // signatures add, any of them may cross its limit.
        let complex_types = plain_type_texts(&inputs, &output).iter().any(|ty| {
            ty.contains("dyn ")
                || ty.contains("fn(")
                || syn::parse_str::<syn::Type>(ty).is_ok_and(|t| types::complexity(&t) > 150)
        });
        let location_span = spec
            .autodiff
            .as_ref()
            .map_or_else(|| spec.name_span(), |p| p.span.clone());
        let line = cx.lines.line(location_span.start);
        let output_line = cx.lines.line(
            spec.output
                .as_ref()
                .map_or(spec.span.start, |o| o.span().start),
        );
        let asynchronous = spec.asynchronous.as_ref().is_some_and(|a| a.value);
        let fusion = fusion_impl(
            spec.fusion.as_ref().map(|f| f.value.as_str()),
            &backends,
            composite.is_some(),
            composition.is_some(),
            asynchronous,
            &output,
        );
        // A declared-type input has no lazy form yet: its op runs its composition. Nor has it an
        // eager one, nor has a quantized input (the fusion stream resolves float, int and bool
        // tensors only).
        let fusion = if fusion == FusionImpl::Eager
            && inputs.iter().any(|i| match &i.arg {
                Arg::Declared { .. } => true,
                Arg::Tensor(t) => t.kind == TensorKind::Quantized,
                Arg::Plain(_) | Arg::Device => false,
            }) {
            FusionImpl::None
        } else if fusion == FusionImpl::Lazy
            && inputs.iter().any(|i| matches!(i.arg, Arg::Declared { .. }))
        {
            if composition.is_some() {
                FusionImpl::Composition
            } else {
                FusionImpl::None
            }
        } else {
            fusion
        };
        let remote = remote_impl(
            spec,
            &backends,
            composite.is_some(),
            composition.is_some(),
            asynchronous,
            &inputs,
            &output,
        );
        let mut op = Op {
            name,
            doc,
            deprecated,
            policy,
            location: format!("{}:{line}", cx.manifest_name),
            inputs,
            output,
            backends,
            backends_location,
            group: 0,
            composite,
            composition,
            asynchronous,
            fusion,
            remote,
            dtypes: dtypes(spec, cx),
            output_location: format!("{}:{output_line}", cx.manifest_name),
            route_by,
            complex_types,
            backward: None,
            hand_written: matches!(
                spec.backward,
                Some(crate::model::BackwardSpec::HandWritten(_))
            ),
            check: crate::ir::Check::default(),
        };
        let backward_line = match &spec.backward {
            Some(crate::model::BackwardSpec::Function(f)) => cx.lines.line(f.span.start),
            Some(crate::model::BackwardSpec::Formulas { span, .. }) => cx.lines.line(span.start),
            Some(crate::model::BackwardSpec::HandWritten(span)) => cx.lines.line(span.start),
            None => line,
        };
        let backward_cx = super::backward::Cx {
            source: self.source,
            location: format!("{}:{backward_line}", cx.manifest_name),
            bounds: cx.bounds,
            types: &self.declared.defs,
        };
        let backward = super::backward::lower(spec, &op, &backward_cx, self.diags);
        let check = super::check::lower(spec, &op, &self.declared.defs);
        match (backward, check) {
            (Ok(backward), Ok(check)) => {
                op.backward = backward;
                op.check = check;
            }
            (_, check) => {
                self.diags.extend(check.err().unwrap_or_default());
                return None;
            }
        }
        Some(op)
    }
}

/// Every plain type of an op, inputs then outputs.
fn plain_type_texts(inputs: &[Input], output: &Output) -> Vec<String> {
    fn outputs(out: &Output, acc: &mut Vec<String>) {
        match out {
            Output::Plain(ty) => acc.push(ty.clone()),
            Output::Tuple(items) => items.iter().for_each(|o| outputs(o, acc)),
            Output::Unit | Output::Tensor(_) | Output::Declared { .. } => {}
        }
    }
    let mut acc: Vec<String> = inputs
        .iter()
        .filter_map(|i| match &i.arg {
            Arg::Plain(ty) => Some(ty.clone()),
            _ => None,
        })
        .collect();
    outputs(output, &mut acc);
    acc
}

/// The rank generics of an output, in order.
fn output_ranks(out: &Output, acc: &mut Vec<String>) {
    match out {
        Output::Tensor(TensorArg {
            rank: Rank::Generic(g),
            ..
        }) => acc.push(g.clone()),
        Output::Declared { ranks, .. } => acc.extend(ranks.iter().cloned()),
        Output::Tuple(items) => items.iter().for_each(|o| output_ranks(o, acc)),
        _ => {}
    }
}
