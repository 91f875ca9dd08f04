//! No key without effect: for every manifest key (read from the parser's key sets, so a new key
//! cannot be left out) and each context it is tried in, adding it either changes the generated
//! code or is refused with an error at that key. A key that is accepted and changes nothing is
//! a key the generator silently ignores.
//!
//! Each context is a small manifest; each case adds one key (with a value other than its
//! default) to one place in it. Keys whose given value only restates what the generator infers
//! (`save` next to formulas, which must list exactly what they read) are listed in
//! [`ASSERTIONS`] with the reason, and must still be refused when they disagree.

use burn_route_codegen::keys::Table;
use burn_route_codegen::{Builder, Error};

/// A manifest in parts: `[routing]` lines, `[[type]]` entries, and one `[[op]]` table whose
/// `inputs`, `output` and `check` are inline tables edited by the cases.
#[derive(Clone)]
struct Context {
    name: &'static str,
    routing: Vec<String>,
    types: Vec<String>,
    op: Vec<(String, String)>,
    inputs: Vec<String>,
    output: Option<String>,
    check: Option<String>,
}

impl Context {
    fn new(name: &'static str, backends: &str, op: &[(&str, &str)], inputs: &[&str]) -> Self {
        Self {
            name,
            routing: vec!["trait = \"MyOps\"".into(), format!("backends = {backends}")],
            types: Vec::new(),
            op: op
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            inputs: inputs.iter().map(|s| (*s).to_owned()).collect(),
            output: Some("{ tensor = \"float\" }".into()),
            check: None,
        }
    }

    fn output(mut self, output: &str) -> Self {
        self.output = Some(output.to_owned());
        self
    }

    fn ty(mut self, ty: &str) -> Self {
        self.types.push(ty.to_owned());
        self
    }

    fn text(&self) -> String {
        let mut s = format!("[routing]\n{}\n", self.routing.join("\n"));
        for ty in &self.types {
            s.push_str(&format!("\n[[type]]\n{ty}\n"));
        }
        s.push_str("\n[[op]]\nname = \"f\"\n");
        s.push_str(&format!("inputs = [{}]\n", self.inputs.join(", ")));
        if let Some(o) = &self.output {
            s.push_str(&format!("output = {o}\n"));
        }
        for (k, v) in &self.op {
            s.push_str(&format!("{k} = {v}\n"));
        }
        if let Some(c) = &self.check {
            s.push_str(&format!("check = {c}\n"));
        }
        s
    }
}

/// Adds `key = value` inside the inline table `table` (`{ ... }`).
fn inline_add(table: &str, key: &str, value: &str) -> String {
    let body = table
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim();
    if body.is_empty() {
        format!("{{ {key} = {value} }}")
    } else {
        format!("{{ {body}, {key} = {value} }}")
    }
}

/// Where a case puts its key.
#[derive(Clone, Copy, Debug)]
enum Place {
    Routing,
    Op,
    /// In input `n`.
    Input(usize),
    Output,
    Check,
    /// In the first field of the first `[[type]]`.
    Field,
    /// In the first `[[type]]` entry.
    Type,
}

struct Case {
    place: Place,
    key: &'static str,
    values: &'static [&'static str],
}

const fn case(place: Place, key: &'static str, values: &'static [&'static str]) -> Case {
    Case { place, key, values }
}

/// Every key with values other than its default, in each place it may stand.
const CASES: &[Case] = &[
    case(Place::Routing, "autodiff_trait", &["\"MyAutodiffKernels\""]),
    case(
        Place::Routing,
        "autodiff_cfg",
        &["'feature = \"autodiff\"'"],
    ),
    case(
        Place::Routing,
        "backward_bounds",
        &["[\"crate::k::Extra\"]"],
    ),
    case(Place::Op, "doc", &["\"Does f.\""]),
    case(Place::Op, "deprecated", &["\"use `g` instead\""]),
    case(
        Place::Op,
        "autodiff",
        &["\"differentiable\"", "\"detach\"", "\"reject\""],
    ),
    case(
        Place::Op,
        "backends",
        &[
            "[\"Flex\"]",
            "[\"Flex\", { name = \"Cube\", cfg = 'feature = \"wgpu\"' }]",
        ],
    ),
    case(
        Place::Op,
        "composite",
        &["\"crate::c::f\"", "\"crate::c::g\""],
    ),
    case(
        Place::Op,
        "composition",
        &["\"crate::c::f\"", "\"crate::c::g\""],
    ),
    case(Place::Op, "async", &["true"]),
    case(Place::Op, "fusion", &["\"kernel\"", "\"composition\""]),
    case(Place::Op, "dtypes", &["[\"f32\"]", "[\"f32\", \"f16\"]"]),
    case(Place::Op, "other_dtypes", &["\"composition\""]),
    case(Place::Op, "remote", &["\"kernel\"", "\"composition\""]),
    case(
        Place::Op,
        "backward",
        &["{ x = \"grad\" }", "\"crate::b::f\"", "\"hand-written\""],
    ),
    case(Place::Op, "save", &["[\"x\"]", "[]"]),
    case(Place::Op, "checkpoint", &["\"recompute\""]),
    case(Place::Op, "no_gradient", &["[\"x\"]"]),
    case(Place::Op, "check", &["{ ranges = { x = [0.5, 1.5] } }"]),
    case(Place::Input(0), "borrowed", &["true"]),
    case(Place::Input(0), "dims", &["2", "\"E\""]),
    case(Place::Input(0), "container", &["\"option\"", "\"vec\""]),
    case(
        Place::Input(1),
        "shape",
        &[
            "{ same_as = \"x\" }",
            "{ broadcast_to = \"x\" }",
            "{ broadcast_with = \"x\" }",
            "{ leading_dims_of = \"x\" }",
            "{ last_dim_of = \"x\" }",
        ],
    ),
    case(Place::Output, "dims", &["2", "\"E\""]),
    case(Place::Output, "container", &["\"option\"", "\"vec\""]),
    case(Place::Output, "shape", &["\"x\"", "\"crate::m::shape\""]),
    case(Place::Output, "dtype", &["\"x\"", "\"default\""]),
    case(Place::Check, "shapes", &["{ x = [3, 4] }"]),
    case(Place::Check, "ranges", &["{ x = [0.5, 1.5] }"]),
    case(Place::Check, "args", &["{ s = \"2.0\" }"]),
    case(Place::Check, "gradients", &["false"]),
    case(Place::Check, "tolerance", &["0.05"]),
    case(Place::Check, "value_tolerance", &["1e-3"]),
    case(Place::Check, "composition", &["false"]),
    case(Place::Field, "doc", &["\"A field.\""]),
    case(Place::Field, "dims", &["2"]),
    case(Place::Field, "container", &["\"option\""]),
    case(Place::Field, "shape", &["\"x\""]),
    case(Place::Field, "dtype", &["\"x\""]),
    case(Place::Type, "doc", &["\"A type.\""]),
];

/// Keys whose value, when accepted, restates what the generator infers (so the code does not
/// change), with the reason. Each must still be refused when it disagrees (its cases include
/// such a value, checked by `assertion_keys_refuse_disagreement`).
const ASSERTIONS: &[(&str, &str)] = &[
    (
        "save",
        "next to formulas, `save` must list exactly what they read: a written-down check",
    ),
    (
        "remote",
        "`remote = \"kernel\"` where it is the default asserts the op runs as one operation on the server: refused with the reason when it cannot",
    ),
];

/// The keys these tests exercise through other means than [`CASES`]: names that every context
/// already has (a key cannot be added twice), tables that hold the others, and the keys of
/// shapes contracts, types and variants that structure a manifest rather than set an option.
const STRUCTURAL: &[&str] = &[
    "routing", "op", "type", "trait", "backends", "name", "cfg", "inputs", "output", "tensor",
    "type", "device", "fields", "variants",
];

fn contexts() -> Vec<Context> {
    let x = "{ name = \"x\", tensor = \"float\" }";
    let y = "{ name = \"y\", tensor = \"float\" }";
    let s = "{ name = \"s\", type = \"f32\" }";
    let all = "[\"Flex\", \"Cube\", \"Remote\"]";
    let meta = "{ tensor = \"float\", shape = \"x\", dtype = \"x\" }";
    vec![
        Context::new("reject op on Flex", "[\"Flex\"]", &[], &[x, y, s]),
        Context::new(
            "differentiable op with formulas",
            "[\"Flex\"]",
            &[("autodiff", "\"differentiable\""), ("backward", "{ x = \"grad * y\", y = \"grad * x\" }")],
            &[x, y, s],
        ),
        Context::new(
            "differentiable op with a backward function",
            "[\"Flex\"]",
            &[("autodiff", "\"differentiable\""), ("backward", "\"crate::b::f\"")],
            &[x, y, s],
        ),
        Context::new(
            "differentiable op with hand-written Autodiff kernels",
            "[\"Flex\"]",
            &[("autodiff", "\"differentiable\"")],
            &[x, y, s],
        ),
        Context::new(
            "detach op with a composition on every backend",
            all,
            &[("autodiff", "\"detach\""), ("composition", "\"crate::c::f\"")],
            &[x, y, s],
        )
        .output(meta),
        Context::new(
            "differentiable op with a composition on Flex and Cube",
            "[\"Flex\", \"Cube\"]",
            &[("autodiff", "\"differentiable\""), ("composition", "\"crate::c::f\"")],
            &[x, y, s],
        ),
        Context::new(
            "differentiable op with a composition and dtypes",
            "[\"Flex\"]",
            &[
                ("autodiff", "\"differentiable\""),
                ("composition", "\"crate::c::f\""),
                ("dtypes", "[\"f32\"]"),
            ],
            &[x, y, s],
        ),
        Context::new(
            "composite op",
            "[\"Flex\", \"Cube\"]",
            &[("autodiff", "\"differentiable\""), ("composite", "\"crate::c::f\"")],
            &[x, y, s],
        ),
        Context::new(
            "async op with a composition",
            "[\"Flex\", \"Cube\"]",
            &[("async", "true"), ("composition", "\"crate::c::f\"")],
            &[x, y, s],
        ),
        Context::new(
            "op with a declared-type input on every backend",
            all,
            &[("autodiff", "\"detach\""), ("composition", "\"crate::c::f\"")],
            &[x, "{ name = \"p\", type = \"Pair\" }", s],
        )
        .output(meta)
        .ty("name = \"Pair\"\nfields = [{ name = \"a\", tensor = \"float\" }, { name = \"b\", tensor = \"float\" }]"),
        Context::new(
            "op returning a declared struct on Flex and Cube",
            "[\"Flex\", \"Cube\"]",
            &[("autodiff", "\"differentiable\""), ("composition", "\"crate::c::f\"")],
            &[x, y, s],
        )
        .output("{ type = \"Stats\" }")
        .ty("name = \"Stats\"\nfields = [{ name = \"mean\", tensor = \"float\" }, { name = \"var\", tensor = \"float\" }]"),
    ]
}

/// The files, or each error's key and message.
fn render(source: &str) -> Result<Vec<String>, Vec<(String, String)>> {
    // With the op check: `[op.check]` keys change only its file.
    match Builder::new("ops.toml").op_check().render_str(source) {
        Ok(files) => Ok(files
            .into_iter()
            .map(|f| without_positions(&f.contents))
            .collect()),
        Err(Error::Manifest(report)) => Err(report
            .diagnostics
            .iter()
            .filter(|d| !d.warning)
            .map(|d| (d.key.clone(), d.message.clone()))
            .collect()),
        Err(other) => panic!("unexpected error: {other}"),
    }
}

/// `text` with every `ops.toml:LINE[:COL]` reference made `ops.toml:_`: a key added above an op
/// moves the op's lines, which must not count as an effect of the key.
fn without_positions(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("ops.toml:") {
        let (head, tail) = rest.split_at(at + "ops.toml:".len());
        out.push_str(head);
        out.push('_');
        rest = tail.trim_start_matches(|c: char| c.is_ascii_digit() || c == ':');
    }
    out.push_str(rest);
    out
}

/// `cx` with `key = value` added at `place`; `None` where the context already has the key there
/// or has no such place.
fn with(cx: &Context, place: Place, key: &str, value: &str) -> Option<(Context, String)> {
    let mut out = cx.clone();
    let at = match place {
        Place::Routing => {
            out.routing.push(format!("{key} = {value}"));
            format!("routing.{key}")
        }
        Place::Op => {
            // A key the context has already gets the other value instead.
            match out.op.iter_mut().find(|(k, _)| k == key) {
                Some((_, v)) if v == value => return None,
                Some((_, v)) => *v = value.to_owned(),
                None => out.op.push((key.to_owned(), value.to_owned())),
            }
            format!("op[0].{key}")
        }
        Place::Input(i) => {
            let input = out.inputs.get_mut(i)?;
            if input.contains(&format!("{key} =")) || !input.contains("tensor") {
                return None;
            }
            *input = inline_add(input, key, value);
            format!("op[0].inputs[{i}].{key}")
        }
        Place::Output => {
            let o = out.output.as_mut()?;
            if o.contains(&format!("{key} =")) || !o.contains("tensor") {
                return None;
            }
            *o = inline_add(o, key, value);
            format!("op[0].output.{key}")
        }
        Place::Check => {
            let c = out.check.get_or_insert_with(|| "{}".to_owned());
            *c = inline_add(c, key, value);
            format!("op[0].check.{key}")
        }
        Place::Field => {
            let ty = out.types.first_mut()?;
            let start = ty.find("{ name = ")?;
            let end = start + ty[start..].find('}')?;
            let field = &ty[start..=end];
            if field.contains(&format!("{key} =")) {
                return None;
            }
            let edited = inline_add(field, key, value);
            ty.replace_range(start..=end, &edited);
            "type[0].fields[0]".to_owned() + "." + key
        }
        Place::Type => {
            let ty = out.types.first_mut()?;
            ty.push_str(&format!("\n{key} = {value}"));
            format!("type[0].{key}")
        }
    };
    Some((out, at))
}

#[test]
fn every_key_is_tried() {
    let tried: Vec<&str> = CASES.iter().map(|c| c.key).collect();
    for &table in Table::ALL {
        for key in &table.names() {
            let shape_rule = table == Table::Shape
                && CASES
                    .iter()
                    .any(|c| c.key == "shape" && c.values.iter().any(|v| v.contains(key)));
            assert!(
                tried.contains(key) || STRUCTURAL.contains(key) || shape_rule,
                "manifest key `{key}` is in no case of tests/key_effects.rs: add one (or list it in STRUCTURAL with why)"
            );
        }
    }
}

#[test]
fn no_key_is_accepted_without_effect() {
    let mut silent = Vec::new();
    let mut unnamed = Vec::new();
    let mut table: Vec<String> = Vec::new();
    for cx in contexts() {
        let base = render(&cx.text()).unwrap_or_else(|e| {
            panic!("context `{}` must be valid: {e:?}\n{}", cx.name, cx.text())
        });
        for case in CASES {
            let mut outcomes = Vec::new();
            let (mut accepted, mut changed) = (false, false);
            for value in case.values {
                let Some((edited, at)) = with(&cx, case.place, case.key, value) else {
                    continue;
                };
                let outcome = match render(&edited.text()) {
                    // Refused at the key (or below it), or, for a key that conflicts with
                    // another, at the other with a message that names this key or its value.
                    Err(errors) => {
                        let named = errors.iter().any(|(k, m)| {
                            k == &at
                                || k.starts_with(&format!("{at}."))
                                || k.starts_with(&format!("{at}["))
                                || m.contains(case.key)
                                || m.contains(&format!("`{}`", value.trim_matches('"')))
                                || m.contains(&format!("{}`", value.trim_matches('"')))
                        });
                        if !named {
                            unnamed.push(format!(
                                "{} + {:?} `{}` = {value}: refused without naming the key: {errors:?}",
                                cx.name, case.place, case.key
                            ));
                        }
                        let keys: Vec<&str> = errors.iter().map(|(k, _)| k.as_str()).collect();
                        format!("refused at {}", keys.join(", "))
                    }
                    Ok(files) => {
                        accepted = true;
                        if files == base {
                            format!("`{at}` accepted, same code")
                        } else {
                            changed = true;
                            "changes the code".to_owned()
                        }
                    }
                };
                outcomes.push(format!("{value}: {outcome}"));
            }
            if outcomes.is_empty() {
                continue;
            }
            let assertion = ASSERTIONS.iter().any(|(k, _)| *k == case.key);
            if accepted && !changed && !assertion {
                silent.push(format!(
                    "{} + {:?} `{}`: {}",
                    cx.name,
                    case.place,
                    case.key,
                    outcomes.join("; ")
                ));
            }
            table.push(format!(
                "| {} | {:?} `{}` | {} |",
                cx.name,
                case.place,
                case.key,
                outcomes.join("; ")
            ));
        }
    }
    if std::env::var_os("KEY_EFFECTS_TABLE").is_some() {
        println!("{}", table.join("\n"));
    }
    assert!(
        silent.is_empty(),
        "keys accepted without effect (no accepted value changes the generated code):\n{}",
        silent.join("\n")
    );
    assert!(
        unnamed.is_empty(),
        "keys refused by errors that neither stand at them nor name them:\n{}",
        unnamed.join("\n")
    );
}

#[test]
fn assertion_keys_refuse_disagreement() {
    for (key, _) in ASSERTIONS {
        assert!(
            ["save", "remote"].contains(key),
            "a new assertion key needs a case here"
        );
    }
    // `remote = "kernel"` on an op that cannot run as one operation (a declared output).
    let cx = &contexts()[10];
    let (edited, _) =
        with(cx, Place::Op, "backends", "[\"Flex\", \"Remote\"]").expect("no `backends` yet");
    let (edited, _) = with(&edited, Place::Op, "remote", "\"kernel\"").expect("no `remote` yet");
    let keys =
        render(&edited.text()).expect_err("a declared output cannot be one Remote operation");
    assert!(keys.iter().any(|(k, _)| k == "op[0].remote"), "{keys:?}");
    let cx = &contexts()[1];
    let (edited, _) = with(cx, Place::Op, "save", "[\"x\"]").expect("no `save` yet");
    let keys = render(&edited.text()).expect_err("formulas read `x` and `y`: `save` must say so");
    assert!(keys.iter().any(|(k, _)| k == "op[0].save"), "{keys:?}");
}
