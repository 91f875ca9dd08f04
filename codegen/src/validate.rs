//! [`Manifest`] → [`Ir`]: every semantic rule, all problems collected before failing.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::diag::{Diagnostic, did_you_mean, line_col};
use crate::ir::{
    Arg, Backend, BackendName, Input, Ir, Op, Output, Policy, Rank, TensorArg, TensorKind,
};
use crate::model::{ArgSpec, Dims, Manifest, OpSpec, OutputSpec, Sp, TensorSpec};

/// Parameter names the generated routing code uses for itself.
pub const RESERVED_INPUT_NAMES: &[&str] = &["route", "kernel"];

const POLICIES: &[&str] = &["differentiable", "detach", "reject"];
const KINDS: &[&str] = &["float", "int", "bool"];
const DEFAULT_AUTODIFF_CFG: &str = "feature = \"autodiff\"";

/// Checks `manifest` and lowers it. `manifest_name` is how runtime messages name the file;
/// `source` is its text (for line numbers).
pub fn validate(
    manifest: &Manifest,
    manifest_name: &str,
    source: &str,
) -> Result<Ir, Vec<Diagnostic>> {
    let mut v = Validator { diags: Vec::new() };
    let routing = &manifest.routing;

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
        v.push(Diagnostic::new(a.span.clone(), "routing.autodiff_trait", "`autodiff_trait` must differ from `trait`")
                .help(format!("rename it, e.g. `autodiff_trait = \"{t}Autodiff\"`, or remove the key to use that default")));
    }
    let autodiff_cfg = match &routing.autodiff_cfg {
        Some(cfg) => v.cfg(cfg, "routing.autodiff_cfg"),
        None => syn::parse_str(DEFAULT_AUTODIFF_CFG).ok(),
    };

    let backends = routing
        .backends
        .as_ref()
        .map(|b| v.backends(b))
        .unwrap_or_default();

    let mut seen: BTreeMap<String, Range<usize>> = BTreeMap::new();
    let mut ops = Vec::new();
    for spec in &manifest.ops {
        if let Some(name) = &spec.name {
            if let Some(first) = seen.get(&name.value) {
                let (line, _) = line_col(source, first.start);
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
        if let Some(op) = v.op(spec, &backends, manifest_name, source) {
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
            Ok(Ir {
                manifest_name: manifest_name.to_owned(),
                trait_name,
                autodiff_trait,
                autodiff_cfg,
                backends,
                ops,
            })
        }
        // A missing value with no diagnostic here was already reported by parsing.
        _ => Err(v.diags),
    }
}

struct Validator {
    diags: Vec<Diagnostic>,
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
            || name.value == "self"
            || name.value == "Self"
            || name.value == "crate"
            || name.value == "super"
        {
            "is a Rust keyword"
        } else {
            "is not a Rust identifier"
        };
        self.push(Diagnostic::new(name.span.clone(), key, format!("`{}` {why}", name.value))
            .help(format!("use {example}: letters, digits and `_`, not starting with a digit, not a keyword")));
        None
    }

    fn cfg(&mut self, cfg: &Sp<String>, key: &str) -> Option<syn::Meta> {
        match syn::parse_str::<syn::Meta>(&cfg.value) {
            Ok(meta) => Some(meta),
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

    fn backends(&mut self, list: &Sp<Vec<crate::model::BackendSpec>>) -> Vec<Backend> {
        let names: Vec<&str> = BackendName::ALL.iter().map(|b| b.as_str()).collect();
        if list.value.is_empty() {
            self.push(
                Diagnostic::new(
                    list.span.clone(),
                    "routing.backends",
                    "empty backend list: no op could run anywhere",
                )
                .help("list at least one backend, e.g. `backends = [\"Flex\"]`"),
            );
        }
        let mut out: Vec<Backend> = Vec::new();
        for (i, spec) in list.value.iter().enumerate() {
            let key = format!("routing.backends[{i}]");
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
            let cfg = spec
                .cfg
                .as_ref()
                .and_then(|c| self.cfg(c, &format!("routing.backends[{i}].cfg")));
            if spec.cfg.is_some() && cfg.is_none() {
                continue;
            }
            out.push(Backend { name, cfg });
        }
        out
    }

    fn op(
        &mut self,
        spec: &OpSpec,
        backends: &[Backend],
        manifest_name: &str,
        source: &str,
    ) -> Option<Op> {
        let path = format!("op[{}]", spec.index);
        let name = spec.name.as_ref().and_then(|n| {
            self.ident(
                n,
                &format!("{path}.name"),
                "a snake_case name such as \"add_relu\"",
            )
        });
        let policy = match &spec.autodiff {
            None => Some(Policy::Reject),
            Some(p) => match p.value.as_str() {
                "differentiable" => Some(Policy::Differentiable),
                "detach" => Some(Policy::Detach),
                "reject" => Some(Policy::Reject),
                other => {
                    let help = match did_you_mean(other, POLICIES) {
                        Some(close) => format!(
                            "did you mean `{close}`? one of: differentiable, detach, reject"
                        ),
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
            },
        };

        let mut inputs = Vec::new();
        let mut ok = true;
        if let Some(list) = &spec.inputs {
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
                                format!(
                                    "input name `{n}` is reserved by the generated routing code"
                                ),
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
        } else {
            ok = false;
        }
        let output = match &spec.output {
            None => Some(Output::Unit),
            Some(out) => self.output(out, &format!("{path}.output")),
        };

        let (name, policy, output) = (name?, policy?, output?);
        if !ok {
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
            self.push(Diagnostic::new(p.span.clone(), format!("{path}.autodiff"), format!("op `{name}` is `{}` but has no float tensor input, so autodiff never reaches it", policy.as_str()))
                .help("remove `autodiff` (the default `reject` is exact here), or add a float tensor input"));
            return None;
        }
        // (An empty or missing backend list is reported on its own.)
        if !has_tensor && backends.len() > 1 {
            let span = spec
                .inputs
                .as_ref()
                .map_or(spec.span.clone(), |i| i.span.clone());
            self.push(Diagnostic::new(span, format!("{path}.inputs"), format!("op `{name}` has no tensor input, so nothing tells which of the {} backends to run it on", backends.len()))
                .help("add a tensor input to route by, or list exactly one backend in `routing.backends`"));
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
        let (line, _) = line_col(source, location_span.start);
        let doc = spec
            .doc
            .as_ref()
            .map(|d| d.value.lines().map(|l| l.trim_end().to_owned()).collect())
            .unwrap_or_default();
        Some(Op {
            name,
            doc,
            policy,
            location: format!("{manifest_name}:{line}"),
            inputs,
            output,
            backends: backends.to_vec(),
        })
    }

    fn arg(&mut self, spec: &ArgSpec, key: &str) -> Option<Arg> {
        match spec {
            ArgSpec::Tensor(t) => self.tensor(t, key).map(Arg::Tensor),
            ArgSpec::Plain(ty) => self.plain(ty, &format!("{key}.type")).map(Arg::Plain),
        }
    }

    fn plain(&mut self, ty: &Sp<String>, key: &str) -> Option<syn::Type> {
        match syn::parse_str::<syn::Type>(&ty.value) {
            Ok(t) => Some(t),
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
            other => {
                let help = match did_you_mean(other, KINDS) {
                    Some(close) => {
                        format!("did you mean `{close}`? tensor kinds: float, int, bool")
                    }
                    None => "use one of: float, int, bool".to_owned(),
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
        Some(TensorArg {
            kind: kind?,
            borrowed: t.borrowed.as_ref().is_some_and(|b| b.value),
            rank: rank?,
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
