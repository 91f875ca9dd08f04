//! Every checked-in render must equal a fresh one, so that what people read is what compiles:
//!
//! - `generated/`: the shipped ops' modules, as `build.rs` rendered them for this build, and
//!   their op check (`routed_check.rs`, included by `tests/op_check.rs`);
//! - `tests/{lazy,eager,formulas,declared,remote}/generated/`: the test-only manifests, which no build script
//!   renders (a crate that depends on burn-route never pays for them): the integration tests
//!   include these copies.
//!
//! Bless after changing a manifest or the generator: `BLESS=1 cargo test --test generated`.

use std::path::Path;

use burn_route_codegen::{Builder, CHECK_FILE, DISPATCH_FILE, File, OPS_FILE, TENSOR_FILE};

const BLESS_COMMAND: &str = "BLESS=1 cargo test --test generated";
const HINT: &str = "bless the snapshot with `BLESS=1 cargo test --test generated`";

fn bless() -> bool {
    burn_route_codegen::bless_requested()
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn check(files: &[File], dir: &str) {
    if let Err(report) =
        burn_route_codegen::snapshot::check(files, &root().join(dir), bless(), BLESS_COMMAND)
    {
        panic!("{report}");
    }
}

#[test]
fn generated_snapshots_match_the_build_render() {
    let out_dir = Path::new(env!("OUT_DIR"));
    let files: Vec<File> = [OPS_FILE, DISPATCH_FILE, TENSOR_FILE]
        .into_iter()
        .map(|name| File {
            name,
            contents: std::fs::read_to_string(out_dir.join(name))
                .unwrap_or_else(|e| panic!("build.rs did not render {name}: {e}")),
        })
        .collect();
    check(&files, "generated");
}

#[test]
fn the_op_check_is_fresh() {
    let files = Builder::new(root().join("ops.toml"))
        .manifest_name("ops.toml")
        .runtime_path("crate::rt")
        .op_check_crate("::burn_route")
        .regenerate_hint(HINT)
        .render()
        .unwrap_or_else(|e| panic!("{e}"));
    let check_file: Vec<File> = files.into_iter().filter(|f| f.name == CHECK_FILE).collect();
    assert_eq!(check_file.len(), 1, "the op check is rendered");
    check(&check_file, "generated");
}

/// A test-only manifest's modules, rendered as the tests that include them expect.
fn test_manifest(name: &str, op_check: Option<&str>) {
    let manifest = format!("tests/{name}/ops.toml");
    let mut builder = Builder::new(root().join(&manifest))
        .manifest_name(&manifest)
        .runtime_path("::burn_route::rt")
        .regenerate_hint(HINT);
    if let Some(path) = op_check {
        builder = builder.op_check_crate(path);
    }
    let files = builder.render().unwrap_or_else(|e| panic!("{e}"));
    check(&files, &format!("tests/{name}/generated"));
}

/// Every form of the lazy `Fusion<B>` implementation (`tests/integration/lazy_forms.rs`).
#[test]
fn the_lazy_forms_are_fresh() {
    test_manifest("lazy", None);
}

/// Every form of the eager `Fusion<B>` implementation (`tests/integration/eager_forms.rs`).
#[test]
fn the_eager_forms_are_fresh() {
    test_manifest("eager", None);
}

/// Ops with formula backward passes (`tests/integration/formulas.rs`).
#[test]
fn the_formula_ops_are_fresh() {
    test_manifest("formulas", None);
}

/// Ops over declared types, with their op check (`tests/integration/declared.rs`).
#[test]
fn the_declared_type_ops_are_fresh() {
    test_manifest("declared", Some("crate::declared::routed"));
}

/// Every form of an op as one operation on a Remote server (`tests/integration/remote_forms.rs`).
#[test]
fn the_remote_forms_are_fresh() {
    test_manifest("remote", None);
}
