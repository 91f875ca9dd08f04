//! The rules of ops on Remote (`remote`): what running an op on the server as one custom
//! operation needs.
//!
//! Such an op's client declares its outputs before the server runs anything (their `shape` and
//! `dtype`, as on `Fusion<B>`) and ships its plain arguments as the operation's scalars, which
//! carry numbers, `bool`, `char`, `String`, and `Option`s, `Vec`s, arrays and tuples of them
//! exactly. An op that cannot run that way runs its `composition` on Remote, primitive by
//! primitive, which it says with `remote = "composition"` (or by declaring no output metadata).

use super::context::{Context, ManifestRule, unknown_modes};
use super::lower::{declared_input, metadata_function, remote_kernel_possible, served};
use crate::diag::{Diagnostic, page};
use crate::ir::{Arg, BackendId, Op, RemoteImpl};
use crate::model::OpSpec;

/// The rules about ops on Remote, checked after [`super::asynchrony::MANIFEST_RULES`].
pub(super) const MANIFEST_RULES: &[ManifestRule] = &[
    remote_value_known,
    remote_key_applies,
    remote_ops_can_run,
    remote_kernel_beside_hand_written,
    remote_arguments_encode,
];

fn key(spec: &OpSpec, rest: &str) -> String {
    format!("op[{}].{rest}", spec.index)
}

/// `remote` is `"kernel"` or `"composition"`.
fn remote_value_known(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    unknown_modes(
        cx,
        "remote",
        |spec| spec.remote.as_ref(),
        crate::keys::REMOTE,
        "write \"kernel\" (one operation that the server runs with the op's kernel) or \"composition\" (the op's composition, primitive by primitive)",
        page::REMOTE,
    )
}

/// `remote` says how an op runs on Remote: the op must be routed there, and have kernels.
fn remote_key_applies(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (spec, op) in cx.ops {
        let Some(value) = spec.remote.as_ref() else {
            continue;
        };
        let at = value.span.clone();
        if op.composite.is_some() {
            out.push(
                Diagnostic::new(
                    at,
                    key(spec, "remote"),
                    format!(
                        "op `{}` is composite: its composition runs on every backend, Remote included, so `remote` has nothing to choose",
                        op.name
                    ),
                )
                .page(page::REMOTE)
                .help("remove `remote`"),
            );
        } else if !op.backends.iter().any(|b| b.name == BackendId::Remote) {
            out.push(
                Diagnostic::new(
                    at,
                    key(spec, "remote"),
                    format!(
                        "op `{}` is not routed to Remote, so `remote` has nothing to choose",
                        op.name
                    ),
                )
                .page(page::REMOTE)
                .help("add \"Remote\" to the op's `backends` (or `routing.backends`), or remove `remote`"),
            );
        } else if value.value == "composition" && op.composition.is_none() {
            out.push(
                Diagnostic::new(
                    at,
                    key(spec, "remote"),
                    format!(
                        "op `{}` says it runs its composition on Remote, but has no `composition`",
                        op.name
                    ),
                )
                .page(page::REMOTE)
                .help(if served(&op.backends)
                    && remote_kernel_possible(op.asynchronous, &op.inputs, &op.output)
                    && unencodable(cx, op).is_empty()
                {
                    "add `composition = \"path::to::fn\"` (the op written with backend primitives), or remove `remote` to run the op's kernel on the server"
                } else {
                    // Without `remote`, the op would not run on Remote at all.
                    "add `composition = \"path::to::fn\"` (the op written with backend primitives)"
                }),
            );
        }
    }
    out
}

/// What keeps an op that is not [`remote_kernel_possible`] from being one custom operation on
/// Remote: the first of the conditions that check tests.
enum Obstacle {
    NotServed,
    Async,
    DeclaredOutput,
    MetadataFunction,
    Metadata,
}

impl Obstacle {
    fn of(op: &Op) -> Self {
        if !served(&op.backends) {
            Self::NotServed
        } else if op.asynchronous {
            Self::Async
        } else if op.output.has_declared() {
            Self::DeclaredOutput
        } else if declared_input(&op.inputs) && metadata_function(&op.output) {
            Self::MetadataFunction
        } else {
            Self::Metadata
        }
    }

    /// Why the op cannot be one operation.
    fn why(&self) -> &'static str {
        match self {
            Self::NotServed => {
                "it is routed to no backend a server runs kernels on (`Flex`, `Cube`), so no server has its kernel"
            }
            Self::Async => "it is async, and a server runs an operation synchronously",
            Self::DeclaredOutput => {
                "it returns a declared type, whose tensors the client cannot declare before the server runs the kernel"
            }
            Self::MetadataFunction => {
                "its output metadata comes from a function, which gets the specs of tensor inputs only, and it takes a declared-type input"
            }
            Self::Metadata => {
                "not every output is a tensor whose `shape` and `dtype` the manifest declares, and the client declares an operation's outputs before the server runs it"
            }
        }
    }

    /// What the op would change to be one.
    fn fix(&self, op: &Op) -> String {
        let x = super::context::example_input(op);
        match self {
            Self::NotServed => "route the op to the server's backend too (e.g. `backends = [\"Flex\", \"Remote\"]`, with its Flex kernel)".to_owned(),
            Self::Async => "remove `async = true`".to_owned(),
            Self::DeclaredOutput => "return tensors instead of the declared type".to_owned(),
            Self::MetadataFunction => format!(
                "declare the outputs' `shape` and `dtype` by input name (e.g. `shape = \"{x}\", dtype = \"{x}\"`) instead of with a function"
            ),
            Self::Metadata => format!(
                "give every tensor output `shape` and `dtype` (e.g. `shape = \"{x}\", dtype = \"{x}\"`)"
            ),
        }
    }
}

/// What `remote = "composition"` needs besides: an op with a declared-type input has no lazy
/// `Fusion<B>` form, so its outputs' metadata would be read by nothing.
fn composition_needs(op: &Op) -> &'static str {
    let declared_input = op
        .inputs
        .iter()
        .any(|i| matches!(i.arg, Arg::Declared { .. }));
    if declared_input && super::rules::has_meta(&op.output) {
        " (and remove the outputs' `shape` and `dtype`, which nothing else reads for an op with a declared-type input)"
    } else {
        ""
    }
}

/// An op that says it runs on the Remote server as one operation (`remote = "kernel"`) can.
fn remote_ops_can_run(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (spec, op) in cx.ops {
        let Some(remote) = spec.remote.as_ref().filter(|r| r.value == "kernel") else {
            continue;
        };
        let on_remote = op.backends.iter().any(|b| b.name == BackendId::Remote);
        if !on_remote || op.composite.is_some() {
            continue;
        }
        if served(&op.backends) && remote_kernel_possible(op.asynchronous, &op.inputs, &op.output) {
            continue;
        }
        out.push(
            Diagnostic::new(
                remote.span.clone(),
                key(spec, "remote"),
                format!(
                    "op `{}` says it runs on the Remote server as one operation (`remote = \"kernel\"`), but cannot: {}",
                    op.name,
                    Obstacle::of(op).why()
                ),
            )
            .page(page::REMOTE)
            .help(format!(
                "{}, or write `remote = \"composition\"`{} to run the op's composition on Remote primitive by primitive{}",
                Obstacle::of(op).fix(op),
                if op.composition.is_none() {
                    " and give the op `composition = \"path::to::fn\"`"
                } else {
                    ""
                },
                composition_needs(op)
            )),
        );
    }
    out
}

/// Whether two ops land in one trait: the same backends (and cfgs), both composite or not.
fn same_trait(a: &Op, b: &Op) -> bool {
    a.composite.is_some() == b.composite.is_some()
        && a.backends.len() == b.backends.len()
        && a.backends
            .iter()
            .zip(&b.backends)
            .all(|(x, y)| x.name == y.name && x.cfg == y.cfg)
}

/// An op that says it runs on the server as one operation cannot share its trait with an op
/// whose Remote implementation the crate writes by hand (the generator writes a trait's Remote
/// implementation whole, or not at all).
fn remote_kernel_beside_hand_written(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (spec, op) in cx.ops {
        let Some(remote) = spec.remote.as_ref().filter(|r| r.value == "kernel") else {
            continue;
        };
        let Some((_, other)) = cx
            .ops
            .iter()
            .find(|(_, o)| o.remote == RemoteImpl::HandWritten && same_trait(o, op))
        else {
            continue;
        };
        out.push(
            Diagnostic::new(
                remote.span.clone(),
                key(spec, "remote"),
                format!(
                    "op `{}` says it runs on the Remote server as one operation, but op `{}` of the same trait runs on Remote only through an `impl` written by hand ({}, and it has no `composition`), so the generator cannot write the trait's Remote implementation",
                    op.name,
                    other.name,
                    Obstacle::of(other).why()
                ),
            )
            .page(page::REMOTE)
            .help(format!(
                "for op `{}`, {} or add a `composition`; or give one of the two ops a `backends` list of its own so they land in different traits",
                other.name,
                Obstacle::of(other).fix(other)
            )),
        );
    }
    out
}

/// A warning for each op that runs on Remote only through the crate's own `impl`: it cannot
/// run on the server as one operation and has no composition, so its trait's Remote
/// implementation is not generated.
pub(super) fn hand_written_warnings(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    cx.ops
        .iter()
        .filter(|(_, op)| op.remote == RemoteImpl::HandWritten)
        .map(|(spec, op)| {
            Diagnostic::new(
                spec.output
                    .as_ref()
                    .map_or_else(|| spec.name_span(), crate::model::OutputSpec::span),
                key(spec, "output"),
                format!(
                    "op `{}` is routed to Remote but cannot run on the server as one operation ({}) and has no `composition`: the crate implements its trait for `Remote` by hand, and `{}` does not serve it",
                    op.name,
                    Obstacle::of(op).why(),
                    crate::names::SERVE_REMOTE
                ),
            )
            .page(page::REMOTE)
            .help(format!("{}, or add `composition = \"path::to::fn\"`, and the generator writes the Remote implementation", Obstacle::of(op).fix(op)))
            .warning()
        })
        .collect()
}

/// Whether the scalars of a custom operation carry a plain type exactly: numbers (up to 64
/// bits), `bool`, `char`, `String`, and `Option`s, `Vec`s, arrays and tuples (up to four) of
/// them.
pub(crate) fn encodable(ty: &syn::Type) -> bool {
    match ty {
        syn::Type::Paren(p) => encodable(&p.elem),
        syn::Type::Group(g) => encodable(&g.elem),
        syn::Type::Array(a) => encodable(&a.elem),
        syn::Type::Tuple(t) => {
            !t.elems.is_empty() && t.elems.len() <= 4 && t.elems.iter().all(encodable)
        }
        syn::Type::Path(p) if p.qself.is_none() => {
            let Some(last) = p.path.segments.last() else {
                return false;
            };
            let name = last.ident.to_string();
            let std_path = p.path.segments.len() == 1
                || p.path.segments.iter().rev().skip(1).all(|s| {
                    matches!(
                        s.ident.to_string().as_str(),
                        "std" | "core" | "alloc" | "option" | "vec" | "string" | "primitive"
                    )
                });
            if !std_path {
                return false;
            }
            match &last.arguments {
                syn::PathArguments::None => {
                    burn_route_core::primitive::is_remote_scalar(&name) || name == "String"
                }
                syn::PathArguments::AngleBracketed(args)
                    if matches!(name.as_str(), "Option" | "Vec") =>
                {
                    let mut types = args.args.iter().filter_map(|a| match a {
                        syn::GenericArgument::Type(t) => Some(t),
                        _ => None,
                    });
                    match (types.next(), types.next()) {
                        (Some(t), None) => args.args.len() == 1 && encodable(t),
                        _ => false,
                    }
                }
                _ => false,
            }
        }
        _ => false,
    }
}

/// A plain argument of an op that runs on the server as one operation travels as scalars, so
/// its type must be one they carry exactly.
fn remote_arguments_encode(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    cx.ops
        .iter()
        .filter(|(_, op)| op.remote == RemoteImpl::Kernel)
        .flat_map(|(spec, op)| {
            unencodable(cx, op)
                .into_iter()
                .map(|(i, what)| not_encodable(spec, i, what))
        })
        .collect()
}

/// The plain inputs of `op`, and the plain fields of its declared-type inputs, that an
/// operation's scalars cannot carry exactly: each input's index and what it is.
fn unencodable(cx: &Context<'_, '_>, op: &Op) -> Vec<(usize, String)> {
    let carried = |ty: &str| syn::parse_str::<syn::Type>(ty).is_ok_and(|t| encodable(&t));
    let mut out = Vec::new();
    for (i, input) in op.inputs.iter().enumerate() {
        let Arg::Plain(ty) = &input.arg else { continue };
        if !carried(ty) {
            out.push((
                i,
                format!("`{}` of op `{}` has type `{ty}`", input.name, op.name),
            ));
        }
    }
    // The plain fields of declared-type inputs travel the same way.
    for (i, input) in op.inputs.iter().enumerate() {
        let Arg::Declared { name, .. } = &input.arg else {
            continue;
        };
        for (path, member) in crate::ir::members(cx.types, name) {
            let crate::ir::MemberType::Plain(ty) = member else {
                continue;
            };
            if !carried(ty) {
                out.push((
                    i,
                    format!(
                        "`{}.{}` of op `{}` (a field of type `{name}`) has type `{ty}`",
                        input.name,
                        crate::ir::label(&path),
                        op.name
                    ),
                ));
            }
        }
    }
    out
}

/// A plain value (`what`, of input `i`) that the operation's scalars cannot carry.
fn not_encodable(spec: &OpSpec, i: usize, what: String) -> Diagnostic {
    Diagnostic::new(
        spec.input_type_span(i),
        format!("op[{}].inputs[{i}].type", spec.index),
        format!("{what}, which the op's operation on the Remote server cannot carry exactly: its arguments travel as the operation's scalars"),
    )
    .page(page::REMOTE)
    .help("use numbers (up to 64 bits), `bool`, `char`, `String`, or `Option`s, `Vec`s, arrays and tuples of them (an owned `Vec<usize>` for `&[usize]`, `String` for `&str`); or add `remote = \"composition\"` (with a `composition`) to run the op's composition on Remote")
}
