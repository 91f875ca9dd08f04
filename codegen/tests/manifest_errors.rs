//! Every bad manifest gives the exact `ops.toml:LINE:COL` diagnostics, all at once.

use burn_route_codegen::{Builder, Error, error_lines};

const VALID: &str = r#"[routing]
trait = "MyOps"
backends = ["Flex"]

[[op]]
name = "add"
autodiff = "differentiable"
inputs = [
    { name = "lhs", tensor = "float" },
    { name = "rhs", tensor = "float" },
]
output = { tensor = "float" }
"#;

/// The fixture's output, and with the shape and dtype an op routed to Cube declares.
const WITHOUT_METADATA: &str = "output = { tensor = \"float\" }";
const WITH_METADATA: &str = "output = { tensor = \"float\", shape = \"lhs\", dtype = \"lhs\" }";

fn errors(source: &str) -> Vec<String> {
    match Builder::new("ops.toml").render_str(source) {
        Ok(_) => panic!("manifest unexpectedly valid:\n{source}"),
        Err(err @ Error::Manifest(_)) => error_lines(&err),
        Err(other) => panic!("unexpected error kind: {other}"),
    }
}

fn edited(from: &str, to: &str) -> String {
    assert!(VALID.contains(from), "fixture has no `{from}`");
    VALID.replacen(from, to, 1)
}

#[test]
fn the_fixture_is_valid() {
    let files = Builder::new("ops.toml")
        .render_str(VALID)
        .expect("valid manifest");
    assert_eq!(files.len(), 3);
}

#[test]
fn toml_syntax_error() {
    assert_eq!(
        errors(&edited("name = \"add\"", "name = \"add")),
        [
            "ops.toml:6:8: `<syntax>`: TOML syntax error: unterminated string (it starts here); help: close it with `\"` on the same line (use `\"\"\"` for a string of several lines)"
        ]
    );
}

#[test]
fn unknown_key_with_suggestion() {
    assert_eq!(
        errors(&edited("output =", "outptu =")),
        [format!(
            "ops.toml:12:1: `op[0].outptu`: unknown key `outptu` in `op[0]`; help: did you mean `output`? known keys: {}",
            op_keys()
        )]
    );
}

#[test]
fn unknown_top_level_key() {
    assert_eq!(
        errors(&format!("[rooting]\nx = 1\n{VALID}")),
        [
            "ops.toml:1:2: `rooting`: unknown key `rooting` at the top level; help: remove it; known keys: routing, op, type"
        ]
    );
}

#[test]
fn duplicate_op_name() {
    let source = format!(
        "{VALID}\n[[op]]\nname = \"add\"\ninputs = [{{ name = \"x\", tensor = \"float\" }}]\n"
    );
    assert_eq!(
        errors(&source),
        [
            "ops.toml:15:8: `op[1].name`: duplicate op name `add` (first declared on line 6); help: rename one of the ops; op names become trait methods and must be unique"
        ]
    );
}

#[test]
fn duplicate_input_name() {
    assert_eq!(
        errors(&edited("name = \"rhs\"", "name = \"lhs\"")),
        [
            "ops.toml:10:14: `op[0].inputs[1].name`: duplicate input name `lhs`; help: give every input of an op a distinct name"
        ]
    );
}

#[test]
fn names_must_be_identifiers_and_not_keywords() {
    assert_eq!(
        errors(&edited("name = \"add\"", "name = \"add-relu\"")),
        [
            "ops.toml:6:8: `op[0].name`: op name `add-relu` is not a Rust identifier; help: did you mean `add_relu`? names are snake_case: lowercase ASCII letters, digits and single `_`"
        ]
    );
    assert_eq!(
        errors(&edited("name = \"lhs\"", "name = \"fn\"")),
        [
            "ops.toml:9:14: `op[0].inputs[0].name`: input name `fn` is a Rust keyword; help: use a name in snake_case: lowercase ASCII letters, digits and single `_`, not a keyword, not starting with `__`"
        ]
    );
    assert_eq!(
        errors(&edited("trait = \"MyOps\"", "trait = \"Self\"")),
        [
            "ops.toml:2:9: `routing.trait`: trait name `Self` is a Rust keyword; help: use a name in UpperCamelCase: ASCII letters and digits, starting with an uppercase letter, not a keyword, not starting with `__`"
        ]
    );
}

#[test]
fn unknown_tensor_kind_and_backend() {
    assert_eq!(
        errors(&edited(
            "tensor = \"float\" },\n    { name = \"rhs\"",
            "tensor = \"flaot\" },\n    { name = \"rhs\""
        )),
        [
            "ops.toml:9:30: `op[0].inputs[0].tensor`: unknown tensor kind `flaot`; help: did you mean `float`? tensor kinds: float, int, bool, quantized"
        ]
    );
    assert_eq!(
        errors(&edited("[\"Flex\"]", "[\"Flx\"]")),
        [
            "ops.toml:3:13: `routing.backends[0]`: unknown backend `Flx`; help: did you mean `Flex`? known backends: Flex, Cube, Remote"
        ]
    );
}

#[test]
fn empty_backend_list() {
    assert_eq!(
        errors(&edited("[\"Flex\"]", "[]")),
        [
            "ops.toml:3:12: `routing.backends`: empty backend list: no op could run anywhere; help: list at least one backend, e.g. `backends = [\"Flex\"]`"
        ]
    );
}

#[test]
fn policy_needs_a_float_input() {
    let source = VALID.replace("tensor = \"float\" }", "tensor = \"int\" }");
    assert_eq!(
        errors(&source),
        [
            "ops.toml:7:12: `op[0].autodiff`: op `add` is `differentiable` but has no float tensor input, so autodiff never reaches it; help: remove `autodiff` (the default `reject` is exact here), or add a float tensor input"
        ]
    );
}

#[test]
fn no_tensor_input_needs_exactly_one_backend() {
    let source = VALID
        .replace(
            "[\"Flex\"]",
            "[\"Flex\", { name = \"Cube\", cfg = 'feature = \"cube\"' }]",
        )
        .replace("autodiff = \"differentiable\"\n", "")
        .replace("tensor = \"float\" }", "type = \"f32\" }");
    assert_eq!(
        errors(&source),
        [
            "ops.toml:7:10: `op[0].inputs`: op `add` has no tensor and no device input, so nothing tells which of the 2 backends to run it on; help: add a tensor input or a `device = true` input to route by, or list exactly one backend (in the op's `backends` or in `routing.backends`)"
        ]
    );
    // With exactly one backend it is fine.
    let single = source.replace(", { name = \"Cube\", cfg = 'feature = \"cube\"' }", "");
    Builder::new("ops.toml")
        .render_str(&single)
        .expect("one backend routes a tensor-less op");
}

#[test]
fn unknown_policy_wrong_type_and_reserved_name() {
    assert_eq!(
        errors(&edited("\"differentiable\"", "\"diferentiable\"")),
        [
            "ops.toml:7:12: `op[0].autodiff`: unknown autodiff policy `diferentiable`; help: did you mean `differentiable`? one of: differentiable, detach, reject"
        ]
    );
    assert_eq!(
        errors(&edited("name = \"add\"", "name = 3")),
        [
            "ops.toml:6:8: `op[0].name`: `op[0].name` must be a string, found integer; help: write `name = \"3\"`"
        ]
    );
}

#[test]
fn plain_types_and_cfgs_must_parse() {
    assert_eq!(
        errors(&edited(
            "tensor = \"float\" },\n    { name = \"rhs\"",
            "type = \"Vec<\" },\n    { name = \"rhs\""
        )),
        [
            "ops.toml:9:28: `op[0].inputs[0].type`: `Vec<` is not a Rust type: unexpected end of input, expected one of: `for`, parentheses, `fn`, `unsafe`, `extern`, identifier, `::`, `<`, `dyn`, square brackets, `*`, `&`, `!`, `impl`, `_`, lifetime; help: write a Rust type such as \"f32\", \"usize\" or \"Option<u64>\""
        ]
    );
    assert_eq!(
        errors(&edited(
            "[\"Flex\"]",
            "[{ name = \"Flex\", cfg = \"feature = \" }]"
        )),
        [
            "ops.toml:3:36: `routing.backends[0].cfg`: `feature = ` is not a cfg predicate: unexpected end of input, expected an expression; help: write what goes inside `#[cfg(...)]`, e.g. 'feature = \"cube\"'"
        ]
    );
}

#[test]
fn missing_keys() {
    assert_eq!(
        errors("[[op]]\nname = \"x\"\ninputs = []\n"),
        [
            "ops.toml:1:1: `routing`: missing `[routing]` table; help: add `[routing]` with `trait = \"MyOps\"` and `backends = [\"Flex\"]`"
        ]
    );
    assert_eq!(
        errors(&edited("name = \"lhs\", ", "")),
        [
            "ops.toml:9:5: `op[0].inputs[0].name`: missing key `name` in `op[0].inputs[0]`; help: add `name = \"x\"`"
        ]
    );
}

#[test]
fn every_error_is_reported_in_one_pass() {
    let source = VALID
        .replace("trait = \"MyOps\"", "trait = \"My Ops\"")
        .replace("outp", "outpt")
        .replace(
            "name = \"rhs\", tensor = \"float\"",
            "name = \"rhs\", tensor = \"double\"",
        );
    assert_eq!(
        errors(&source),
        [
            "ops.toml:2:9: `routing.trait`: trait name `My Ops` contains whitespace; help: did you mean `MyOps`? names are UpperCamelCase: ASCII letters and digits, starting with an uppercase letter",
            "ops.toml:10:30: `op[0].inputs[1].tensor`: unknown tensor kind `double`; help: use one of: float, int, bool, quantized",
            format!("ops.toml:12:1: `op[0].outptut`: unknown key `outptut` in `op[0]`; help: did you mean `output`? known keys: {}", op_keys()).as_str(),
        ]
    );
}

#[test]
fn build_script_reports_cargo_errors_without_panicking() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("ops.toml");
    std::fs::write(
        &manifest,
        edited("tensor = \"float\" }\n", "tensor = \"flaot\" }\n"),
    )
    .unwrap();
    let builder = Builder::new(&manifest)
        .manifest_name("ops.toml")
        .out_dir(dir.path().join("out"));
    let mut stdout = Vec::new();
    assert!(!builder.build_script_to(&mut stdout));
    let stdout = String::from_utf8(stdout).unwrap();
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            format!("cargo::rerun-if-changed={}", manifest.display()).as_str(),
            "cargo::rerun-if-changed=build.rs",
            // The generator's own cfgs are declared, and set from burn-route's build metadata
            // (`DEP_BURN_ROUTE_*` from burn-route-runtime, `DEP_BURN_ROUTE_OPS_*` from
            // burn-route; unset here).
            "cargo::rerun-if-env-changed=DEP_BURN_ROUTE_AUTODIFF",
            "cargo::rerun-if-env-changed=DEP_BURN_ROUTE_OPS_AUTODIFF",
            "cargo::rustc-check-cfg=cfg(burn_route_autodiff)",
            "cargo::rerun-if-env-changed=DEP_BURN_ROUTE_CUBE",
            "cargo::rerun-if-env-changed=DEP_BURN_ROUTE_OPS_CUBE",
            "cargo::rustc-check-cfg=cfg(burn_route_cube)",
            "cargo::rerun-if-env-changed=DEP_BURN_ROUTE_REMOTE",
            "cargo::rerun-if-env-changed=DEP_BURN_ROUTE_OPS_REMOTE",
            "cargo::rustc-check-cfg=cfg(burn_route_remote)",
            "cargo::error=error: unknown tensor kind `flaot`",
            "cargo::error=  --> ops.toml:12:21",
            "cargo::error=   |",
            "cargo::error=12 | output = { tensor = \"flaot\" }",
            "cargo::error=   |                     ^^^^^^^ `op[0].output.tensor`",
            "cargo::error=   |",
            "cargo::error=   = help: did you mean `float`? tensor kinds: float, int, bool, quantized",
            "cargo::error=   = note: see https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#manifest-unknown-kind",
        ]
    );
    assert!(
        !dir.path().join("out").exists(),
        "nothing is written when the manifest is bad"
    );
}

#[test]
fn build_script_writes_the_files_once_and_deterministically() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("ops.toml");
    std::fs::write(&manifest, VALID).unwrap();
    let out = dir.path().join("out");
    let builder = Builder::new(&manifest).out_dir(&out);
    let first = builder.write().unwrap();
    assert_eq!(first.len(), 3);
    assert!(
        first
            .iter()
            .all(|(_, outcome)| *outcome == burn_route_codegen::WriteOutcome::Written)
    );
    let contents: Vec<String> = first
        .iter()
        .map(|(p, _)| std::fs::read_to_string(p).unwrap())
        .collect();
    let second = builder.write().unwrap();
    assert!(
        second
            .iter()
            .all(|(_, outcome)| *outcome == burn_route_codegen::WriteOutcome::Unchanged)
    );
    // Rendering again (from text) is byte-identical.
    let again: Vec<String> = Builder::new(&manifest)
        .render()
        .unwrap()
        .into_iter()
        .map(|f| f.contents)
        .collect();
    assert_eq!(contents, again);
}

#[test]
fn container_device_and_composite_rules() {
    assert_eq!(
        errors(&edited(
            "tensor = \"float\" },\n    { name = \"rhs\"",
            "tensor = \"float\", container = \"list\" },\n    { name = \"rhs\""
        )),
        [
            "ops.toml:9:51: `op[0].inputs[0].container`: unknown container `list`; help: use \"option\" (`Option<tensor>`) or \"vec\" (`Vec<tensor>`)"
        ]
    );
    assert_eq!(
        errors(&edited(
            "tensor = \"float\" },\n    { name = \"rhs\"",
            "tensor = \"float\", borrowed = true, container = \"vec\" },\n    { name = \"rhs\""
        )),
        [
            "ops.toml:9:68: `op[0].inputs[0].container`: a borrowed `vec` of tensors is not supported; help: pass the `Vec` by value (remove `borrowed`)"
        ]
    );
    assert_eq!(
        errors(&edited(
            "]\noutput",
            "    { name = \"d1\", device = true },\n    { name = \"d2\", device = true },\n]\noutput"
        )),
        [
            "ops.toml:12:5: `op[0].inputs[3]`: more than one device input; help: keep one `device = true` input: an op runs on one device"
        ]
    );
    assert_eq!(
        errors(&edited(
            "{ name = \"lhs\", tensor = \"float\" }",
            "{ name = \"lhs\", tensor = \"float\", type = \"f32\" }"
        )),
        [
            "ops.toml:9:39: `op[0].inputs[0].type`: `op[0].inputs[0]` has both `tensor` and `type`; help: give exactly one of `tensor` (a tensor), `type` (a plain Rust value) or `device = true` (the device)"
        ]
    );
    assert_eq!(
        errors(&edited(
            "{ name = \"lhs\", tensor = \"float\" }",
            "{ name = \"lhs\", type = \"f32\", dims = 2 }"
        )),
        [
            "ops.toml:9:35: `op[0].inputs[0].dims`: `dims` only applies to tensors, but `op[0].inputs[0]` is not a tensor; help: remove `dims`, or make the entry a tensor with `tensor = \"float\"`"
        ]
    );
    assert_eq!(
        errors(&edited(
            "name = \"add\"\n",
            "name = \"add\"\ncomposite = \"crate::\"\n"
        )),
        [
            "ops.toml:7:13: `op[0].composite`: composite `crate::` is not a Rust path: unexpected end of input, expected identifier; help: name the function by its full path without generic arguments, e.g. \"crate::composite::softplus\""
        ]
    );
}

#[test]
fn per_op_backends_inherit_the_routing_cfg() {
    let source = VALID
        .replace(
            "[\"Flex\"]",
            "[\"Flex\", { name = \"Cube\", cfg = 'feature = \"cube\"' }]",
        )
        .replace(
            "name = \"add\"\n",
            "name = \"add\"\nbackends = [{ name = \"Cube\", cfg = 'feature = \"gpu\"' }]\n",
        )
        .replace(WITHOUT_METADATA, WITH_METADATA);
    assert_eq!(
        errors(&source),
        [
            "ops.toml:7:36: `op[0].backends[0].cfg`: backend `Cube` already has its cfg in `routing.backends`; help: remove `cfg` here: the op uses the `routing.backends` entry for `Cube`"
        ]
    );
    let inherited = source.replace(
        "{ name = \"Cube\", cfg = 'feature = \"gpu\"' }]\n",
        "\"Cube\"]\n",
    );
    let files = Builder::new("ops.toml")
        .render_str(&inherited)
        .expect("valid");
    let dispatch = &files
        .iter()
        .find(|f| f.name == "routed_dispatch.rs")
        .unwrap()
        .contents;
    // The op's own trait is named after its backends, and its arm carries the inherited cfg.
    assert!(
        dispatch.contains("impl MyOpsCube for rt::Dispatch"),
        "{dispatch}"
    );
    for arm in [
        "(rt::BackendId::Cube, __rt::Mode::Concrete) =>",
        "rt::BackendId::Cube =>",
    ] {
        assert!(
            dispatch.contains(&format!(
                "#[cfg(all(feature = \"cube\", burn_route_cube))]\n            {arm}"
            )),
            "{arm} in {dispatch}"
        );
    }
}

#[test]
fn names_and_types_that_generated_code_cannot_scope() {
    assert_eq!(
        errors(&edited("name = \"lhs\"", "name = \"Some\"")),
        [
            "ops.toml:9:14: `op[0].inputs[0].name`: input name `Some` is not snake_case; help: did you mean `some`? names are snake_case: lowercase ASCII letters, digits and single `_`"
        ]
    );
    // Names the generated code uses for itself start with `__`; everything else is free.
    for free in ["route_add", "route", "kernel", "run", "planned", "out_0"] {
        Builder::new("ops.toml")
            .render_str(&edited("name = \"lhs\"", &format!("name = \"{free}\"")))
            .unwrap_or_else(|e| panic!("`{free}` refused: {e}"));
    }
    assert_eq!(
        errors(&edited("name = \"lhs\"", "name = \"__route\"")),
        [
            "ops.toml:9:14: `op[0].inputs[0].name`: input name `__route` starts with `__`, which is reserved for the generator's own names; help: did you mean `route`? names are snake_case: lowercase ASCII letters, digits and single `_`"
        ]
    );
    assert_eq!(
        errors(&edited(
            "{ name = \"rhs\", tensor = \"float\" }",
            "{ name = \"shape\", type = \"[usize; D]\" }"
        )),
        [
            "ops.toml:10:30: `op[0].inputs[1].type`: plain type `[usize; D]` uses `D` as a length, which is not in scope in the generated modules; help: rank generics exist only at the `Tensor<D>` level; use a number"
        ]
    );
}

#[test]
fn cfg_predicates_must_have_rustc_shape() {
    assert_eq!(
        errors(&edited(
            "[\"Flex\"]",
            "[\"Flex\", { name = \"Cube\", cfg = 'feature = cube' }]"
        )),
        [
            "ops.toml:3:44: `routing.backends[1].cfg`: `feature = cube` is not a cfg predicate: expected a string literal, as in `feature = \"cube\"`; help: write what goes inside `#[cfg(...)]`, e.g. 'feature = \"cube\"'"
        ]
    );
    let ok = edited(
        "[\"Flex\"]",
        "[\"Flex\", { name = \"Cube\", cfg = 'all(feature = \"cube\", not(target_os = \"ios\"))' }]",
    )
    .replace(WITHOUT_METADATA, WITH_METADATA);
    Builder::new("ops.toml")
        .render_str(&ok)
        .expect("nested predicates are fine");
}

#[test]
fn one_backend_one_cfg_and_no_name_clashes() {
    let two_cfgs = format!(
        "{}\n[[op]]\nname = \"b\"\nbackends = [{{ name = \"Cube\", cfg = 'feature = \"gpu\"' }}]\ninputs = [{{ name = \"x\", tensor = \"float\" }}]\n",
        edited(
            "name = \"add\"\n",
            "name = \"add\"\nbackends = [{ name = \"Cube\", cfg = 'feature = \"cube\"' }]\n"
        )
        .replace(WITHOUT_METADATA, WITH_METADATA)
    );
    assert_eq!(
        errors(&two_cfgs),
        [
            "ops.toml:17:13: `op[1].backends[0]`: backend `Cube` has a different cfg here than where it was first listed; help: give a backend the same cfg everywhere (or list it once in `routing.backends`)"
        ]
    );
    let clash = edited(
        "trait = \"MyOps\"",
        "trait = \"MyOps\"\nautodiff_trait = \"AutodiffFlex\"",
    );
    assert_eq!(
        errors(&clash),
        [
            "ops.toml:3:18: `routing.autodiff_trait`: the generated code would define `AutodiffFlex` twice; help: rename `trait` or `autodiff_trait` so the traits named after them (`...Autodiff`, `...Composite`, `...<Backends>`) and the `Autodiff<Backend>`/`Balanced<Backend>` aliases stay distinct"
        ]
    );
}

/// Diagnostics scale: all 10,000 errors are found, and the report shows a readable number of
/// them plus "and N more". (How long that takes is the `errors_10000` group of the `render`
/// bench, in BENCHMARKS.md.)
#[test]
fn ten_thousand_errors_are_all_found_and_the_report_is_capped() {
    let mut source = String::from("[routing]\ntrait = \"MyOps\"\nbackends = [\"Flex\"]\n");
    for i in 0..10_000 {
        source.push_str(&format!(
            "\n[[op]]\nname = \"op_{i}\"\ninputs = [{{ name = \"x\", tensor = \"flaot\" }}]\n"
        ));
    }
    let err = Builder::new("ops.toml").render_str(&source).unwrap_err();
    let Error::Manifest(report) = &err else {
        panic!("{err}")
    };
    assert_eq!(report.diagnostics.len(), 10_000);
    let rendered = report.render();
    let lines = error_lines(&err);
    let snippets = burn_route_codegen::rendered_lines(&err);
    let shown = burn_route_codegen::stages::SHOWN;
    assert_eq!(lines.len(), shown + 1);
    assert_eq!(
        lines[shown],
        "error: ... and 9950 more errors in ops.toml (not shown; fix the ones above first)"
    );
    assert_eq!(rendered.matches("unknown tensor kind").count(), shown);
    assert!(rendered.ends_with("10000 errors in ops.toml"), "{rendered}");
    assert_eq!(
        snippets[snippets.len() - 2..],
        [
            "error: ... and 9950 more errors in ops.toml (not shown; fix the ones above first)",
            "  = note: see https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#manifest-too-many",
        ]
    );
    // The last shown error points at op 49's line, found by binary search.
    assert!(
        lines[shown - 1].starts_with("ops.toml:203:34: `op[49].inputs[0].tensor`"),
        "{}",
        lines[shown - 1]
    );
}

/// Builder options go through validation like manifest values: the trait override meets the
/// naming rules (reported on `routing.trait`), paths must be module paths, and text written
/// into generated comments must be one plain line.
#[test]
fn builder_options_are_validated() {
    let err = Builder::new("ops.toml")
        .trait_name("Result")
        .render_str(VALID)
        .unwrap_err();
    assert_eq!(
        error_lines(&err),
        [
            "ops.toml:2:9: `Builder::trait_name`: trait name `Result` is a name of Rust's prelude, which the generated modules use (`Result`); help: choose a name of your own, e.g. `ResultOps`"
        ]
    );
    let renamed = Builder::new("ops.toml")
        .trait_name("Renamed")
        .render_str(VALID)
        .expect("valid override");
    assert!(
        renamed
            .iter()
            .any(|f| f.contents.contains("pub trait Renamed: rt::Backend"))
    );
    for (builder, message) in [
        (
            Builder::new("ops.toml").runtime_path("crate::rt<u8>"),
            "burn-route-codegen: runtime path `crate::rt<u8>` has generic arguments; a module path has none",
        ),
        (
            Builder::new("ops.toml").manifest_name("ops\n.toml"),
            "burn-route-codegen: manifest name `ops\\n.toml` contains U+000A; it is written into generated comments and must be one line of plain text",
        ),
        (
            Builder::new("ops.toml").regenerate_hint("run\u{202e} this"),
            "burn-route-codegen: regenerate hint `run\\u{202e} this` contains U+202E; it is written into generated comments and must be one line of plain text",
        ),
    ] {
        match builder.render_str(VALID) {
            Err(err @ Error::Config(_)) => assert_eq!(
                err.to_string(),
                format!(
                    "{message}. See {}",
                    burn_route_core::errors::link("build-config")
                )
            ),
            other => panic!("expected a config error, got {other:?}"),
        }
    }
}

/// The known keys of `[[op]]`, as the unknown-key help lists them: the key table's.
fn op_keys() -> String {
    burn_route_codegen::keys::Table::Op.names().join(", ")
}

/// The error reference's list of the known keys of each table (section `manifest-unknown-key`)
/// is the parser's, table by table: a new key cannot be left out of it.
#[test]
fn the_error_reference_lists_every_known_key() {
    use burn_route_codegen::keys::Table;
    let section =
        burn_route_core::errors::section("manifest-unknown-key").expect("the section exists");
    let list = &section[section
        .find("The known keys in each table are:")
        .expect("the list")..];
    let list = &list[..list.find("**How to fix**").expect("the list ends")];
    // Each item: `- TABLE: `key`, `key`, ...`, continued on indented lines.
    let mut items: Vec<(String, Vec<String>)> = Vec::new();
    for line in list.lines().skip(1) {
        if let Some(item) = line.strip_prefix("- ") {
            let (table, keys) = item.split_once(": ").expect("`TABLE: keys`");
            items.push((table.to_owned(), Vec::new()));
            items
                .last_mut()
                .expect("just pushed")
                .1
                .extend(backticked(keys));
        } else if let Some((_, keys)) = items.last_mut() {
            keys.extend(backticked(line));
        }
    }
    fn backticked(text: &str) -> Vec<String> {
        text.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    }
    let expected: Vec<(String, Vec<String>)> = Table::ALL
        .iter()
        .map(|table| {
            (
                table.title().to_owned(),
                table.names().iter().map(|k| (*k).to_owned()).collect(),
            )
        })
        .collect();
    assert_eq!(items, expected);
}

/// An op routed to Cube with a kernel of its own and no output metadata (nor composition) runs
/// eagerly on `Fusion<B>`: the build succeeds with one warning for it, which names the keys that
/// would make it one deferred operation.
#[test]
fn an_op_without_metadata_on_cube_runs_eagerly_with_a_warning() {
    let source = r#"[routing]
trait = "MyOps"
backends = ["Flex", "Cube"]

[[op]]
name = "count_pairs"
inputs = [{ name = "x", tensor = "float" }]
output = [{ tensor = "float", shape = "x" }, { tensor = "int", dims = 1 }]

[[op]]
name = "lazy"
inputs = [{ name = "x", tensor = "float" }]
output = { tensor = "float", shape = "x", dtype = "x" }
"#;
    let dir = std::env::temp_dir().join(format!("burn-route-eager-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ops.toml");
    std::fs::write(&path, source).unwrap();
    let (files, report) = Builder::new(&path)
        .manifest_name("ops.toml")
        .render_with_warnings()
        .expect("an eager op is valid");
    std::fs::remove_dir_all(&dir).unwrap();
    let report = report.expect("a warning");
    let lines: Vec<String> = report
        .diagnostics
        .iter()
        .map(|d| d.render_line(&report.file, &report.source))
        .collect();
    assert_eq!(
        lines,
        [
            "ops.toml:8:10: `op[0].output`: op `count_pairs` runs eagerly on `Fusion<B>` (what `Cube` is when fusion is on): each call waits for the fusion stream to compute its inputs, runs its Cube kernel at once and fuses with nothing around it; help: declare `op[0].output[0].dtype`, `op[0].output[1].shape`, `op[0].output[1].dtype` (an input's name, e.g. `shape = \"x\", dtype = \"x\"`, or a function path; `dtype = \"default\"` for an int or bool output) to make each call one deferred operation, or give the op `composition = \"path::to::fn\"` to run its composition there, which Burn fuses"
        ]
    );
    let ops = files
        .iter()
        .find(|f| f.name == "routed_ops.rs")
        .expect("the ops module");
    assert!(
        ops.contents
            .contains("let __eager = rt::fusion::Eager::<B>::new(\"count_pairs\");"),
        "{}",
        ops.contents
    );
}

#[test]
fn footnote_like_text_is_refused_only_where_clippy_refuses_it() {
    // Clippy's `doc_suspicious_footnotes` reads a numeric `[^1]` in text as a footnote; an
    // escaped `\[`, inline code and a word label are text.
    let with_doc = |doc: &str| {
        edited(
            "name = \"add\"\n",
            &format!("name = \"add\"\ndoc = '{doc}'\n"),
        )
    };
    for accepted in [
        r"See the paper\[^1].",
        "See `[^1]` in the code.",
        "See the note[^note].",
        "See the paper[^1].\n\n[^1]: The paper.",
    ] {
        let source = with_doc(accepted)
            .replace("doc = '", "doc = '''")
            .replace("'\n", "'''\n");
        Builder::new("ops.toml")
            .render_str(&source)
            .unwrap_or_else(|e| panic!("`{accepted}` refused: {e}"));
    }
    let lines = errors(&with_doc("See the paper[^1]."));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("doc has a footnote reference without its definition"),
        "{lines:?}"
    );
}

#[test]
fn bare_grad_is_the_one_float_field_of_a_declared_output() {
    // `grad` alone, for a struct with one float field, is that field's incoming gradient: the
    // formula reaches the backward pass (it was zeroed, with a warning that no input gets a
    // gradient).
    let source = "[routing]\ntrait = \"MyOps\"\nbackends = [\"Flex\"]\n\n[[type]]\nname = \"Nested\"\nfields = [{ name = \"b\", tensor = \"float\" }]\n\n[[op]]\nname = \"declared_out\"\nautodiff = \"differentiable\"\ninputs = [{ name = \"x\", tensor = \"float\" }]\noutput = { type = \"Nested\" }\nbackward = { x = \"grad * 2\" }\n";
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("ops.toml");
    std::fs::write(&path, source).expect("write");
    let (files, warnings) = Builder::new(&path).render_with_warnings().expect("renders");
    assert!(warnings.is_none(), "{}", warnings.unwrap().render());
    let ops = files
        .iter()
        .find(|f| f.name == "routed_ops.rs")
        .expect("the ops module");
    assert!(
        ops.contents
            .contains("__grads[0] = Some(B::float_mul_scalar(grad, __grad::scalar(2.0_f64)));"),
        "{}",
        ops.contents
    );
}

/// Shape contracts in a cycle of three rules (`a` the same as `c`, `c` broadcast with `a`),
/// with `b` depending on the cycle: the op check gives the cycle's first input a shape and
/// the others follow it, so its shapes meet every contract. The second input of the cycle got
/// a shape of its own, and the valid manifest was refused ("the op check would call `tri` with
/// `b` of shape [2] and `c` of shape [2, 3], which breaks `b`'s shape contract").
#[test]
fn contracts_in_a_cycle_get_shapes_that_meet_them() {
    let source = r#"
[routing]
trait = "Ops"
backends = ["Flex", "Remote"]

[[op]]
name = "tri"
autodiff = "differentiable"
inputs = [
    { name = "a", tensor = "float", dims = 2, borrowed = true, container = "option", shape = { same_as = "c" } },
    { name = "b", tensor = "float", dims = 1, shape = { last_dim_of = "c" } },
    { name = "c", tensor = "float", dims = 2, shape = { broadcast_with = "a" } },
    { name = "k", type = "Option<(u8, Vec<f32>)>" },
]
output = [{ tensor = "float", dims = 2, shape = "super::kernels::tri_shape", dtype = "b" }, { type = "u64" }]
composition = "super::kernels::tri"
check = { tolerance = 1e-3, ranges = { a = [-1.0, 1.0] } }
"#;
    let rendered = Builder::new("ops.toml")
        .op_check_crate("::my_ops")
        .render_str(source);
    assert!(
        rendered.is_ok(),
        "{:?}",
        rendered.err().map(|e| e.to_string())
    );
}
