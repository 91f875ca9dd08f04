//! Advice that leads out: for each error, applying the fix its help names makes that error go
//! away, and what is left (nothing, here) never asks to undo the fix.

use burn_route_codegen::{Builder, Error};

/// The `(key, help)` of each error of `source`; empty when it renders.
fn errors(source: &str) -> Vec<(String, String)> {
    match Builder::new("ops.toml").op_check().render_str(source) {
        Ok(_) => Vec::new(),
        Err(Error::Manifest(report)) => report
            .diagnostics
            .iter()
            .filter(|d| !d.warning)
            .map(|d| (d.key.clone(), d.help.clone().unwrap_or_default()))
            .collect(),
        Err(other) => panic!("unexpected error: {other}"),
    }
}

/// `source` fails at `key` with a help that says `advice`; replacing `from` by `to` (doing what
/// it says) renders.
#[track_caller]
fn follow(source: &str, key: &str, advice: &str, from: &str, to: &str) {
    let before = errors(source);
    let Some((_, help)) = before.iter().find(|(k, _)| k == key) else {
        panic!("no error at `{key}`: {before:?}\n{source}");
    };
    assert!(
        help.contains(advice),
        "the help at `{key}` is `{help}`, not `{advice}`"
    );
    assert!(source.contains(from), "`{from}` is not in the manifest");
    let fixed = source.replacen(from, to, 1);
    let after = errors(&fixed);
    assert!(after.is_empty(), "after `{advice}`: {after:?}\n{fixed}");
}

const HEAD: &str = "[routing]\ntrait = \"MyOps\"\nbackends = [\"Flex\"]\n\n";

fn manifest(routing_backends: &str, body: &str) -> String {
    HEAD.replace("[\"Flex\"]", routing_backends) + body
}

const PAIR: &str = "[[type]]\nname = \"Pair\"\nfields = [{ name = \"a\", tensor = \"float\" }, { name = \"s\", type = \"f32\" }]\n\n";

#[test]
fn a_declared_input_op_on_cube_with_fusion_kernel_leads_out_both_ways() {
    // Routed to Cube only: the output's metadata has no reader, and `fusion = "kernel"` has no
    // lazy form. Each help, followed alone, leaves the other error, which never asks to put the
    // first fix back; followed together, the manifest renders.
    let op = "[[op]]\nname = \"scaled\"\nautodiff = \"detach\"\ninputs = [{ name = \"p\", type = \"Pair\" }, { name = \"x\", tensor = \"float\" }]\noutput = { tensor = \"float\", shape = \"x\", dtype = \"x\" }\ncomposition = \"crate::c::scaled\"\nfusion = \"kernel\"\n";
    let source = manifest("[\"Cube\"]", &format!("{PAIR}{op}"));
    let keys: Vec<String> = errors(&source).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["op[0].output", "op[0].fusion"]);
    let without_metadata = source.replace(", shape = \"x\", dtype = \"x\"", "");
    let left = errors(&without_metadata);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].0, "op[0].fusion");
    assert!(
        !left[0].1.contains("declare `shape`"),
        "asks to undo: {left:?}"
    );
    let without_fusion = source.replace("fusion = \"kernel\"\n", "");
    let left = errors(&without_fusion);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].0, "op[0].output");
    follow(
        &without_fusion,
        "op[0].output",
        "remove `shape` and `dtype`",
        ", shape = \"x\", dtype = \"x\"",
        "",
    );
    // On every backend, the metadata is for Remote, and only `fusion` goes.
    let source = manifest("[\"Flex\", \"Cube\", \"Remote\"]", &format!("{PAIR}{op}"));
    follow(
        &source,
        "op[0].fusion",
        "remove `fusion`",
        "fusion = \"kernel\"\n",
        "",
    );
}

#[test]
fn ranges_lead_out() {
    let op = |range: &str| {
        manifest(
            "[\"Flex\"]",
            &format!(
                "[[op]]\nname = \"f\"\ninputs = [{{ name = \"x\", tensor = \"float\" }}, {{ name = \"i\", tensor = \"int\" }}]\noutput = {{ tensor = \"float\" }}\ncheck = {{ ranges = {{ {range} }} }}\n"
            ),
        )
    };
    follow(
        &op("x = [2, 1]"),
        "op[0].check.ranges.x",
        "swap the bounds: `[1, 2]`",
        "[2, 1]",
        "[1, 2]",
    );
    follow(
        &op("x = [1, 1]"),
        "op[0].check.ranges.x",
        "`[1, 2]`",
        "[1, 1]",
        "[1, 2]",
    );
    follow(
        &op("x = [0, inf]"),
        "op[0].check.ranges.x",
        "`[-1e6, 1e6]`",
        "[0, inf]",
        "[-1e6, 1e6]",
    );
    follow(
        &op("x = [nan, 1]"),
        "op[0].check.ranges.x",
        "`[-1, 1]`",
        "[nan, 1]",
        "[-1, 1]",
    );
    follow(
        &op("i = [0.5, 1]"),
        "op[0].check.ranges.i",
        "`[1, 2]`",
        "[0.5, 1]",
        "[1, 2]",
    );
    follow(
        &op("i = [0, 3e9]"),
        "op[0].check.ranges.i",
        "[-2147483648, 2147483648]",
        "3e9",
        "2147483647",
    );
}

#[test]
fn check_shapes_lead_out() {
    let source = manifest(
        "[\"Flex\"]",
        "[[op]]\nname = \"norm\"\ninputs = [{ name = \"x\", tensor = \"float\" }, { name = \"w\", tensor = \"float\", dims = 1, shape = { last_dim_of = \"x\" } }, { name = \"y\", tensor = \"float\" }]\noutput = { tensor = \"float\" }\ncheck = { shapes = { x = [2, 3], w = [4] } }\n",
    );
    follow(
        &source,
        "op[0].check.shapes.w",
        "give `w` the shape [3]",
        "w = [4]",
        "w = [3]",
    );
    follow(
        &source,
        "op[0].check.shapes.w",
        "remove it from `shapes`",
        ", w = [4]",
        "",
    );
    let ranks = source.replace("w = [4]", "y = [2, 3, 4]");
    follow(
        &ranks,
        "op[0].check.shapes.y",
        "a shape of 2 dimensions",
        "[2, 3, 4]",
        "[4, 5]",
    );
    // A broadcast rule allows several shapes: the help names one.
    let broadcast = manifest(
        "[\"Flex\"]",
        "[[op]]\nname = \"scaled\"\ninputs = [{ name = \"x\", tensor = \"float\" }, { name = \"w\", tensor = \"float\", shape = { broadcast_to = \"x\" } }]\noutput = { tensor = \"float\" }\ncheck = { shapes = { x = [3, 4], w = [2, 4] } }\n",
    );
    follow(
        &broadcast,
        "op[0].check.shapes.w",
        "such as [1, 4]",
        "w = [2, 4]",
        "w = [1, 4]",
    );
}

#[test]
fn formula_dimensions_lead_out() {
    let source = manifest(
        "[\"Flex\"]",
        "[[op]]\nname = \"f\"\nautodiff = \"differentiable\"\ninputs = [{ name = \"x\", tensor = \"float\", dims = 2 }]\noutput = { tensor = \"float\", dims = 2 }\nbackward = { x = \"grad / dim_size(x, 2)\" }\n",
    );
    follow(
        &source,
        "op[0].backward.x",
        "-1 to -2 from the end",
        "dim_size(x, 2)",
        "dim_size(x, -1)",
    );
    // A formula for an input of another rank than the output.
    let ranks = source
        .replace(
            "output = { tensor = \"float\", dims = 2 }",
            "output = { tensor = \"float\" }",
        )
        .replace("grad / dim_size(x, 2)", "grad");
    follow(
        &ranks,
        "op[0].backward.x",
        "give `x` and the output the same `dims`",
        "output = { tensor = \"float\" }",
        "output = { tensor = \"float\", dims = 2 }",
    );
}

#[test]
fn keys_without_effect_lead_out() {
    let detach = manifest(
        "[\"Flex\"]",
        "[[op]]\nname = \"f\"\nautodiff = \"detach\"\ninputs = [{ name = \"x\", tensor = \"float\" }]\noutput = { tensor = \"float\" }\ncheck = { gradients = false }\n",
    );
    follow(
        &detach,
        "op[0].check.gradients",
        "remove `gradients`",
        "check = { gradients = false }\n",
        "",
    );
    let tolerance = detach.replace("gradients = false", "tolerance = 0.1");
    follow(
        &tolerance,
        "op[0].check.tolerance",
        "remove `tolerance`",
        "check = { tolerance = 0.1 }\n",
        "",
    );
    let dtype = detach
        .replace(
            "output = { tensor = \"float\" }",
            "output = { tensor = \"float\", dtype = \"x\" }",
        )
        .replace("check = { gradients = false }\n", "");
    follow(
        &dtype,
        "op[0].output.dtype",
        "add `shape`",
        "dtype = \"x\"",
        "shape = \"x\", dtype = \"x\"",
    );
    follow(
        &dtype,
        "op[0].output.dtype",
        "remove `dtype`",
        ", dtype = \"x\"",
        "",
    );
    let field = manifest(
        "[\"Flex\"]",
        "[[type]]\nname = \"Pair\"\nfields = [{ name = \"a\", tensor = \"float\", shape = \"x\" }]\n\n[[op]]\nname = \"f\"\ninputs = [{ name = \"p\", type = \"Pair\" }, { name = \"x\", tensor = \"float\" }]\noutput = { tensor = \"float\" }\n",
    );
    follow(
        &field,
        "type[0].fields[0].shape",
        "remove `shape`",
        ", shape = \"x\"",
        "",
    );
    let asynchronous = manifest(
        "[\"Flex\", \"Cube\"]",
        "[[op]]\nname = \"f\"\nasync = true\ninputs = [{ name = \"x\", tensor = \"float\" }]\noutput = { tensor = \"float\" }\ncomposition = \"crate::c::f\"\nfusion = \"composition\"\n",
    );
    follow(
        &asynchronous,
        "op[0].fusion",
        "remove `fusion`",
        "fusion = \"composition\"\n",
        "",
    );
}

#[test]
fn a_formula_that_is_not_linear_is_shown_one_that_is_in_the_ops_own_names() {
    let source = manifest(
        "[\"Flex\"]",
        "[[type]]\nname = \"Moments\"\nfields = [{ name = \"first\", tensor = \"float\" }, { name = \"second\", tensor = \"float\" }]\n\n[[op]]\nname = \"moments\"\nautodiff = \"differentiable\"\ninputs = [{ name = \"x\", tensor = \"float\" }]\noutput = { type = \"Moments\" }\nbackward = { x = \"grad.first * grad.second\" }\n",
    );
    follow(
        &source,
        "op[0].backward.x",
        "\"grad.first * 2 + grad.second * x\"",
        "grad.first * grad.second",
        "grad.first * 2 + grad.second * x",
    );
}

#[test]
fn long_values_are_cut_in_messages() {
    let long = "a".repeat(200_000);
    let source = manifest(
        "[\"Flex\"]",
        &format!(
            "[[op]]\nname = \"f\"\nautodiff = \"{long}\"\ninputs = [{{ name = \"x\", tensor = \"float\" }}]\n"
        ),
    );
    let Err(err) = Builder::new("ops.toml").render_str(&source) else {
        panic!("an unknown policy is an error");
    };
    let lines = burn_route_codegen::error_lines(&err);
    assert_eq!(
        lines,
        [format!(
            "ops.toml:7:12: `op[0].autodiff`: unknown autodiff policy `{}…{}`; help: use one of: differentiable, detach, reject",
            "a".repeat(40),
            "a".repeat(16)
        )]
    );
}

#[test]
fn an_op_that_gives_no_gradient_is_warned() {
    let source = manifest(
        "[\"Flex\"]",
        "[[op]]\nname = \"f\"\nautodiff = \"differentiable\"\ninputs = [{ name = \"x\", tensor = \"float\" }]\noutput = { tensor = \"float\" }\nbackward = { x = \"none\" }\n",
    );
    let dir = std::env::temp_dir().join(format!("burn-route-no-gradient-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ops.toml");
    std::fs::write(&path, &source).unwrap();
    let (_, report) = Builder::new(&path)
        .manifest_name("ops.toml")
        .render_with_warnings()
        .expect("the op is valid");
    let report = report.expect("a warning");
    let lines: Vec<String> = report
        .diagnostics
        .iter()
        .map(|d| d.render_line(&report.file, &report.source))
        .collect();
    assert_eq!(
        lines,
        [
            "ops.toml:10:12: `op[0].backward`: op `f` is `differentiable`, but its backward pass gives no float input a gradient (every formula is \"none\"): no gradient ever flows through it; help: write `autodiff = \"detach\"` and remove `backward` (what the op does now: its output carries no gradient back), or give the inputs that have a gradient one"
        ]
    );
    // Following it renders without the warning.
    let fixed = source
        .replace("\"differentiable\"", "\"detach\"")
        .replace("backward = { x = \"none\" }\n", "");
    std::fs::write(&path, &fixed).unwrap();
    let (_, report) = Builder::new(&path)
        .manifest_name("ops.toml")
        .render_with_warnings()
        .expect("the op is valid");
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(report.is_none(), "{report:?}");
}

#[test]
fn a_differentiable_op_without_float_output_is_warned() {
    let source = manifest(
        "[\"Flex\"]",
        "[[op]]\nname = \"count\"\nautodiff = \"differentiable\"\ninputs = [{ name = \"x\", tensor = \"float\" }]\ncomposition = \"crate::k::count\"\noutput = { tensor = \"int\" }\n",
    );
    let dir =
        std::env::temp_dir().join(format!("burn-route-no-float-output-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ops.toml");
    std::fs::write(&path, &source).unwrap();
    let warnings = |path: &std::path::Path| {
        let (_, report) = Builder::new(path)
            .manifest_name("ops.toml")
            .render_with_warnings()
            .expect("the op is valid");
        report.map(|report| {
            report
                .diagnostics
                .iter()
                .map(|d| d.render_line(&report.file, &report.source))
                .collect::<Vec<_>>()
        })
    };
    assert_eq!(
        warnings(&path).expect("a warning"),
        [
            "ops.toml:7:12: `op[0].autodiff`: op `count` is `differentiable`, but returns no float tensor: nothing it returns carries a gradient back; help: write `autodiff = \"detach\"` (what the op does now: a tracked input is read, and no gradient flows back through the op), or return a float tensor"
        ]
    );
    // Following it renders without the warning.
    std::fs::write(&path, source.replace("\"differentiable\"", "\"detach\"")).unwrap();
    let left = warnings(&path);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(left.is_none(), "{left:?}");
}

/// The kinds of help every fixture can follow mechanically, over all of `tests/ui`: "did you
/// mean `X`" (the name at the span replaced by `X`), and "remove `KEY`" on a diagnostic at that
/// key, "remove this key", "remove this formula" and "remove it" (the `KEY = value` pair
/// deleted), and "set/add/write `KEY = VALUE`" for a key of the op (set under its header). After the edit, that error is gone, and no error
/// asks to put back what was removed.
#[test]
fn every_did_you_mean_and_remove_help_of_the_ui_fixtures_leads_out() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui");
    let mut fixtures: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/ui")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    fixtures.sort();
    let (mut followed, mut problems) = (0, Vec::new());
    for path in fixtures {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        // (A fixture of bytes that are not UTF-8 has nothing to follow.)
        let Ok(source) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Err(Error::Manifest(report)) = Builder::new("ops.toml").op_check().render_str(&source)
        else {
            continue;
        };
        for d in report.diagnostics.iter().filter(|d| !d.warning) {
            let help = d.help.clone().unwrap_or_default();
            let Some(fixed) = mechanical_fix(&source, d, &help) else {
                continue;
            };
            followed += 1;
            let after = match Builder::new("ops.toml").op_check().render_str(&fixed) {
                Ok(_) => Vec::new(),
                Err(Error::Manifest(r)) => {
                    r.diagnostics.into_iter().filter(|d| !d.warning).collect()
                }
                Err(other) => panic!("{file}: {other}"),
            };
            if let Some(same) = after
                .iter()
                .find(|a| a.key == d.key && a.message == d.message)
            {
                problems.push(format!(
                    "{file}: `{}`: following `{help}` leaves `{}`",
                    d.key, same.message
                ));
            }
            // A new error of the same op or type (other entries may report only once this one
            // is fixed) that asks for the removed key.
            let entity = |key: &str| key.split('.').next().unwrap_or_default().to_owned();
            if let Some(removed) = removed_key(d, &help)
                && let Some(back) = after.iter().find(|a| {
                    let h = a.help.clone().unwrap_or_default();
                    entity(&a.key) == entity(&d.key)
                        && !report
                            .diagnostics
                            .iter()
                            .any(|b| b.key == a.key && b.message == a.message)
                        && (h.contains(&format!("add `{removed}"))
                            || h.contains(&format!("declare `{removed}")))
                })
            {
                problems.push(format!(
                    "{file}: `{}`: removing `{removed}` as its help says brings `{}` asking for it back: {}",
                    d.key,
                    back.key,
                    back.help.clone().unwrap_or_default()
                ));
            }
            // The same for a key the help sets: nothing new asks to remove it.
            if let Some((set, _)) = op_key_edit(&help)
                && let Some(back) = after.iter().find(|a| {
                    entity(&a.key) == entity(&d.key)
                        && !report
                            .diagnostics
                            .iter()
                            .any(|b| b.key == a.key && b.message == a.message)
                        && a.help
                            .as_deref()
                            .is_some_and(|h| h.contains(&format!("remove `{set}`")))
                })
            {
                problems.push(format!(
                    "{file}: `{}`: setting `{set}` as its help says brings `{}` asking to remove it",
                    d.key, back.key
                ));
            }
        }
    }
    eprintln!("{followed} helps of the UI fixtures followed");
    assert!(
        followed >= 80,
        "only {followed} helps followed: the fixtures changed?"
    );
    assert!(
        problems.is_empty(),
        "{} of {followed} helps do not lead out:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The key a "remove `KEY`" help removes, when the diagnostic stands at that key.
fn removed_key(d: &burn_route_codegen::Diagnostic, help: &str) -> Option<String> {
    let last = d.key.rsplit('.').next()?;
    let plain = |key: &str| key.chars().all(|c| c.is_ascii_lowercase() || c == '_');
    // "remove this key", "remove this formula", "remove it" (an unknown key): the key at fault.
    if [
        "remove this key",
        "remove this formula",
        "remove it;",
        "remove it,",
    ]
    .iter()
    .any(|h| help.starts_with(h) || help.contains(&format!(", or {h}")))
    {
        return plain(last).then(|| last.to_owned());
    }
    let start = help.find("remove `")? + "remove `".len();
    let key = &help[start..start + help[start..].find('`')?];
    (last == key && plain(key)).then(|| key.to_owned())
}

/// `source` with the help's edit made, for the mechanical kinds.
fn mechanical_fix(source: &str, d: &burn_route_codegen::Diagnostic, help: &str) -> Option<String> {
    let at = d.span.clone();
    let text = source.get(at.clone())?;
    // "set/add/write `KEY = VALUE`" (or "give the op `composition = ...`") for a key of the op
    // at fault: the key set to that value under its `[[op]]` header (replacing the line that
    // sets it, if any).
    if let Some((key, value)) = op_key_edit(help)
        && let Some(index) = d
            .key
            .strip_prefix("op[")
            .and_then(|rest| rest.split(']').next())
            .and_then(|n| n.parse::<usize>().ok())
    {
        let mut fixed = set_op_key(source, index, key, &value)?;
        // "(with a `composition`)": the key needs one too.
        if help.contains("(with a `composition`)") {
            fixed = set_op_key(&fixed, index, "composition", "\"crate::c::f\"")?;
        }
        return Some(fixed);
    }
    if let Some(start) = help.find("did you mean `") {
        let start = start + "did you mean `".len();
        let suggestion = &help[start..start + help[start..].find('`')?];
        let replacement = if text.starts_with('"') {
            format!("\"{suggestion}\"")
        } else if text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            suggestion.to_owned()
        } else {
            return None;
        };
        let mut fixed = source.to_owned();
        fixed.replace_range(at, &replacement);
        return Some(fixed);
    }
    let key = removed_key(d, help)?;
    // The pair: `key = value` with the span on the value (or on the key itself).
    let line_start = source[..at.start].rfind('\n').map_or(0, |i| i + 1);
    let before = &source[line_start..at.start];
    let pair_start = line_start
        + before
            .rfind(&format!("{key} ="))
            .or_else(|| (text == key).then_some(before.len()))?;
    let value_end = if text == key {
        // The span is the key: the value runs to the next `,`, `}` or line end at depth 0.
        let rest = &source[at.end..];
        let mut depth = 0i32;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            match c {
                '{' | '[' => depth += 1,
                '}' | ']' if depth == 0 => {
                    end = i;
                    break;
                }
                '}' | ']' => depth -= 1,
                ',' | '\n' if depth == 0 => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        at.end + end
    } else {
        at.end
    };
    let mut fixed = source.to_owned();
    let prefix = &source[line_start..pair_start];
    if prefix.trim().is_empty() {
        // A line of its own (`key = value`): the line goes.
        let line_end = source[value_end..]
            .find('\n')
            .map_or(source.len(), |i| value_end + i + 1);
        fixed.replace_range(line_start..line_end, "");
    } else if let Some(comma) = source[..pair_start]
        .rfind(',')
        .filter(|c| source[*c + 1..pair_start].trim().is_empty())
    {
        // Inside an inline table, after another pair: `, key = value` goes.
        fixed.replace_range(comma..value_end, "");
    } else {
        // The first pair of an inline table: `key = value, ` goes.
        let rest = &source[value_end..];
        let skip = rest
            .find(|c: char| c != ',' && c != ' ')
            .unwrap_or(rest.len());
        fixed.replace_range(pair_start..value_end + skip, "");
    }
    Some(fixed)
}

#[test]
fn metadata_examples_name_the_ops_own_inputs() {
    let source = manifest(
        "[\"Flex\", \"Remote\"]",
        "[[op]]\nname = \"f\"\ninputs = [{ name = \"logits\", tensor = \"float\" }]\noutput = { tensor = \"float\" }\nremote = \"kernel\"\n",
    );
    follow(
        &source,
        "op[0].remote",
        "(e.g. `shape = \"logits\", dtype = \"logits\"`)",
        "output = { tensor = \"float\" }",
        "output = { tensor = \"float\", shape = \"logits\", dtype = \"logits\" }",
    );
}

/// The op key and value a help sets: "set `backward = \"hand-written\"`", "add `remote = ...`",
/// "write `other_dtypes = ...`", "add `composition = \"path::to::fn\"`" (a placeholder path
/// becomes `crate::c::f`).
fn op_key_edit(help: &str) -> Option<(&'static str, String)> {
    const KEYS: &[&str] = &[
        "composition",
        "remote",
        "backward",
        "autodiff",
        "other_dtypes",
    ];
    for verb in ["set `", "add `", "write `", "give the op `"] {
        let Some(start) = help.find(verb).map(|i| i + verb.len()) else {
            continue;
        };
        let snippet = &help[start..start + help[start..].find('`')?];
        let (key, value) = snippet.split_once(" = ")?;
        let key = KEYS.iter().find(|k| **k == key)?;
        let value = if value.contains("path::to::") {
            "\"crate::c::f\"".to_owned()
        } else {
            value.to_owned()
        };
        return Some((key, value));
    }
    None
}

/// `source` with `key = value` under the `index`th `[[op]]` header, replacing the line that sets
/// it, if any.
fn set_op_key(source: &str, index: usize, key: &str, value: &str) -> Option<String> {
    let header = source.match_indices("[[op]]\n").nth(index)?.0 + "[[op]]\n".len();
    let end = source[header..]
        .find("\n[[")
        .map_or(source.len(), |e| header + e);
    let line = format!("{key} = {value}\n");
    let mut fixed = source.to_owned();
    match source[header..end].find(&format!("\n{key} = ")) {
        Some(at) => {
            let start = header + at + 1;
            let stop = source[start..]
                .find('\n')
                .map_or(source.len(), |e| start + e + 1);
            fixed.replace_range(start..stop, &line);
        }
        None if source[header..].starts_with(&format!("{key} = ")) => {
            let stop = source[header..]
                .find('\n')
                .map_or(source.len(), |e| header + e + 1);
            fixed.replace_range(header..stop, &line);
        }
        None => fixed.insert_str(header, &line),
    }
    Some(fixed)
}

#[test]
fn other_dtypes_on_ops_that_take_no_dtypes_leads_out() {
    // A composite op, an op without float input and an async one take no `dtypes`: the help
    // for `other_dtypes` alone removes it (adding `dtypes` would be refused), and the help for
    // `dtypes` beside `other_dtypes` removes both.
    let ops = [
        "[[op]]\nname = \"c\"\ninputs = [{ name = \"x\", tensor = \"float\" }]\ncomposite = \"crate::k::c\"\noutput = { tensor = \"float\" }\n",
        "[[op]]\nname = \"i\"\ninputs = [{ name = \"x\", tensor = \"int\" }]\ncomposition = \"crate::k::i\"\noutput = { tensor = \"int\", shape = \"x\", dtype = \"x\" }\n",
        "[[op]]\nname = \"w\"\nasync = true\ninputs = [{ name = \"x\", tensor = \"float\", borrowed = true }]\ncomposition = \"crate::k::w\"\noutput = { type = \"usize\" }\n",
    ];
    for op in ops {
        let other = "other_dtypes = \"error\"\n";
        let source = manifest("[\"Flex\"]", &format!("{op}{other}"));
        follow(
            &source,
            "op[0].other_dtypes",
            "remove `other_dtypes`",
            other,
            "",
        );
        let both = format!("dtypes = [\"f32\"]\n{other}");
        let source = manifest("[\"Flex\"]", &format!("{op}{both}"));
        follow(
            &source,
            "op[0].dtypes",
            "remove `dtypes` and `other_dtypes`",
            &both,
            "",
        );
    }
}
