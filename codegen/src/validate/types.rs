//! Plain types and function paths, checked as every generated signature will see them.
//!
//! A plain type appears unchanged in the trait method, the `Dispatch` routing, the `try_`
//! functions and the `Tensor<D>` functions. Those live in generated modules that import only
//! the runtime (`rt`) and the generated traits, with different generics at each level, so a
//! type may only name what is in scope in all of them: primitives, the prelude's types, and
//! anything by a path of two or more segments (`crate::Config`, `std::ops::Range<usize>`).

use syn::visit::Visit;

use crate::names;

/// Where a plain type appears.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Position {
    /// A parameter: an elided lifetime borrows for the call.
    Input,
    /// A return value: there is nothing to borrow from.
    Output,
}

/// Why a type cannot be used, and the fix.
pub(super) struct Problem {
    pub message: String,
    pub help: String,
}

fn problem(message: impl Into<String>, help: impl Into<String>) -> Problem {
    Problem {
        message: message.into(),
        help: help.into(),
    }
}

/// Checks a plain type. `ranks` are the op's rank generics, which exist only at the
/// `Tensor<D>` level.
pub(super) fn check(ty: &syn::Type, position: Position, ranks: &[String]) -> Result<(), Problem> {
    sized(ty)?;
    let mut visitor = Checker {
        position,
        ranks,
        bound_lifetimes: Vec::new(),
        in_fn: 0,
        found: None,
    };
    visitor.visit_type(ty);
    visitor.found.map_or(Ok(()), Err)
}

/// Why a composite function path cannot be called as `path::<Self>(..)` from the traits
/// module, if it cannot.
pub(super) fn function_path_problem(path: &syn::Path) -> Option<String> {
    if path
        .segments
        .iter()
        .any(|s| !matches!(s.arguments, syn::PathArguments::None))
    {
        return Some("has generic arguments; the generated call adds `::<Self>` itself".to_owned());
    }
    let first = path.segments.first()?.ident.to_string();
    if path.leading_colon.is_none() && path.segments.len() == 1 {
        return Some(format!(
            "is a single name, which is not in scope in the generated traits module (it imports only `{}`)",
            names::RUNTIME
        ));
    }
    if path.leading_colon.is_none() && (first == "self" || first == names::RUNTIME) {
        return Some(format!(
            "starts with `{first}`, which names the generated module or the runtime, not your function"
        ));
    }
    None
}

/// A by-value type must be sized.
fn sized(ty: &syn::Type) -> Result<(), Problem> {
    let unsized_what = match ty {
        syn::Type::Paren(p) => return sized(&p.elem),
        syn::Type::Group(g) => return sized(&g.elem),
        syn::Type::Slice(_) => "a slice",
        syn::Type::TraitObject(_) => "a trait object",
        syn::Type::Path(p) if p.qself.is_none() && p.path.is_ident("str") => "a string slice",
        _ => return Ok(()),
    };
    Err(problem(
        format!("is {unsized_what}, which is unsized: it cannot be passed or returned by value"),
        "use a reference (`&[usize]`, `&str`) in an input, or an owned type (`Vec<usize>`, `String`, `Box<dyn Fn(f32) -> f32>`)",
    ))
}

struct Checker<'a> {
    position: Position,
    ranks: &'a [String],
    /// Lifetimes declared by an enclosing `for<'a>`.
    bound_lifetimes: Vec<String>,
    /// Depth of `fn(..)` / `Fn(..)` types, where elided lifetimes are the function's own.
    in_fn: usize,
    found: Option<Problem>,
}

impl Checker<'_> {
    fn report(&mut self, p: Problem) {
        if self.found.is_none() {
            self.found = Some(p);
        }
    }

    fn lifetime(&mut self, lifetime: Option<&syn::Lifetime>) {
        match lifetime {
            None => {
                if self.position == Position::Output && self.in_fn == 0 {
                    self.report(problem(
                        "borrows with an elided lifetime, but a return value has nothing to borrow from",
                        "return an owned type (`String`, `Vec<usize>`) or a `'static` reference",
                    ));
                }
            }
            Some(l) if l.ident == "static" => {}
            Some(l) if l.ident == "_" => self.lifetime(None),
            Some(l) if self.bound_lifetimes.contains(&l.ident.to_string()) => {}
            Some(l) => self.report(problem(
                format!("uses lifetime `{l}`, which no generated signature declares"),
                "use `'static`, or an elided lifetime (`&str`) in an input",
            )),
        }
    }

    /// A path used as a type (or a trait, when `trait_` is set).
    fn path(&mut self, path: &syn::Path, trait_: bool) {
        let first = &path.segments[0].ident;
        let first_text = first.to_string();
        if path.leading_colon.is_none() {
            if self.ranks.contains(&first_text) {
                self.report(problem(
                    format!("uses the rank generic `{first_text}`, which is not in scope at every level of the generated API"),
                    "use a concrete type (e.g. `Vec<usize>` instead of `[usize; D]`); rank generics exist only at the `Tensor<D>` level",
                ));
                return;
            }
            if first_text == "Self" || names::GENERICS.contains(&first_text.as_str()) {
                self.report(problem(
                    format!("uses `{first_text}`, which means something different at each level of the generated API (or nothing)"),
                    "use a concrete type; backend-specific types are not plain types",
                ));
                return;
            }
            if path.segments.len() == 1 {
                let scoped = if trait_ {
                    names::SCOPED_TRAITS
                } else {
                    names::SCOPED_TYPES
                };
                if !scoped.contains(&first_text.as_str()) {
                    let what = if trait_ { "trait" } else { "type" };
                    self.report(problem(
                        format!("names the {what} `{first_text}`, which is not in scope in the generated modules"),
                        format!(
                            "write its full path, e.g. `crate::{first_text}` or `std::...::{first_text}`; only primitives and the prelude's {} can be named alone",
                            if trait_ { "traits" } else { "`Box`, `Option`, `Result`, `String` and `Vec`" }
                        ),
                    ));
                    return;
                }
            }
        }
        for segment in &path.segments {
            match &segment.arguments {
                syn::PathArguments::None => {}
                syn::PathArguments::AngleBracketed(args) => {
                    for arg in &args.args {
                        match arg {
                            syn::GenericArgument::Lifetime(l) => self.lifetime(Some(l)),
                            syn::GenericArgument::Type(t) => self.visit_type(t),
                            syn::GenericArgument::AssocType(a) => self.visit_type(&a.ty),
                            syn::GenericArgument::Const(e) => self.const_expr(e),
                            _ => self.report(problem(
                                "has a generic argument that generated code does not support",
                                "use a concrete type",
                            )),
                        }
                    }
                }
                syn::PathArguments::Parenthesized(args) => {
                    self.in_fn += 1;
                    for input in &args.inputs {
                        self.visit_type(input);
                    }
                    if let syn::ReturnType::Type(_, t) = &args.output {
                        self.visit_type(t);
                    }
                    self.in_fn -= 1;
                }
            }
        }
    }

    fn const_expr(&mut self, expr: &syn::Expr) {
        match expr {
            syn::Expr::Lit(_) => {}
            syn::Expr::Path(p) if p.path.segments.len() > 1 || p.path.leading_colon.is_some() => {}
            syn::Expr::Path(p) if p.qself.is_none() => {
                let name = p.path.segments[0].ident.to_string();
                let fix = if self.ranks.contains(&name) {
                    "rank generics exist only at the `Tensor<D>` level; use a number"
                } else {
                    "use a number, or a constant by its full path (`crate::LEN`)"
                };
                self.report(problem(
                    format!(
                        "uses `{name}` as a length, which is not in scope in the generated modules"
                    ),
                    fix,
                ));
            }
            syn::Expr::Block(_) | syn::Expr::Paren(_) | syn::Expr::Binary(_) => {}
            _ => self.report(problem(
                "has a length that is neither a number nor a constant's path",
                "use a number, or a constant by its full path (`crate::LEN`)",
            )),
        }
    }
}

impl<'ast> Visit<'ast> for Checker<'_> {
    fn visit_type(&mut self, ty: &'ast syn::Type) {
        if self.found.is_some() {
            return;
        }
        match ty {
            syn::Type::Infer(_) => self.report(problem(
                "contains `_`, which cannot appear in a function signature",
                "write the type out, e.g. \"Vec<usize>\"",
            )),
            syn::Type::ImplTrait(_) => self.report(problem(
                "contains `impl Trait`, which cannot appear in every generated signature",
                "use a concrete type, or `Box<dyn Trait>` by its full trait path",
            )),
            syn::Type::Never(_) => self.report(problem(
                "uses the never type `!`, which is not stable",
                "use `()` or `std::convert::Infallible`",
            )),
            syn::Type::Macro(_) | syn::Type::Verbatim(_) => self.report(problem(
                "is not a type generated code can spell",
                "write the type out, without macros",
            )),
            syn::Type::Path(p) => {
                if p.qself.is_some() {
                    self.report(problem(
                        "is a qualified path (`<T as Trait>::Item`)",
                        "name the type by its own path, e.g. `crate::Item`",
                    ));
                } else {
                    self.path(&p.path, false);
                }
            }
            syn::Type::Reference(r) => {
                self.lifetime(r.lifetime.as_ref());
                self.visit_type(&r.elem);
            }
            syn::Type::BareFn(f) => {
                let declared: Vec<String> = f
                    .lifetimes
                    .iter()
                    .flat_map(|l| l.lifetimes.iter())
                    .filter_map(|p| match p {
                        syn::GenericParam::Lifetime(l) => Some(l.lifetime.ident.to_string()),
                        _ => None,
                    })
                    .collect();
                let before = self.bound_lifetimes.len();
                self.bound_lifetimes.extend(declared);
                self.in_fn += 1;
                for input in &f.inputs {
                    self.visit_type(&input.ty);
                }
                if let syn::ReturnType::Type(_, t) = &f.output {
                    self.visit_type(t);
                }
                self.in_fn -= 1;
                self.bound_lifetimes.truncate(before);
            }
            syn::Type::TraitObject(t) => {
                for bound in &t.bounds {
                    match bound {
                        syn::TypeParamBound::Trait(b) => {
                            let declared: Vec<String> = b
                                .lifetimes
                                .iter()
                                .flat_map(|l| l.lifetimes.iter())
                                .filter_map(|p| match p {
                                    syn::GenericParam::Lifetime(l) => {
                                        Some(l.lifetime.ident.to_string())
                                    }
                                    _ => None,
                                })
                                .collect();
                            let before = self.bound_lifetimes.len();
                            self.bound_lifetimes.extend(declared);
                            self.path(&b.path, true);
                            self.bound_lifetimes.truncate(before);
                        }
                        syn::TypeParamBound::Lifetime(l) => {
                            // `dyn Trait + '_` in an input borrows for the call, as `&T` does.
                            self.lifetime(Some(l));
                        }
                        _ => self.report(problem(
                            "has a bound generated code does not support",
                            "use a trait path",
                        )),
                    }
                }
            }
            syn::Type::Array(a) => {
                self.visit_type(&a.elem);
                self.const_expr(&a.len);
            }
            // Tuples, slices behind references, pointers, parentheses: their parts.
            other => syn::visit::visit_type(self, other),
        }
    }
}
