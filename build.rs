//! Generates the routed-op modules from `ops.toml` into `OUT_DIR`. The routes compiled in (the
//! `burn_route_autodiff`, `burn_route_cube` and `burn_route_remote` cfgs) follow the features of
//! `burn-route-runtime`, which this crate's own features turn on, as in every crate with ops.
//! It also publishes those routes (`links = "burn_route_ops"`) for a crate that depends on
//! burn-route alone and generates routing code of its own.

fn main() {
    let feature = |name: &str| std::env::var_os(format!("CARGO_FEATURE_{name}")).is_some();
    for (key, on) in [
        ("autodiff", feature("AUTODIFF")),
        ("cube", feature("CUBE")),
        ("remote", feature("REMOTE")),
    ] {
        println!("cargo::metadata={key}={}", u8::from(on));
    }
    burn_route_codegen::Builder::new("ops.toml")
        .runtime_path("crate::rt")
        .regenerate_hint("bless the snapshot with `BLESS=1 cargo test --test generated`")
        .build_script();
}
