//! Random valid manifests compile against the real runtime: each one is rendered (the three
//! modules plus the `skeleton` kernel stubs) into a scratch crate that depends on this crate,
//! and `cargo clippy -D warnings` (or `cargo check` where clippy is not installed) must pass,
//! with the consuming crate's `autodiff` feature on and off.
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
        prop_oneof![3 => Just(""), 1 => Just(", dims = 2"), 1 => Just(", dims = \"E\"")],
    )
        .prop_map(|(kind, borrowed, container, dims)| {
            let borrowed = if borrowed { ", borrowed = true" } else { "" };
            format!("tensor = \"{kind}\"{borrowed}{container}{dims}")
        })
}

fn input() -> impl Strategy<Value = String> {
    prop_oneof![
        5 => tensor_arg(),
        2 => prop_oneof![Just("f32"), Just("usize"), Just("Vec<usize>"), Just("Option<u64>"), Just("bool"), Just("(f32, f32)")]
            .prop_map(|t| format!("type = \"{t}\"")),
        1 => Just("device = true".to_owned()),
    ]
}

fn output() -> impl Strategy<Value = String> {
    let one = prop_oneof![
        4 => prop_oneof![Just("float"), Just("int"), Just("bool")]
            .prop_map(|k| format!("{{ tensor = \"{k}\" }}")),
        1 => Just("{ tensor = \"float\", container = \"vec\" }".to_owned()),
        1 => Just("{ tensor = \"int\", container = \"option\" }".to_owned()),
        1 => Just("{ type = \"usize\" }".to_owned()),
    ];
    prop_oneof![
        1 => Just(String::new()),
        4 => one.clone().prop_map(|o| format!("output = {o}\n")),
        2 => (one.clone(), one.clone(), one).prop_map(|(a, b, c)| format!("output = [{a}, [{b}, {c}]]\n")),
    ]
}

/// Names of methods of Burn's own backend traits: the generated code must not call them
/// ambiguously.
const BURN_METHOD_NAMES: [&str; 4] = ["gelu", "relu", "layer_norm", "float_add"];

fn op(index: usize) -> impl Strategy<Value = String> {
    (
        prop_oneof![
            3 => Just(format!("op_{index}")),
            1 => Just(BURN_METHOD_NAMES[index].to_owned()),
        ],
        prop_oneof![Just("differentiable"), Just("detach"), Just("reject")],
        prop::collection::vec(input(), 0..5),
        output(),
        // Only Cube behind its (off) cfg leaves the op no backend in this crate's build: every
        // routing arm is cfg'd out. (Valid where `routing.backends` does not list Cube.)
        prop_oneof![
            4 => Just(""),
            1 => Just("backends = [\"Flex\"]\n"),
            1 => Just("backends = [{ name = \"Cube\", cfg = 'feature = \"cube\"' }]\n"),
        ],
    )
        .prop_map(move |(name, policy, inputs, output, backends)| {
            let mut text = format!(
                "[[op]]\nname = \"{name}\"\ndoc = \"Random op {index}.\"\nautodiff = \"{policy}\"\n{backends}inputs = [\n"
            );
            for (i, input) in inputs.iter().enumerate() {
                let _ = writeln!(text, "    {{ name = \"in_{i}\", {input} }},");
            }
            text.push_str("]\n");
            text.push_str(&output);
            text
        })
}

fn manifest() -> impl Strategy<Value = String> {
    (
        prop_oneof![
            Just("[\"Flex\"]"),
            Just("[\"Flex\", { name = \"Cube\", cfg = 'feature = \"cube\"' }]"),
        ],
        (op(0), op(1), op(2), op(3)),
        1usize..=4,
    )
        .prop_map(|(backends, (a, b, c, d), count)| {
            let ops = [a, b, c, d];
            format!(
                "[routing]\ntrait = \"Ops\"\nbackends = {backends}\n\n{}",
                ops[..count].join("\n")
            )
        })
}

/// The first `MANIFESTS` random manifests (from a fixed seed) that validate.
fn valid_manifests() -> Vec<String> {
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    );
    let strategy = manifest();
    let mut found = Vec::new();
    let mut tried = 0;
    while found.len() < MANIFESTS {
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

#[test]
fn random_valid_manifests_compile_with_the_runtime() {
    let manifests = valid_manifests();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scratch = tempfile::tempdir().expect("temp dir");
    let dir = scratch.path();
    write(
        &dir.join("Cargo.toml"),
        &format!(
            r#"[package]
name = "random-manifests"
version = "0.0.0"
edition = "2024"
publish = false

[workspace]

[features]
default = ["autodiff"]
autodiff = ["burn-route/autodiff"]
# Named by the manifests' Cube backend cfg; left off (the Cube runtime is not built here).
cube = []

[dependencies]
burn-route = {{ path = {root:?}, default-features = false }}
"#,
            root = root.display().to_string()
        ),
    );
    // The workspace's versions: nothing new to resolve.
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).expect("copy Cargo.lock");

    let mut lib = String::from(
        "//! Generated by tests/compile_random_manifests.rs.\n\
         // The kernel stubs ignore their parameters.\n\
         #![allow(unused_variables)]\n",
    );
    for (i, source) in manifests.iter().enumerate() {
        let module = format!("m{i}");
        let builder = Builder::new("ops.toml").manifest_name(format!("{module}/ops.toml"));
        for file in builder.render_str(source).expect("validated above") {
            write(
                &dir.join("src").join(&module).join(file.name),
                &file.contents,
            );
        }
        let stubs = builder.skeleton_str(source).expect("validated above");
        write(&dir.join("src").join(&module).join("kernels.rs"), &stubs);
        write(&dir.join("src").join(&module).join("ops.toml"), source);
        let _ = write!(
            lib,
            "\npub mod {module} {{\n\
             \x20   pub mod ops {{ include!(\"{module}/routed_ops.rs\"); }}\n\
             \x20   pub mod dispatch {{ include!(\"{module}/routed_dispatch.rs\"); }}\n\
             \x20   pub mod tensor {{ include!(\"{module}/routed_tensor.rs\"); }}\n\
             \x20   pub mod kernels {{ include!(\"{module}/kernels.rs\"); }}\n\
             }}\n"
        );
    }
    write(&dir.join("src/lib.rs"), &lib);

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let has_clippy = Command::new(&cargo)
        .args(["clippy", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("random-manifests-target");
    for features in [&[][..], &["--no-default-features"][..]] {
        let mut command = Command::new(&cargo);
        if has_clippy {
            command.args(["clippy", "--quiet"]);
        } else {
            command.args(["check", "--quiet"]);
        }
        command.args(features);
        if has_clippy {
            command.args(["--", "-D", "warnings"]);
        }
        let output = command
            .current_dir(dir)
            .env("CARGO_TARGET_DIR", &target)
            .output()
            .expect("run cargo");
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
