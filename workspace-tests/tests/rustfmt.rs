//! Generated files are rustfmt-clean: every module (the kernel stubs and op check included) rendered from this
//! repository's manifests and from `tests/fmt/*.toml` passes `rustfmt --check --edition 2024`.
//! Skipped, with the reason printed, where rustfmt is not installed (CI has it).

use std::path::{Path, PathBuf};
use std::process::Command;

use burn_route_codegen::Builder;

fn manifests() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = vec![
        root.join("../ops.toml"),
        root.join("../examples/downstream/ops.toml"),
        root.join("../tests/formulas/ops.toml"),
        root.join("../tests/declared/ops.toml"),
    ];
    let mut fixtures: Vec<PathBuf> = std::fs::read_dir(root.join("tests/fmt"))
        .expect("tests/fmt")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    fixtures.sort();
    all.extend(fixtures);
    all
}

#[test]
fn generated_files_pass_rustfmt_check() {
    let rustfmt = std::env::var("RUSTFMT").unwrap_or_else(|_| "rustfmt".to_owned());
    if Command::new(&rustfmt).arg("--version").output().is_err() {
        eprintln!("skipped: `{rustfmt}` is not installed");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let mut files = Vec::new();
    for (i, manifest) in manifests().iter().enumerate() {
        let name = manifest.file_name().unwrap().to_string_lossy().into_owned();
        let builder = Builder::new(manifest)
            .manifest_name(&name)
            .op_check_crate("::checked");
        let rendered = builder.render().unwrap_or_else(|e| panic!("{name}: {e}"));
        for file in rendered {
            let path = dir.path().join(format!("{i}_{}", file.name));
            std::fs::write(&path, &file.contents).unwrap();
            files.push(path);
        }
        let path = dir.path().join(format!("{i}_skeleton.rs"));
        std::fs::write(&path, builder.skeleton().unwrap()).unwrap();
        files.push(path);
    }
    // burn-route's own files as checked in: its crate paths are longer than `::checked`, so
    // its lines break at other places.
    for entry in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../generated"))
        .expect("generated/")
    {
        files.push(entry.expect("entry").path());
    }
    let output = Command::new(&rustfmt)
        .args(["--check", "--edition", "2024"])
        .args(&files)
        .output()
        .expect("run rustfmt");
    assert!(
        output.status.success(),
        "rustfmt would change the generated code:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
