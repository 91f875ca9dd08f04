//! Property tests over random manifests: the generator never panics; a manifest either fails
//! with diagnostics that point inside the text (with a line and column), or renders Rust that
//! `syn` parses; rendering is deterministic.

use std::fmt::Write as _;

use burn_route_codegen::{Builder, Error};
use proptest::prelude::*;

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => "[a-z][a-z0-9_]{0,6}".prop_map(String::from),
        1 => prop_oneof![Just("fn"), Just("Self"), Just("1x"), Just("a-b"), Just(""), Just("route"), Just("try_x")]
            .prop_map(String::from),
        // What Rust would not see as the same plain identifier, or would warn about.
        2 => prop::sample::select(&[
            " x", "x ", "a b", "r#fn", "gen", "try", "Add", "xY", "__x", "a__b", "café", "x/*c*/",
            "Some", "_", "\u{202e}x", "x\ty",
        ][..])
            .prop_map(String::from),
        // Any text at all.
        1 => any::<String>(),
    ]
}

fn kind() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        6 => prop_oneof![Just("float"), Just("int"), Just("bool"), Just("quantized")],
        1 => prop_oneof![Just("flaot"), Just("Float"), Just("")],
    ]
}

/// Shape contracts, good and bad: known and unknown rules, names of inputs that may or may not
/// exist (the op's inputs are drawn from `name()` too), wrong value types, several rules.
fn shape() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just(String::new()),
        2 => (
            prop_oneof![Just("same_as"), Just("broadcast_to"), Just("broadcast_with"), Just("last_dim_of"), Just("leading_dims_of"), Just("same")],
            name(),
        )
            .prop_map(|(rule, of)| format!(", shape = {{ {rule} = \"{of}\" }}")),
        1 => prop_oneof![
            Just(", shape = {}".to_owned()),
            Just(", shape = \"x\"".to_owned()),
            Just(", shape = { same_as = 1 }".to_owned()),
            Just(", shape = { same_as = \"x\", broadcast_to = \"y\" }".to_owned()),
        ],
    ]
}

fn arg() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (kind(), any::<bool>(), prop_oneof![Just(""), Just(", container = \"option\""), Just(", container = \"vec\""), Just(", container = \"set\"")], prop_oneof![Just(""), Just(", dims = 2"), Just(", dims = 1"), Just(", dims = \"E\""), Just(", dims = 0")], shape())
            .prop_map(|(k, borrowed, container, dims, shape)| format!("tensor = \"{k}\"{}{container}{dims}{shape}", if borrowed { ", borrowed = true" } else { "" })),
        2 => prop_oneof![Just("f32"), Just("usize"), Just("Vec<usize>"), Just("Option<u64>"), Just("Vec<"), Just("bool")]
            .prop_map(|t| format!("type = \"{t}\"")),
        1 => Just("device = true".to_owned()),
        1 => Just("tensor = \"float\", type = \"f32\"".to_owned()),
        // Declared types (`type_name()` draws the names the `[[type]]` entries use), owned,
        // borrowed, inside another type, or misspelled.
        2 => (type_name(), prop_oneof![Just(""), Just("&"), Just("& ")])
            .prop_map(|(t, r)| format!("type = \"{r}{t}\"")),
        1 => prop_oneof![Just("Option<Pair>"), Just("Piar"), Just("&Vec<Choice>"), Just("&&Pair")]
            .prop_map(|t| format!("type = \"{t}\"")),
    ]
}

/// Declared type names: a few shared ones (so ops and fields find them), and bad ones.
fn type_name() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::sample::select(&["Pair", "Choice", "Inner", "Tensor", "Shape"][..]).prop_map(String::from),
        1 => prop::sample::select(&["pair", "Option", "B", "Pair_2", "__T", "PairPrimitive", "Ops", ""][..])
            .prop_map(String::from),
        1 => "[A-Z][A-Za-z0-9]{0,5}".prop_map(String::from),
    ]
}

/// A field of a declared type (its `name` key aside): tensors, plain types and declared types,
/// good and bad.
fn field() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (kind(), prop_oneof![Just(""), Just(", container = \"option\""), Just(", container = \"vec\""), Just(", container = \"set\"")], prop_oneof![Just(""), Just(", dims = 2"), Just(", dims = \"E\""), Just(", dims = 0")])
            .prop_map(|(k, c, d)| format!("tensor = \"{k}\"{c}{d}")),
        2 => prop_oneof![Just("f32"), Just("String"), Just("Vec<usize>"), Just("&str"), Just("&'static str"), Just("dyn Fn()"), Just("Vec<")]
            .prop_map(|t| format!("type = \"{t}\"")),
        2 => (type_name(), prop_oneof![4 => Just(""), 1 => Just("&")]).prop_map(|(t, r)| format!("type = \"{r}{t}\"")),
        1 => prop_oneof![Just("Option<Pair>"), Just("Piar")].prop_map(|t| format!("type = \"{t}\"")),
        1 => prop_oneof![
            Just("tensor = \"float\", borrowed = true".to_owned()),
            Just("device = true".to_owned()),
            Just("tensor = \"float\", type = \"f32\"".to_owned()),
            Just("tensor = \"float\", shape = \"x\"".to_owned()),
            Just("tensor = \"float\", shape = \"a\", dtype = \"a\"".to_owned()),
            Just("tensor = \"float\", dtype = \"a\"".to_owned()),
            Just("tensor = \"float\", doc = \"The scores.\"".to_owned()),
            Just("type = \"f32\", doc = \"A\n\n```\"".to_owned()),
            Just(String::new()),
        ],
    ]
}

/// `fields = [...]`: all named, none named, or a mix; empty sometimes; duplicate names.
fn fields(named: bool) -> impl Strategy<Value = String> {
    prop::collection::vec(
        (
            prop_oneof![8 => Just(named), 1 => Just(!named)],
            prop_oneof![Just("a"), Just("b"), Just("x"), Just("Bad"), Just("__x")],
            field(),
        ),
        0..4,
    )
    .prop_map(|items| {
        let items: Vec<String> = items
            .into_iter()
            .map(|(named, name, field)| {
                let sep = if field.is_empty() { "" } else { ", " };
                if named {
                    format!("{{ name = \"{name}\"{sep}{field} }}")
                } else {
                    format!("{{ {field} }}")
                }
            })
            .collect();
        format!("[{}]", items.join(", "))
    })
}

/// A `[[type]]` entry: a struct, an enum (unit, tuple and struct variants), both or neither.
fn declared() -> impl Strategy<Value = String> {
    let variant = (
        prop_oneof![Just("Dense"), Just("Empty"), Just("Masked"), Just("bad_variant")],
        prop_oneof![2 => Just(None), 2 => fields(false).prop_map(Some), 2 => fields(true).prop_map(Some)],
        prop_oneof![4 => Just(""), 1 => Just(", doc = \"A dense tensor.\""), 1 => Just(", doc = 1")],
    )
        .prop_map(|(name, fields, doc)| match fields {
            None => format!("{{ name = \"{name}\"{doc} }}"),
            Some(f) => format!("{{ name = \"{name}\", fields = {f}{doc} }}"),
        });
    (
        type_name(),
        prop_oneof![
            4 => fields(true).prop_map(|f| format!("fields = {f}\n")),
            4 => prop::collection::vec(variant, 0..4).prop_map(|v| format!("variants = [{}]\n", v.join(", "))),
            1 => Just("fields = [{ name = \"x\", tensor = \"float\" }]\nvariants = [{ name = \"A\" }, { name = \"B\" }]\n".to_owned()),
            1 => Just("doc = \"Nothing.\"\n".to_owned()),
            1 => Just("fields = 3\nextra = 1\n".to_owned()),
        ],
    )
        .prop_map(|(name, body)| format!("[[type]]\nname = \"{name}\"\n{body}"))
}

fn output() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        kind().prop_map(|k| format!("output = {{ tensor = \"{k}\" }}\n")),
        prop_oneof![Just("2"), Just("\"D\""), Just("\"E\""), Just("0"), Just("\"d\"")]
            .prop_map(|d| format!("output = {{ tensor = \"float\", dims = {d} }}\n")),
        Just("output = { type = \"usize\" }\n".to_owned()),
        Just("output = { tensor = \"float\", dtype = \"a\" }\n".to_owned()),
        Just("output = { tensor = \"float\", shape = \"a\", dtype = \"a\" }\n".to_owned()),
        Just("output = { type = \"Pair\" }\n".to_owned()),
        (kind(), kind()).prop_map(|(a, b)| format!("output = [{{ tensor = \"{a}\" }}, [{{ tensor = \"{b}\", container = \"option\" }}, {{ type = \"u8\" }}]]\n")),
        Just("output = []\n".to_owned()),
        Just("output = 3\n".to_owned()),
    ]
}

/// Backward passes, good and bad: formulas (names, functions, syntax), function paths,
/// `"hand-written"`, `save`, `checkpoint`, `no_gradient` and `[op.check]` keys.
fn backward() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("backward = { a = \"grad * b\", b = \"none\" }\n"),
        Just("backward = { a = \"grad * exp(a) - sum_dim(output, -1) / 2\" }\n"),
        Just("backward = { a = \"grad *\", zz = \"(\" }\n"),
        Just("backward = { a = \"powf(grad, a, a) + where(grad) + nope(a) + 1e999\" }\n"),
        Just("backward = { a = 3 }\n"),
        Just("backward = \"crate::grads::f\"\nsave = [\"a\", \"output\", \"output.1\", \"a\"]\n"),
        Just("backward = \"crate::Grads::f\"\ncheckpoint = \"recompute\"\n"),
        Just("backward = \"f\"\ncheckpoint = \"sometimes\"\n"),
        Just("save = [\"a\"]\ncheckpoint = 3\n"),
        // A hand-written `Autodiff<B, C>` kernel: alone, with the keys it refuses, misspelt,
        // and on an async op (which allows it).
        Just("backward = \"hand-written\"\n"),
        Just("backward = \"hand-written\"\nsave = [\"a\"]\nno_gradient = [\"a\"]\n"),
        Just("backward = \"handwritten\"\n"),
        Just("async = true\nbackward = \"hand-written\"\n"),
        Just("no_gradient = [\"a\"]\n"),
        // Fields of declared struct inputs by path: keys quoted and dotted, reads of floats,
        // numbers, optional and missing fields, a trailing dot, `save` of fields and structs.
        Just(
            "backward = { \"a.x\" = \"grad * a.y\", a.y = \"grad * a.x.z + a.\", \"b.0\" = \"none\", a = \"grad\" }\n"
        ),
        Just("backward = { \"a.f0\" = \"grad * a.f1 * output.f0\", b = \"grad * a\" }\n"),
        Just("backward = \"crate::g::f\"\nsave = [\"a.x\", \"a\", \"a.Dense.0\", \"b.c.d\"]\n"),
        Just("backward = { \"a.f0\" = \"grad\" }\ncheckpoint = \"recompute\"\n"),
        // Declared struct outputs by path: linear and not, unknown fields, a bare `grad`, and
        // `dim_size` of an input, of a gradient and with a dimension that is not a literal.
        Just(
            "backward = { a = \"(grad.f0 + grad.f1 * a) / dim_size(a, -1)\", b = \"grad.f0 * grad.f1 + output.zz\" }\n"
        ),
        Just(
            "backward = { a = \"grad * dim_size(grad.f0, 0) + dim_size(a, b) + dim_size(2, -1)\" }\n"
        ),
        Just(
            "check = { shapes = { a = [2, 3], b = [[1], [2]] }, ranges = { a = [1, 0] }, args = { a = \"1 +\" }, tolerance = 0, gradients = 1 }\n"
        ),
        // Literals of another type than the plain input's (refused at the manifest's line).
        Just("check = { args = { a = \"1.5\", b = \"'c'\" } }\n"),
        Just("check = { value_tolerance = 0 }\n"),
        Just("check = { value_tolerance = \"1e-3\" }\n"),
        Just("check = { value_tolerance = 1e-3 }\n"),
        Just("check = { shapes = { a = \"x\" }, ranges = 2, composition = true }\n"),
        // Member paths into declared inputs, good and bad.
        Just(
            "check = { shapes = { \"a.x\" = [2, 3], \"a.Dense.0\" = [[1]], \"a.\" = [1] }, ranges = { \"a.p.q\" = [0, 1] }, args = { \"a.0\" = \"1\", \"b..c\" = \"2\" } }\n"
        ),
        // Async ops: alone, with the keys they refuse, and not a boolean.
        Just("async = true\n"),
        Just("async = true\ncomposition = \"crate::k::f\"\n"),
        Just("async = true\nbackward = { a = \"grad\" }\n"),
        Just("async = true\ncomposite = \"crate::k\"\n"),
        Just("async = \"yes\"\n"),
        Just("remote = \"kernl\"\n"),
        Just("remote = \"composition\"\n"),
        Just("remote = \"kernel\"\n"),
        Just("remote = 1\n"),
        Just("fusion = \"compositon\"\n"),
        Just("fusion = \"composition\"\n"),
        Just("fusion = \"kernel\"\n"),
        Just("fusion = 1\n"),
        Just("dtypes = [\"f32\", \"bf16\"]\nother_dtypes = \"composition\"\n"),
        Just("dtypes = [\"f16\"]\n"),
        Just("dtypes = [\"f32\", \"f23\", \"f32\"]\nother_dtypes = \"error\"\n"),
        Just("dtypes = []\n"),
        Just("dtypes = \"f32\"\nother_dtypes = \"compose\"\n"),
        Just("other_dtypes = \"composition\"\n"),
        // Check keys the op's declaration decides: bounds the check cannot draw from, shapes
        // that break a contract or a rank generic, keys with nothing to act on.
        Just(
            "check = { ranges = { a = [0, inf], b = [nan, 1] }, gradients = false, tolerance = 0.1 }\n"
        ),
        Just("check = { ranges = { a = [1e39, 2e39], b = [0, 3e9] }, composition = false }\n"),
        Just("check = { shapes = { a = [2, 3], b = [2, 3, 4] } }\n"),
        Just("dtypes = [\"f32\"]\nfusion = \"composition\"\ncomposition = \"crate::k::f\"\n"),
    ]
}

fn op() -> impl Strategy<Value = String> {
    (
        name(),
        prop_oneof![Just(""), Just("autodiff = \"differentiable\"\n"), Just("autodiff = \"detach\"\n"), Just("autodiff = \"reject\"\n"), Just("autodiff = \"maybe\"\n")],
        prop::collection::vec((name(), arg()), 0..4),
        output(),
        prop_oneof![6 => Just(""), 1 => Just("backends = [\"Flex\"]\n"), 1 => Just("backends = [\"Cube\", \"Flx\"]\n"), 1 => Just("composite = \"crate::k\"\n"), 1 => Just("composite = \"k::<u8>\"\n"), 1 => Just("extra = 1\n"), 2 => backward()],
        // Docs that must be refused with a position (bidi control, bare CR, control character,
        // open fence) or accepted (CRLF, tab, closed fence).
        prop_oneof![
            4 => Just(""),
            1 => Just("doc = \"a\\u202Eb\"\n"),
            1 => Just("doc = \"a\\rb\"\n"),
            1 => Just("doc = \"a\\u0000b\"\n"),
            1 => Just("doc = \"\"\"\n```\nx\n\"\"\"\n"),
            1 => Just("doc = \"a\\r\\nb\\tc\\n```\\nx\\n```\"\n"),
            // Deprecation notes: good, empty, on two lines, with a control character, not text.
            1 => Just("deprecated = \"use `fused` instead, \\\"soon\\\" \\\\ é\"\n"),
            1 => Just("deprecated = \" \\t \"\n"),
            1 => Just("deprecated = \"a\\nb\"\n"),
            1 => Just("deprecated = \"a\\u202Eb\"\n"),
            1 => Just("deprecated = 3\n"),
        ],
    )
        .prop_map(|(name, policy, inputs, output, extra, doc)| {
            let inputs: Vec<String> = inputs.into_iter().map(|(n, a)| format!("    {{ name = \"{n}\", {a} }},\n")).collect();
            format!("[[op]]\nname = \"{name}\"\n{doc}{policy}inputs = [\n{}]\n{output}{extra}", inputs.concat())
        })
}

/// The optional keys of `[routing]`, good and bad.
fn routing_extras() -> impl Strategy<Value = String> {
    (
        prop_oneof![3 => Just(""), 1 => Just("autodiff_trait = \"OpsGrad\"\n"), 1 => Just("autodiff_trait = \"Ops\"\n"), 1 => Just("autodiff_trait = \"bad name\"\n")],
        prop_oneof![3 => Just(""), 1 => Just("autodiff_cfg = 'feature = \"autodiff\"'\n"), 1 => Just("autodiff_cfg = \"all(\"\n"), 1 => Just("autodiff_cfg = 'target_os = \"nope\"'\n")],
        prop_oneof![3 => Just(""), 1 => Just("backward_bounds = [\"crate::kernels::MyBackward\"]\n"), 1 => Just("backward_bounds = [\"NoPath\"]\n"), 1 => Just("backward_bounds = [1]\n")],
    )
        .prop_map(|(a, b, c)| format!("{a}{b}{c}"))
}

fn manifest() -> impl Strategy<Value = String> {
    (
        prop_oneof![
            Just("[\"Flex\"]"),
            Just("[\"Flex\", { name = \"Cube\", cfg = 'feature = \"cube\"' }]"),
            Just("[]"),
            Just("[\"Flex\", \"Flex\"]")
        ],
        prop::collection::vec(op(), 0..5),
        prop::collection::vec(declared(), 0..4),
        routing_extras(),
    )
        .prop_map(|(backends, ops, types, extras)| {
            format!(
                "[routing]\ntrait = \"Ops\"\nbackends = {backends}\n{extras}\n{}\n{}",
                types.join("\n"),
                ops.join("\n")
            )
        })
}

/// A tensor field or input that validates: any kind, container and rank.
fn valid_tensor() -> impl Strategy<Value = String> {
    (
        prop_oneof![Just("float"), Just("int"), Just("bool"), Just("quantized")],
        prop_oneof![2 => Just(""), 1 => Just(", container = \"option\""), 1 => Just(", container = \"vec\"")],
        prop_oneof![2 => Just(""), 1 => Just(", dims = 2"), 1 => Just(", dims = \"E\"")],
    )
        .prop_map(|(k, c, d)| format!("tensor = \"{k}\"{c}{d}"))
}

/// Manifests with declared types that all validate: types `T0`..`Tn` (a struct or an enum with
/// unit, tuple and struct variants), each holding a tensor first and nesting only later types
/// (no cycles), used by ops as owned or borrowed inputs and as outputs, alone or in tuples.
fn valid_declared_manifest() -> impl Strategy<Value = String> {
    let member = prop_oneof![
        3 => valid_tensor(),
        2 => prop::sample::select(&["f32", "usize", "String", "Vec<usize>", "Option<u64>", "&'static str", "(f32, bool)"][..])
            .prop_map(|t| format!("type = \"{t}\"")),
        2 => Just("type = \"@NEXT\"".to_owned()),
    ];
    let members = prop::collection::vec(member, 0..4);
    let body = prop_oneof![
        (valid_tensor(), members.clone())
            .prop_map(|(first, rest)| (true, vec![(2u8, first, rest)])),
        (
            valid_tensor(),
            members.clone(),
            prop::collection::vec((0u8..3, valid_tensor(), members), 1..3),
        )
            .prop_map(|(first, rest, mut more)| {
                more.insert(0, (1, first, rest));
                (false, more)
            }),
    ];
    let use_ = (0usize..4, any::<bool>());
    let op = (
        prop::collection::vec(use_.clone(), 1..3),
        prop_oneof![
            Just(0u8), // a tensor
            Just(1),   // a declared type
            Just(2),   // a tuple of both
            Just(3),   // nothing
        ],
        0usize..4,
        any::<bool>(),
    );
    (
        prop::collection::vec(body, 1..5),
        prop::collection::vec(op, 1..4),
        prop_oneof![Just("[\"Flex\"]"), Just("[\"Flex\", \"Remote\"]"), Just("[\"Flex\", \"Cube\"]")],
    )
        .prop_map(|(types, ops, backends)| {
            let n = types.len();
            let mut text = format!("[routing]\ntrait = \"Ops\"\nbackends = {backends}\n");
            for (i, (is_struct, parts)) in types.iter().enumerate() {
                // `@NEXT` nests the next type, or a tensor for the last one.
                let member = |m: &String| {
                    if m.contains("@NEXT") {
                        if i + 1 < n {
                            m.replace("@NEXT", &format!("T{}", i + 1))
                        } else {
                            "tensor = \"int\"".to_owned()
                        }
                    } else {
                        m.clone()
                    }
                };
                let _ = write!(text, "\n[[type]]\nname = \"T{i}\"\n");
                if *is_struct {
                    let (_, first, rest) = &parts[0];
                    let items: Vec<String> = std::iter::once(first)
                        .chain(rest)
                        .enumerate()
                        .map(|(j, m)| format!("{{ name = \"f{j}\", {} }}", member(m)))
                        .collect();
                    let _ = writeln!(text, "fields = [{}]", items.join(", "));
                } else {
                    let variants: Vec<String> = parts
                        .iter()
                        .enumerate()
                        .map(|(v, (form, first, rest))| match form {
                            0 => format!("{{ name = \"V{v}\" }}"),
                            1 => {
                                let items: Vec<String> = std::iter::once(first)
                                    .chain(rest)
                                    .map(|m| format!("{{ {} }}", member(m)))
                                    .collect();
                                format!("{{ name = \"V{v}\", fields = [{}] }}", items.join(", "))
                            }
                            _ => {
                                let items: Vec<String> = std::iter::once(first)
                                    .chain(rest)
                                    .enumerate()
                                    .map(|(j, m)| format!("{{ name = \"g{j}\", {} }}", member(m)))
                                    .collect();
                                format!("{{ name = \"V{v}\", fields = [{}] }}", items.join(", "))
                            }
                        })
                        .collect();
                    let _ = writeln!(text, "variants = [{}]", variants.join(", "));
                }
            }
            for (k, (uses, output, out_type, extra_tensor)) in ops.iter().enumerate() {
                let mut inputs: Vec<String> = uses
                    .iter()
                    .enumerate()
                    .map(|(j, (t, borrowed))| {
                        let amp = if *borrowed { "&" } else { "" };
                        format!("{{ name = \"p{j}\", type = \"{amp}T{}\" }}", t % n)
                    })
                    .collect();
                if *extra_tensor {
                    inputs.push("{ name = \"x\", tensor = \"float\" }".to_owned());
                }
                let ty = format!("T{}", out_type % n);
                let output = match output {
                    0 => "output = { tensor = \"float\" }\n".to_owned(),
                    1 => format!("output = {{ type = \"{ty}\" }}\n"),
                    2 => format!("output = [{{ tensor = \"int\" }}, [{{ type = \"{ty}\" }}, {{ type = \"usize\" }}]]\n"),
                    _ => String::new(),
                };
                // Routed to Cube or Remote, an op with declared types runs its composition.
                let composition = if backends.contains("Cube") || backends.contains("Remote") {
                    format!("composition = \"crate::compositions::op_{k}\"\n")
                } else {
                    String::new()
                };
                let _ = write!(
                    text,
                    "\n[[op]]\nname = \"op_{k}\"\n{composition}inputs = [{}]\n{output}",
                    inputs.join(", ")
                );
            }
            text
        })
}

/// Manifests whose backward passes reach into a declared struct input, all valid: a struct
/// `S` of float (one or optional), int and plain fields and a nested struct `N`; an op over
/// `x` and `s` with a formula per float field (or `"none"`), each reading floats and numbers
/// the struct holds, or a backward function getting them all.
fn valid_member_backward_manifest() -> impl Strategy<Value = String> {
    let field = prop_oneof![
        3 => Just("tensor = \"float\""),
        1 => Just("tensor = \"float\", container = \"option\""),
        1 => Just("tensor = \"int\""),
        1 => Just("type = \"f32\""),
        1 => Just("type = \"usize\""),
        1 => Just("type = \"String\""),
    ];
    (
        prop::collection::vec(field, 0..4),
        any::<bool>(),
        prop::collection::vec(0usize..8, 4),
        any::<bool>(),
        prop_oneof![Just("[\"Flex\"]"), Just("[\"Flex\", \"Remote\"]")],
    )
        .prop_map(|(fields, function, picks, quoted, backends)| {
            let mut text = format!("[routing]\ntrait = \"Ops\"\nbackends = {backends}\n");
            text.push_str("\n[[type]]\nname = \"N\"\nfields = [{ name = \"b\", tensor = \"float\" }, { name = \"eps\", type = \"f32\" }]\n");
            let mut items: Vec<String> = fields
                .iter()
                .enumerate()
                .map(|(j, f)| format!("{{ name = \"f{j}\", {f} }}"))
                .collect();
            items.push("{ name = \"n\", type = \"N\" }".to_owned());
            let _ = writeln!(text, "\n[[type]]\nname = \"S\"\nfields = [{}]", items.join(", "));
            // What the formulas may read: `x`, the struct's single floats and its numbers.
            let mut tensors = vec!["x".to_owned(), "s.n.b".to_owned()];
            let mut numbers = vec!["s.n.eps".to_owned()];
            let mut slots = vec!["x".to_owned()];
            for (j, f) in fields.iter().enumerate() {
                match *f {
                    "tensor = \"float\"" => {
                        tensors.push(format!("s.f{j}"));
                        slots.push(format!("s.f{j}"));
                    }
                    "tensor = \"float\", container = \"option\"" => slots.push(format!("s.f{j}")),
                    "type = \"f32\"" | "type = \"usize\"" => numbers.push(format!("s.f{j}")),
                    _ => {}
                }
            }
            slots.push("s.n.b".to_owned());
            let backward = if function {
                "backward = \"crate::grads::f\"\n".to_owned()
            } else {
                let entries: Vec<String> = slots
                    .iter()
                    .enumerate()
                    .map(|(i, slot)| {
                        let pick = picks[i % picks.len()] + i;
                        let formula = match pick % 4 {
                            0 => "none".to_owned(),
                            1 => format!("grad * {}", tensors[pick % tensors.len()]),
                            2 => format!("grad * {} * {}", tensors[pick % tensors.len()], numbers[pick % numbers.len()]),
                            _ => format!("grad / (1 + {})", numbers[pick % numbers.len()]),
                        };
                        let key = if quoted || !slot.contains('.') {
                            format!("\"{slot}\"")
                        } else {
                            slot.clone()
                        };
                        format!("{key} = \"{formula}\"")
                    })
                    .collect();
                format!("backward = {{ {} }}\n", entries.join(", "))
            };
            let _ = write!(
                text,
                "\n[[op]]\nname = \"op\"\nautodiff = \"differentiable\"\ncomposition = \"crate::k::op\"\ninputs = [{{ name = \"x\", tensor = \"float\" }}, {{ name = \"s\", type = \"S\" }}]\noutput = {{ tensor = \"float\" }}\n{backward}"
            );
            text
        })
}

/// Replaces one byte range with junk: the manifest may stop being TOML at all.
fn mutated() -> impl Strategy<Value = String> {
    (
        manifest(),
        any::<prop::sample::Index>(),
        0usize..4,
        prop_oneof![
            Just(""),
            Just("\""),
            Just("["),
            Just("]"),
            Just("="),
            Just("\n"),
            Just("é"),
            Just("{ x = ")
        ],
    )
        .prop_map(|(text, at, len, junk)| {
            let mut at = at.index(text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            let mut end = (at + len).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            format!("{}{junk}{}", &text[..at], &text[end..])
        })
}

fn check(source: &str) {
    match Builder::new("ops.toml").render_str(source) {
        Ok(files) => {
            for file in &files {
                syn::parse_file(&file.contents)
                    .unwrap_or_else(|e| panic!("{}: {e}\n{}", file.name, file.contents));
            }
            // Deterministic: the same text renders to the same bytes.
            let again = Builder::new("ops.toml")
                .render_str(source)
                .expect("renders again");
            assert_eq!(files, again);
        }
        Err(Error::Manifest(report)) => {
            assert!(!report.diagnostics.is_empty());
            for d in &report.diagnostics {
                assert!(
                    d.span.start <= d.span.end && d.span.end <= source.len(),
                    "span {:?} outside the text",
                    d.span
                );
                let (line, col) = d.line_col(source);
                assert!(line >= 1 && col >= 1);
                assert!(
                    d.render_line("ops.toml", source)
                        .starts_with(&format!("ops.toml:{line}:{col}: "))
                );
                // The rustc-style rendering never panics either.
                assert!(
                    d.render_snippet("ops.toml", source)
                        .contains(&format!("ops.toml:{line}:{col}"))
                );
            }
        }
        Err(other) => panic!("unexpected error kind: {other}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_manifests_render_or_fail_with_positions(source in manifest()) {
        check(&source);
    }

    #[test]
    fn mutated_manifests_never_panic(source in mutated()) {
        check(&source);
    }

    #[test]
    fn valid_member_backward_passes_render(source in valid_member_backward_manifest()) {
        if let Err(err) = Builder::new("ops.toml").render_str(&source) {
            panic!("refused:\n{err}\n{source}");
        }
        check(&source);
    }

    #[test]
    fn valid_declared_types_render(source in valid_declared_manifest()) {
        if let Err(err) = Builder::new("ops.toml").render_str(&source) {
            panic!("refused:\n{err}\n{source}");
        }
        check(&source);
    }
}

#[test]
fn random_valid_manifests_do_render() {
    // The generators above must reach the `Ok` branch too, not only errors.
    let source = "[routing]\ntrait = \"Ops\"\nbackends = [\"Flex\"]\n\n[[op]]\nname = \"a\"\ninputs = [\n    { name = \"x\", tensor = \"float\", container = \"vec\" },\n]\noutput = [{ tensor = \"int\" }, [{ tensor = \"bool\", container = \"option\" }, { type = \"u8\" }]]\n";
    assert!(Builder::new("ops.toml").render_str(source).is_ok());
    check(source);
}

#[test]
fn an_error_at_the_end_of_the_file_has_the_same_position_in_both_renderings() {
    // Found by `mutated_manifests_never_panic`: an unterminated multi-line string runs to the
    // end of a text that ends with blank lines.
    check("[routing]\ntrait = \"\"\"\nbackends = [\"Flex\"]\n\n");
    check("[routing]\ntrait = \"\"\"\n");
    check("[routing]\ntrait = \"\"\"");
}

/// The generators, all together, write every key of the key table at least once: a key added
/// to the table and forgotten here fails this test.
#[test]
fn the_generators_write_every_key_of_the_key_table() {
    use burn_route_codegen::keys;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    );
    let strategies = [
        manifest().boxed(),
        valid_declared_manifest().boxed(),
        valid_member_backward_manifest().boxed(),
        mutated().boxed(),
    ];
    let mut texts = Vec::new();
    for strategy in &strategies {
        for _ in 0..400 {
            texts.push(strategy.new_tree(&mut runner).expect("a value").current());
        }
    }
    let missing = keys::unused_by(texts.iter().map(String::as_str));
    assert!(missing.is_empty(), "keys no generator writes: {missing:?}");
}
