//! The README, the guide (`src/guide/*.md`), the error reference (`core/src/errors.md`) and
//! CONTRIBUTING.md, block by block: every code
//! block is tested by something, so a doc change that breaks an example fails here or in a
//! doctest.
//!
//! - A listing (`<!-- listing: PATH -->` before the block) must be the whole file at `PATH`,
//!   which CI builds and tests. `BLESS=1` rewrites the listings from the files.
//! - A Rust block runs as a doctest (the guide's in `burn-route`, the README's and the error
//!   reference's in `examples/training`), or is a listing, or says why not (`<!-- not run: REASON -->`).
//! - A manifest block (outside the error reference) is rendered by the generator: accepted, or refused with exactly the
//!   rustc-style text of the ```text block that follows it when that block starts with `error`.
//!   `<!-- excerpt: ops.toml -->` blocks must equal the ops of the same name in `ops.toml`.
//! - The error reference's TOML examples mark lines `# wrong` and `# right`: the manifest with
//!   the right lines must be accepted, and the one with the wrong lines refused with a
//!   diagnostic that links the example's own section (for a run-time error's section, accepted:
//!   the mistake shows when the op runs). A fragment (op keys, input or backend entries) is
//!   checked inside a minimal manifest.
//! - Other TOML blocks must parse, and name the versions of the packages.
//! - The manifest reference documents exactly the keys of the JSON Schema.

use std::fs;
use std::path::{Path, PathBuf};

use burn_route_codegen::{Builder, Error, rendered_lines};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The error reference's TOML examples follow their own convention (wrong / right line pairs,
/// checked by `the_error_reference_examples_are_what_the_generator_says`).
const TOML_UNCHECKED: &[&str] = &["core/src/errors.md"];

/// The documents whose TOML blocks are tested.
fn toml_documents() -> Vec<String> {
    documents()
        .into_iter()
        .filter(|d| !TOML_UNCHECKED.contains(&d.as_str()))
        .collect()
}

/// The documents whose blocks are tested, relative to the repository root.
fn documents() -> Vec<String> {
    let mut docs = vec![
        "README.md".to_owned(),
        "CONTRIBUTING.md".to_owned(),
        "core/src/errors.md".to_owned(),
    ];
    let mut guide: Vec<String> = fs::read_dir(root().join("src/guide"))
        .expect("src/guide")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| format!("src/guide/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    guide.sort();
    docs.extend(guide);
    docs
}

/// A fenced code block.
#[derive(Debug)]
struct Block {
    /// The info string (` ```toml ` → `toml`).
    info: String,
    /// The lines between the fences, without the fence's indentation, each ending in `\n`.
    text: String,
    /// The text of an HTML comment on the last non-blank line before the opening fence.
    marker: Option<String>,
    /// 1-based line of the opening fence.
    line: usize,
    /// Byte range of `text` in the document (for rewriting listings).
    range: std::ops::Range<usize>,
}

impl Block {
    fn lang(&self) -> &str {
        self.info.split([',', ' ']).next().unwrap_or("")
    }

    fn attrs(&self) -> Vec<&str> {
        self.info
            .split([',', ' '])
            .filter(|a| !a.is_empty())
            .collect()
    }

    fn is_rust(&self) -> bool {
        let attrs = self.attrs();
        attrs.is_empty()
            || attrs.iter().all(|a| {
                matches!(
                    *a,
                    "rust" | "ignore" | "no_run" | "should_panic" | "compile_fail"
                ) || a.starts_with("edition")
            })
    }

    fn listing(&self) -> Option<&str> {
        self.marker.as_deref()?.strip_prefix("listing: ")
    }

    fn reason_not_run(&self) -> Option<&str> {
        self.marker.as_deref()?.strip_prefix("not run: ")
    }

    fn excerpt(&self) -> Option<&str> {
        self.marker.as_deref()?.strip_prefix("excerpt: ")
    }

    fn is_manifest(&self) -> bool {
        self.lang() == "toml"
            && self.text.lines().any(|l| {
                let l = l.trim();
                l == "[[op]]" || l == "[[type]]" || l == "[routing]" || l == "[op.check]"
            })
    }
}

fn blocks(doc: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut offset = 0;
    let mut last_nonblank: Option<&str> = None;
    let mut lines = doc.split_inclusive('\n').enumerate().peekable();
    while let Some((index, line)) = lines.next() {
        let start = offset;
        offset += line.len();
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if let Some(info) = trimmed.trim_end().strip_prefix("```") {
            let marker = last_nonblank
                .map(str::trim)
                .and_then(|l| l.strip_prefix("<!--"))
                .and_then(|l| l.strip_suffix("-->"))
                .map(|m| m.trim().to_owned());
            let text_start = offset;
            let mut text = String::new();
            let mut text_end = offset;
            let mut closed = false;
            for (_, inner) in lines.by_ref() {
                offset += inner.len();
                if inner.trim() == "```" {
                    closed = true;
                    break;
                }
                text_end = offset;
                let stripped = if inner.len() > indent && inner[..indent].trim().is_empty() {
                    &inner[indent..]
                } else {
                    inner.trim_start()
                };
                text.push_str(stripped);
                if !stripped.ends_with('\n') {
                    text.push('\n');
                }
            }
            assert!(closed, "line {}: a code block left open", index + 1);
            out.push(Block {
                info: info.trim().to_owned(),
                text,
                marker,
                line: index + 1,
                range: text_start..text_end,
            });
            last_nonblank = None;
            let _ = start;
            continue;
        }
        if !line.trim().is_empty() {
            last_nonblank = Some(line);
        }
    }
    out
}

fn read(path: &str) -> String {
    fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn listings_are_the_files_they_name() {
    let bless = burn_route_codegen::bless_requested();
    let mut stale = Vec::new();
    for path in documents() {
        let mut doc = read(&path);
        let mut rewrites = Vec::new();
        for block in blocks(&doc) {
            let Some(file) = block.listing() else {
                continue;
            };
            let content = read(file);
            if block.text != content {
                stale.push(format!("{path}:{}: the listing of {file}", block.line));
                rewrites.push((block.range.clone(), content));
            }
        }
        if bless && !rewrites.is_empty() {
            for (range, content) in rewrites.into_iter().rev() {
                doc.replace_range(range, &content);
            }
            fs::write(root().join(&path), doc).expect("write");
        }
    }
    assert!(
        bless || stale.is_empty(),
        "listings that differ from their files (re-run with BLESS=1 to copy the files in):\n{}",
        stale.join("\n")
    );
}

#[test]
fn every_rust_block_runs_or_says_why_not() {
    let mut problems = Vec::new();
    let mut counts = [0usize; 3];
    for path in documents() {
        for block in blocks(&read(&path)) {
            if block.info.is_empty() {
                problems.push(format!(
                    "{path}:{}: a block without a language (rustdoc would run it as Rust)",
                    block.line
                ));
                continue;
            }
            if !block.is_rust() {
                continue;
            }
            let attrs = block.attrs();
            let skipped = attrs.iter().any(|a| matches!(*a, "ignore" | "no_run"));
            if !skipped {
                counts[0] += 1;
            } else if block.listing().is_some() {
                counts[1] += 1;
            } else if block.reason_not_run().is_some_and(|r| !r.trim().is_empty()) {
                counts[2] += 1;
            } else {
                problems.push(format!(
                    "{path}:{}: `{}` needs `<!-- not run: REASON -->` (or a listing) before it",
                    block.line, block.info
                ));
            }
            if path.starts_with("CONTRIBUTING") && !skipped {
                problems.push(format!(
                    "{path}:{}: CONTRIBUTING.md is not a doctest: mark the block `rust,ignore` \
                     with its reason",
                    block.line
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    eprintln!(
        "Rust blocks: {} run as doctests, {} listings, {} not run (with a reason)",
        counts[0], counts[1], counts[2]
    );
}

/// `[routing]` for manifest blocks that show ops alone.
const DEFAULT_ROUTING: &str = "[routing]\ntrait = \"MyOps\"\nbackends = [\"Flex\"]\n\n";

#[test]
fn every_manifest_block_is_what_the_generator_says() {
    let mut problems = Vec::new();
    let mut checked = 0;
    let shipped: toml::Table = toml::from_str(&read("ops.toml")).expect("ops.toml parses");
    for path in toml_documents() {
        let all = blocks(&read(&path));
        for (i, block) in all.iter().enumerate() {
            if !block.is_manifest() {
                continue;
            }
            checked += 1;
            let at = format!("{path}:{}", block.line);
            if let Some(file) = block.excerpt() {
                assert_eq!(file, "ops.toml", "{at}: excerpts are of ops.toml");
                problems.extend(excerpt_problems(&at, &block.text, &shipped));
                continue;
            }
            let expected = all
                .get(i + 1)
                .filter(|next| next.lang() == "text" && next.text.starts_with("error"));
            let source = if block.text.lines().any(|l| l.trim() == "[routing]") {
                block.text.clone()
            } else {
                assert!(
                    expected.is_none(),
                    "{at}: a block with an expected error needs its own [routing] (line numbers)"
                );
                format!("{DEFAULT_ROUTING}{}", block.text)
            };
            let result = Builder::new("ops.toml").op_check().render_str(&source);
            match (result, expected) {
                (Ok(_), None) => {}
                (Ok(_), Some(_)) => problems.push(format!(
                    "{at}: the text shows an error, but the generator accepts the manifest"
                )),
                (Err(err), None) => problems.push(format!(
                    "{at}: the generator refuses the manifest:\n{}",
                    rendered_lines(&err).join("\n")
                )),
                (Err(err), Some(text)) => {
                    let want: Vec<&str> =
                        text.text.lines().filter(|l| !l.trim().is_empty()).collect();
                    let got = rendered_lines(&err);
                    if want != got {
                        problems.push(format!(
                            "{at}: the generator's error differs from the text's.\n\
                             text:\n{}\ngenerator:\n{}",
                            want.join("\n"),
                            got.join("\n")
                        ));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    assert!(checked > 10, "only {checked} manifest blocks found");
    eprintln!("manifest blocks checked by the generator: {checked}");
}

/// An excerpt's ops must be `ops.toml`'s ops of the same names, key for key but `doc`.
fn excerpt_problems(at: &str, text: &str, shipped: &toml::Table) -> Vec<String> {
    let excerpt: toml::Table = match toml::from_str(text) {
        Ok(t) => t,
        Err(e) => return vec![format!("{at}: does not parse: {e}")],
    };
    let ops = |t: &toml::Table| -> Vec<toml::Table> {
        t.get("op")
            .and_then(|o| o.as_array())
            .map(|a| a.iter().filter_map(|v| v.as_table().cloned()).collect())
            .unwrap_or_default()
    };
    let mut problems = Vec::new();
    for mut op in ops(&excerpt) {
        let name = op
            .get("name")
            .and_then(|n| n.as_str())
            .unwrap_or("")
            .to_owned();
        let Some(mut real) = ops(shipped)
            .into_iter()
            .find(|o| o.get("name").and_then(|n| n.as_str()) == Some(name.as_str()))
        else {
            problems.push(format!("{at}: ops.toml has no op `{name}`"));
            continue;
        };
        op.remove("doc");
        real.remove("doc");
        if op != real {
            problems.push(format!(
                "{at}: op `{name}` differs from ops.toml's:\n{op:#?}\nops.toml:\n{real:#?}"
            ));
        }
    }
    problems
}

/// The versions a Cargo.toml block may name for this repository's and Burn's crates.
fn version_problem(name: &str, version: &str) -> Option<String> {
    let want: &[&str] = if name.starts_with("burn-route") {
        &["0.1", "0.1.0", "=0.1.0"]
    } else if name.starts_with("burn") {
        &["=0.23.0-pre.1"]
    } else if name == "cubecl" {
        &["=0.12.0-pre.1"]
    } else {
        return None;
    };
    (!want.contains(&version)).then(|| format!("`{name}` at `{version}`, not one of {want:?}"))
}

#[test]
fn every_other_toml_block_parses_and_names_the_right_versions() {
    let mut problems = Vec::new();
    for path in toml_documents() {
        for block in blocks(&read(&path)) {
            if block.lang() != "toml" || block.is_manifest() {
                continue;
            }
            let at = format!("{path}:{}", block.line);
            let table: toml::Table = match toml::from_str(&block.text) {
                Ok(t) => t,
                Err(e) => {
                    problems.push(format!("{at}: does not parse: {e}"));
                    continue;
                }
            };
            for section in ["dependencies", "build-dependencies", "dev-dependencies"] {
                let Some(deps) = table.get(section).and_then(|d| d.as_table()) else {
                    continue;
                };
                for (name, spec) in deps {
                    let version = match spec {
                        toml::Value::String(v) => Some(v.as_str()),
                        toml::Value::Table(t) => t.get("version").and_then(|v| v.as_str()),
                        _ => None,
                    };
                    if let Some(problem) = version.and_then(|v| version_problem(name, v)) {
                        problems.push(format!("{at}: {problem}"));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The manifest reference's key tables are the key table's
/// ([`burn_route_codegen::keys::reference_table`]): each table of the manifest once, between
/// `<!-- keys: ID -->` and `<!-- /keys -->`. With `BLESS=1` the blocks are rewritten.
#[test]
fn the_manifest_reference_key_tables_are_the_key_table() {
    use burn_route_codegen::keys::{Table, reference_table};
    const OPEN: &str = "<!-- keys: ";
    const CLOSE: &str = "<!-- /keys -->";
    let path = "src/guide/manifest.md";
    let doc = read(path);
    let mut fresh = String::new();
    let mut rest = doc.as_str();
    let mut seen = Vec::new();
    while let Some(start) = rest.find(OPEN) {
        let (before, after) = rest.split_at(start);
        fresh.push_str(before);
        let line_end = after.find(" -->").expect("a marker ends with ` -->`");
        let id = &after[OPEN.len()..line_end];
        let table = *Table::ALL
            .iter()
            .find(|t| t.id() == id)
            .unwrap_or_else(|| panic!("{path}: `{OPEN}{id} -->` names no table of the key table"));
        let end = after
            .find(CLOSE)
            .unwrap_or_else(|| panic!("{path}: `{OPEN}{id} -->` is not closed"));
        fresh.push_str(&after[..line_end + " -->".len()]);
        fresh.push('\n');
        fresh.push_str(&reference_table(table));
        fresh.push_str(CLOSE);
        rest = &after[end + CLOSE.len()..];
        seen.push(table);
    }
    fresh.push_str(rest);
    seen.sort();
    assert_eq!(
        seen,
        Table::ALL.to_vec(),
        "{path}: every table of the manifest has one key table"
    );
    if burn_route_codegen::bless_requested() {
        fs::write(root().join(path), &fresh).expect("write");
    } else {
        assert!(
            doc == fresh,
            "{path}: the key tables differ from the key table (codegen/src/keys.rs); re-run with BLESS=1"
        );
    }
}

/// The variant of an error-reference example: its lines tagged `# wrong` or `# right` (and the
/// untagged ones, shared).
fn variant(text: &str, keep: &str, drop: &str) -> String {
    text.lines()
        .filter(|line| !line.contains(&format!("# {drop}")) || line.contains(&format!("# {keep}")))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// A fragment of an error-reference example inside a minimal manifest.
fn complete(fragment: &str) -> String {
    let code: Vec<&str> = fragment
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let has_table = |t: &str| fragment.lines().any(|l| l.trim() == t);
    if has_table("[routing]") {
        return fragment.to_owned();
    }
    if has_table("[[op]]") || has_table("[[type]]") {
        return format!("{DEFAULT_ROUTING}{fragment}");
    }
    if code.first().is_some_and(|l| l.starts_with('{')) {
        let entries: String = fragment.lines().map(|l| format!("    {l}\n")).collect();
        if code.iter().any(|l| l.contains("cfg =")) {
            return format!(
                "[routing]\ntrait = \"MyOps\"\nbackends = [\n    \"Flex\",\n{entries}]\n\n[[op]]\n\
                 name = \"example\"\ninputs = [{{ name = \"x\", tensor = \"float\" }}]\n\
                 output = {{ tensor = \"float\", shape = \"x\", dtype = \"x\" }}\n"
            );
        }
        return format!(
            "{DEFAULT_ROUTING}[[op]]\nname = \"example\"\ninputs = [\n    \
             {{ name = \"x\", tensor = \"float\" }},\n{entries}]\noutput = {{ tensor = \"float\" }}\n"
        );
    }
    // Op keys: the ones the fragment does not set get a default.
    let sets = |key: &str| code.iter().any(|l| l.starts_with(&format!("{key} ")));
    let mut op = String::from("[[op]]\n");
    if !sets("name") {
        op.push_str("name = \"example\"\n");
    }
    if !sets("inputs") {
        op.push_str("inputs = [{ name = \"x\", tensor = \"float\" }]\n");
    }
    if !sets("output") {
        op.push_str("output = { tensor = \"float\" }\n");
    }
    format!("{DEFAULT_ROUTING}{op}{fragment}")
}

#[test]
fn the_error_reference_examples_are_what_the_generator_says() {
    let doc = read("core/src/errors.md");
    let lines: Vec<&str> = doc.lines().collect();
    let build_time = lines
        .iter()
        .position(|l| l.contains(r#"<a id="build-time-manifest-errors">"#))
        .expect("the build-time part");
    let mut problems = Vec::new();
    let mut checked = 0;
    for block in blocks(&doc) {
        if block.lang() != "toml" {
            continue;
        }
        let at = format!("core/src/errors.md:{}", block.line);
        let anchor = lines[..block.line]
            .iter()
            .rev()
            .find_map(|l| l.strip_prefix(r#"<a id=""#)?.split('"').next())
            .expect("a section");
        let is_cargo = block.text.lines().any(|l| l.trim() == "[dependencies]");
        if is_cargo {
            if let Err(e) = toml::from_str::<toml::Table>(&block.text) {
                problems.push(format!("{at}: does not parse: {e}"));
            }
            continue;
        }
        checked += 1;
        let paired = block.text.contains("# wrong") || block.text.contains("# right");
        let render = |text: &str| Builder::new("ops.toml").render_str(&complete(text));
        let right = variant(&block.text, "right", "wrong");
        if let Err(err) = render(&right) {
            problems.push(format!(
                "{at} (#{anchor}): the right manifest is refused:\n{}\n{}",
                complete(&right),
                rendered_lines(&err).join("\n")
            ));
        }
        if !paired {
            continue;
        }
        let wrong = variant(&block.text, "wrong", "right");
        let runtime = block.line <= build_time;
        match (render(&wrong), runtime) {
            (Ok(_), true) => {}
            (Ok(_), false) => problems.push(format!(
                "{at} (#{anchor}): the wrong manifest is accepted:\n{}",
                complete(&wrong)
            )),
            (Err(err), true) => problems.push(format!(
                "{at} (#{anchor}): a run-time mistake, but the generator refuses it:\n{}",
                rendered_lines(&err).join("\n")
            )),
            (Err(Error::Manifest(report)), false) => {
                if !report.diagnostics.iter().any(|d| d.page == anchor) {
                    problems.push(format!(
                        "{at} (#{anchor}): the wrong manifest is refused, but not with this \
                         section's error:\n{}",
                        report.snippets().join("\n")
                    ));
                }
            }
            (Err(other), false) => problems.push(format!("{at}: {other}")),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    assert!(checked > 30, "only {checked} examples found");
    eprintln!("error-reference TOML examples checked: {checked}");
}

/// `text` with every `ops.toml:LINE:COL` made `ops.toml:_`: a sample's position is that of
/// the manifest it came from, not of the section's example.
fn without_position(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("ops.toml:") {
        let (head, tail) = rest.split_at(at + "ops.toml:".len());
        out.push_str(head);
        out.push('_');
        rest = tail.trim_start_matches(|c: char| c.is_ascii_digit() || c == ':');
    }
    out.push_str(rest);
    out
}

/// Each build-time section's sample messages (its **Message** block's `ops.toml:...` lines)
/// are messages the generator gives today with the section's error page: each must equal, but
/// for its position, a line of the section's `# wrong` example rendered, or of another
/// section's example with the same page. `BLESS=1` replaces the samples of a section whose
/// samples all differ with the example's own lines.
#[test]
fn the_error_reference_sample_messages_are_what_the_generator_says() {
    let doc = read("core/src/errors.md");
    let lines: Vec<&str> = doc.lines().collect();
    let build_time = lines
        .iter()
        .position(|l| l.contains(r#"<a id="build-time-manifest-errors">"#))
        .expect("the build-time part");
    let all = blocks(&doc);
    let anchor_of = |block: &Block| {
        lines[..block.line]
            .iter()
            .rev()
            .find_map(|l| l.strip_prefix(r#"<a id=""#)?.split('"').next())
            .map(str::to_owned)
    };
    // Every line the examples give, by page.
    let mut given: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for block in all
        .iter()
        .filter(|b| b.lang() == "toml" && b.line > build_time)
    {
        if !(block.text.contains("# wrong") || block.text.contains("# right")) {
            continue;
        }
        let wrong = complete(&variant(&block.text, "wrong", "right"));
        if let Err(Error::Manifest(report)) = Builder::new("ops.toml").render_str(&wrong) {
            for (d, line) in report.diagnostics.iter().zip(report.lines()) {
                given.entry(d.page.to_owned()).or_default().push(line);
            }
        }
    }
    // And every line the UI fixtures give (`codegen/tests/ui`: a manifest per family of
    // errors), for samples of variants the section's example does not show.
    let ui = root().join("codegen/tests/ui");
    let mut fixtures: Vec<_> = std::fs::read_dir(&ui)
        .expect("codegen/tests/ui")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.ends_with(".toml") && !name.ends_with(".fixed.toml")
        })
        .collect();
    fixtures.sort();
    let mut from_fixtures: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for path in fixtures {
        // Rendered from the file, as a build script reads it: one fixture is not UTF-8 on
        // purpose (the encoding error).
        if let Err(Error::Manifest(report)) = Builder::new(&path).manifest_name("ops.toml").render()
        {
            for (d, line) in report.diagnostics.iter().zip(report.lines()) {
                from_fixtures
                    .entry(d.page.to_owned())
                    .or_default()
                    .push(line);
            }
        }
    }
    // A sample ending in `...` stands for every message that starts like it.
    let matches = |sample: &str, known: &[String]| {
        let sample = without_position(sample);
        match sample.strip_suffix("...") {
            Some(prefix) => known.iter().any(|k| k.starts_with(prefix)),
            None => known.contains(&sample),
        }
    };
    let mut problems = Vec::new();
    let mut checked = 0;
    let mut rewrites: Vec<(std::ops::Range<usize>, String)> = Vec::new();
    for block in all
        .iter()
        .filter(|b| b.lang() == "text" && b.line > build_time)
    {
        let samples: Vec<&str> = block
            .text
            .lines()
            .filter(|l| l.starts_with("ops.toml:"))
            .collect();
        let Some(anchor) = anchor_of(block) else {
            continue;
        };
        if samples.is_empty() {
            continue;
        }
        // A section without a `# wrong` example is held to the UI fixtures' lines alone. The
        // one exception is a file the build script cannot read, which no manifest can show.
        if anchor == "build-io" {
            continue;
        }
        let got = given.get(&anchor).map_or(&[][..], Vec::as_slice);
        let known: Vec<String> = got
            .iter()
            .chain(from_fixtures.get(&anchor).into_iter().flatten())
            .map(|l| without_position(l))
            .collect();
        let stale: Vec<&&str> = samples.iter().filter(|s| !matches(s, &known)).collect();
        checked += samples.len();
        if stale.is_empty() {
            continue;
        }
        // What the section's example gives, else what the fixtures of its page give.
        let given_here: Vec<&str> = if got.is_empty() {
            from_fixtures
                .get(&anchor)
                .into_iter()
                .flatten()
                .map(String::as_str)
                .collect()
        } else {
            got.iter().map(String::as_str).collect()
        };
        if stale.len() == samples.len() && !given_here.is_empty() {
            let mut fresh = given_here.clone();
            fresh.dedup();
            rewrites.push((block.range.clone(), fresh.join("\n") + "\n"));
        }
        problems.push(format!(
            "core/src/errors.md:{} (#{anchor}): sample messages the generator no longer gives:\n{}\n\
             it gives:\n{}",
            block.line,
            stale.iter().map(|s| format!("  {s}")).collect::<Vec<_>>().join("\n"),
            given_here.iter().map(|s| format!("  {s}")).collect::<Vec<_>>().join("\n")
        ));
    }
    if burn_route_codegen::bless_requested() && !rewrites.is_empty() {
        let mut text = doc.clone();
        for (range, fresh) in rewrites.into_iter().rev() {
            text.replace_range(range, &fresh);
        }
        std::fs::write(root().join("core/src/errors.md"), text).expect("write errors.md");
        return;
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    assert!(checked > 30, "only {checked} sample messages checked");
    eprintln!("error-reference sample messages checked: {checked}");
}

/// Every link into the error reference from the docs (`crate::errors#ID`,
/// `super::errors#ID`, `burn_route::errors#ID`, ...) names a section it has.
#[test]
fn every_link_into_the_error_reference_names_a_section() {
    let reference = read("core/src/errors.md");
    let mut problems = Vec::new();
    for path in documents() {
        let doc = read(&path);
        for (at, _) in doc.match_indices("errors#") {
            let id: String = doc[at + "errors#".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect();
            // The guide's own errors chapter (`super::errors#routeerror`) has headings of its own.
            let chapter = doc[..at].ends_with("super::")
                && read("src/guide/errors.md")
                    .to_lowercase()
                    .contains(&id.replace('-', " "));
            if !chapter && !reference.contains(&format!("<a id=\"{id}\"></a>")) {
                problems.push(format!(
                    "{path}: `errors#{id}` names no section of the error reference"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The manifest reference's annotated manifest uses every key of the key table (the test above
/// has the generator accept it).
#[test]
fn the_annotated_manifest_uses_every_key() {
    let doc = read("src/guide/manifest.md");
    let all = blocks(&doc);
    let block = all
        .iter()
        .find(|b| b.marker.as_deref() == Some("every key"))
        .expect("the manifest reference's `<!-- every key -->` manifest");
    let missing = burn_route_codegen::keys::unused_by([block.text.as_str()]);
    assert!(
        missing.is_empty(),
        "keys the annotated manifest does not use: {missing:?}"
    );
}

/// Every chapter of the guide (`src/guide.rs`) is in the guide's index and in the README's list
/// of chapters, and those name no other.
#[test]
fn the_chapter_lists_are_the_guides_chapters() {
    let modules: Vec<String> = read("src/guide.rs")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(" {").to_owned())
        .filter(|m| !m.starts_with("chart"))
        .collect();
    assert!(modules.len() > 10, "{modules:?}");
    let index = read("src/guide/index.md");
    let readme = read("README.md");
    let readme = readme
        .split("\n## The guide\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("the README's section `## The guide`");
    let linked = |text: &str, open: &str, close: &str| -> Vec<String> {
        text.match_indices(open)
            .filter_map(|(at, _)| {
                let rest = &text[at + open.len()..];
                Some(rest[..rest.find(close)?].to_owned())
            })
            .filter(|m| !m.is_empty() && !m.contains('/') && !m.contains('#'))
            .collect()
    };
    let in_index = linked(&index, "](", ")");
    let in_readme = linked(
        readme,
        "](https://docs.rs/burn-route/0.1.0/burn_route/guide/",
        "/index.html",
    );
    assert_eq!(in_index, modules, "src/guide/index.md's chapters, in order");
    assert_eq!(
        in_readme, modules,
        "README.md's chapters of the guide, in order"
    );
}

/// The counts of ops the docs state are the manifests': `examples/downstream`'s ("eight ops"),
/// and the ops `benches/ops.rs` times (each named in the sentence, each with a group there).
#[test]
fn the_op_counts_the_docs_state_are_the_sources() {
    const WORDS: [&str; 13] = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve",
    ];
    let downstream = read("examples/downstream/ops.toml")
        .lines()
        .filter(|l| l.trim() == "[[op]]")
        .count();
    let word = WORDS[downstream];
    for path in [
        "README.md",
        "src/guide/index.md",
        "src/guide/walkthrough.md",
        "src/guide/your_own_ops.md",
    ] {
        let text = read(path).replace('\n', " ");
        for (at, _) in text.match_indices(" ops") {
            let before = text[..at].rsplit(' ').next().unwrap_or("");
            if let Some(n) = WORDS.iter().position(|w| *w == before) {
                assert_eq!(
                    n, downstream,
                    "{path}: \"{before} ops\", but examples/downstream has {word}"
                );
            }
        }
        assert!(
            text.contains(&format!("{word} ops")),
            "{path} should say examples/downstream has {word} ops"
        );
    }
    let chapter = read("src/guide/benchmarks.md").replace('\n', " ");
    let start = chapter
        .find("`benches/ops.rs` times ")
        .expect("the sentence that counts the timed ops");
    let sentence = &chapter[start..];
    let sentence = &sentence[..sentence.find(") against").expect("its end")];
    let stated: usize = sentence["`benches/ops.rs` times ".len()..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a number");
    let shipped: toml::Table = toml::from_str(&read("ops.toml")).unwrap();
    let names: Vec<String> = shipped["op"]
        .as_array()
        .unwrap()
        .iter()
        .map(|op| op["name"].as_str().unwrap().to_owned())
        .collect();
    let bench = read("benches/ops.rs");
    let named: Vec<&String> = names
        .iter()
        .filter(|n| sentence.contains(&format!("`{n}`")))
        .collect();
    assert_eq!(named.len(), stated, "the ops the sentence names: {named:?}");
    for name in named {
        assert!(
            bench.contains(&format!("/{name}")) || bench.contains(&format!("\"{name}\"")),
            "benches/ops.rs times no `{name}`"
        );
    }
}

/// The tour (`cargo run --example tour`, the README's main command) says it shows every op of
/// `ops.toml`: each op's name appears in a call in `examples/tour.rs`.
#[test]
fn the_tour_calls_every_shipped_op() {
    let shipped: toml::Table = toml::from_str(&read("ops.toml")).expect("ops.toml parses");
    let tour = read("examples/tour.rs");
    let missing: Vec<String> = shipped["op"]
        .as_array()
        .expect("ops")
        .iter()
        .map(|op| op["name"].as_str().expect("a name").to_owned())
        .filter(|name| !tour.contains(&format!("{name}(")) && !tour.contains(&format!("{name}::<")))
        .collect();
    assert!(missing.is_empty(), "the tour calls none of: {missing:?}");
}

/// The guide's feature table (`using_the_ops.md`, `# Features`) lists exactly burn-route's
/// features, each marked `on` when the default features turn it on and `off` otherwise.
#[test]
fn the_feature_table_is_the_packages_features() {
    let manifest: toml::Table = read("Cargo.toml").parse().expect("Cargo.toml");
    let features = manifest["features"].as_table().expect("[features]");
    let default: Vec<&str> = features["default"]
        .as_array()
        .expect("default features")
        .iter()
        .map(|f| f.as_str().expect("a feature name"))
        .collect();
    let mut declared: Vec<(String, &str)> = features
        .keys()
        .filter(|name| *name != "default")
        .map(|name| {
            let on = if default.contains(&name.as_str()) {
                "on"
            } else {
                "off"
            };
            (name.clone(), on)
        })
        .collect();
    let guide = read("src/guide/using_the_ops.md");
    let table = guide
        .split("\n# Features\n")
        .nth(1)
        .and_then(|rest| {
            rest.split("\n\n")
                .map(str::trim_start)
                .find(|p| p.starts_with("| feature |"))
        })
        .expect("the table of `# Features` in using_the_ops.md");
    let mut listed: Vec<(String, &str)> = table
        .lines()
        .skip(2)
        .map(|row| {
            let cells: Vec<&str> = row.split(" | ").collect();
            let name = cells[0].trim_start_matches("| ").trim_matches('`');
            (name.to_owned(), cells[1])
        })
        .collect();
    declared.sort();
    listed.sort();
    assert_eq!(
        listed, declared,
        "using_the_ops.md's feature table against Cargo.toml's [features]"
    );
}
