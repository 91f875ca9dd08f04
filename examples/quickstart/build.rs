fn main() {
    burn_route_codegen::Builder::new("ops.toml").build_script();
}
