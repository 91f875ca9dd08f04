//! The shell blocks of the docs name what exists: every `cargo` command's packages, features,
//! test, bench and example targets, and the test and bench filters it passes; every script;
//! every `burn-route-codegen` subcommand and flag (the CLI's own tests run those invocations on
//! the shipped manifests: `cli/tests/cli.rs`). A block that cannot be checked says why before
//! it (`<!-- not run: REASON -->`). Running each command here would take CI's whole budget (most
//! build a backend stack), so what is checked is what a rename or a removal makes false.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository root")
        .to_path_buf()
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One package of the workspace: where it is and what its `Cargo.toml` declares.
struct Package {
    dir: PathBuf,
    features: BTreeSet<String>,
    dependencies: BTreeSet<String>,
}

fn packages() -> BTreeMap<String, Package> {
    let workspace: toml::Table = toml::from_str(&read(&root().join("Cargo.toml"))).unwrap();
    let members = workspace["workspace"]["members"].as_array().unwrap();
    let mut out = BTreeMap::new();
    for member in members {
        let dir = root().join(member.as_str().unwrap());
        let manifest: toml::Table = toml::from_str(&read(&dir.join("Cargo.toml"))).unwrap();
        let name = manifest["package"]["name"].as_str().unwrap().to_owned();
        let keys = |table: &str| -> BTreeSet<String> {
            manifest
                .get(table)
                .and_then(|t| t.as_table())
                .map(|t| t.keys().cloned().collect())
                .unwrap_or_default()
        };
        let mut dependencies = keys("dependencies");
        dependencies.extend(keys("dev-dependencies"));
        dependencies.extend(keys("build-dependencies"));
        out.insert(
            name,
            Package {
                dir,
                features: keys("features"),
                dependencies,
            },
        );
    }
    out
}

/// Every Rust source under `dir`, concatenated (for filters that name a function or a group).
fn sources(dir: &Path) -> String {
    let mut text = String::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return text;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            text.push_str(&sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            text.push_str(&read(&path));
        }
    }
    text
}

/// The shell blocks of `doc` that are not marked `not run`, with their first line.
fn shell_blocks(doc: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    let mut lines = doc.lines().enumerate().peekable();
    let mut last_text = "";
    while let Some((i, line)) = lines.next() {
        let fence = line.trim_start();
        if let Some(info) = fence.strip_prefix("```") {
            let shell = matches!(info.trim(), "sh" | "bash" | "shell" | "console");
            let marked = last_text.trim_start().starts_with("<!-- not run:");
            let mut body = Vec::new();
            for (_, inner) in lines.by_ref() {
                if inner.trim_start().starts_with("```") {
                    break;
                }
                body.push(inner.to_owned());
            }
            if shell && !marked {
                out.push((i + 1, body));
            }
            last_text = "";
        } else if !line.trim().is_empty() {
            last_text = line;
        }
    }
    out
}

/// The words of a command, without leading `VAR=value`s, a `taskset -c N` and a trailing `&`.
fn words(command: &str) -> Vec<String> {
    let mut words: Vec<String> = command
        .split_whitespace()
        .skip_while(|w| w.contains('=') && !w.starts_with('-'))
        .map(|w| w.trim_matches(|c| c == '\'' || c == '"').to_owned())
        .filter(|w| w != "&")
        .collect();
    if words.first().is_some_and(|w| w == "taskset") {
        words.drain(..3.min(words.len()));
        let rest = words.join(" ");
        return self::words(&rest);
    }
    words
}

/// The lines of a shell block as commands: continuation lines joined, comments dropped, each
/// `a && b` split.
fn commands(body: &[String]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in body.iter().enumerate() {
        let code = match line.find(" #") {
            Some(at) => &line[..at],
            None => line,
        };
        let code = code.trim();
        if code.starts_with('#') {
            continue;
        }
        let (start, mut text) = pending.take().unwrap_or((i, String::new()));
        match code.strip_suffix('\\') {
            Some(head) => {
                text.push_str(head);
                text.push(' ');
                pending = Some((start, text));
            }
            None => {
                text.push_str(code);
                for part in text.split("&&") {
                    if !part.trim().is_empty() {
                        out.push((start, part.trim().to_owned()));
                    }
                }
            }
        }
    }
    out
}

/// The identifiers of a filter (a substring or a regex): the words a bench or test id contains,
/// less sizes (`1K`, `64K`).
fn identifiers(filter: &str) -> Vec<String> {
    filter
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| {
            w.chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
        })
        .map(str::to_owned)
        .collect()
}

struct Checker {
    packages: BTreeMap<String, Package>,
    cli_source: String,
    problems: std::cell::RefCell<Vec<String>>,
}

impl Checker {
    fn problem(&self, at: &str, text: String) {
        self.problems.borrow_mut().push(format!("{at}: {text}"));
    }

    fn cargo(&self, at: &str, args: &[String], cwd: &Path) {
        let Some(sub) = args.first() else {
            return self.problem(at, "a bare `cargo`".to_owned());
        };
        let (args, after) = match args.iter().position(|a| a == "--") {
            Some(i) => (&args[1..i], &args[i + 1..]),
            None => (&args[1..], &args[args.len()..]),
        };
        let mut selected: Vec<String> = Vec::new();
        let mut workspace = false;
        let mut features = Vec::new();
        let mut targets: Vec<(&str, String)> = Vec::new();
        let mut positional = Vec::new();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            match arg.as_str() {
                "-p" | "--package" => selected.extend(it.next().cloned()),
                "--workspace" => workspace = true,
                "--features" | "-F" => features.extend(
                    it.next()
                        .map(|f| f.split(',').map(str::to_owned).collect::<Vec<_>>())
                        .unwrap_or_default(),
                ),
                "--test" | "--bench" | "--example" => {
                    let kind = &arg[2..];
                    targets.extend(it.next().map(|t| (kind, t.clone())));
                }
                "--exclude" | "--profile" | "--target-dir" => {
                    it.next();
                }
                "--path" => {
                    if let Some(path) = it.next()
                        && !root().join(path).join("Cargo.toml").exists()
                    {
                        self.problem(
                            at,
                            format!("`--path {path}` is no package of this repository"),
                        );
                    }
                }
                flag if flag.starts_with('-') => {}
                word => positional.push(word.to_owned()),
            }
        }
        if sub == "install" {
            for name in &positional {
                if !self.packages.contains_key(name) {
                    self.problem(
                        at,
                        format!("`cargo install {name}`: no package of that name"),
                    );
                }
            }
            return;
        }
        if sub == "fuzz" {
            if let Some(target) = positional.get(1)
                && !root()
                    .join("codegen/fuzz/fuzz_targets")
                    .join(format!("{target}.rs"))
                    .exists()
            {
                self.problem(at, format!("no fuzz target `{target}`"));
            }
            return;
        }
        for name in &selected {
            if !self.packages.contains_key(name) {
                self.problem(
                    at,
                    format!("`-p {name}`: no package of that name in the workspace"),
                );
            }
        }
        let scope: Vec<&Package> = if workspace {
            self.packages.values().collect()
        } else if selected.is_empty() {
            self.packages.values().filter(|p| p.dir == cwd).collect()
        } else {
            selected
                .iter()
                .filter_map(|n| self.packages.get(n))
                .collect()
        };
        for feature in &features {
            let known = scope.iter().any(|p| match feature.split_once('/') {
                Some((dep, _)) => p.dependencies.contains(dep),
                None => p.features.contains(feature),
            });
            if !known {
                self.problem(
                    at,
                    format!("feature `{feature}` is no feature of the selected packages"),
                );
            }
        }
        let mut filter_sources = String::new();
        for (kind, name) in &targets {
            let folder = match *kind {
                "test" => "tests",
                "bench" => "benches",
                _ => "examples",
            };
            let found = scope.iter().find(|p| {
                let dir = p.dir.join(folder);
                dir.join(format!("{name}.rs")).exists() || dir.join(name).join("main.rs").exists()
            });
            match found {
                Some(p) => {
                    let dir = p.dir.join(folder);
                    let file = dir.join(format!("{name}.rs"));
                    if file.exists() {
                        filter_sources.push_str(&read(&file));
                    }
                    filter_sources.push_str(&sources(&dir.join(name)));
                    if *kind == "bench" {
                        filter_sources.push_str(&sources(&dir.join("common")));
                    }
                }
                None => self.problem(at, format!("`--{kind} {name}`: no such target")),
            }
        }
        // Filters: after `--` (or, for `cargo test`, positional words), each must name something
        // in the selected target's sources: a module (`cube::`), a group or function name.
        let filters: Vec<&String> = if sub == "test" {
            positional.iter().chain(after).collect()
        } else if sub == "bench" {
            after.iter().collect()
        } else {
            Vec::new()
        };
        if filter_sources.is_empty() && !filters.is_empty() {
            for p in &scope {
                filter_sources.push_str(&sources(&p.dir.join("tests")));
                filter_sources.push_str(&sources(&p.dir.join("src")));
            }
        }
        for filter in filters.into_iter().filter(|f| !f.starts_with('-')) {
            for token in identifiers(filter) {
                if !filter_sources.contains(&token) {
                    self.problem(
                        at,
                        format!("filter `{filter}`: `{token}` is nowhere in the target's sources"),
                    );
                }
            }
        }
    }

    fn cli(&self, at: &str, args: &[String]) {
        let Some(sub) = args.first() else { return };
        if !self.cli_source.contains(&format!("\"{sub}\""))
            && !self
                .cli_source
                .to_lowercase()
                .contains(&format!("    {sub}"))
        {
            self.problem(
                at,
                format!("`burn-route-codegen {sub}`: no such subcommand"),
            );
        }
        for flag in args.iter().filter(|a| a.starts_with("--")) {
            let long = flag.trim_start_matches('-').replace('-', "_");
            if !self.cli_source.contains(&long) {
                self.problem(
                    at,
                    format!("`{flag}`: no such option of `burn-route-codegen {sub}`"),
                );
            }
        }
        if sub == "explain"
            && let Some(page) = args.get(1)
            && burn_route_core::errors::section(page).is_none()
        {
            self.problem(
                at,
                format!("`explain {page}`: no such page in the error reference"),
            );
        }
    }
}

fn checker() -> Checker {
    Checker {
        packages: packages(),
        cli_source: sources(&root().join("cli/src")),
        problems: std::cell::RefCell::new(Vec::new()),
    }
}

/// What a rename or a removal leaves behind is found.
#[test]
fn the_check_finds_names_that_do_not_exist() {
    let checker = checker();
    let body: Vec<String> = [
        "cargo test -p no-such-package",
        "cargo test --features no_such_feature,no-such-dep/x",
        "cargo test --test no_such_test",
        "cargo bench --bench ops -- 'fwd/no_such_op/'",
        "cargo test --test integration -- no_such_module::",
        "burn-route-codegen frobnicate",
        "burn-route-codegen check ops.toml --no-such-flag",
        "burn-route-codegen explain no-such-page",
    ]
    .map(str::to_owned)
    .to_vec();
    for (i, command) in commands(&body) {
        let w = words(&command);
        match w[0].as_str() {
            "cargo" => checker.cargo(&i.to_string(), &w[1..], &root()),
            _ => checker.cli(&i.to_string(), &w[1..]),
        }
    }
    let problems = checker.problems.into_inner();
    let lines: BTreeSet<&str> = problems
        .iter()
        .map(|p| p.split(':').next().unwrap())
        .collect();
    assert_eq!(lines.len(), body.len(), "{problems:#?}");
    assert_eq!(problems.len(), 9, "{problems:#?}");
}

#[test]
fn shell_blocks_name_what_exists() {
    let mut docs: Vec<PathBuf> = [
        "README.md",
        "CONTRIBUTING.md",
        "BENCHMARKS.md",
        "cli/README.md",
        "core/src/errors.md",
    ]
    .iter()
    .map(|p| root().join(p))
    .collect();
    let mut guide: Vec<PathBuf> = fs::read_dir(root().join("src/guide"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    guide.sort();
    docs.extend(guide);
    let checker = checker();
    let mut commands_seen = 0;
    for doc in &docs {
        let rel = doc.strip_prefix(root()).unwrap().display().to_string();
        for (line, body) in shell_blocks(&read(doc)) {
            let mut cwd = root();
            for (offset, command) in commands(&body) {
                let at = format!("{rel}:{}", line + 1 + offset);
                let w = words(&command);
                commands_seen += 1;
                match w.first().map(String::as_str) {
                    Some("cargo") => checker.cargo(&at, &w[1..], &cwd),
                    Some("burn-route-codegen") => checker.cli(&at, &w[1..]),
                    Some("cd") => {
                        cwd = cwd.join(w.get(1).map_or("", String::as_str));
                        if !cwd.is_dir() {
                            checker.problem(&at, format!("no directory `{}`", cwd.display()));
                        }
                    }
                    Some("touch") => {
                        for file in &w[1..] {
                            if !cwd.join(file).exists() {
                                checker.problem(&at, format!("no file `{file}` to touch"));
                            }
                        }
                    }
                    Some(script) if script.starts_with("scripts/") => {
                        if !root().join(script).exists() {
                            checker.problem(&at, format!("no script `{script}`"));
                        }
                    }
                    Some(binary)
                        if binary.starts_with("target/") && binary.contains("/examples/") =>
                    {
                        let name = binary.rsplit('/').next().unwrap_or("");
                        if !root().join("examples").join(format!("{name}.rs")).exists() {
                            checker.problem(&at, format!("no example `{name}` builds `{binary}`"));
                        }
                    }
                    _ => checker.problem(
                        &at,
                        format!(
                            "`{command}` is neither cargo, burn-route-codegen, a script nor a \
                             built example: mark the block `<!-- not run: REASON -->`"
                        ),
                    ),
                }
            }
        }
    }
    let problems = checker.problems.into_inner();
    assert!(
        problems.is_empty(),
        "shell commands in the docs that name what does not exist:\n{}",
        problems.join("\n")
    );
    assert!(
        commands_seen > 40,
        "only {commands_seen} shell commands found"
    );
}
