//! Generates the routed-op modules from `ops.toml` into `OUT_DIR`, and publishes which routes
//! this build of burn-route has (`links = "burn_route"`): the build script of every crate that
//! generates routing code with `burn_route_codegen::Builder::build_script` reads them as
//! `DEP_BURN_ROUTE_*` and compiles its autodiff, Cube and Remote routes in to match.

fn main() {
    let feature = |name: &str| std::env::var_os(format!("CARGO_FEATURE_{name}")).is_some();
    for (key, on) in [
        ("autodiff", feature("AUTODIFF")),
        ("cube", feature("WGPU") || feature("CUDA")),
        ("remote", feature("REMOTE")),
    ] {
        println!("cargo::metadata={key}={}", u8::from(on));
        // This crate's own generated code is compiled under the same cfgs as a downstream
        // crate's (`burn_route_autodiff`, ...); `Builder::build_script` declares them.
        if on {
            println!("cargo::rustc-cfg=burn_route_{key}");
        }
    }
    // `.op_check()`: also `OUT_DIR/routed_check.rs`, which `tests/op_check.rs` includes.
    burn_route_codegen::Builder::new("ops.toml")
        .runtime_path("crate::rt")
        .op_check()
        .regenerate_hint("bless the snapshot with `UPDATE_GENERATED=1 cargo test --test generated`")
        .build_script();
    // Every form of the lazy `Fusion<B>` implementation, for `tests/integration/lazy_forms.rs`
    // (outside the library, so the runtime is `::burn_route::rt`).
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    burn_route_codegen::Builder::new("tests/lazy/ops.toml")
        .manifest_name("tests/lazy/ops.toml")
        .out_dir(out.join("lazy"))
        .build_script();
    // Ops with formula backward passes, for `tests/integration/formulas.rs`.
    burn_route_codegen::Builder::new("tests/formulas/ops.toml")
        .manifest_name("tests/formulas/ops.toml")
        .out_dir(out.join("formulas"))
        .build_script();
    // Ops over declared types (structs and enums holding tensors), for `tests/integration/declared.rs`.
    burn_route_codegen::Builder::new("tests/declared/ops.toml")
        .manifest_name("tests/declared/ops.toml")
        // The op check of every declared-type op, included by tests/integration/declared.rs.
        .op_check_crate("crate::declared::routed")
        .out_dir(out.join("declared"))
        .build_script();
}
