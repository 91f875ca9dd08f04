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
    burn_route_codegen::Builder::new("ops.toml")
        .runtime_path("crate::rt")
        .regenerate_hint("bless the snapshot with `UPDATE_GENERATED=1 cargo test --test generated`")
        .build_script();
}
