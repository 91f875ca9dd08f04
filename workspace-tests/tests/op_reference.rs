//! The reference of the shipped ops (`src/guide/ops.md`, between `<!-- ops: begin -->` and
//! `<!-- ops: end -->`) is generated from the sources that decide it: `ops.toml` (lowered by the
//! generator: policy, dtypes, backward form, shape contracts, how the op runs on `Fusion<B>` and
//! Remote), the checked-in `generated/routed_tensor.rs` (each op's `Tensor`-level signature) and
//! the kernels' `impl RoutedOps... for Flex` / `for CubeBackend` blocks (which backends have a
//! kernel of their own). A change to any of them that the page does not follow fails here;
//! `BLESS=1` rewrites the page.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use burn_route_codegen::stages::ir::{
    Arg, BackendId, BackwardForm, Container, FusionImpl, Ir, Op, Output, Policy, Rank, RemoteImpl,
    SavedValue, TensorKind,
};
use burn_route_codegen::stages::{parse, validate};

const BEGIN: &str = "<!-- ops: begin -->\n";
const END: &str = "<!-- ops: end -->";
const PAGE: &str = "src/guide/ops.md";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn lowered(source: &str) -> Ir {
    let (manifest, diags) = parse(source);
    assert!(diags.is_empty(), "ops.toml parses");
    validate(&manifest, "ops.toml", source).expect("ops.toml validates")
}

/// The methods of every `impl <trait starting with RoutedOps> for <self_ty>` in `file`.
fn kernels_of(file: &str, self_ty: &str) -> Vec<(String, bool)> {
    let parsed = syn::parse_file(&read(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut out = Vec::new();
    for item in parsed.items {
        let syn::Item::Impl(imp) = item else { continue };
        let Some((_, path, _)) = &imp.trait_ else {
            continue;
        };
        let is_ops = path
            .segments
            .last()
            .is_some_and(|s| s.ident.to_string().starts_with("RoutedOps"));
        let on = match &*imp.self_ty {
            syn::Type::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == self_ty),
            _ => false,
        };
        if !(is_ops && on) {
            continue;
        }
        for item in imp.items {
            if let syn::ImplItem::Fn(f) = item {
                // Whether the body calls into the `cube` module (a CubeCL kernel of its own),
                // or is built of other kernels and Burn's ops.
                let calls_cube = f
                    .block
                    .stmts
                    .iter()
                    .map(|s| quote::quote!(#s).to_string())
                    .any(|s| s.contains("cube ::"));
                out.push((f.sig.ident.to_string(), calls_cube));
            }
        }
    }
    out
}

/// The `Tensor`-level signature of `name`, as `generated/routed_tensor.rs` has it (rustfmt's
/// layout), without its body.
fn signature(tensor_rs: &str, name: &str) -> String {
    let start = tensor_rs
        .find(&format!("\npub fn {name}<"))
        .or_else(|| tensor_rs.find(&format!("\npub fn {name}(")))
        .unwrap_or_else(|| panic!("`pub fn {name}` in generated/routed_tensor.rs"));
    let text = &tensor_rs[start + 1..];
    let end = text.find(" {\n").expect("a body");
    text[..end].replace("rt::", "")
}

fn first_sentence(doc: &[String]) -> String {
    let text = doc.join(" ");
    let text = text.trim();
    match text.find(". ") {
        Some(end) => text[..=end].trim().to_owned(),
        None => text.to_owned(),
    }
}

fn rank(rank: &Rank) -> String {
    match rank {
        Rank::Generic(name) => name.clone(),
        Rank::Fixed(n) => n.to_string(),
    }
}

fn backward(op: &Op) -> String {
    if op.policy != Policy::Differentiable {
        return "none (the op is not differentiable)".to_owned();
    }
    if op.hand_written {
        return "hand-written `Autodiff<B, C>` kernel".to_owned();
    }
    let Some(backward) = &op.backward else {
        return if op.composite.is_some() || op.composition.is_some() {
            "Burn's autodiff of its composition".to_owned()
        } else {
            "hand-written `Autodiff<B, C>` kernel".to_owned()
        };
    };
    let slots: Vec<String> = op.float_slots().map(|s| s.name).collect();
    let mut text = match &backward.form {
        BackwardForm::Formulas(formulas) => {
            let parts: Vec<String> = formulas
                .iter()
                .zip(&slots)
                .map(|(f, slot)| match f {
                    Some(f) => format!("`{slot}`: `{}`", f.text),
                    None => format!("`{slot}`: none"),
                })
                .collect();
            format!("formulas ({})", parts.join("; "))
        }
        BackwardForm::Function { path, args, .. } => {
            let short = path.rsplit("::").take(2).collect::<Vec<_>>();
            let saved: Vec<String> = args
                .iter()
                .map(|a| match a {
                    SavedValue::Float(i) => format!("`{}`", slots[*i]),
                    SavedValue::Output => "the output".to_owned(),
                    // A generated field holding element N of a tuple output (`save = ["output.N"]`).
                    SavedValue::Field(name) => match name.strip_prefix("__output_") {
                        Some(n) => format!("`output.{}`", n.replace('_', ".")),
                        None => format!("`{name}`"),
                    },
                })
                .collect();
            format!(
                "`{}::{}`, keeping {}",
                short[1],
                short[0],
                if saved.is_empty() {
                    "nothing".to_owned()
                } else {
                    saved.join(", ")
                }
            )
        }
    };
    if backward.recompute {
        text.push_str("; recomputed under gradient checkpointing");
    }
    text
}

/// How the op runs on each of its backends: one `(backend, how)` row each.
fn backends(
    op: &Op,
    flex: &[(String, bool)],
    cube: &[(String, bool)],
) -> Vec<(&'static str, String)> {
    let has = |kernels: &[(String, bool)]| {
        kernels
            .iter()
            .find(|(name, _)| *name == op.name)
            .map(|k| k.1)
    };
    op.backends
        .iter()
        .map(|backend| {
            let name = backend.name.key();
            let how = match backend.name {
                BackendId::Flex if has(flex).is_some() => "its own kernel".to_owned(),
                BackendId::Cube => {
                    let Some(cubecl) = has(cube) else {
                        return (name, "its composition".to_owned());
                    };
                    let kernel = if cubecl {
                        "its own CubeCL kernel"
                    } else {
                        "its own kernel, of this crate's CubeCL kernels and Burn's ops"
                    };
                    match op.fusion {
                        FusionImpl::Lazy => {
                            format!("{kernel}; with fusion on, one deferred operation")
                        }
                        FusionImpl::Composition => {
                            format!("{kernel}; with fusion on, its composition, which Burn fuses")
                        }
                        FusionImpl::Eager => format!("{kernel}; with fusion on, run at the call"),
                        _ => kernel.to_owned(),
                    }
                }
                BackendId::Remote => match op.remote {
                    RemoteImpl::Kernel => "one operation: the server runs its kernel".to_owned(),
                    _ => "its composition, primitive by primitive".to_owned(),
                },
                _ => "its composition".to_owned(),
            };
            (name, how)
        })
        .collect()
}

fn contracts(op: &Op) -> String {
    let parts: Vec<String> = op
        .inputs
        .iter()
        .filter_map(|i| {
            let c = i.shape.as_ref()?;
            Some(format!("`{}` {} `{}`", i.name, c.rule.key(), c.of))
        })
        .collect();
    if parts.is_empty() {
        "none".to_owned()
    } else {
        parts.join("; ")
    }
}

fn dtypes(op: &Op) -> String {
    let has_float = op.inputs.iter().any(|i| match &i.arg {
        Arg::Tensor(t) => t.kind == TensorKind::Float,
        Arg::Declared { .. } => true,
        _ => false,
    });
    if !has_float {
        return "no float input".to_owned();
    }
    match &op.dtypes {
        None => "every float dtype".to_owned(),
        Some(d) => {
            let list: Vec<&str> = d.list.iter().map(|d| d.key()).collect();
            let others = if d.composition {
                "others run its composition"
            } else {
                "others are a `RouteError::UnsupportedDtype`"
            };
            format!("{}; {others}", list.join(", "))
        }
    }
}

/// One op's entry.
fn entry(op: &Op, tensor_rs: &str, flex: &[(String, bool)], cube: &[(String, bool)]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### `{}`\n", op.name);
    let _ = writeln!(
        out,
        "<!-- not run: the signature, without its body -->\n```rust,ignore\n{}\n```\n",
        signature(tensor_rs, &op.name)
    );
    let _ = writeln!(out, "{}\n", first_sentence(&op.doc));
    let inputs: Vec<String> = op
        .inputs
        .iter()
        .filter_map(|i| match &i.arg {
            Arg::Tensor(t) => {
                let container = match t.container {
                    Container::One => "",
                    Container::Option => "optional ",
                    Container::Vec => "a `Vec` of ",
                };
                Some(format!(
                    "`{}`: {container}{} rank {}",
                    i.name,
                    t.kind.key(),
                    rank(&t.rank)
                ))
            }
            _ => None,
        })
        .collect();
    let output = match &op.output {
        Output::Tensor(t) => format!("{} rank {}", t.kind.key(), rank(&t.rank)),
        Output::Tuple(items) => format!("a tuple of {}", items.len()),
        Output::Declared { name, .. } => format!("`{name}`"),
        Output::Plain(ty) => format!("`{ty}`"),
        Output::Unit => "`()`".to_owned(),
    };
    let _ = writeln!(out, "| | |\n|---|---|");
    let _ = writeln!(out, "| policy | `{}` |", op.policy.key());
    let _ = writeln!(out, "| backward | {} |", backward(op));
    let _ = writeln!(out, "| dtypes | {} |", dtypes(op));
    for (backend, how) in backends(op, flex, cube) {
        let _ = writeln!(out, "| on {backend} | {how} |");
    }
    let _ = writeln!(out, "| shape contract | {} |", contracts(op));
    if !inputs.is_empty() {
        let _ = writeln!(out, "| tensor inputs | {} |", inputs.join(", "));
    }
    let _ = writeln!(out, "| output | {output} |");
    if let Some(path) = &op.composite {
        let _ = writeln!(
            out,
            "| composite (the op on every backend) | `{}` |",
            path.trim_start_matches("crate::")
        );
    } else if let Some(path) = &op.composition {
        let _ = writeln!(
            out,
            "| replaces (its composition) | `{}` |",
            path.trim_start_matches("crate::")
        );
    }
    out.push('\n');
    out
}

fn reference() -> String {
    let source = read("ops.toml");
    let ir = lowered(&source);
    let tensor_rs = read("generated/routed_tensor.rs");
    let flex = kernels_of("src/kernels/flex.rs", "Flex");
    let cube = kernels_of("src/kernels/cube_routed.rs", "CubeBackend");
    // The manifest's sections (`# --- Title: ... ---`), by the line each starts on.
    let mut sections: Vec<(usize, String)> = vec![(0, "Small ops and demonstrations".to_owned())];
    for (line, text) in source.lines().enumerate() {
        if let Some(rest) = text.strip_prefix("# --- ") {
            let title = rest
                .split(':')
                .next()
                .unwrap_or(rest)
                .trim_end_matches(" ---");
            sections.push((line + 1, title.to_owned()));
        }
    }
    let mut out = String::new();
    let mut current = None;
    for op in &ir.ops {
        let line: usize = op
            .location
            .rsplit(':')
            .next()
            .and_then(|l| l.parse().ok())
            .expect("ops.toml:LINE");
        let section = sections
            .iter()
            .rev()
            .find(|(start, _)| *start <= line)
            .map(|(_, title)| title.clone());
        if section != current {
            let _ = writeln!(out, "## {}\n", section.clone().unwrap_or_default());
            current = section;
        }
        out.push_str(&entry(op, &tensor_rs, &flex, &cube));
    }
    out
}

#[test]
fn the_op_reference_is_generated_from_the_sources() {
    let page = read(PAGE);
    let start = page.find(BEGIN).expect("the begin marker") + BEGIN.len();
    let end = page.find(END).expect("the end marker");
    let fresh = reference();
    if burn_route_codegen::bless_requested() {
        let mut text = page.clone();
        text.replace_range(start..end, &fresh);
        std::fs::write(root().join(PAGE), text).expect("write");
        return;
    }
    assert!(
        page[start..end] == fresh,
        "{PAGE} is stale: the shipped ops changed; re-run with BLESS=1"
    );
}
