fn main() {
    // `.op_check()` also writes the op check that `tests/op_check.rs` includes.
    burn_route_codegen::Builder::new("ops.toml")
        .op_check()
        .build_script();
}
