//! Every section of the error reference that a message links exists: the runtime's
//! `errors::link("...")` calls and `anchor()` arms, and the generator's `diag::page` anchors,
//! read from the sources so a new message cannot link a page nobody wrote.

use std::path::Path;

use burn_route_core::errors;

/// The string literals of `text` that look like anchors (`lower-case-words`).
fn anchor_literals(text: &str) -> Vec<&str> {
    text.split('"')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            !s.is_empty()
                && s.contains('-')
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        })
        .collect()
}

/// The body of every `fn anchor(` in `source`, up to the end of its `match` (`\n    }\n`).
fn anchor_fns(source: &str) -> Vec<&str> {
    source
        .match_indices("pub fn anchor(")
        .filter_map(|(at, _)| {
            let rest = &source[at..];
            rest.find("\n    }\n").map(|end| &rest[..end])
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("source dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_linked_section_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    rust_files(&root.join("runtime/src"), &mut files);
    let mut linked: Vec<(String, String)> = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file).expect("read");
        let name = file.display().to_string();
        for (at, _) in source.match_indices("errors::link(\"") {
            let rest = &source[at + "errors::link(\"".len()..];
            let anchor = &rest[..rest.find('"').expect("closed literal")];
            linked.push((name.clone(), anchor.to_owned()));
        }
        for body in anchor_fns(&source) {
            for anchor in anchor_literals(body) {
                linked.push((name.clone(), anchor.to_owned()));
            }
        }
    }
    let pages =
        std::fs::read_to_string(root.join("codegen/src/diag/page.rs")).expect("diag/page.rs");
    let pages = &pages[..pages.find("#[cfg(test)]").unwrap_or(pages.len())];
    for anchor in anchor_literals(pages) {
        linked.push(("codegen/src/diag/page.rs".to_owned(), anchor.to_owned()));
    }
    // The runtime's errors (the `RouteError` sections, the malformed ones, the backward
    // pass's, the Remote server's) and the generator's pages are all found.
    assert!(linked.len() > 25, "{linked:?}");
    let missing: Vec<&(String, String)> = linked
        .iter()
        .filter(|(_, anchor)| errors::section(anchor).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "linked sections the error reference lacks: {missing:?}"
    );
}

#[test]
fn every_anchor_literal_in_a_message_test_exists() {
    // The exact texts the tests expect end with the link: its anchor must exist too.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in [
        "tests",
        "runtime/src",
        "examples/downstream/tests",
        "cli/tests",
        "codegen",
    ] {
        rust_files(&root.join(dir), &mut files);
    }
    let prefix = "burn_route_core/errors/index.html#";
    let mut seen = 0;
    for file in &files {
        let source = std::fs::read_to_string(file).expect("read");
        for (at, _) in source.match_indices(prefix) {
            let rest = &source[at + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
                .unwrap_or(rest.len());
            let anchor = &rest[..end];
            seen += 1;
            assert!(
                errors::section(anchor).is_some(),
                "{}: links `#{anchor}`, which the error reference lacks",
                file.display()
            );
        }
    }
    assert!(seen > 20, "{seen} links found");
}
