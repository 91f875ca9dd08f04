//! Any byte string as a manifest: parse, validate and render (the op check included) must never
//! panic, and every diagnostic must point inside the text.
#![no_main]

use burn_route_codegen::{Builder, Error};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    // With the op check: `[op.check]` keys only reach its emitter.
    match Builder::new("ops.toml").op_check().render_str(source) {
        Ok(files) => {
            for file in files {
                syn::parse_file(&file.contents).expect("rendered Rust parses");
            }
        }
        Err(Error::Manifest(report)) => {
            for d in &report.diagnostics {
                assert!(d.span.end <= source.len());
                let _ = d.render_snippet("ops.toml", source);
            }
        }
        Err(other) => panic!("unexpected error: {other}"),
    }
});
