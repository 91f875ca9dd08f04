//! Manifest-error fixtures: each `tests/ui/NAME.toml` fails with exactly the rustc-style report
//! in `tests/ui/NAME.stderr` (what `burn-route-codegen check` prints). Bless after an intended
//! change with `BLESS=1 cargo test -p burn-route-codegen --test ui`, then review the diff.

use std::path::Path;

use burn_route_codegen::{Builder, Error};

#[test]
fn every_fixture_fails_with_its_stderr() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui");
    let bless = std::env::var_os("BLESS").is_some_and(|v| v == "1");
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/ui")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    cases.sort();
    assert!(cases.len() >= 30, "fixtures missing from {}", dir.display());
    let mut stale = Vec::new();
    for case in &cases {
        let file = case.file_name().unwrap().to_string_lossy().into_owned();
        let rendered = match Builder::new(case).manifest_name(&file).render() {
            Ok(_) => panic!("{file}: accepted, but a fixture must fail"),
            Err(Error::Manifest(report)) => format!("{}\n", report.render()),
            Err(other) => panic!("{file}: not a manifest error: {other}"),
        };
        assert!(!rendered.contains("panicked"), "{file}: {rendered}");
        let expected_path = case.with_extension("stderr");
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if expected != rendered {
            if bless {
                std::fs::write(&expected_path, &rendered).expect("bless");
            } else {
                stale.push(format!(
                    "{file}:\n{}",
                    similar::TextDiff::from_lines(&expected, &rendered)
                        .unified_diff()
                        .header("expected", "actual")
                ));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "{} fixture(s) differ; if intended, re-run with `BLESS=1 cargo test -p burn-route-codegen --test ui` and review:\n{}",
        stale.len(),
        stale.join("\n")
    );
}
