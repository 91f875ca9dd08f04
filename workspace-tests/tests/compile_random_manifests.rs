//! Random valid manifests compile against the real runtime: a scratch crate set up as the guide's
//! "Your own ops" says (a `build.rs` calling
//! `Builder::build_script` for each manifest, the `skeleton` kernel stubs beside them) must pass
//! `cargo clippy -D warnings` (or `cargo check` where clippy is not installed), with burn-route's
//! `autodiff` feature on and off.
//!
//! The manifests are adversarial where the generator could go wrong: op, input, trait and rank
//! names that collide with what generated code uses (`route`, `kernel`, `out_0`, `dispatch`,
//! Burn's own method names...), docs with comment markers, quotes, code fences, Unicode and
//! CRLF, plain types with paths, references, lifetimes and trait objects, and tensor-less ops
//! routed by their device to several backends; declared types (`[[type]]`: structs and enums,
//! nested, with optional, `vec` and plain fields named like generated locals) taken owned or
//! borrowed and returned alone or in tuples.
//!
//! The scratch crate lives in a temporary directory; its target directory is kept under
//! Cargo's per-test scratch space so later runs only recompile the generated code.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use burn_route_codegen::Builder;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};

/// How many valid manifests the scratch crate compiles.
const MANIFESTS: usize = 24;

fn tensor_arg() -> impl Strategy<Value = String> {
    (
        prop_oneof![
            4 => Just("float"),
            2 => Just("int"),
            2 => Just("bool"),
            1 => Just("quantized")
        ],
        any::<bool>(),
        prop_oneof![3 => Just(""), 1 => Just(", container = \"option\""), 1 => Just(", container = \"vec\"")],
        prop_oneof![3 => Just(String::new()), 1 => Just(", dims = 2".to_owned()), 1 => Just(", dims = 1".to_owned()), 2 => rank_name().prop_map(|r| format!(", dims = \"{r}\""))],
    )
        .prop_map(|(kind, borrowed, container, dims)| {
            let borrowed = if borrowed && !container.contains("vec") { ", borrowed = true" } else { "" };
            format!("tensor = \"{kind}\"{borrowed}{container}{dims}")
        })
}

/// A shape contract for an input (the input it names is picked among the op's others).
fn contract() -> impl Strategy<Value = Option<(&'static str, prop::sample::Index)>> {
    prop_oneof![
        3 => Just(None),
        2 => (
            prop::sample::select(&[
                "same_as",
                "broadcast_to",
                "broadcast_with",
                "last_dim_of",
                "leading_dims_of",
            ][..]),
            any::<prop::sample::Index>(),
        )
            .prop_map(Some),
    ]
}

/// Rank names: the default, others, and ones that look like generated generics.
fn rank_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("D".to_owned()),
        Just("E".to_owned()),
        Just("N".to_owned()),
        Just("RANK_2".to_owned()),
        "[A-Z][A-Z0-9]{0,3}".prop_map(String::from),
    ]
}

/// Plain types that may appear in an input.
const INPUT_TYPES: &[&str] = &[
    "f32",
    "usize",
    "Vec<usize>",
    "Option<u64>",
    "bool",
    "(f32, f32)",
    "&str",
    "&'static str",
    "&[usize]",
    "[f32; 3]",
    "std::ops::Range<usize>",
    "Box<dyn Fn(f32) -> f32>",
    "Option<Box<dyn Fn(&str) -> String + Send>>",
    "fn(f32) -> f32",
    "String",
    "Result<u8, String>",
    "core::num::NonZeroUsize",
    "&mut Vec<f32>",
];

/// Plain types that may appear in an output.
const OUTPUT_TYPES: &[&str] = &[
    "usize",
    "String",
    "Vec<f32>",
    "&'static str",
    "Option<(u8, bool)>",
    "std::collections::BTreeMap<String, usize>",
];

fn input() -> impl Strategy<Value = String> {
    prop_oneof![
        5 => tensor_arg(),
        3 => prop::sample::select(INPUT_TYPES).prop_map(|t| format!("type = \"{t}\"")),
        1 => Just("device = true".to_owned()),
        // A declared type, owned or borrowed: `@T<k>` is replaced by the manifest's `k`th
        // `[[type]]` (see `declared_types`).
        2 => (0..4u8, any::<bool>()).prop_map(|(k, borrowed)| {
            format!("type = \"{}@T{k}\"", if borrowed { "&" } else { "" })
        }),
    ]
}

/// Names of declared types: what the runtime and generated code name too (`Shape`, `Device`),
/// none of them a trait name `manifest()` draws.
const TYPE_NAMES: &[&str] = &["Detections", "Shape", "Device", "Operand"];

/// Field names that generated code uses for its own locals and paths.
const FIELD_NAMES: &[&str] = &[
    "route",
    "value",
    "names",
    "leaf",
    "self_",
    "kernel",
    "out_0",
    "device",
    "dispatch",
    "x",
    "clone",
    "into_primitive",
];

/// Plain field types: owned, `Clone` and `Debug` (the generated types derive both).
const FIELD_TYPES: &[&str] = &[
    "f32",
    "usize",
    "String",
    "Vec<usize>",
    "Option<u64>",
    "&'static str",
    "(f32, bool)",
    "[f32; 3]",
    "std::ops::Range<usize>",
    "core::num::NonZeroUsize",
];

/// One field's value (its name aside): a tensor, a plain type, or `@NEXT`, the next declared
/// type (so no type contains itself).
fn field() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => tensor_arg().prop_map(|t| t.replace(", borrowed = true", "")),
        2 => prop::sample::select(FIELD_TYPES).prop_map(|t| format!("type = \"{t}\"")),
        1 => Just("type = \"@NEXT\"".to_owned()),
    ]
}

/// Up to four `[[type]]` entries, valid by construction: each a struct or an enum (unit,
/// tuple and struct variants) whose first field is a tensor, nesting only later types.
fn declared_types() -> impl Strategy<Value = Vec<String>> {
    let fields = || {
        (
            tensor_arg(),
            prop::collection::vec(field(), 0..3),
            0..FIELD_NAMES.len(),
        )
    };
    let shape = prop_oneof![
        2 => fields().prop_map(|f| vec![(2u8, f)]),
        2 => prop::collection::vec((0..3u8, fields()), 2..4),
    ];
    prop::collection::vec((shape, doc()), 0..=3).prop_map(|types| {
        let n = types.len();
        types
            .iter()
            .enumerate()
            .map(|(i, (parts, doc))| {
                let member = |m: &str| {
                    let m = m.replace(", borrowed = true", "");
                    if i + 1 < n {
                        m.replace("@NEXT", TYPE_NAMES[i + 1])
                    } else {
                        m.replace(
                            "type = \"@NEXT\"",
                            "tensor = \"float\", container = \"option\"",
                        )
                    }
                };
                let list = |(first, rest, seed): &(String, Vec<String>, usize), named: bool| {
                    let items: Vec<String> = std::iter::once(first)
                        .chain(rest)
                        .enumerate()
                        .map(|(j, m)| {
                            if named {
                                let name = FIELD_NAMES[(seed + j) % FIELD_NAMES.len()];
                                format!("{{ name = \"{name}\", {} }}", member(m))
                            } else {
                                format!("{{ {} }}", member(m))
                            }
                        })
                        .collect();
                    format!("[{}]", items.join(", "))
                };
                let body = if parts.len() == 1 {
                    format!("fields = {}", list(&parts[0].1, true))
                } else {
                    let variants: Vec<String> = parts
                        .iter()
                        .enumerate()
                        .map(|(v, (form, f))| {
                            // The first variant holds a tensor; the others may be unit ones.
                            let form = if v == 0 { form.max(&1) } else { form };
                            let name = ["Dense", "Empty", "Some", "Tensor"][v % 4];
                            match form {
                                0 => format!("{{ name = \"{name}\" }}"),
                                1 => {
                                    format!("{{ name = \"{name}\", fields = {} }}", list(f, false))
                                }
                                _ => format!("{{ name = \"{name}\", fields = {} }}", list(f, true)),
                            }
                        })
                        .collect();
                    format!("variants = [\n    {},\n]", variants.join(",\n    "))
                };
                format!(
                    "[[type]]\nname = \"{}\"\ndoc = {doc}\n{body}\n",
                    TYPE_NAMES[i]
                )
            })
            .collect()
    })
}

/// `@T<k>` in an op's text as the manifest's declared type `k % n`, or a plain type when the
/// manifest declares none.
fn resolve_declared(text: &str, n: usize) -> String {
    let mut out = text.to_owned();
    for k in 0..4 {
        let placeholder = format!("@T{k}");
        out = if n == 0 {
            out.replace(&format!("\"&{placeholder}\""), "\"&str\"")
                .replace(&format!("\"{placeholder}\""), "\"usize\"")
        } else {
            out.replace(&placeholder, TYPE_NAMES[k % n])
        };
    }
    out
}

fn output() -> impl Strategy<Value = String> {
    let one = prop_oneof![
        4 => prop_oneof![Just("float"), Just("int"), Just("bool")]
            .prop_map(|k| format!("{{ tensor = \"{k}\" }}")),
        1 => Just("{ tensor = \"float\", container = \"vec\" }".to_owned()),
        1 => Just("{ tensor = \"int\", container = \"option\" }".to_owned()),
        1 => rank_name().prop_map(|r| format!("{{ tensor = \"float\", dims = \"{r}\" }}")),
        2 => prop::sample::select(OUTPUT_TYPES).prop_map(|t| format!("{{ type = \"{t}\" }}")),
        1 => (0..4u8).prop_map(|k| format!("{{ type = \"@T{k}\" }}")),
    ];
    prop_oneof![
        1 => Just(String::new()),
        4 => one.clone().prop_map(|o| format!("output = {o}\n")),
        1 => one.clone().prop_map(|o| format!("output = [{o}]\n")),
        2 => (one.clone(), one.clone(), one).prop_map(|(a, b, c)| format!("output = [{a}, [{b}, {c}]]\n")),
    ]
}

/// Names of methods of Burn's own backend traits, of std traits, and of what generated code
/// names for itself: the generated code must not call any of them ambiguously or shadow them.
const TRICKY_OP_NAMES: &[&str] = &[
    "gelu",
    "relu",
    "layer_norm",
    "float_add",
    "clone",
    "into",
    "from",
    "drop",
    "default",
    "route",
    "dispatch",
    "rt",
    "tensor",
    "ops",
    "kernel",
    "run",
    "planned",
    "new",
    "map",
    "route_op",
    "unwrap",
    "expect",
    "iter",
    "len",
];

/// Input names that generated code uses for its own locals, paths or closures.
const TRICKY_INPUT_NAMES: &[&str] = &[
    "route", "kernel", "run", "planned", "out_0", "out", "t", "i", "b", "f", "c", "d", "rt",
    "dispatch", "op", "route_op", "try_op", "self_", "some", "none", "ok", "err", "device",
    "tensor", "_x",
];

fn op_name(index: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        2 => Just(format!("op_{index}")),
        2 => prop::sample::select(TRICKY_OP_NAMES).prop_map(move |n| format!("{n}_{index}")),
        1 => prop::sample::select(TRICKY_OP_NAMES).prop_map(str::to_owned),
        1 => "[a-z][a-z0-9]{0,4}(_[a-z0-9]{1,3}){0,2}".prop_map(String::from),
    ]
}

fn input_name() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => prop::sample::select(TRICKY_INPUT_NAMES).prop_map(str::to_owned),
        1 => "[a-z][a-z0-9]{0,4}(_[a-z0-9]{1,3}){0,1}".prop_map(String::from),
    ]
}

/// Docs, as TOML string literals: comment markers, quotes, backslashes, closed code fences,
/// Unicode, tabs, CRLF, blank lines, very long lines, HTML and attributes.
fn doc() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(r#""Random op.""#.to_owned()),
        Just(r#""Ends a comment */ and starts one /* and a line // and ///""#.to_owned()),
        Just(r#""Quotes " and backslashes \ and `code` and 'single'""#.to_owned()),
        Just("\"\"\"\nExample:\n\n```text\nlet x = 1;\n```\n\nAfter the fence.\"\"\"".to_owned()),
        Just(r#""Unicode: é, ß, 漢字, 🙂, and a tab:	here""#.to_owned()),
        Just(
            r#""Windows
line
breaks""#
                .to_owned()
        ),
        Just(
            r#""Blank lines


  indented
#[cfg(not(any()))]
<b>html</b> &amp;""#
                .to_owned()
        ),
        "[a-z ]{90,140}".prop_map(|long| format!("\"{long}\"")),
        Just(r#""""#.to_owned()),
        Just(r#""   ""#.to_owned()),
    ]
}

fn op(index: usize) -> impl Strategy<Value = String> {
    (
        op_name(index),
        prop_oneof![Just("differentiable"), Just("detach"), Just("reject")],
        prop::collection::vec((input_name(), input(), contract()), 0..5),
        output(),
        // Only Cube behind its (off) cfg leaves the op no backend in this crate's build: every
        // routing arm is cfg'd out. (Valid where `routing.backends` does not list Cube.) A
        // Cube or Remote without a cfg follows burn-route's features; a device-only op may be
        // routed to several backends.
        prop_oneof![
            4 => Just(""),
            1 => Just("backends = [\"Flex\"]\n"),
            1 => Just("backends = [{ name = \"Cube\", cfg = 'feature = \"cube\"' }]\n"),
            1 => Just("backends = [\"Flex\", \"Remote\"]\n"),
            1 => Just("backends = [\"Remote\", { name = \"Cube\", cfg = 'all(unix, my_cfg, my_flag = \"on\")' }]\n"),
        ],
        doc(),
        // Output metadata (what the lazy `Fusion<B>` impl of an op routed to Cube needs), a
        // composition, both or neither: the functions they name are the skeleton's stubs.
        // A declared backward pass: none, `"hand-written"`, formulas or a function (the
        // skeleton's stub), each kept or recomputed. `async = true`, now and then.
        // How the op runs on Remote: the default, `remote = "composition"` or `"kernel"`
        // (refused, and filtered out, where the op cannot).
        ((any::<bool>(), any::<bool>()), (0..6u8, any::<bool>()), prop::bool::weighted(0.25), 0..4u8),
        // Deprecated now and then: the generated code calls its deprecated functions itself.
        prop::bool::weighted(0.2),
    )
        .prop_map(move |(name, policy, inputs, output, backends, doc, ((meta, composition), (backward, recompute), asynchronous, remote), deprecated)| {
            // An op with a declared type runs its composition on Cube (it has no lazy form),
            // so it takes no output metadata, and no declared backward pass.
            let declared = output.contains("@T") || inputs.iter().any(|(_, arg, _)| arg.contains("@T"));
            let (meta, composition) = if declared { (false, true) } else { (meta, composition) };
            // `backward = "hand-written"` (kind 2) fits any differentiable op: its
            // `Autodiff<B, C>` kernel is the skeleton's stub, not its composition.
            let hand_written = policy == "differentiable" && backward == 2;
            let backward = if declared { 0 } else { backward };
            let output = if meta { with_metadata(&name, &output) } else { output };
            // An async op: its future owns its arguments (no borrowed plain type), it takes no
            // `backward` (below), and it has a composition (what it runs on `Fusion<B>` when
            // routed to Cube): the skeleton's `async fn` stub.
            let owned = !inputs.iter().any(|(_, arg, _)| arg.starts_with("type") && arg.contains('&'));
            // (And `Send`: a trait object with `+ Send`, no `Rc`, no raw pointer.)
            let send = !inputs.iter().any(|(_, arg, _)| {
                arg.starts_with("type")
                    && ((arg.contains("dyn ") && !arg.contains("+ Send")) || arg.contains("Rc<") || arg.contains('*'))
            });
            let asynchronous = asynchronous && owned && send;
            let composition = composition || asynchronous;
            let composition = if composition {
                format!("composition = \"super::kernels::{name}_composition\"\n")
            } else {
                String::new()
            };
            let asynchronous_key = if asynchronous { "async = true\n" } else { "" };
            let remote_key = match remote {
                1 if !composition.is_empty() => "remote = \"composition\"\n",
                2 if meta => "remote = \"kernel\"\n",
                _ => "",
            };
            // How the op runs on `Fusion<B>`: its composition though it declares metadata, or
            // its kernel said explicitly (where the op is routed to Cube; refused, and filtered
            // out, where the routing does not list it).
            let cube = backends.is_empty() || backends.contains("Cube");
            let fusion_key = match remote {
                // (Only where the op also has a deferred kernel form to choose against.)
                3 if cube && !composition.is_empty() && meta && !asynchronous => {
                    "fusion = \"composition\"\n"
                }
                0 if cube && meta && !asynchronous => "fusion = \"kernel\"\n",
                _ => "",
            };
            // The float dtypes its kernels take, and what the others run: its composition, or a
            // routing error (on a synchronous op with kernels of its own and a float input).
            let float_input = inputs
                .iter()
                .any(|(_, arg, _)| arg.starts_with("tensor = \"float\""));
            let dtypes_key = match (backward, remote, composition.is_empty()) {
                _ if asynchronous || !float_input || backends.contains("composite") => "",
                (_, 1 | 3, false) => {
                    "dtypes = [\"f32\", \"bf16\"]\nother_dtypes = \"composition\"\n"
                }
                (1 | 4, _, _) => "dtypes = [\"f16\"]\n",
                _ => "",
            };
            let deprecated_key = if deprecated { "deprecated = \"use `other` instead\"\n" } else { "" };
            let mut text = format!(
                "[[op]]\nname = \"{name}\"\ndoc = {doc}\n{deprecated_key}autodiff = \"{policy}\"\n{backends}{asynchronous_key}{composition}{fusion_key}{remote_key}{dtypes_key}inputs = [\n"
            );
            // A contract relates a single or optional tensor to another one (validation refuses
            // the rest, and rank conflicts, which filters those manifests out).
            let relatable: Vec<&str> = inputs
                .iter()
                .filter(|(_, arg, _)| arg.starts_with("tensor") && !arg.contains("vec"))
                .map(|(name, _, _)| name.as_str())
                .collect();
            for (input, arg, contract) in &inputs {
                let others: Vec<&&str> = relatable.iter().filter(|n| **n != input).collect();
                let shape = match contract {
                    Some((rule, pick)) if arg.starts_with("tensor") && !others.is_empty() => {
                        format!(", shape = {{ {rule} = \"{}\" }}", pick.get(&others))
                    }
                    _ => String::new(),
                };
                let _ = writeln!(text, "    {{ name = \"{input}\", {arg}{shape} }},");
            }
            text.push_str("]\n");
            text.push_str(&output);
            // Only where a backward pass is allowed: a differentiable op with one single float
            // output and no `vec` float input (recomputed: no borrowed plain argument).
            let float_outputs = output.matches("tensor = \"float\"").count();
            let single_float_output = float_outputs == 1
                && !output.contains("tensor = \"float\", container");
            let no_float_vec = !inputs
                .iter()
                .any(|(_, arg, _)| arg.starts_with("tensor = \"float\"") && arg.contains("vec"));
            if hand_written {
                text.push_str("backward = \"hand-written\"\n");
            } else if policy == "differentiable" && single_float_output && no_float_vec && !asynchronous {
                // (A function receives every plain argument: owned ones only.)
                let backward = if backward == 5 && !owned { 0 } else { backward };
                text.push_str(&backward_keys(&name, &inputs, backward, recompute && owned));
            }
            text
        })
}

/// `backward` (and `checkpoint`) for an op with `inputs`: `kind` 0 to 2 none (2 is
/// `"hand-written"`, written by the caller), 3 and 4 formulas, 5 a function. Formulas read the single float inputs and the numeric plain ones.
fn backward_keys<C>(op: &str, inputs: &[(String, String, C)], kind: u8, recompute: bool) -> String {
    let float = |arg: &str| arg.starts_with("tensor = \"float\"") && !arg.contains("vec");
    let single: Vec<&str> = inputs
        .iter()
        .filter(|(_, arg, _)| float(arg) && !arg.contains("option"))
        .map(|(n, _, _)| n.as_str())
        .collect();
    let number = inputs
        .iter()
        .find(|(_, arg, _)| {
            ["\"f32\"", "\"usize\"", "\"i64\""]
                .iter()
                .any(|t| arg.ends_with(t))
        })
        .map(|(n, _, _)| n.as_str());
    let mut keys = match kind {
        3 | 4 => {
            let formulas: Vec<String> = inputs
                .iter()
                .filter(|(_, arg, _)| float(arg))
                .enumerate()
                .map(|(i, (input, _, _))| {
                    let other = single.get(i % single.len().max(1)).copied();
                    let formula = match (i % 4, other, number) {
                        (0, Some(x), _) => format!("grad * sigmoid({x})"),
                        (1, _, Some(n)) => format!("grad * {n} - grad / 2"),
                        (2, Some(x), _) => {
                            format!("where(gt({x}, 0), grad, -grad) * sum_dim(output, -1)")
                        }
                        (3, _, _) => "none".to_owned(),
                        // A number that reads a tensor (laid out as rustfmt lays it out).
                        (1, _, None) => {
                            "grad / dim_size(grad, -1) * (2 + dim_size(grad, 0))".to_owned()
                        }
                        _ => "grad".to_owned(),
                    };
                    format!("{input} = \"{formula}\"")
                })
                .collect();
            format!("backward = {{ {} }}\n", formulas.join(", "))
        }
        5 => format!("backward = \"super::kernels::{op}_backward\"\n"),
        _ => return String::new(),
    };
    if recompute {
        keys.push_str("checkpoint = \"recompute\"\n");
    }
    keys
}

/// `output` with a `shape` and `dtype` function for every tensor output (`op_shape_1`, ...).
fn with_metadata(op: &str, output: &str) -> String {
    let mut out = String::new();
    let mut rest = output;
    let mut count = 0;
    while let Some(start) = rest.find("{ tensor = ") {
        let end = start + rest[start..].find(" }").expect("a closed table");
        count += 1;
        let _ = write!(
            out,
            "{}, shape = \"super::kernels::{op}_shape_{count}\", dtype = \"super::kernels::{op}_dtype_{count}\"",
            &rest[..end]
        );
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn manifest() -> impl Strategy<Value = String> {
    (
        prop_oneof![
            Just("[\"Flex\"]"),
            Just("[\"Flex\", { name = \"Cube\", cfg = 'feature = \"cube\"' }]"),
            Just("[\"Flex\", \"Cube\", \"Remote\"]"),
        ],
        prop_oneof![
            Just("Ops"),
            Just("MyOps2"),
            Just("Backend"),
            Just("Dispatch"),
            Just("Tensor"),
            Just("Route"),
            Just("Lane"),
            Just("D"),
        ],
        (op(0), op(1), op(2), op(3)),
        1usize..=4,
        declared_types(),
    )
        .prop_map(|(backends, trait_name, (a, b, c, d), count, types)| {
            let ops = [a, b, c, d];
            let ops = resolve_declared(&ops[..count].join("\n"), types.len());
            format!(
                "[routing]\ntrait = \"{trait_name}\"\nbackends = {backends}\n\n{}{}{ops}",
                types.join("\n"),
                if types.is_empty() { "" } else { "\n" },
            )
        })
}

/// The composite functions the edge manifests name.
const COMPOSITES: &str = "
pub fn comp<B: ::burn_route_runtime::rt::Backend>(
    x: ::burn_route_runtime::rt::FloatTensor<B>,
) -> ::burn_route_runtime::rt::FloatTensor<B> {
    x
}
pub fn comp2<B: ::burn_route_runtime::rt::Backend>(
    a: ::burn_route_runtime::rt::FloatTensor<B>,
    b: ::burn_route_runtime::rt::FloatTensor<B>,
) -> ::burn_route_runtime::rt::FloatTensor<B> {
    drop(b);
    a
}
pub fn comp_dev<B: ::burn_route_runtime::rt::Backend>(
    n: usize,
    device: &::burn_route_runtime::rt::DeviceOf<B>,
) -> ::burn_route_runtime::rt::IntTensor<B> {
    todo!()
}
";

/// How many valid manifests are rendered and checked with rustfmt (cheap: no compilation).
const FORMATTED: usize = 300;

/// The first `count` random manifests (from a fixed seed) that validate.
fn valid_manifests(count: usize) -> Vec<String> {
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    );
    let strategy = manifest();
    let mut found = Vec::new();
    let mut tried = 0;
    while found.len() < count {
        tried += 1;
        assert!(
            tried < 10_000,
            "the generator rarely yields valid manifests"
        );
        let source = strategy
            .new_tree(&mut runner)
            .expect("a manifest")
            .current();
        if Builder::new("ops.toml").render_str(&source).is_ok() {
            found.push(source);
        }
    }
    found
}

fn write(path: &Path, contents: &str) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("create dir");
    std::fs::write(path, contents).expect("write");
}

/// The repository root: this crate's parent folder.
fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace-tests sits in the repository")
}

/// Every edge-case manifest (`tests/edge_manifests/TOPIC/CASE.toml`), as `TOPIC/CASE.toml` and
/// its text.
fn edge_manifests() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/edge_manifests");
    let mut out = Vec::new();
    for topic in std::fs::read_dir(&dir).expect("tests/edge_manifests") {
        let topic = topic.expect("entry").path();
        for case in std::fs::read_dir(&topic).expect("a topic folder") {
            let path = case.expect("entry").path();
            if path.extension().is_some_and(|e| e == "toml") {
                let name = path.strip_prefix(&dir).unwrap().display().to_string();
                out.push((name, std::fs::read_to_string(&path).expect("read")));
            }
        }
    }
    out
}

/// A scratch crate set up as the guide's "Your own ops" says: one
/// module per manifest, generated by `build.rs`, with `kernels[i]` as its kernels.
///
/// Each test names its crate differently: the crates share a target directory, and cargo
/// would otherwise take two crates of the same name in different temporary directories for
/// one (same build directory, and freshness from modification times of the same relative
/// paths), so a build script written before the other test's build would not run again.
fn scratch_crate(name: &str, manifests: &[String], kernels: &[String]) -> tempfile::TempDir {
    let root = workspace_root();
    let scratch = tempfile::tempdir().expect("temp dir");
    let dir = scratch.path();
    write(
        &dir.join("Cargo.toml"),
        &format!(
            r#"[package]
name = "{name}"
version = "0.0.0"
edition = "2024"
publish = false

[workspace]

[features]
default = ["autodiff"]
autodiff = ["burn-route-runtime/autodiff"]
# Named by the manifests' Cube backend cfg: the Cube routes and their `Fusion<B>` forms (lazy,
# eager, composition), checked in a run of their own with the wgpu runtime.
cube = ["burn-route-runtime/wgpu"]
# The Remote route (client calls, server registration), checked in a run of its own.
remote = ["burn-route-runtime/remote"]

[dependencies]
burn-route-runtime = {{ path = {runtime:?}, default-features = false }}

[build-dependencies]
burn-route-codegen = {{ path = {codegen:?} }}

# The repository's dev profile, so the Burn crates of a shared target directory are reused.
[profile.dev]
debug = "line-tables-only"

[profile.dev.package."*"]
debug = false
"#,
            runtime = root.join("runtime").display().to_string(),
            name = name,
            codegen = root.join("codegen").display().to_string(),
        ),
    );
    // The workspace's versions: nothing new to resolve.
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).expect("copy Cargo.lock");

    let mut lib = String::from("//! Generated by tests/compile_random_manifests.rs.\n");
    // Each module's op check (`Builder::op_check_crate`), compiled with the tests.
    let mut check = String::from("//! The op checks of the generated modules.\n");
    let crate_name = name.replace('-', "_");
    let mut build = String::from("fn main() {\n");
    for (i, (source, kernels)) in manifests.iter().zip(kernels).enumerate() {
        let module = format!("m{i}");
        // The op check too, where the manifest gives it every value it needs (a plain input
        // whose type has no `Default` needs `check.args`, which the generator asks for).
        let with_check = Builder::new("ops.toml")
            .op_check_crate(format!("::{crate_name}::{module}"))
            .render_str(source)
            .is_ok();
        write(&dir.join("src").join(&module).join("kernels.rs"), kernels);
        write(
            &dir.join("manifests").join(&module).join("ops.toml"),
            source,
        );
        let _ = writeln!(
            build,
            "    burn_route_codegen::Builder::new(\"manifests/{module}/ops.toml\")\n\
             \x20       .manifest_name(\"{module}/ops.toml\")\n\
             \x20       .out_dir(std::path::Path::new(&std::env::var(\"OUT_DIR\").unwrap()).join(\"{module}\"))\n\
             \x20       {check_call}.build_script();",
            check_call = if with_check {
                format!(".op_check_crate(\"::{crate_name}::{module}\")\n\x20       ")
            } else {
                String::new()
            },
        );
        if with_check {
            let _ = writeln!(
                check,
                "mod {module} {{ include!(concat!(env!(\"OUT_DIR\"), \"/{module}/routed_check.rs\")); }}"
            );
        }
        let _ = write!(
            lib,
            "\npub mod {module} {{\n\
             \x20   pub mod ops {{ include!(concat!(env!(\"OUT_DIR\"), \"/{module}/routed_ops.rs\")); }}\n\
             \x20   pub mod dispatch {{ include!(concat!(env!(\"OUT_DIR\"), \"/{module}/routed_dispatch.rs\")); }}\n\
             \x20   pub mod tensor {{ include!(concat!(env!(\"OUT_DIR\"), \"/{module}/routed_tensor.rs\")); }}\n\
             \x20   // The kernel stubs ignore their parameters (the generated code must not).\n\
             \x20   #[allow(unused_variables)]\n\
             \x20   pub mod kernels {{ include!(\"{module}/kernels.rs\"); }}\n\
             }}\n"
        );
    }
    build.push_str("}\n");
    write(&dir.join("build.rs"), &build);
    write(&dir.join("src/lib.rs"), &lib);
    write(&dir.join("tests/op_check.rs"), &check);
    scratch
}

/// `cargo clippy -D warnings` (or `cargo check` without clippy) on the scratch crate's `targets`
/// (`--lib`, or `--all-targets` for the op checks of `tests/op_check.rs` too), with
/// `features`, in a target directory kept between runs: `BURN_ROUTE_SCRATCH_TARGET_DIR` when
/// set (CI points it at the target directory of its lint stage, whose Burn crates are checked
/// already), else one under Cargo's per-test scratch space.
fn lint(dir: &Path, features: &[&str], targets: &str) -> std::process::Output {
    // The tests of this file share one target directory: one build at a time.
    static ONE_BUILD: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = ONE_BUILD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let has_clippy = Command::new(&cargo)
        .args(["clippy", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    let target = std::env::var_os("BURN_ROUTE_SCRATCH_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_TARGET_TMPDIR")).join("random-manifests-target"),
        std::path::PathBuf::from,
    );
    let mut command = Command::new(&cargo);
    if has_clippy {
        command.args(["clippy", "--quiet", targets]);
    } else {
        command.args(["check", "--quiet", targets]);
    }
    command.args(features);
    if has_clippy {
        command.args(["--", "-D", "warnings"]);
    }
    command
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("run cargo")
}

#[test]
fn random_valid_manifests_compile_with_the_runtime() {
    // The nested strategies need more stack than a test thread has in the dev profile.
    let all = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(|| valid_manifests(FORMATTED))
        .expect("spawn")
        .join()
        .expect("manifests");
    let stubs = |manifests: &[String]| -> Vec<String> {
        manifests
            .iter()
            .enumerate()
            .map(|(i, source)| {
                Builder::new("ops.toml")
                    .manifest_name(format!("m{i}/ops.toml"))
                    .skeleton_str(source)
                    .expect("validated above")
            })
            .collect()
    };
    // Then the edge cases found by trying to break the generator (`tests/edge_manifests`):
    // every one of them is accepted, so every one must compile too.
    let mut edge = edge_manifests();
    edge.sort();
    assert!(edge.len() >= 50, "edge manifests missing");
    let all: Vec<String> = all
        .into_iter()
        .chain(edge.iter().map(|(_, text)| text.clone()))
        .collect();
    // Together they use every key of the key table, so every key is compiled and linted in
    // some context: a key added to the table and forgotten here fails.
    let missing = burn_route_codegen::keys::unused_by(all.iter().map(String::as_str));
    assert!(
        missing.is_empty(),
        "keys no compiled manifest uses (add them to the generator or tests/edge_manifests): {missing:?}"
    );
    let formatted = tempfile::tempdir().expect("temp dir");
    rustfmt_clean(formatted.path(), &all, &stubs(&all));
    let manifests: Vec<String> = all[..MANIFESTS]
        .iter()
        .chain(&all[FORMATTED..])
        .cloned()
        .collect();
    // Composite edge cases name `super::kernels::comp`, `comp2` and `comp_dev`.
    let kernels: Vec<String> = stubs(&manifests)
        .into_iter()
        .zip(&manifests)
        .map(|(stubs, source)| {
            if source.contains("composite") {
                stubs + COMPOSITES
            } else {
                stubs
            }
        })
        .collect();
    let scratch = scratch_crate("random-manifests", &manifests, &kernels);
    for features in [
        &[][..],
        &["--no-default-features"][..],
        &["--features", "remote"][..],
        &["--features", "cube"][..],
    ] {
        // The op checks (`cfg!` inside, no `#[cfg]` items) compile the same with any
        // features: with the default ones only.
        let targets = if features.is_empty() {
            "--all-targets"
        } else {
            "--lib"
        };
        let output = lint(scratch.path(), features, targets);
        if output.status.success() {
            continue;
        }
        // Keep the crate for a look, and show which manifests were in it.
        let kept = scratch.keep();
        panic!(
            "the generated code of {} random manifests does not compile {features:?} (crate kept at {}):\n{}\n\nmanifests:\n{}",
            manifests.len(),
            kept.display(),
            String::from_utf8_lossy(&output.stderr),
            manifests.join("\n---\n")
        );
    }
}

/// The generated modules, op checks and stubs of every manifest pass `rustfmt --check --edition 2024`
/// (skipped, with the reason printed, where rustfmt is not installed).
fn rustfmt_clean(dir: &Path, manifests: &[String], kernels: &[String]) {
    let rustfmt = std::env::var("RUSTFMT").unwrap_or_else(|_| "rustfmt".to_owned());
    if Command::new(&rustfmt).arg("--version").output().is_err() {
        eprintln!("rustfmt check skipped: `{rustfmt}` is not installed");
        return;
    }
    let mut files = Vec::new();
    for (i, (source, stubs)) in manifests.iter().zip(kernels).enumerate() {
        // With the op check where the manifest gives it every value it needs.
        let rendered = Builder::new("ops.toml")
            .manifest_name(format!("m{i}/ops.toml"))
            .op_check_crate(format!("::scratch::m{i}"))
            .render_str(source)
            .or_else(|_| {
                Builder::new("ops.toml")
                    .manifest_name(format!("m{i}/ops.toml"))
                    .render_str(source)
            })
            .expect("validated above");
        for file in rendered {
            let path = dir.join("fmt").join(format!("m{i}_{}", file.name));
            write(&path, &file.contents);
            files.push(path);
        }
        let path = dir.join("fmt").join(format!("m{i}_kernels.rs"));
        write(&path, stubs);
        files.push(path);
    }
    let output = Command::new(&rustfmt)
        .args(["--check", "--edition", "2024"])
        .args(&files)
        .output()
        .expect("run rustfmt");
    assert!(
        output.status.success(),
        "rustfmt would change the generated code:\n{}{}\nmanifests:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        manifests.join("\n---\n")
    );
}

/// What CONTRIBUTING.md's "Adding an op to the shipped library" promises: after a new op is declared, the compiler names the
/// kernels still to write, for `Flex` and for `Autodiff<B, C>` (a compile-fail case).
#[test]
fn a_declared_op_without_kernels_is_named_by_the_compiler() {
    let before = "[routing]\ntrait = \"MyOps\"\nbackends = [\"Flex\"]\n\n\
        [[op]]\nname = \"double\"\nautodiff = \"differentiable\"\n\
        inputs = [{ name = \"x\", tensor = \"float\" }]\noutput = { tensor = \"float\" }\n";
    let after = format!(
        "{before}\n[[op]]\nname = \"square\"\nautodiff = \"differentiable\"\n\
         inputs = [{{ name = \"x\", tensor = \"float\" }}]\noutput = {{ tensor = \"float\" }}\n"
    );
    // The kernels written for the manifest before `square` was added.
    let kernels = Builder::new("ops.toml")
        .skeleton_str(before)
        .expect("valid manifest");
    let scratch = scratch_crate("missing-kernels", &[after], &[kernels]);
    let output = lint(scratch.path(), &[], "--lib");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "compiled without `square`'s kernels"
    );
    assert_eq!(
        stderr
            .matches("not all trait items implemented, missing: `square`")
            .count(),
        2,
        "one for `impl MyOps for rt::Flex`, one for the `Autodiff<B, C>` impl:\n{stderr}"
    );
    assert!(stderr.contains("impl MyOps for rt::Flex"), "{stderr}");
    assert!(
        stderr.contains(
            "impl<B: MyOps, C: rt::CheckpointStrategy> MyOpsAutodiff for rt::Autodiff<B, C>"
        ),
        "{stderr}"
    );
}
