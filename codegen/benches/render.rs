//! How long a build script spends rendering: a synthetic 1,000-op manifest end to end (parse,
//! validate, emit + pretty-print, write), and each stage on its own; and how long a manifest
//! with 10,000 errors takes to report (found, rendered rustc-style and as `file:LINE:COL` lines).
//!
//! Run: `cargo bench -p burn-route-codegen --bench render` (release), and
//! `cargo bench --profile dev -p burn-route-codegen --bench render` for the unoptimised build
//! that build scripts get by default.

use std::hint::black_box;

use burn_route_codegen::Builder;
use criterion::{Criterion, criterion_group, criterion_main};

/// `ops` ops cycling through the three policies and the common signature shapes.
fn synthetic_manifest(ops: usize) -> String {
    let mut text = String::from(
        "[routing]\ntrait = \"BenchOps\"\nbackends = [\"Flex\", { name = \"Cube\", cfg = 'feature = \"cube\"' }]\n",
    );
    for i in 0..ops {
        let body = match i % 4 {
            0 => {
                "autodiff = \"differentiable\"\ninputs = [\n    { name = \"lhs\", tensor = \"float\" },\n    { name = \"rhs\", tensor = \"float\" },\n]\noutput = { tensor = \"float\" }\n"
            }
            1 => {
                "autodiff = \"detach\"\ninputs = [{ name = \"x\", tensor = \"float\", borrowed = true }, { name = \"k\", type = \"usize\" }]\noutput = [{ tensor = \"float\" }, { tensor = \"int\" }]\n"
            }
            2 => {
                "inputs = [{ name = \"x\", tensor = \"float\" }, { name = \"mask\", tensor = \"bool\", container = \"option\" }]\noutput = { tensor = \"float\" }\n"
            }
            _ => {
                "autodiff = \"differentiable\"\ninputs = [{ name = \"xs\", tensor = \"float\", container = \"vec\" }]\noutput = { tensor = \"float\", container = \"vec\" }\n"
            }
        };
        text.push_str(&format!(
            "\n[[op]]\nname = \"op_{i}\"\ndoc = \"Synthetic op {i}.\"\n{body}"
        ));
    }
    text
}

fn render(c: &mut Criterion) {
    let source = synthetic_manifest(1000);
    let builder = Builder::new("ops.toml");
    let dir = std::env::temp_dir().join(format!("burn-route-bench-{}", std::process::id()));
    let manifest = dir.join("ops.toml");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(&manifest, &source).unwrap();

    let mut group = c.benchmark_group("render_1000_ops");
    group.sample_size(10);
    group.bench_function("parse", |b| {
        b.iter(|| black_box(burn_route_codegen::stages::parse(black_box(&source))))
    });
    let (model, diagnostics) = burn_route_codegen::stages::parse(&source);
    assert!(diagnostics.is_empty());
    group.bench_function("validate", |b| {
        b.iter(|| {
            black_box(
                burn_route_codegen::stages::validate(black_box(&model), "ops.toml", &source)
                    .unwrap(),
            )
        });
    });
    let ir = burn_route_codegen::stages::validate(&model, "ops.toml", &source).unwrap();
    let config = burn_route_codegen::stages::EmitConfig {
        runtime: "::burn_route::rt".to_owned(),
        trait_module: "super::ops".to_owned(),
        dispatch_module: "super::dispatch".to_owned(),
        regenerate: "rebuild".to_owned(),
    };
    group.bench_function("emit", |b| {
        b.iter(|| black_box(burn_route_codegen::stages::emit(black_box(&ir), &config)))
    });
    group.bench_function("parse_validate_emit", |b| {
        b.iter(|| black_box(builder.render_str(black_box(&source)).unwrap()))
    });
    let writer = Builder::new(&manifest).out_dir(dir.join("out"));
    group.bench_function("end_to_end_with_write", |b| {
        b.iter(|| {
            // Remove the outputs so every iteration really writes.
            let _ = std::fs::remove_dir_all(dir.join("out"));
            black_box(writer.write().unwrap())
        });
    });
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

/// 10,000 ops, each with a misspelt tensor kind: every error is collected, then rendered.
fn diagnostics(c: &mut Criterion) {
    let mut source = String::from("[routing]\ntrait = \"MyOps\"\nbackends = [\"Flex\"]\n");
    for i in 0..10_000 {
        source.push_str(&format!(
            "\n[[op]]\nname = \"op_{i}\"\ninputs = [{{ name = \"x\", tensor = \"flaot\" }}]\n"
        ));
    }
    let builder = Builder::new("ops.toml");
    let mut group = c.benchmark_group("errors_10000");
    group.sample_size(10);
    group.bench_function("find_and_render", |b| {
        b.iter(|| {
            let err = builder.render_str(black_box(&source)).unwrap_err();
            let burn_route_codegen::Error::Manifest(report) = &err else {
                panic!("{err}")
            };
            assert_eq!(report.diagnostics.len(), 10_000);
            black_box((
                report.render(),
                burn_route_codegen::error_lines(&err),
                burn_route_codegen::rendered_lines(&err),
            ))
        })
    });
    group.finish();
}

criterion_group!(benches, render, diagnostics);
criterion_main!(benches);
