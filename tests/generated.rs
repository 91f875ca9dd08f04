//! The checked-in `generated/` files must equal what `build.rs` rendered for this build.
//!
//! Bless after changing `ops.toml` or the generator: `UPDATE_GENERATED=1 cargo test --test generated`.

use std::path::Path;

use burn_route_codegen::File;
use burn_route_codegen::emit::{DISPATCH_FILE, OPS_FILE, TENSOR_FILE};

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
    let snapshot_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("generated");
    let bless = std::env::var_os("UPDATE_GENERATED").is_some_and(|v| v == "1");
    if let Err(report) = burn_route_codegen::snapshot::check(
        &files,
        &snapshot_dir,
        bless,
        "UPDATE_GENERATED=1 cargo test --test generated",
    ) {
        panic!("{report}");
    }
}
