//! Manifest-error fixtures: each `tests/ui/NAME.toml` fails with exactly the rustc-style report
//! in `tests/ui/NAME.stderr` (what `burn-route-codegen check` prints). Bless after an intended
//! change with `BLESS=1 cargo test -p burn-route-codegen --test ui`, then review the diff.
//!
//! Each fixture has a twin, `tests/ui/NAME.fixed.toml`: the fixture with every help of its
//! report followed (and those of the errors and warnings that only show once the first are
//! fixed), written by hand as a user would. The twin must render without an error or a
//! warning: a help that does not lead out, or leads to a diagnostic asking to undo it, fails
//! here. (The mechanical kinds of help are also applied one by one in `help_leads_out.rs`.)

use std::path::Path;

use burn_route_codegen::{Builder, Error};

#[test]
fn every_fixture_fails_with_its_stderr() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui");
    let bless = burn_route_codegen::bless_requested();
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/ui")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .filter(|p| !is_fixed(p))
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

fn is_fixed(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with(".fixed.toml"))
}

#[test]
fn every_fixture_has_a_fixed_twin_that_renders_cleanly() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui");
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/ui")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    cases.sort();
    let mut problems = Vec::new();
    let mut twins = 0;
    for case in cases.iter().filter(|p| !is_fixed(p)) {
        let file = case.file_name().unwrap().to_string_lossy().into_owned();
        let twin = case.with_extension("fixed.toml");
        let Ok(fixed) = std::fs::read_to_string(&twin) else {
            problems.push(format!(
                "{file}: no `{}`: write the fixture with each help followed",
                twin.file_name().unwrap().to_string_lossy()
            ));
            continue;
        };
        twins += 1;
        let original = std::fs::read(case).expect("fixture");
        assert_ne!(
            fixed.as_bytes(),
            original,
            "{file}: the twin is the fixture itself"
        );
        match Builder::new(&twin).op_check().render_with_warnings() {
            Ok((_, None)) => {}
            Ok((_, Some(warnings))) => problems.push(format!(
                "{file}: the fixed twin renders with warnings:\n{}",
                warnings.render()
            )),
            Err(Error::Manifest(report)) => problems.push(format!(
                "{file}: the fixed twin still fails:\n{}",
                report.render()
            )),
            Err(other) => problems.push(format!("{file}: {other}")),
        }
    }
    // No twin without its fixture.
    for twin in cases.iter().filter(|p| is_fixed(p)) {
        let name = twin.file_name().unwrap().to_string_lossy().into_owned();
        let fixture = dir.join(name.replace(".fixed.toml", ".toml"));
        if !fixture.exists() {
            problems.push(format!("{name}: no fixture `{}`", fixture.display()));
        }
    }
    assert!(twins >= 100, "only {twins} fixed twins");
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}
