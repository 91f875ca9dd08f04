//! Property tests over random manifests: the generator never panics; a manifest either fails
//! with diagnostics that point inside the text (with a line and column), or renders Rust that
//! `syn` parses; rendering is deterministic.

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
    ]
}

fn output() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        kind().prop_map(|k| format!("output = {{ tensor = \"{k}\" }}\n")),
        Just("output = { type = \"usize\" }\n".to_owned()),
        (kind(), kind()).prop_map(|(a, b)| format!("output = [{{ tensor = \"{a}\" }}, [{{ tensor = \"{b}\", container = \"option\" }}, {{ type = \"u8\" }}]]\n")),
        Just("output = []\n".to_owned()),
        Just("output = 3\n".to_owned()),
    ]
}

/// Backward passes, good and bad: formulas (names, functions, syntax), function paths, `save`,
/// `checkpoint` and `[op.check]` keys.
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
        Just(
            "check = { shapes = { a = [2, 3], b = [[1], [2]] }, ranges = { a = [1, 0] }, args = { a = \"1 +\" }, tolerance = 0, gradients = 1 }\n"
        ),
        Just("check = { shapes = { a = \"x\" }, ranges = 2, composition = true }\n"),
        // Async ops: alone, with the keys they refuse, and not a boolean.
        Just("async = true\n"),
        Just("async = true\ncomposition = \"crate::k::f\"\n"),
        Just("async = true\nbackward = { a = \"grad\" }\n"),
        Just("async = true\ncomposite = \"crate::k\"\n"),
        Just("async = \"yes\"\n"),
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
        ],
    )
        .prop_map(|(name, policy, inputs, output, extra, doc)| {
            let inputs: Vec<String> = inputs.into_iter().map(|(n, a)| format!("    {{ name = \"{n}\", {a} }},\n")).collect();
            format!("[[op]]\nname = \"{name}\"\n{doc}{policy}inputs = [\n{}]\n{output}{extra}", inputs.concat())
        })
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
    )
        .prop_map(|(backends, ops)| {
            format!(
                "[routing]\ntrait = \"Ops\"\nbackends = {backends}\n\n{}",
                ops.join("\n")
            )
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
