//! Generates the routed-op modules from `ops.toml` into `OUT_DIR`. The routes compiled in (the
//! `burn_route_autodiff`, `burn_route_cube` and `burn_route_remote` cfgs) follow the features of
//! `burn-route-runtime`, which this crate's own features turn on, as in every crate with ops.

fn main() {
    burn_route_codegen::Builder::new("ops.toml")
        .runtime_path("crate::rt")
        .regenerate_hint("bless the snapshot with `BLESS=1 cargo test --test generated`")
        .build_script();
}
