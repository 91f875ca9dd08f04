//! Publishes which routes this build of the runtime has (`links = "burn_route"`): the build
//! script of every crate that generates routing code with `burn_route_codegen::Builder` reads
//! them as `DEP_BURN_ROUTE_*` and compiles its autodiff, Cube and Remote arms in to match.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let feature = |name: &str| std::env::var_os(format!("CARGO_FEATURE_{name}")).is_some();
    for (key, on) in [
        ("autodiff", feature("AUTODIFF")),
        ("cube", feature("CUBE")),
        ("remote", feature("REMOTE")),
    ] {
        println!("cargo::metadata={key}={}", u8::from(on));
    }
}
