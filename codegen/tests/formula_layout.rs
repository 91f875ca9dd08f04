//! Backward formulas whose numbers read tensors (`dim_size(x, 0)`, which carries its formula's
//! text, so such a number rarely fits on a line) are laid out as rustfmt lays them out: random
//! formulas over numbers and tensors, rendered, pass `rustfmt --check --edition 2024`.

use std::process::Command;

use burn_route_codegen::Builder;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

fn number() -> impl Strategy<Value = String> {
    let atom = prop_oneof![
        Just("dim_size(x, 0)".to_owned()),
        Just("dim_size(y, -1)".to_owned()),
        Just("dim_size(grad, 1)".to_owned()),
        Just("dim_size(output, 0)".to_owned()),
        Just("s".to_owned()),
        Just("t".to_owned()),
        Just("2".to_owned()),
        Just("0.5".to_owned()),
    ];
    atom.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            (
                inner.clone(),
                prop::sample::select(&["+", "-", "*", "/"][..]),
                inner.clone()
            )
                .prop_map(|(a, op, b)| format!("{a} {op} {b}")),
            (
                inner.clone(),
                prop::sample::select(&["+", "-", "*", "/"][..]),
                inner.clone()
            )
                .prop_map(|(a, op, b)| format!("({a} {op} {b})")),
            inner.clone().prop_map(|a| format!("-({a})")),
            inner.clone().prop_map(|a| format!("-{a}")),
            (
                prop::sample::select(&["exp", "sqrt", "log", "abs", "tanh", "sigmoid"][..]),
                inner.clone()
            )
                .prop_map(|(f, a)| format!("{f}({a})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("powf({a}, {b})")),
            (inner.clone(), inner.clone(), inner).prop_map(|(a, b, c)| format!("{a} * {b} * {c}")),
        ]
    })
}

fn tensor() -> impl Strategy<Value = String> {
    let atom = prop_oneof![Just("x"), Just("y"), Just("output")].prop_map(String::from);
    atom.prop_recursive(2, 8, 2, |inner| {
        prop_oneof![
            (inner.clone(), number()).prop_map(|(a, n)| format!("{a} * ({n})")),
            (number(), inner.clone(), inner.clone())
                .prop_map(|(n, a, b)| format!("{n} * {a} + {b}")),
            (inner.clone(), number()).prop_map(|(a, n)| format!("exp({a}) / ({n})")),
            (inner, number()).prop_map(|(a, n)| format!("sum_dim({a}, 0) - {n}")),
        ]
    })
}

fn manifest() -> impl Strategy<Value = String> {
    prop::collection::vec((tensor(), number(), tensor()), 12).prop_map(|ops| {
        let mut s = "[routing]\ntrait = \"MyOps\"\nbackends = [\"Flex\"]\n".to_owned();
        for (i, (a, n, b)) in ops.into_iter().enumerate() {
            s.push_str(&format!(
                "\n[[op]]\nname = \"o{i}\"\nautodiff = \"differentiable\"\ninputs = [{{ name = \"x\", tensor = \"float\" }}, {{ name = \"y\", tensor = \"float\" }}, {{ name = \"s\", type = \"f32\" }}, {{ name = \"t\", type = \"f64\" }}]\noutput = {{ tensor = \"float\" }}\nbackward = {{ x = \"grad * ({a})\", y = \"grad / ({n}) + grad * ({b})\" }}\n"
            ));
        }
        s
    })
}

#[test]
fn numbers_that_read_tensors_are_laid_out_as_rustfmt_does() {
    let rustfmt = std::env::var("RUSTFMT").unwrap_or_else(|_| "rustfmt".to_owned());
    if Command::new(&rustfmt).arg("--version").output().is_err() {
        eprintln!("skipped: `{rustfmt}` is not installed");
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let strategy = manifest();
    let mut paths = Vec::new();
    for case in 0..12 {
        let source = strategy
            .new_tree(&mut runner)
            .expect("a manifest")
            .current();
        let files = Builder::new("ops.toml")
            .render_str(&source)
            .unwrap_or_else(|e| panic!("{e}\n{source}"));
        for file in files {
            let path = dir.path().join(format!("{case}_{}", file.name));
            std::fs::write(&path, &file.contents).expect("write");
            paths.push(path);
        }
    }
    let out = Command::new(&rustfmt)
        .args(["--check", "--edition", "2024"])
        .args(&paths)
        .output()
        .expect("rustfmt runs");
    assert!(
        out.status.success(),
        "generated formulas differ from rustfmt:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
