//! Generates the routed-op modules from `ops.toml` into `OUT_DIR`.

fn main() {
    burn_route_codegen::Builder::new("ops.toml")
        .runtime_path("crate::rt")
        .build_script();
}
