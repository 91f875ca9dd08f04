//! What a plain input's Rust type tells from its text alone, and the rules that read it: the
//! values a backward pass keeps, and the values the op check makes.
//!
//! The generated derivative of a differentiable op holds the plain inputs its backward pass
//! reads (a formula's numbers, `save`, every input of a recomputed op) and must be `Clone +
//! Debug + Send + 'static` (Burn's graph moves it between threads and clones it for
//! checkpointing). A type of the crate's own that is not fails to compile, naming the type; the
//! shapes the text shows are refused here, at the input.

use syn::visit::Visit;

use super::context::{Context, ManifestRule};
use crate::diag::{Diagnostic, page};
use crate::ir::{Arg, Backward, BackwardForm, FieldSource};
use crate::model::OpSpec;

/// The rules of this module.
pub(super) const MANIFEST_RULES: &[ManifestRule] =
    &[kept_values_can_be_kept, op_check_values_can_be_made];

/// Why a plain type (canonical text, parsed by validation already) is not `Send`, for the shapes
/// that can be told from the type alone: a trait object without a `Send` bound, `Rc` (and
/// `rc::Weak`), a raw pointer. (A type of the crate's own that is not `Send` fails to compile,
/// naming the type; the generated code cannot see into it.)
pub(super) fn not_send(ty: &str) -> Option<&'static str> {
    struct Finder(Option<&'static str>);
    impl<'ast> Visit<'ast> for Finder {
        fn visit_type_trait_object(&mut self, t: &'ast syn::TypeTraitObject) {
            if !bounds_name(t, &["Send"]) && self.0.is_none() {
                self.0 = Some("a trait object without `+ Send`");
            }
            syn::visit::visit_type_trait_object(self, t);
        }
        fn visit_type_ptr(&mut self, t: &'ast syn::TypePtr) {
            self.0.get_or_insert("a raw pointer");
            syn::visit::visit_type_ptr(self, t);
        }
        fn visit_path(&mut self, p: &'ast syn::Path) {
            let names: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
            let rc = names.last().is_some_and(|n| n == "Rc")
                || names.windows(2).any(|w| w[0] == "rc" && w[1] == "Weak");
            if rc {
                self.0.get_or_insert("`Rc` is not `Send`");
            }
            syn::visit::visit_path(self, p);
        }
    }
    let parsed = syn::parse_str::<syn::Type>(ty).ok()?;
    let mut finder = Finder(None);
    finder.visit_type(&parsed);
    finder.0
}

/// Why a plain type is not `Clone` or not `Debug`, for the shapes the text shows: a boxed trait
/// object (`Box<dyn Trait>` is never `Clone`), a closure trait object (`dyn Fn(..)`, in any
/// pointer, is not `Debug`).
fn not_clone_or_debug(ty: &str) -> Option<&'static str> {
    struct Finder(Option<&'static str>);
    impl<'ast> Visit<'ast> for Finder {
        fn visit_path_segment(&mut self, s: &'ast syn::PathSegment) {
            if s.ident == "Box"
                && let syn::PathArguments::AngleBracketed(args) = &s.arguments
                && args
                    .args
                    .iter()
                    .any(|a| matches!(a, syn::GenericArgument::Type(syn::Type::TraitObject(_))))
            {
                self.0.get_or_insert("a boxed trait object is not `Clone`");
            }
            syn::visit::visit_path_segment(self, s);
        }
        fn visit_type_trait_object(&mut self, t: &'ast syn::TypeTraitObject) {
            if bounds_name(t, &["Fn", "FnMut", "FnOnce"]) {
                self.0
                    .get_or_insert("a closure trait object (`dyn Fn`) is not `Debug`");
            }
            syn::visit::visit_type_trait_object(self, t);
        }
    }
    let parsed = syn::parse_str::<syn::Type>(ty).ok()?;
    let mut finder = Finder(None);
    finder.visit_type(&parsed);
    finder.0
}

/// An error about the type of op `spec`'s input `i`, at that type.
fn at_type(spec: &OpSpec, i: usize, message: String) -> Diagnostic {
    Diagnostic::new(
        spec.input_type_span(i),
        format!("op[{}].inputs[{i}].type", spec.index),
        message,
    )
}

/// Whether a trait object's bounds name one of `traits` (by the path's last segment).
fn bounds_name(t: &syn::TypeTraitObject, traits: &[&str]) -> bool {
    t.bounds.iter().any(|b| {
        matches!(b, syn::TypeParamBound::Trait(t)
            if t.path.segments.last().is_some_and(|s| traits.iter().any(|n| s.ident == n)))
    })
}

/// The plain values a backward pass keeps can be kept: `Clone + Debug + Send` as far as their
/// types show (see the module docs).
fn kept_values_can_be_kept(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (spec, op) in cx.ops {
        let Some(backward) = &op.backward else {
            continue;
        };
        let mut kept: Vec<(usize, String, String)> = Vec::new();
        let mut collect = |b: &Backward| {
            for field in &b.fields {
                let (input, label, ty) = match &field.source {
                    FieldSource::Input(name) => {
                        let Some(i) = op.inputs.iter().position(|i| i.name == *name) else {
                            continue;
                        };
                        let Arg::Plain(ty) = &op.inputs[i].arg else {
                            continue;
                        };
                        (i, name.clone(), ty.clone())
                    }
                    FieldSource::Member { input, fields, ty } => {
                        let Some(i) = op.inputs.iter().position(|i| i.name == *input) else {
                            continue;
                        };
                        (i, format!("{input}.{}", fields.join(".")), ty.clone())
                    }
                    FieldSource::Output(_) | FieldSource::OutputMember(_) => continue,
                };
                if !kept.iter().any(|(_, l, _)| *l == label) {
                    kept.push((input, label, ty));
                }
            }
        };
        collect(backward);
        backward.siblings.iter().for_each(&mut collect);
        // Why the pass keeps it: a recomputed op keeps every input, a backward function is
        // passed what `save` lists (every input by default), a formula keeps what it reads.
        let function = matches!(backward.form, BackwardForm::Function { .. });
        let how = match (backward.recompute, function) {
            (true, true) => {
                "remove `checkpoint = \"recompute\"` (a recomputed op keeps every input) and leave it out of `save`"
            }
            (true, false) => {
                "remove `checkpoint = \"recompute\"` (a recomputed op keeps every input)"
            }
            (false, true) => {
                "leave it out of `save` (without `save`, a backward function is passed every input)"
            }
            (false, false) => "write the formulas without it",
        };
        for (i, label, ty) in kept {
            let Some(why) = not_send(&ty).or_else(|| not_clone_or_debug(&ty)) else {
                continue;
            };
            out.push(
                at_type(
                    spec,
                    i,
                    format!(
                        "`{label}` of op `{}` is kept for its backward pass, which needs `Clone + Debug + Send`, but `{ty}` is not ({why})",
                        op.name
                    ),
                )
                .page(page::BACKWARD)
                .help(format!("pass a type that is (`Arc` for `Rc`; for a closure, a type of your own deriving `Clone` and `Debug` around it, or an `Arc<dyn Trait + Send + Sync>` of a trait with `Debug` as a supertrait), or keep it out of the backward pass: {how}")),
            );
        }
    }
    out
}

/// Why a plain type has no `Default`, for the shapes its text shows: a function pointer, a raw
/// pointer, a reference (but to a slice or `str`), a pointer to a trait object, `Result`, a
/// `NonZero` integer, an array of more than 32 elements (or of a length that is not a number),
/// or a tuple, an array or a `Box`, `Arc` or `Rc` holding one of them. (An `Option` of anything
/// has one.)
fn no_default(ty: &syn::Type) -> Option<&'static str> {
    match ty {
        syn::Type::BareFn(_) => Some("a function pointer has none"),
        syn::Type::Ptr(_) => Some("a raw pointer has none"),
        syn::Type::Reference(r) => match &*r.elem {
            syn::Type::Slice(_) => None,
            syn::Type::Path(p) if p.path.is_ident("str") => None,
            _ => Some("a reference has none, but to a slice or `str`"),
        },
        syn::Type::TraitObject(_) | syn::Type::ImplTrait(_) => Some("a trait object has none"),
        syn::Type::Paren(p) => no_default(&p.elem),
        syn::Type::Group(g) => no_default(&g.elem),
        syn::Type::Tuple(t) => t.elems.iter().find_map(no_default),
        syn::Type::Array(a) => match &a.len {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(n),
                ..
            }) if n.base10_parse::<usize>().is_ok_and(|n| n <= 32) => no_default(&a.elem),
            syn::Expr::Lit(_) => Some("an array of more than 32 elements has none"),
            // `[T; N]` with a constant: `Default` only if it is at most 32, which the text
            // does not show.
            _ => Some("an array has one only up to 32 elements, and its length is not a number"),
        },
        syn::Type::Path(p) => {
            let last = p.path.segments.last()?;
            let pointee = match &last.arguments {
                syn::PathArguments::AngleBracketed(args) => {
                    args.args.iter().find_map(|a| match a {
                        syn::GenericArgument::Type(t) => Some(t),
                        _ => None,
                    })
                }
                _ => None,
            };
            let name = last.ident.to_string();
            let pointer = ["Box", "Arc", "Rc"].contains(&name.as_str());
            if pointer && matches!(pointee, Some(syn::Type::TraitObject(_))) {
                Some("a pointer to a trait object has none")
            } else if let (true, Some(pointee)) = (pointer, pointee) {
                // A pointer has one where its pointee has.
                no_default(pointee)
            } else if name == "Result" {
                Some("`Result` has none")
            } else if name.starts_with("NonZero") {
                Some("a `NonZero` integer has none")
            } else {
                None
            }
        }
        _ => None,
    }
}

/// The op check makes a plain input's value with `Default::default()` unless `[op.check] args`
/// gives one (numbers and `bool` get small values): a type whose text shows it has no `Default`
/// needs its value there, or the whole op check fails to compile.
fn op_check_values_can_be_made(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    if !cx.op_check {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (spec, op) in cx.ops {
        let given = |name: &str| {
            spec.check
                .as_ref()
                .is_some_and(|c| c.args.iter().any(|(k, _)| k.value == name))
        };
        for (i, input) in op.inputs.iter().enumerate() {
            let Arg::Plain(ty) = &input.arg else { continue };
            if given(&input.name) {
                continue;
            }
            let Some(why) = syn::parse_str::<syn::Type>(ty)
                .ok()
                .as_ref()
                .and_then(no_default)
            else {
                continue;
            };
            out.push(
                at_type(
                    spec,
                    i,
                    format!(
                        "the op check makes `{}` of op `{}` with `Default::default()`, but `{ty}` has no `Default` ({why})",
                        input.name, op.name
                    ),
                )
                .page(page::OP_CHECK)
                .help(format!(
                    "give its value in the op's `[op.check]` table: `args = {{ {} = \"...\" }}` (a Rust expression of type `{ty}`)",
                    input.name
                )),
            );
        }
    }
    out
}
