//! What the docs say about using the crates before they are published, and about the versions
//! they support, against the repository: the `[patch.crates-io]` section of the README names
//! each published crate by the folder that holds it, `cargo install --path cli` installs the
//! command, every published crate declares the `rust-version` the README states, and the guide's
//! count of `examples/downstream`'s ops is its manifest's.

use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The packages this repository publishes, by folder (those without `publish = false`).
const PUBLISHED: &[(&str, &str)] = &[
    ("burn-route", "."),
    ("burn-route-core", "core"),
    ("burn-route-runtime", "runtime"),
    ("burn-route-codegen", "codegen"),
    ("burn-route-cli", "cli"),
];

fn package(folder: &str) -> toml::Table {
    let manifest: toml::Table = read(&format!("{folder}/Cargo.toml"))
        .parse()
        .expect("Cargo.toml");
    manifest["package"].as_table().expect("[package]").clone()
}

#[test]
fn the_published_list_is_every_package_without_publish_false() {
    let workspace: toml::Table = read("Cargo.toml").parse().expect("Cargo.toml");
    let members = workspace["workspace"]["members"]
        .as_array()
        .expect("members");
    for member in members {
        let folder = member.as_str().expect("a path");
        let p = package(folder);
        let published = p.get("publish").and_then(toml::Value::as_bool) != Some(false);
        let name = p["name"].as_str().expect("name");
        assert_eq!(
            published,
            PUBLISHED.contains(&(name, folder)),
            "`{name}` in `{folder}`: PUBLISHED in this test is stale"
        );
    }
}

#[test]
fn the_readme_patch_section_names_each_library_by_its_folder() {
    let readme = read("README.md");
    let start = readme
        .find("```toml\n[patch.crates-io]\n")
        .expect("the README shows a [patch.crates-io] section");
    let block = &readme[start + "```toml\n".len()..];
    let block = &block[..block.find("```").expect("the block ends")];
    let table: toml::Table = block.parse().expect("the section parses");
    let patch = table["patch"]["crates-io"]
        .as_table()
        .expect("[patch.crates-io]");
    let libraries: Vec<&(&str, &str)> = PUBLISHED
        .iter()
        .filter(|(name, _)| *name != "burn-route-cli")
        .collect();
    assert_eq!(patch.len(), libraries.len(), "{patch:?}");
    for (name, folder) in libraries {
        let path = patch
            .get(*name)
            .and_then(|v| v.get("path"))
            .and_then(toml::Value::as_str)
            .unwrap_or_else(|| panic!("the README's section does not patch `{name}`"));
        let expected = if *folder == "." {
            "../burn-route".to_owned()
        } else {
            format!("../burn-route/{folder}")
        };
        assert_eq!(path, expected, "`{name}`");
        assert_eq!(package(folder)["name"].as_str(), Some(*name));
    }
}

#[test]
fn cargo_install_path_cli_installs_the_command() {
    let cli: toml::Table = read("cli/Cargo.toml").parse().expect("cli/Cargo.toml");
    let bins = cli["bin"].as_array().expect("[[bin]]");
    assert!(
        bins.iter()
            .any(|b| b["name"].as_str() == Some("burn-route-codegen")),
        "{bins:?}"
    );
    for doc in ["README.md", "cli/README.md", "src/guide/command_line.md"] {
        assert!(
            read(doc).contains("cargo install --path cli"),
            "{doc} does not show the install from a clone"
        );
    }
}

#[test]
fn every_published_crate_declares_the_rust_version_the_readme_states() {
    let readme = read("README.md");
    let at = readme
        .find("`rust-version` in every crate is ")
        .expect("the README states the rust-version")
        + "`rust-version` in every crate is ".len();
    let stated: String = readme[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let stated = stated.trim_end_matches('.');
    assert!(
        readme.contains(&format!("stable Rust toolchain ({stated} or later")),
        "the README's two commands name another toolchain than {stated}"
    );
    for (name, folder) in PUBLISHED {
        assert_eq!(
            package(folder)
                .get("rust-version")
                .and_then(toml::Value::as_str),
            Some(stated),
            "`{name}` declares another rust-version than the README's {stated}"
        );
    }
}

#[test]
fn the_guide_counts_the_downstream_ops() {
    let ops = read("examples/downstream/ops.toml")
        .matches("\n[[op]]\n")
        .count();
    let words = [
        "no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve",
    ];
    let said = format!("is a complete crate with {} ops", words[ops]);
    assert!(
        read("src/guide/your_own_ops.md").contains(&said),
        "the guide should say `{said}`"
    );
}
