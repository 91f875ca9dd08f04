//! Plain types and function paths, checked as every generated signature will see them.
//!
//! A plain type appears unchanged in the trait method, the `Dispatch` routing, the `try_`
//! functions and the `Tensor<D>` functions. Those live in generated modules that import only
//! the runtime (`rt`) and the generated traits, with different generics at each level, so a
//! type may only name what is in scope in all of them: primitives, the prelude's types, and
//! anything by a path of two or more segments (`crate::Config`, `std::ops::Range<usize>`).

use syn::visit::Visit;

use burn_route_core::primitive;

use crate::names;

/// Where a plain type appears.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Position {
    /// A parameter: an elided lifetime borrows for the call.
    Input,
    /// A return value: there is nothing to borrow from.
    Output,
    /// A field of a declared type: it owns its value, like a return value.
    Field,
}

impl Position {
    /// Whether a value here has nothing to borrow from (an elided lifetime is an error).
    fn owns(self) -> bool {
        matches!(self, Self::Output | Self::Field)
    }

    /// What a value here is, and how to fix a borrow, for the messages.
    fn owner_and_fix(self) -> (&'static str, &'static str) {
        match self {
            Self::Input => ("a parameter", "use an owned type"),
            Self::Output => ("a return value", "return an owned type"),
            Self::Field => ("a field of a declared type", "use an owned type"),
        }
    }
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
    clippy_shapes(ty, position)?;
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
    if path.leading_colon.is_none()
        && path.segments.len() == 1
        && ["crate", "super", "self", "Self"].contains(&first.as_str())
    {
        return Some(format!("is the keyword `{first}`, not a function"));
    }
    if path.leading_colon.is_none() && first == "Self" {
        return Some(
            "starts with `Self`, which in the generated trait is the backend, not your function"
                .to_owned(),
        );
    }
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

/// The last segment of a path type and its type arguments.
fn path_parts(ty: &syn::Type) -> Option<(String, Vec<&syn::Type>)> {
    let syn::Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    let args = match &last.arguments {
        syn::PathArguments::AngleBracketed(a) => a
            .args
            .iter()
            .filter_map(|arg| match arg {
                syn::GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Some((last.ident.to_string(), args))
}

/// Shapes of types that clippy refuses wherever generated code spells them, with its fix.
fn clippy_shapes(ty: &syn::Type, position: Position) -> Result<(), Problem> {
    let lint = |message: String, help: &str| Err(problem(message, help));
    // A parameter borrowing an owned collection: `&Vec<T>`, `&String`, `&PathBuf`.
    if let (Position::Input, syn::Type::Reference(r)) = (position, ty)
        && r.mutability.is_none()
        && let Some((name, _)) = path_parts(&r.elem)
    {
        let better = match name.as_str() {
            "Vec" => Some("&[T]"),
            "String" => Some("&str"),
            "PathBuf" => Some("&std::path::Path"),
            "Cow" => Some("&str` for a `Cow<str>`, `&[T]` for a `Cow<[T]>"),
            _ => None,
        };
        if let Some(better) = better {
            return lint(
                format!("borrows a `{name}`, which clippy refuses in a parameter (`ptr_arg`)"),
                &format!("take `{better}` instead"),
            );
        }
    }
    let mut found: Option<Problem> = None;
    let mut visit = |ty: &syn::Type| {
        if found.is_some() {
            return;
        }
        if let syn::Type::Reference(r) = ty
            && path_parts(&r.elem).is_some_and(|(n, _)| n == "Box")
        {
            found = Some(problem(
                "borrows a `Box`, which clippy refuses (`borrowed_box`)",
                "borrow the boxed value itself: `&T`",
            ));
            return;
        }
        let Some((name, args)) = path_parts(ty) else {
            return;
        };
        let inner = args.first().and_then(|t| path_parts(t));
        let inner_ref = matches!(args.first(), Some(syn::Type::Reference(_)));
        let inner_name = inner.as_ref().map(|(n, _)| n.as_str()).unwrap_or_default();
        let collections = [
            "Vec",
            "String",
            "HashMap",
            "BTreeMap",
            "HashSet",
            "BTreeSet",
            "VecDeque",
            "BinaryHeap",
            "LinkedList",
        ];
        found = match name.as_str() {
            "Box" if collections.contains(&inner_name) => Some(problem(
                format!(
                    "boxes a `{inner_name}`, which is already on the heap (clippy's `box_collection`)"
                ),
                "use the collection itself",
            )),
            "Box" | "Rc" | "Arc"
                if (["Box", "Rc", "Arc"].contains(&inner_name)
                    && inner
                        .as_ref()
                        .and_then(|(_, a)| a.first())
                        .is_some_and(|t| sized(t).is_ok()))
                    || inner_ref =>
            {
                Some(problem(
                    format!(
                        "nests two pointers in `{name}<..>`, which clippy refuses (`redundant_allocation`)"
                    ),
                    "keep one of them",
                ))
            }
            "Vec"
                if inner_name == "Box"
                    && inner.as_ref().is_some_and(|(_, boxed)| {
                        boxed.first().is_some_and(|t| {
                            path_parts(t)
                                .is_some_and(|(n, a)| a.is_empty() && primitive::is_sized(&n))
                        })
                    }) =>
            {
                Some(problem(
                    "is a `Vec` of boxed sized values, which clippy refuses (`vec_box`)",
                    "store the values in the `Vec` directly",
                ))
            }
            "Result"
                if position == Position::Output
                    && matches!(args.get(1), Some(syn::Type::Tuple(t)) if t.elems.is_empty()) =>
            {
                Some(problem(
                    "returns `Result<_, ()>`, which clippy refuses for a public function (`result_unit_err`)",
                    "give the error a type of its own, or return an `Option`",
                ))
            }
            "HashMap" | "HashSet" | "BTreeMap" | "BTreeSet"
                if path_parts_first(&args).is_some_and(|n| INTERIOR.contains(&n.as_str())) =>
            {
                Some(problem(
                    format!(
                        "keys a `{name}` by a type with interior mutability, which clippy refuses (`mutable_key_type`)"
                    ),
                    format!(
                        "key it by the value the cell holds, an immutable type (e.g. `{name}<u8>`, not `{name}<Cell<u8>>`)"
                    ),
                ))
            }
            _ => None,
        };
        // `__` belongs to the generator: no path the user writes may use it.
        if let syn::Type::Path(p) = ty
            && p.path
                .segments
                .iter()
                .any(|s| s.ident.to_string().starts_with("__"))
        {
            found = Some(problem(
                "names a path starting with `__`, which belongs to the generated code",
                "name a type of your own crate (e.g. `crate::ops::Panic`), or a library's",
            ));
        }
    };
    walk_types(ty, &mut visit);
    found.map_or(Ok(()), Err)
}

/// Standard library traits, which are not types without `dyn`.
const KNOWN_TRAITS: &[&str] = &[
    "Any", "AsMut", "AsRef", "BufRead", "Debug", "Display", "Error", "Fn", "FnMut", "FnOnce",
    "Future", "Hash", "Hasher", "Iterator", "Read", "Seek", "Send", "Sync", "ToString", "Write",
];

/// Types with interior mutability (keys clippy's `mutable_key_type` refuses).
const INTERIOR: &[&str] = &[
    "Cell",
    "RefCell",
    "UnsafeCell",
    "Mutex",
    "RwLock",
    "OnceCell",
    "AtomicBool",
    "AtomicU8",
    "AtomicU16",
    "AtomicU32",
    "AtomicU64",
    "AtomicUsize",
    "AtomicI8",
    "AtomicI16",
    "AtomicI32",
    "AtomicI64",
    "AtomicIsize",
];

/// The last segment of the first type argument's path.
fn path_parts_first(args: &[&syn::Type]) -> Option<String> {
    args.first().and_then(|t| path_parts(t)).map(|(n, _)| n)
}

/// Calls `f` on `ty` and every type inside it.
fn walk_types(ty: &syn::Type, f: &mut dyn FnMut(&syn::Type)) {
    struct Walk<'f>(&'f mut dyn FnMut(&syn::Type));
    impl<'ast> Visit<'ast> for Walk<'_> {
        fn visit_type(&mut self, ty: &'ast syn::Type) {
            (self.0)(ty);
            syn::visit::visit_type(self, ty);
        }
    }
    Walk(f).visit_type(ty);
}

/// clippy's `type_complexity` score of a type (its lint fires above 250): each path, slice,
/// tuple or array adds ten times its nesting, each function pointer fifty times, each trait
/// object twenty times.
pub(super) fn complexity(ty: &syn::Type) -> usize {
    fn score(ty: &syn::Type, nest: usize) -> usize {
        let (add, deeper) = match ty {
            syn::Type::Infer(_) | syn::Type::Ptr(_) | syn::Type::Reference(_) => (1, false),
            syn::Type::Path(_)
            | syn::Type::Slice(_)
            | syn::Type::Tuple(_)
            | syn::Type::Array(_) => (10 * nest, true),
            syn::Type::BareFn(_) => (50 * nest, false),
            syn::Type::TraitObject(_) => (20 * nest, false),
            _ => (0, false),
        };
        let nest = if deeper { nest + 1 } else { nest };
        let mut inner = 0;
        struct Children<'a>(&'a mut Vec<syn::Type>, bool);
        impl<'ast> Visit<'ast> for Children<'_> {
            fn visit_type(&mut self, ty: &'ast syn::Type) {
                if self.1 {
                    self.0.push(ty.clone());
                } else {
                    self.1 = true;
                    syn::visit::visit_type(self, ty);
                }
            }
        }
        let mut children = Vec::new();
        Children(&mut children, false).visit_type(ty);
        for child in &children {
            inner += score(child, nest);
        }
        add + inner
    }
    score(ty, 1)
}

/// What an unsized-type problem says the type is (`a slice`, `a string slice`, ...).
fn unsized_what(p: &Problem) -> String {
    p.message
        .trim_start_matches("is ")
        .split(',')
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// A by-value type must be sized.
fn sized(ty: &syn::Type) -> Result<(), Problem> {
    let unsized_what = match ty {
        syn::Type::Paren(p) => return sized(&p.elem),
        syn::Type::Group(g) => return sized(&g.elem),
        syn::Type::Slice(_) => "a slice",
        syn::Type::TraitObject(_) => "a trait object",
        syn::Type::Path(p) if p.qself.is_none() && p.path.is_ident("str") => "a string slice",
        syn::Type::Path(p) if p.qself.is_none() && is_unsized_path(&p.path) => {
            "a dynamically sized type"
        }
        _ => return Ok(()),
    };
    Err(problem(
        format!("is {unsized_what}, which is unsized: it cannot be passed or returned by value"),
        "replace the unsized part where it stands by a reference to it in an input (`&str`, `&[usize]`: `(u8, &str)`, not `&(u8, str)`), or by an owned type (`String`, `Vec<usize>`, `Box<dyn Fn(f32) -> f32>`)",
    ))
}

/// Standard library types that are unsized (`Path`, `OsStr`, `CStr`, `str`).
fn is_unsized_path(path: &syn::Path) -> bool {
    path.segments
        .last()
        .is_some_and(|s| ["str", "Path", "OsStr", "CStr"].contains(&s.ident.to_string().as_str()))
}

/// Containers that may hold an unsized type (`Box<str>`, `Cow<Path>`, ...).
const UNSIZED_OK: &[&str] = &["Box", "Rc", "Arc", "Weak", "Cow", "PhantomData"];

/// Standard library types with a lifetime parameter that may be left out in a parameter
/// (`Cow<str>`) but not in a return type.
const BORROWING: &[&str] = &[
    "Cow",
    "Formatter",
    "Arguments",
    "Ref",
    "RefMut",
    "MutexGuard",
    "RwLockReadGuard",
    "RwLockWriteGuard",
    "Chars",
    "Iter",
    "IterMut",
    "Drain",
    "Entry",
    "Lines",
    "Split",
    "SplitWhitespace",
    "CharIndices",
    "Bytes",
    "Keys",
    "Values",
    "Windows",
    "Chunks",
    "StdinLock",
    "StdoutLock",
    "StderrLock",
    "Ancestors",
    "Components",
    "Display",
];

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
                if self.position.owns() && self.in_fn == 0 {
                    let (owner, fix) = self.position.owner_and_fix();
                    self.report(problem(
                        format!("borrows with an elided lifetime, but {owner} has nothing to borrow from"),
                        format!("{fix} (`String`, `Vec<usize>`) or a `'static` reference"),
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
        let last = path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default();
        if !trait_ && self.position.owns() && self.in_fn == 0 && BORROWING.contains(&last.as_str())
        {
            let has_lifetime = matches!(
                &path.segments.last().expect("a segment").arguments,
                syn::PathArguments::AngleBracketed(args)
                    if args.args.iter().any(|a| matches!(a, syn::GenericArgument::Lifetime(_)))
            );
            if !has_lifetime {
                let (owner, fix) = self.position.owner_and_fix();
                // The type's own arguments after the lifetime: `Ref<'static, u8>`.
                let more: String = match &path.segments.last().expect("a segment").arguments {
                    syn::PathArguments::AngleBracketed(args) => args
                        .args
                        .iter()
                        .map(|a| match a {
                            syn::GenericArgument::Type(t) => {
                                format!(", {}", crate::canon::type_text(t))
                            }
                            _ => ", ..".to_owned(),
                        })
                        .collect(),
                    _ => String::new(),
                };
                self.report(problem(
                    format!("uses `{last}`, which borrows (it has a lifetime parameter), but {owner} has nothing to borrow from"),
                    format!("give it a `'static` lifetime (`{last}<'static{more}>`) or {fix}"),
                ));
                return;
            }
        }
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
                    "use a concrete type (e.g. `usize`): backend-specific types are not plain types; for the device, declare the input `{ name = \"device\", device = true }`",
                ));
                return;
            }
            // A trait named where a type belongs: `Box<std::fmt::Debug>` needs `dyn`.
            if !trait_
                && path.segments.len() > 1
                && matches!(first_text.as_str(), "std" | "core" | "alloc")
                && KNOWN_TRAITS.contains(
                    &path
                        .segments
                        .last()
                        .expect("a segment")
                        .ident
                        .to_string()
                        .as_str(),
                )
                // `std::io::Error` and `std::fmt::Error` are structs: the trait is
                // `std::error::Error`.
                && !(path.segments.last().expect("a segment").ident == "Error"
                    && path.segments[path.segments.len() - 2].ident != "error")
            {
                self.report(problem(
                    format!(
                        "names the trait `{}` where a type belongs",
                        path.segments.last().expect("a segment").ident
                    ),
                    "write `dyn` before it, e.g. `Box<dyn std::fmt::Debug>`",
                ));
                return;
            }
            if path.segments.len() == 1 {
                let scoped = if trait_ {
                    names::SCOPED_TRAITS.contains(&first_text.as_str())
                } else {
                    names::is_scoped_type(&first_text)
                };
                if !scoped {
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
                    let container = segment.ident.to_string();
                    for arg in &args.args {
                        match arg {
                            syn::GenericArgument::Lifetime(l) => self.lifetime(Some(l)),
                            syn::GenericArgument::Type(t) => {
                                if !trait_
                                    && !UNSIZED_OK.contains(&container.as_str())
                                    && let Err(p) = sized(t)
                                {
                                    {
                                        let what = p
                                            .message
                                            .trim_start_matches("is ")
                                            .split(',')
                                            .next()
                                            .unwrap_or_default()
                                            .to_owned();
                                        self.report(Problem {
                                            message: format!(
                                                "holds {what} in `{container}<..>`, which needs a sized type"
                                            ),
                                            help: p.help,
                                        });
                                    }
                                }
                                self.visit_type(t);
                            }
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
                        if matches!(&**t, syn::Type::Tuple(unit) if unit.elems.is_empty()) {
                            self.report(problem(
                                "writes `-> ()` in a `Fn` trait's parentheses, which clippy refuses (`unused_unit`)",
                                "drop the `-> ()`: `Fn(u8)` already returns `()`",
                            ));
                        }
                        self.visit_type(t);
                    }
                    self.in_fn -= 1;
                }
            }
        }
    }

    fn const_expr(&mut self, expr: &syn::Expr) {
        match expr {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(int),
                ..
            }) if int.suffix().is_empty()
                && int.to_string().chars().all(|c| c.is_ascii_digit())
                && (int.to_string() == "0" || !int.to_string().starts_with('0'))
                && int.base10_parse::<u32>().is_ok() => {}
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(int),
                ..
            }) => self.report(problem(
                format!("has the length `{int}`, which is not a plain decimal number below 2^32"),
                "write the length in decimal, without a suffix, leading zeros or underscores",
            )),
            syn::Expr::Path(p)
                if p.qself.is_none()
                    && (p.path.segments.len() > 1 || p.path.leading_colon.is_some())
                    && p.path.segments[0].ident != "Self"
                    && !names::GENERICS
                        .contains(&p.path.segments[0].ident.to_string().as_str()) => {}
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
            // `fn() -> !` is stable; `!` anywhere else is not.
            syn::Type::Never(_) if self.in_fn > 0 => {}
            syn::Type::Never(_) => self.report(problem(
                "uses the never type `!` outside a function pointer's return type, where it is not stable",
                "use `std::convert::Infallible`",
            )),
            syn::Type::Paren(_) => self.report(problem(
                "has parentheses around a type, which rustc warns about (`unused_parens`)",
                "remove them (a one-element tuple is written `(T,)`)",
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
            syn::Type::BareFn(f) if f.inputs.iter().any(|i| !i.attrs.is_empty()) => {
                self.report(problem(
                    "has an attribute or doc comment on a function pointer's parameter",
                    "remove it (rustc refuses most, and rustfmt drops the rest)",
                ));
            }
            syn::Type::BareFn(f)
                if f.abi.as_ref().is_some_and(|abi| {
                    abi.name.as_ref().is_none_or(|name| {
                        !["C", "C-unwind", "system", "system-unwind", "Rust"]
                            .contains(&name.value().as_str())
                    })
                }) =>
            {
                self.report(problem(
                    "has a function pointer ABI other than \"C\", \"C-unwind\", \"system\", \"system-unwind\" or \"Rust\" (a bare `extern` is deprecated)",
                    "write `extern \"C\" fn(..)`, or a plain `fn(..)`",
                ));
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
                        syn::TypeParamBound::Trait(b)
                            if matches!(b.modifier, syn::TraitBoundModifier::Maybe(_)) =>
                        {
                            self.report(problem(
                                "has a `?Sized` bound on a trait object, which rustc refuses",
                                "remove `?Sized`: a trait object is unsized already",
                            ));
                        }
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
                if let Err(p) = sized(&a.elem) {
                    self.report(problem(
                        format!("has an array of {}", unsized_what(&p)),
                        p.help,
                    ));
                }
                self.visit_type(&a.elem);
                self.const_expr(&a.len);
            }
            syn::Type::Tuple(t) => {
                for elem in &t.elems {
                    if let Err(p) = sized(elem) {
                        self.report(problem(
                            format!("has a tuple element that is {}", unsized_what(&p)),
                            p.help,
                        ));
                    }
                    self.visit_type(elem);
                }
            }
            // Tuples, slices behind references, pointers, parentheses: their parts.
            other => syn::visit::visit_type(self, other),
        }
    }
}
