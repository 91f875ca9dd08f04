//! [`Manifest`] → [`Ir`]: every semantic rule, all problems collected before failing.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::canon::{cfg_text, path_text, type_text};
use crate::diag::{Diagnostic, LineIndex, did_you_mean};
use crate::ir::{
    Arg, Backend, BackendName, Container, Input, Ir, Op, Output, Policy, Rank, TensorArg,
    TensorKind, TraitGroup,
};
use crate::model::{ArgSpec, BackendSpec, Dims, Manifest, OpSpec, OutputSpec, Sp, TensorSpec};

/// Parameter names the generated routing code uses for itself.
pub const RESERVED_INPUT_NAMES: &[&str] = &["route", "kernel", "run", "planned", "OP"];

const POLICIES: &[&str] = &["differentiable", "detach", "reject"];
const KINDS: &[&str] = &["float", "int", "bool", "quantized"];
const CONTAINERS: &[&str] = &["option", "vec"];
const DEFAULT_AUTODIFF_CFG: &str = "feature = \"autodiff\"";

/// Checks `manifest` and lowers it. `manifest_name` is how runtime messages name the file;
/// `source` is its text (for line numbers).
pub fn validate(
    manifest: &Manifest,
    manifest_name: &str,
    source: &str,
) -> Result<Ir, Vec<Diagnostic>> {
    let mut v = Validator {
        diags: Vec::new(),
        backend_cfgs: BTreeMap::new(),
    };
    let routing = &manifest.routing;
    let lines = LineIndex::new(source);

    let trait_name = routing
        .trait_name
        .as_ref()
        .and_then(|n| v.ident(n, "routing.trait", "a trait name such as \"RoutedOps\""));
    let autodiff_trait = match &routing.autodiff_trait {
        Some(n) => v.ident(
            n,
            "routing.autodiff_trait",
            "a trait name such as \"RoutedOpsAutodiff\"",
        ),
        None => trait_name.as_ref().map(|t| format!("{t}Autodiff")),
    };
    if let (Some(t), Some(a)) = (&trait_name, &routing.autodiff_trait)
        && *t == a.value
    {
        v.push(
            Diagnostic::new(
                a.span.clone(),
                "routing.autodiff_trait",
                "`autodiff_trait` must differ from `trait`",
            )
            .help(format!(
                "rename it, e.g. `autodiff_trait = \"{t}Autodiff\"`, or remove the key to use that default"
            )),
        );
    }
    let autodiff_cfg = match &routing.autodiff_cfg {
        Some(cfg) => v.cfg(cfg, "routing.autodiff_cfg"),
        None => Some(DEFAULT_AUTODIFF_CFG.to_owned()),
    };

    let backends = routing
        .backends
        .as_ref()
        .map(|b| v.backends(b, "routing.backends", &[]))
        .unwrap_or_default();
    let backends_location = routing.backends.as_ref().map_or_else(
        || format!("{manifest_name}:1"),
        |b| format!("{manifest_name}:{}", lines.line(b.span.start)),
    );

    let mut seen: BTreeMap<String, Range<usize>> = BTreeMap::new();
    let mut ops = Vec::new();
    for spec in &manifest.ops {
        if let Some(name) = &spec.name {
            if let Some(first) = seen.get(&name.value) {
                let line = lines.line(first.start);
                v.push(
                    Diagnostic::new(
                        name.span.clone(),
                        format!("op[{}].name", spec.index),
                        format!(
                            "duplicate op name `{}` (first declared on line {line})",
                            name.value
                        ),
                    )
                    .help(
                        "rename one of the ops; op names become trait methods and must be unique",
                    ),
                );
            } else {
                seen.insert(name.value.clone(), name.span.clone());
            }
        }
        let context = OpContext {
            defaults: &backends,
            defaults_location: &backends_location,
            manifest_name,
            lines: &lines,
        };
        if let Some(op) = v.op(spec, &context) {
            ops.push(op);
        }
    }
    // `try_x` is generated for every op `x`; an op literally named `try_x` would collide.
    for spec in &manifest.ops {
        if let Some(name) = &spec.name
            && let Some(base) = name.value.strip_prefix("try_")
            && seen.contains_key(base)
        {
            v.push(
                Diagnostic::new(
                    name.span.clone(),
                    format!("op[{}].name", spec.index),
                    format!(
                        "op name `{}` collides with the generated `try_{base}` of op `{base}`",
                        name.value
                    ),
                )
                .help(
                    "choose a name that does not start with `try_` followed by another op's name",
                ),
            );
        }
    }

    v.diags
        .sort_by(|a, b| (a.span.start, &a.key).cmp(&(b.span.start, &b.key)));
    match (trait_name, autodiff_trait, autodiff_cfg) {
        (Some(trait_name), Some(autodiff_trait), Some(autodiff_cfg)) if v.diags.is_empty() => {
            let groups = assign_groups(&mut ops, &backends, &trait_name, &autodiff_trait);
            let ir = Ir {
                manifest_name: manifest_name.to_owned(),
                trait_name,
                autodiff_trait,
                autodiff_cfg,
                backends,
                ops,
                groups,
            };
            let span = routing
                .trait_name
                .as_ref()
                .map_or(routing.span.clone(), |t| t.span.clone());
            match generated_name_clash(&ir) {
                Some(clash) => Err(vec![
                    Diagnostic::new(span, "routing.trait", format!("the generated code would define `{clash}` twice"))
                        .help("rename `trait` or `autodiff_trait` so the traits named after them (`...Autodiff`, `...Composite`, `...<Backends>`) and the `Autodiff<Backend>`/`Balanced<Backend>` aliases stay distinct"),
                ]),
                None => Ok(ir),
            }
        }
        // A missing value with no diagnostic here was already reported by parsing.
        _ => Err(v.diags),
    }
}

/// Puts every op in its trait: one per (backend list, composite) pair, in order of first use.
fn assign_groups(
    ops: &mut [Op],
    defaults: &[Backend],
    trait_name: &str,
    autodiff_trait: &str,
) -> Vec<TraitGroup> {
    let names =
        |backends: &[Backend]| -> Vec<BackendName> { backends.iter().map(|b| b.name).collect() };
    let default_names = names(defaults);
    let mut keys: Vec<(Vec<BackendName>, bool)> = Vec::new();
    let mut groups = Vec::new();
    for op in ops.iter_mut() {
        let key = (names(&op.backends), op.composite.is_some());
        let index = keys.iter().position(|k| *k == key).unwrap_or_else(|| {
            let mut name = trait_name.to_owned();
            if key.0 != default_names {
                for backend in &op.backends {
                    name.push_str(backend.name.as_str());
                }
            }
            if key.1 {
                name.push_str("Composite");
            }
            let autodiff_name = if name == trait_name {
                autodiff_trait.to_owned()
            } else {
                format!("{name}Autodiff")
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

/// A name the generated modules would define twice, if any: the traits, the autodiff aliases
/// of the dispatch module, and its `rt` import.
fn generated_name_clash(ir: &Ir) -> Option<String> {
    let mut names: Vec<String> = vec!["rt".to_owned()];
    for (index, group) in ir.groups.iter().enumerate() {
        names.push(group.name.clone());
        if ir.needs_autodiff_trait(index) {
            names.push(group.autodiff_name.clone());
        }
    }
    // One pair of aliases per backend that serves a differentiable op.
    let mut aliases: Vec<String> = Vec::new();
    for op in ir
        .ops
        .iter()
        .filter(|op| op.policy == Policy::Differentiable)
    {
        for backend in &op.backends {
            for alias in [
                format!("Autodiff{}", backend.name.as_str()),
                format!("Balanced{}", backend.name.as_str()),
            ] {
                if !aliases.contains(&alias) {
                    aliases.push(alias);
                }
            }
        }
    }
    names.extend(aliases);
    let mut seen = std::collections::BTreeSet::new();
    names.into_iter().find(|n| !seen.insert(n.clone()))
}

/// Manifest-wide facts an op needs while it is validated.
struct OpContext<'a> {
    defaults: &'a [Backend],
    defaults_location: &'a str,
    manifest_name: &'a str,
    lines: &'a LineIndex,
}

/// A cfg predicate as rustc accepts it: `name`, `name = "value"`, or `all(..)` / `any(..)` /
/// `not(..)` of predicates.
fn check_cfg_shape(meta: &syn::Meta) -> syn::Result<()> {
    let single = |path: &syn::Path| {
        path.get_ident().cloned().ok_or_else(|| {
            syn::Error::new_spanned(path, "expected a single name such as `feature`")
        })
    };
    match meta {
        syn::Meta::Path(path) => single(path).map(|_| ()),
        syn::Meta::NameValue(nv) => {
            single(&nv.path)?;
            match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(_),
                    ..
                }) => Ok(()),
                other => Err(syn::Error::new_spanned(
                    other,
                    "expected a string literal, as in `feature = \"cube\"`",
                )),
            }
        }
        syn::Meta::List(list) => {
            let name = single(&list.path)?;
            if !["all", "any", "not"].contains(&name.to_string().as_str()) {
                return Err(syn::Error::new_spanned(
                    &list.path,
                    "expected `all`, `any` or `not`",
                ));
            }
            let nested = list.parse_args_with(
                syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
            )?;
            nested.iter().try_for_each(check_cfg_shape)
        }
    }
}

/// Identifiers in a type (or any tokens).
fn idents_in(tokens: proc_macro2::TokenStream, out: &mut Vec<String>) {
    for tree in tokens {
        match tree {
            proc_macro2::TokenTree::Ident(id) => out.push(id.to_string()),
            proc_macro2::TokenTree::Group(g) => idents_in(g.stream(), out),
            _ => {}
        }
    }
}

struct Validator {
    diags: Vec<Diagnostic>,
    /// The cfg each backend was first given: one backend, one cfg.
    backend_cfgs: BTreeMap<BackendName, String>,
}

/// Whether `s` is a Rust identifier that is not a keyword (raw identifiers are not accepted).
pub fn is_plain_ident(s: &str) -> bool {
    syn::parse_str::<syn::Ident>(s).is_ok()
}

impl Validator {
    fn push(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    fn ident(&mut self, name: &Sp<String>, key: &str, example: &str) -> Option<String> {
        if is_plain_ident(&name.value) {
            return Some(name.value.clone());
        }
        let why = if syn::parse_str::<syn::Ident>(&format!("r#{}", name.value)).is_ok()
            || ["self", "Self", "crate", "super"].contains(&name.value.as_str())
        {
            "is a Rust keyword"
        } else {
            "is not a Rust identifier"
        };
        self.push(
            Diagnostic::new(name.span.clone(), key, format!("`{}` {why}", name.value)).help(
                format!(
                    "use {example}: letters, digits and `_`, not starting with a digit, not a keyword"
                ),
            ),
        );
        None
    }

    fn cfg(&mut self, cfg: &Sp<String>, key: &str) -> Option<String> {
        match syn::parse_str::<syn::Meta>(&cfg.value).and_then(|meta| {
            check_cfg_shape(&meta)?;
            Ok(meta)
        }) {
            Ok(meta) => Some(cfg_text(&meta)),
            Err(err) => {
                self.push(
                    Diagnostic::new(
                        cfg.span.clone(),
                        key,
                        format!("`{}` is not a cfg predicate: {err}", cfg.value),
                    )
                    .help("write what goes inside `#[cfg(...)]`, e.g. 'feature = \"cube\"'"),
                );
                None
            }
        }
    }

    /// A backend list. `inherit` is the manifest's default list: an op's entry naming one of
    /// its backends takes that backend's cfg.
    fn backends(
        &mut self,
        list: &Sp<Vec<BackendSpec>>,
        key: &str,
        inherit: &[Backend],
    ) -> Vec<Backend> {
        let names: Vec<&str> = BackendName::ALL.iter().map(|b| b.as_str()).collect();
        if list.value.is_empty() {
            self.push(
                Diagnostic::new(
                    list.span.clone(),
                    key,
                    "empty backend list: no op could run anywhere",
                )
                .help("list at least one backend, e.g. `backends = [\"Flex\"]`"),
            );
        }
        let mut out: Vec<Backend> = Vec::new();
        for (i, spec) in list.value.iter().enumerate() {
            let key = format!("{key}[{i}]");
            let Some(name) = BackendName::ALL
                .into_iter()
                .find(|b| b.as_str() == spec.name.value)
            else {
                let help = match did_you_mean(&spec.name.value, &names) {
                    Some(close) => format!(
                        "did you mean `{close}`? known backends: {}",
                        names.join(", ")
                    ),
                    None => format!("use one of: {}", names.join(", ")),
                };
                self.push(
                    Diagnostic::new(
                        spec.name.span.clone(),
                        key,
                        format!("unknown backend `{}`", spec.name.value),
                    )
                    .help(help),
                );
                continue;
            };
            if out.iter().any(|b| b.name == name) {
                self.push(
                    Diagnostic::new(
                        spec.span.clone(),
                        key,
                        format!("backend `{}` is listed twice", name.as_str()),
                    )
                    .help("remove the second entry"),
                );
                continue;
            }
            let inherited = inherit.iter().find(|b| b.name == name);
            let cfg = match (&spec.cfg, inherited) {
                (Some(c), Some(_)) => {
                    self.push(
                        Diagnostic::new(
                            c.span.clone(),
                            format!("{key}.cfg"),
                            format!(
                                "backend `{}` already has its cfg in `routing.backends`",
                                name.as_str()
                            ),
                        )
                        .help(format!(
                            "remove `cfg` here: the op uses the `routing.backends` entry for `{}`",
                            name.as_str()
                        )),
                    );
                    continue;
                }
                (Some(c), None) => match self.cfg(c, &format!("{key}.cfg")) {
                    Some(meta) => Some(meta),
                    None => continue,
                },
                (None, Some(b)) => b.cfg.clone(),
                (None, None) => None,
            };
            let cfg_text = cfg.clone().unwrap_or_default();
            match self.backend_cfgs.get(&name) {
                Some(first) if *first != cfg_text => {
                    self.push(
                        Diagnostic::new(spec.span.clone(), key, format!("backend `{}` has a different cfg here than where it was first listed", name.as_str()))
                            .help("give a backend the same cfg everywhere (or list it once in `routing.backends`)"),
                    );
                    continue;
                }
                Some(_) => {}
                None => {
                    self.backend_cfgs.insert(name, cfg_text);
                }
            }
            out.push(Backend { name, cfg });
        }
        out
    }

    fn policy(&mut self, spec: &OpSpec, path: &str) -> Option<Policy> {
        let Some(p) = &spec.autodiff else {
            return Some(Policy::Reject);
        };
        match p.value.as_str() {
            "differentiable" => Some(Policy::Differentiable),
            "detach" => Some(Policy::Detach),
            "reject" => Some(Policy::Reject),
            other => {
                let help = match did_you_mean(other, POLICIES) {
                    Some(close) => {
                        format!("did you mean `{close}`? one of: differentiable, detach, reject")
                    }
                    None => "use one of: differentiable, detach, reject".to_owned(),
                };
                self.push(
                    Diagnostic::new(
                        p.span.clone(),
                        format!("{path}.autodiff"),
                        format!("unknown autodiff policy `{other}`"),
                    )
                    .help(help),
                );
                None
            }
        }
    }

    /// The inputs, or `None` when any of them is invalid (each problem is reported).
    fn inputs(&mut self, spec: &OpSpec, path: &str) -> Option<Vec<Input>> {
        let list = spec.inputs.as_ref()?;
        let mut inputs = Vec::new();
        let mut ok = true;
        let mut seen: BTreeMap<&str, ()> = BTreeMap::new();
        for (i, input) in list.value.iter().enumerate() {
            let key = format!("{path}.inputs[{i}]");
            let name = input.name.as_ref().and_then(|n| {
                self.ident(
                    n,
                    &format!("{key}.name"),
                    "a snake_case name such as \"lhs\"",
                )
            });
            if let (Some(n), Some(sp)) = (&name, &input.name) {
                if RESERVED_INPUT_NAMES.contains(&n.as_str()) {
                    self.push(
                        Diagnostic::new(
                            sp.span.clone(),
                            format!("{key}.name"),
                            format!("input name `{n}` is reserved by the generated routing code"),
                        )
                        .help(format!(
                            "rename the input; reserved names: {}",
                            RESERVED_INPUT_NAMES.join(", ")
                        )),
                    );
                    ok = false;
                } else if seen.insert(sp.value.as_str(), ()).is_some() {
                    self.push(
                        Diagnostic::new(
                            sp.span.clone(),
                            format!("{key}.name"),
                            format!("duplicate input name `{n}`"),
                        )
                        .help("give every input of an op a distinct name"),
                    );
                    ok = false;
                }
            }
            let arg = input.ty.as_ref().and_then(|ty| self.arg(ty, &key));
            match (name, arg) {
                (Some(name), Some(arg)) => inputs.push(Input { name, arg }),
                _ => ok = false,
            }
        }
        let devices: Vec<usize> = (0..inputs.len())
            .filter(|i| matches!(inputs[*i].arg, Arg::Device))
            .collect();
        if ok && devices.len() > 1 {
            self.push(
                Diagnostic::new(
                    list.value[devices[1]].span.clone(),
                    format!("{path}.inputs[{}]", devices[1]),
                    "more than one device input",
                )
                .help("keep one `device = true` input: an op runs on one device"),
            );
            ok = false;
        }
        ok.then_some(inputs)
    }

    /// Names that generated code puts in scope next to the op's own: input names must not
    /// shadow them, and plain types must not depend on them (each level of the generated API
    /// has different generics in scope).
    fn scoped_names(
        &mut self,
        spec: &OpSpec,
        path: &str,
        op: &str,
        inputs: &[Input],
        output: &Output,
    ) -> bool {
        fn ranks(out: &Output, acc: &mut Vec<String>) {
            match out {
                Output::Tensor(TensorArg {
                    rank: Rank::Generic(g),
                    ..
                }) => acc.push(g.clone()),
                Output::Tuple(items) => items.iter().for_each(|o| ranks(o, acc)),
                _ => {}
            }
        }
        let mut generics: Vec<String> = Vec::new();
        for input in inputs {
            if let Arg::Tensor(TensorArg {
                rank: Rank::Generic(g),
                ..
            }) = &input.arg
            {
                generics.push(g.clone());
            }
        }
        ranks(output, &mut generics);
        let specs = spec
            .inputs
            .as_ref()
            .map(|l| l.value.as_slice())
            .unwrap_or_default();
        let mut ok = true;
        for (i, input) in inputs.iter().enumerate() {
            let span = specs
                .get(i)
                .and_then(|s| s.name.as_ref())
                .map_or(spec.span.clone(), |n| n.span.clone());
            let key = format!("{path}.inputs[{i}].name");
            let name = input.name.as_str();
            let problem = if name.starts_with(|c: char| c.is_ascii_uppercase()) {
                Some(format!(
                    "input name `{name}` starts with an uppercase letter, which Rust reads as a type, constant or variant"
                ))
            } else if name == format!("route_{op}") {
                Some(format!(
                    "input name `{name}` is the op's own generated `route_` function"
                ))
            } else if name == "_route" {
                Some(format!(
                    "input name `{name}` is reserved by the generated routing code"
                ))
            } else {
                None
            };
            if let Some(problem) = problem {
                self.push(
                    Diagnostic::new(span, key, problem)
                        .help("use a snake_case input name such as `x` or `values`"),
                );
                ok = false;
            }
        }
        let plain_types = inputs
            .iter()
            .enumerate()
            .filter_map(|(i, input)| match &input.arg {
                Arg::Plain(ty) => Some((
                    format!("{path}.inputs[{i}].type"),
                    specs.get(i).map_or(spec.span.clone(), |s| s.span.clone()),
                    ty,
                )),
                _ => None,
            });
        for (key, span, ty) in plain_types {
            let mut names = Vec::new();
            idents_in(ty.parse().unwrap_or_default(), &mut names);
            let bad = names
                .iter()
                .find(|n| generics.contains(n) || ["B", "Self", "impl"].contains(&n.as_str()));
            if let Some(bad) = bad {
                self.push(
                    Diagnostic::new(span, key, format!("plain type `{ty}` uses `{bad}`, which is not in scope at every level of the generated API"))
                        .help("use a concrete type (e.g. `Vec<usize>` instead of `[usize; D]`); rank generics exist only at the `Tensor<D>` level"),
                );
                ok = false;
            }
        }
        ok
    }

    fn composite(&mut self, spec: &OpSpec, path: &str) -> Result<Option<String>, ()> {
        let Some(c) = &spec.composite else {
            return Ok(None);
        };
        match syn::parse_str::<syn::Path>(&c.value) {
            Ok(p) => Ok(Some(path_text(&p))),
            Err(err) => {
                self.push(
                    Diagnostic::new(
                        c.span.clone(),
                        format!("{path}.composite"),
                        format!("`{}` is not a Rust path: {err}", c.value),
                    )
                    .help("name the function by its path, e.g. \"crate::composite::softplus\""),
                );
                Err(())
            }
        }
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
        let name = spec.name.as_ref().and_then(|n| {
            self.ident(
                n,
                &format!("{path}.name"),
                "a snake_case name such as \"add_relu\"",
            )
        });
        let policy = self.policy(spec, &path);
        let composite = self.composite(spec, &path);
        let inputs = self.inputs(spec, &path);
        let output = match &spec.output {
            None => Some(Output::Unit),
            Some(out) => self.output(out, &format!("{path}.output")),
        };
        let (name, policy, inputs, output) = (name?, policy?, inputs?, output?);
        let composite = composite.ok()?;
        if !self.scoped_names(spec, &path, &name, &inputs, &output) {
            return None;
        }

        let has_float = inputs
            .iter()
            .any(|i| matches!(&i.arg, Arg::Tensor(t) if t.kind == TensorKind::Float));
        let has_tensor = inputs.iter().any(|i| matches!(i.arg, Arg::Tensor(_)));
        if policy != Policy::Reject && !has_float {
            let p = spec
                .autodiff
                .as_ref()
                .expect("non-default policy is written");
            self.push(
                Diagnostic::new(
                    p.span.clone(),
                    format!("{path}.autodiff"),
                    format!(
                        "op `{name}` is `{}` but has no float tensor input, so autodiff never reaches it",
                        policy.as_str()
                    ),
                )
                .help(
                    "remove `autodiff` (the default `reject` is exact here), or add a float tensor input",
                ),
            );
            return None;
        }
        // (An empty or missing backend list is reported on its own.)
        if !has_tensor && backends.len() > 1 {
            let span = spec
                .inputs
                .as_ref()
                .map_or(spec.span.clone(), |i| i.span.clone());
            self.push(
                Diagnostic::new(
                    span,
                    format!("{path}.inputs"),
                    format!(
                        "op `{name}` has no tensor input, so nothing tells which of the {} backends to run it on",
                        backends.len()
                    ),
                )
                .help(
                    "add a tensor input to route by, or list exactly one backend (in the op's `backends` or in `routing.backends`)",
                ),
            );
            return None;
        }
        let location_span = spec.autodiff.as_ref().map_or_else(
            || {
                spec.name
                    .as_ref()
                    .map_or(spec.span.clone(), |n| n.span.clone())
            },
            |p| p.span.clone(),
        );
        let line = cx.lines.line(location_span.start);
        let doc = spec
            .doc
            .as_ref()
            .map(|d| d.value.lines().map(|l| l.trim_end().to_owned()).collect())
            .unwrap_or_default();
        Some(Op {
            name,
            doc,
            policy,
            location: format!("{}:{line}", cx.manifest_name),
            inputs,
            output,
            backends,
            backends_location,
            group: 0,
            composite,
        })
    }

    fn arg(&mut self, spec: &ArgSpec, key: &str) -> Option<Arg> {
        match spec {
            ArgSpec::Tensor(t) => self.tensor(t, key).map(Arg::Tensor),
            ArgSpec::Plain(ty) => self.plain(ty, &format!("{key}.type")).map(Arg::Plain),
            ArgSpec::Device(_) => Some(Arg::Device),
        }
    }

    fn plain(&mut self, ty: &Sp<String>, key: &str) -> Option<String> {
        match syn::parse_str::<syn::Type>(&ty.value) {
            Ok(t) => Some(type_text(&t)),
            Err(err) => {
                self.push(
                    Diagnostic::new(
                        ty.span.clone(),
                        key,
                        format!("`{}` is not a Rust type: {err}", ty.value),
                    )
                    .help("write a Rust type such as \"f32\", \"usize\" or \"Option<u64>\""),
                );
                None
            }
        }
    }

    fn tensor(&mut self, t: &TensorSpec, key: &str) -> Option<TensorArg> {
        let kind = match t.kind.value.as_str() {
            "float" => Some(TensorKind::Float),
            "int" => Some(TensorKind::Int),
            "bool" => Some(TensorKind::Bool),
            "quantized" => Some(TensorKind::Quantized),
            other => {
                let help = match did_you_mean(other, KINDS) {
                    Some(close) => {
                        format!("did you mean `{close}`? tensor kinds: float, int, bool, quantized")
                    }
                    None => "use one of: float, int, bool, quantized".to_owned(),
                };
                self.push(
                    Diagnostic::new(
                        t.kind.span.clone(),
                        format!("{key}.tensor"),
                        format!("unknown tensor kind `{other}`"),
                    )
                    .help(help),
                );
                None
            }
        };
        let rank = match &t.dims {
            None => Some(Rank::Generic("D".to_owned())),
            Some(d) => match &d.value {
                Dims::Generic(name) => {
                    let sp = Sp::new(name.clone(), d.span.clone());
                    self.ident(
                        &sp,
                        &format!("{key}.dims"),
                        "a const-generic name such as \"D\"",
                    )
                    .map(Rank::Generic)
                }
                Dims::Fixed(n) if (1..=16).contains(n) => {
                    Some(Rank::Fixed(usize::try_from(*n).expect("in range")))
                }
                Dims::Fixed(n) => {
                    self.push(
                        Diagnostic::new(
                            d.span.clone(),
                            format!("{key}.dims"),
                            format!("rank {n} is out of range"),
                        )
                        .help("use a rank from 1 to 16, or a const-generic name such as \"D\""),
                    );
                    None
                }
            },
        };
        let borrowed = t.borrowed.as_ref().is_some_and(|b| b.value);
        let container = match &t.container {
            None => Some(Container::One),
            Some(c) => match c.value.as_str() {
                "option" => Some(Container::Option),
                "vec" if borrowed => {
                    self.push(
                        Diagnostic::new(
                            c.span.clone(),
                            format!("{key}.container"),
                            "a borrowed `vec` of tensors is not supported",
                        )
                        .help("pass the `Vec` by value (remove `borrowed`)"),
                    );
                    None
                }
                "vec" => Some(Container::Vec),
                other => {
                    let help = match did_you_mean(other, CONTAINERS) {
                        Some(close) => format!("did you mean `{close}`? containers: option, vec"),
                        None => "use \"option\" (`Option<tensor>`) or \"vec\" (`Vec<tensor>`)"
                            .to_owned(),
                    };
                    self.push(
                        Diagnostic::new(
                            c.span.clone(),
                            format!("{key}.container"),
                            format!("unknown container `{other}`"),
                        )
                        .help(help),
                    );
                    None
                }
            },
        };
        Some(TensorArg {
            kind: kind?,
            borrowed,
            rank: rank?,
            container: container?,
        })
    }

    fn output(&mut self, spec: &OutputSpec, key: &str) -> Option<Output> {
        match spec {
            OutputSpec::Single {
                ty: ArgSpec::Tensor(t),
                ..
            } => self.tensor(t, key).map(Output::Tensor),
            OutputSpec::Single {
                ty: ArgSpec::Plain(ty),
                ..
            } => self.plain(ty, &format!("{key}.type")).map(Output::Plain),
            // Parsing reads `device` from inputs only.
            OutputSpec::Single {
                ty: ArgSpec::Device(_),
                ..
            } => None,
            OutputSpec::Tuple { span, items } => {
                if items.is_empty() {
                    self.push(
                        Diagnostic::new(span.clone(), key, "empty output tuple")
                            .help("remove `output` for an op that returns nothing"),
                    );
                    return None;
                }
                let outs: Vec<Option<Output>> = items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.output(item, &format!("{key}[{i}]")))
                    .collect();
                outs.into_iter()
                    .collect::<Option<Vec<_>>>()
                    .map(Output::Tuple)
            }
        }
    }
}
