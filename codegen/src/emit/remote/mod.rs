//! Ops on `Remote`, at the end of the dispatch file: the client's `impl Trait for Remote`,
//! where an op with output metadata is one custom operation (its inputs, its outputs declared
//! from the metadata, its plain arguments as scalars), and the server's side, the generated
//! `serve_remote_ops` that registers each such op's kernel call on a `RemoteServer`.
//!
//! An op's operation id names the crate, the op and a hash of its declaration, so client and
//! server agree on the encoding or refuse the call ([`crate::ir::RemoteImpl`]).

use super::code::{Doc, Writer, call, cat};
use super::kernels::BackwardKernel;
use super::record::{LazyOutput, Target, declare_outputs, outputs_of, record_op, return_expr};
use super::{
    allow_complex_output, inner_cfg, kind_fn, params, primitive_returns, signature, string_literal,
};
use crate::ir::{Arg, Backend, BackendId, Container, Ir, Op, Output, RemoteImpl, TensorKind};
use crate::names::{self, ARGS, CALL, OUTPUTS, RESULT, SERVE, SERVE_REMOTE, TENSOR};

mod backward;

use backward::*;

/// The Remote backend of `op`, when it runs there as one operation.
fn remote_backend(op: &Op) -> Option<&Backend> {
    if op.remote != RemoteImpl::Kernel {
        return None;
    }
    op.backends.iter().find(|b| b.name == BackendId::Remote)
}

/// The text a client and a server must agree on for one op: its name, each input's name and
/// form, and its output's form. Its hash is part of the operation's id.
fn declaration(ir: &Ir, op: &Op) -> String {
    let inputs: Vec<String> = op
        .inputs
        .iter()
        .map(|input| {
            let form = match &input.arg {
                Arg::Tensor(t) => format!(
                    "{}{}{}",
                    t.kind.key(),
                    super::remote_types::container_mark(t.container),
                    if t.borrowed { "&" } else { "" }
                ),
                Arg::Plain(ty) => format!("={ty}"),
                Arg::Device => "device".to_owned(),
                Arg::Declared { name, borrowed, .. } => format!(
                    "type {}{}",
                    super::remote_types::declaration(ir, name),
                    if *borrowed { "&" } else { "" }
                ),
            };
            format!("{}:{form}", input.name)
        })
        .collect();
    fn output(out: &Output) -> String {
        match out {
            Output::Unit => "()".to_owned(),
            Output::Plain(ty) => format!("={ty}"),
            Output::Tensor(t) => format!(
                "{}{}",
                t.kind.key(),
                super::remote_types::container_mark(t.container)
            ),
            Output::Declared { name, .. } => format!("type {name}"),
            Output::Tuple(items) => {
                let items: Vec<String> = items.iter().map(output).collect();
                format!("({})", items.join(","))
            }
        }
    }
    format!("{}({}){}", op.name, inputs.join(","), output(&op.output))
}

/// Everything Remote in the dispatch file: the ops' operation facts, the client impls, the
/// server's kernel calls and `serve_remote_ops`. Nothing when no op runs on Remote as one
/// operation and no trait is routed there.
pub(super) fn emit(ir: &Ir, w: &mut Writer) {
    let kernels: Vec<&Op> = ir
        .ops
        .iter()
        .filter(|op| remote_backend(op).is_some())
        .collect();
    let backward = super::kernels::kernels(ir, Target::Remote);
    statics(ir, &kernels, w);
    backward_statics(ir, &backward, w);
    super::remote_types::emit(ir, &kernels, w);
    for (index, group) in ir.groups.iter().enumerate() {
        if group.composite {
            continue;
        }
        let Some(remote) = group.backends.iter().find(|b| b.name == BackendId::Remote) else {
            continue;
        };
        // The crate writes this trait's Remote implementation itself.
        if ir
            .ops_of(index)
            .any(|op| op.remote == RemoteImpl::HandWritten)
        {
            continue;
        }
        client_impl(ir, index, remote, w);
    }
    super::kernels::impls(ir, Target::Remote, &backward, w);
    for op in &kernels {
        server_call(ir, op, w);
    }
    for kernel in &backward {
        backward_server_call(kernel, w);
    }
    serve(ir, &kernels, &backward, w);
}

/// `static NAME: RemoteOp = RemoteOp { .. }` for operation `op`, its hash over `declaration`
/// (in groups of four digits); the value on a line of its own when the head is too long, as
/// rustfmt lays it out.
fn remote_static(name: &str, op: &str, declaration: &str, w: &mut Writer) {
    let ty = format!("{}::{}::RemoteOp", names::RUNTIME, names::PRIVATE);
    let head = format!("static {name}: {ty} = {ty} {{");
    let long = !w.fits(&Doc::Text(head.clone()));
    if long {
        w.line(format!("static {name}: {ty} ="));
        w.indent();
        w.open(format!("{ty} {{"));
    } else {
        w.open(head);
    }
    w.line(format!("op: {},", string_literal(op)));
    let digits = format!("{:016x}", burn_route_core::hash(declaration));
    let grouped: Vec<&str> = (0..4).map(|i| &digits[i * 4..i * 4 + 4]).collect();
    w.line(format!("hash: 0x{},", grouped.join("_")));
    w.line("krate: env!(\"CARGO_PKG_NAME\"),");
    w.line("module: module_path!(),");
    w.line(format!(
        "serve: concat!(module_path!(), \"::{SERVE_REMOTE}\"),"
    ));
    w.close("};");
    if long {
        w.dedent();
    }
}

/// One `static` per op that runs on Remote as one operation (used by its routing's `OpInfo`,
/// so always compiled).
fn statics(ir: &Ir, kernels: &[&Op], w: &mut Writer) {
    for op in kernels {
        w.blank();
        w.doc(&[
            format!(
                "`{}` as one operation on Remote: its id is this module, the op and the hash of",
                op.name
            ),
            "its declaration.".to_owned(),
        ]);
        remote_static(
            &names::remote_op(&op.name),
            &op.name,
            &declaration(ir, op),
            w,
        );
    }
}

/// `impl Trait for Remote`: each op with output metadata one custom operation; the others
/// keep the trait's default body, their composition.
fn client_impl(ir: &Ir, index: usize, remote: &Backend, w: &mut Writer) {
    let group = &ir.groups[index];
    let ops: Vec<&Op> = ir
        .ops_of(index)
        .filter(|op| op.remote == RemoteImpl::Kernel)
        .collect();
    w.blank();
    w.doc(&[
        format!(
            "[`{}`] on `Remote`: each op with output metadata is one operation that the",
            group.name
        ),
        format!(
            "server runs with its kernel (registered by [`{SERVE_REMOTE}`]); the others run their"
        ),
        "composition, each primitive an operation on the server.".to_owned(),
    ]);
    w.cfg(remote.cfg.as_deref());
    w.impl_block(
        &format!("impl {}", group.name),
        "rt::Remote",
        ops.is_empty(),
    );
    if ops.is_empty() {
        return;
    }
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            w.blank();
        }
        client_method(op, w);
    }
    w.close("}");
}

fn client_method(op: &Op, w: &mut Writer) {
    allow_complex_output(op, w);
    super::allow_many_arguments(op.inputs.len(), w);
    w.open(signature(
        format!("fn {}", op.name),
        params(op, "Self"),
        primitive_returns(&op.output, "Self", " {"),
    ));
    let facts = format!("&{}", names::remote_op(&op.name));
    record_op(Target::Remote, op, &[facts], w);
    declare_outputs(Target::Remote, op, &outputs_of(&op.output), w);
    w.line(format!("let mut {OUTPUTS} = {CALL}.send();"));
    w.line(return_expr(&op.output));
    w.close("}");
}

/// The reader of the next input of kind `kind` on the server.
fn read(kind: TensorKind) -> String {
    format!("{ARGS}.{}()?", kind_fn(kind))
}

/// An op's kernel call on the server's backend `B`: its inputs and arguments read in the order
/// the client recorded them, its outputs registered in the order it declared them.
fn server_call(ir: &Ir, op: &Op, w: &mut Writer) {
    let group = &ir.groups[op.group];
    let cfg = remote_backend(op).and_then(|b| b.cfg.as_deref());
    w.blank();
    w.doc(&[format!(
        "`{}` on a Remote server's backend `B`: reads the operation's inputs and arguments, runs the kernel, registers its outputs.",
        op.name
    )]);
    w.cfg(cfg);
    w.line(signature(
        format!("fn {}<B>", names::serve_op(&op.name)),
        vec![super::param(ARGS, "&mut rt::remote::Args<'_, B>")],
        " -> Result<(), String>",
    ));
    super::autodiff::where_clause(&[format!("B: rt::remote::BackendIr + {}", group.name)], w);
    for input in &op.inputs {
        let name = &input.name;
        match &input.arg {
            Arg::Tensor(t) => match t.container {
                Container::One => w.line(format!("let {name} = {};", read(t.kind))),
                Container::Option => w.line(format!(
                    "let {name} = {ARGS}.{}_option()?;",
                    kind_fn(t.kind)
                )),
                Container::Vec => {
                    w.line(format!("let {name} = {ARGS}.{}_vec()?;", kind_fn(t.kind)))
                }
            },
            Arg::Plain(ty) => w.line(format!(
                "let {name}: {ty} = {ARGS}.arg({})?;",
                string_literal(name)
            )),
            Arg::Device => w.line(format!("let {name} = {ARGS}.device();")),
            Arg::Declared { name: ty, .. } => w.assign(
                format!("let {name} = "),
                cat([
                    call(
                        format!("{}::<B>::{}", names::primitive_type(ty), names::RECEIVE),
                        [ARGS],
                    ),
                    "?".into(),
                ]),
                ";",
            ),
        }
    }
    let kernel_args: Vec<Doc> = op
        .inputs
        .iter()
        .map(|input| match &input.arg {
            Arg::Tensor(t) => match (t.container, t.borrowed) {
                (Container::One, true) => format!("&{}", input.name),
                (Container::Option, true) => format!("{}.as_ref()", input.name),
                _ => input.name.clone(),
            }
            .into(),
            Arg::Device | Arg::Declared { borrowed: true, .. } => format!("&{}", input.name).into(),
            _ => input.name.clone().into(),
        })
        .collect();
    w.assign(
        format!("let {RESULT} = "),
        call(format!("<B as {}>::{}", group.name, op.name), kernel_args),
        ";",
    );
    for LazyOutput {
        access, tensor: t, ..
    } in &outputs_of(&op.output)
    {
        let value = format!("{RESULT}{access}");
        let out = format!("{ARGS}.{}_out", kind_fn(t.kind));
        match t.container {
            Container::One => w.line(format!("{out}({value})?;")),
            Container::Option => {
                w.open(format!("if let Some({TENSOR}) = {value} {{"));
                w.line(format!("{out}({TENSOR})?;"));
                w.close("}");
            }
            Container::Vec => {
                w.open(format!("for {TENSOR} in {value} {{"));
                w.line(format!("{out}({TENSOR})?;"));
                w.close("}");
            }
        }
    }
    w.line("Ok(())");
    w.close("}");
}

/// `all(a, b)` of two optional cfgs (`None`: always).
pub(super) fn all_cfg(a: Option<&str>, b: Option<&str>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) if a != b => {
            // `all(a, all(b, c))` is `all(a, b, c)`.
            let inner = |p: &str| {
                p.strip_prefix("all(")
                    .and_then(|rest| rest.strip_suffix(')'))
                    .filter(|rest| !rest.is_empty() && !rest.contains('('))
                    .map(str::to_owned)
                    .unwrap_or_else(|| p.to_owned())
            };
            Some(format!("all({}, {})", inner(a), inner(b)))
        }
        (Some(a), _) => Some(a.to_owned()),
        (None, b) => b.map(str::to_owned),
    }
}

/// One operation a server backend registers: its static, its handler, its cfg.
type Registration = (String, String, Option<String>);

/// `serve_remote_ops`, and one registration function per server backend: every manifest routed
/// to Remote has it (only the handshake when no op runs there as one operation), so a server
/// binary calls it without knowing which ops do.
fn serve(ir: &Ir, kernels: &[&Op], backward: &[BackwardKernel<'_>], w: &mut Writer) {
    // Where `Remote` is compiled in: any trait routed there.
    let remotes: Vec<&Backend> = ir
        .groups
        .iter()
        .filter_map(|g| g.backends.iter().find(|b| b.name == BackendId::Remote))
        .collect();
    if remotes.is_empty() {
        return;
    }
    let serve_cfg = super::any_distinct(remotes.iter().map(|b| b.cfg.clone()).collect());
    // The ops a server backend runs, each with the cfg its registration needs (its Remote's
    // and that backend's), and where the backend's registration is compiled in.
    // Each registration: the operation's static, its handler, its cfg.
    let on = |backend: BackendId| -> (Vec<Registration>, Option<String>) {
        let cfg_on = |op: &Op| {
            let there = ir.groups[op.group]
                .backends
                .iter()
                .find(|b| b.name == backend)?;
            let remote = remote_backend(op)?;
            Some(all_cfg(remote.cfg.as_deref(), there.cfg.as_deref()))
        };
        let ops = kernels
            .iter()
            .filter_map(|op| {
                Some((
                    names::remote_op(&op.name),
                    names::serve_op(&op.name),
                    cfg_on(op)?,
                ))
            })
            .chain(backward.iter().filter_map(|k| {
                Some((
                    names::remote_backward_op(k.trait_name(), k.method),
                    names::serve_backward(k.trait_name(), k.method),
                    cfg_on(k.op)?,
                ))
            }))
            .collect();
        let cfgs: Vec<Option<String>> = ir
            .groups
            .iter()
            .filter_map(|g| {
                let remote = g.backends.iter().find(|b| b.name == BackendId::Remote)?;
                let there = g.backends.iter().find(|b| b.name == backend)?;
                Some(all_cfg(remote.cfg.as_deref(), there.cfg.as_deref()))
            })
            .collect();
        let cfg = if backend == BackendId::Flex {
            // A Flex server gets the handshake whatever the traits list.
            serve_cfg.clone()
        } else if cfgs.is_empty() {
            // No trait is routed to both: a server of that backend answers the handshake
            // alone, where Remote and the backend are both compiled in.
            let anywhere = super::any_distinct(
                ir.groups
                    .iter()
                    .filter_map(|g| g.backends.iter().find(|b| b.name == backend))
                    .map(|b| b.cfg.clone())
                    .collect(),
            );
            all_cfg(serve_cfg.as_deref(), anywhere.as_deref())
        } else {
            super::any_distinct(cfgs)
        };
        (ops, cfg)
    };
    let (flex, flex_cfg) = on(BackendId::Flex);
    let (cube, cube_cfg) = on(BackendId::Cube);
    let serve_cube = !cube.is_empty()
        || ir
            .groups
            .iter()
            .any(|g| g.backends.iter().any(|b| b.name == BackendId::Cube));
    w.blank();
    w.doc(&[
        format!(
            "Registers every op of `{}` that runs on the Remote server as one operation on `server`,",
            ir.manifest_name
        ),
        "for the backend of `devices` (the server's devices: Flex, or Cube when this build has it),"
            .to_owned(),
        "and the handshake a client asks before its first call of each op. A server binary calls"
            .to_owned(),
        "it once per crate of ops it serves, before serving:".to_owned(),
        String::new(),
        "```ignore".to_owned(),
        "let devices = [Device::flex()];".to_owned(),
        format!("let server = {SERVE_REMOTE}(RemoteServer::new(devices.clone()), &devices);"),
        "```".to_owned(),
        String::new(),
        "A client whose server does not call it gets [`rt::RouteError::RemoteNotServed`] at its"
            .to_owned(),
        "first call of an op on that server, naming the op and this function.".to_owned(),
    ]);
    w.cfg(serve_cfg.as_deref());
    w.open(signature(
        format!("pub fn {SERVE_REMOTE}"),
        vec![
            super::param("server", "rt::remote::RemoteServer"),
            super::param("devices", "&[rt::Device]"),
        ],
        " -> rt::remote::RemoteServer {",
    ));
    w.open("match rt::remote::backend_of(devices) {");
    w.cfg(inner_cfg(serve_cfg.as_deref(), flex_cfg.as_deref()));
    w.line(format!(
        "Some(rt::BackendId::Flex) => {}(server),",
        names::serve_on(BackendId::Flex)
    ));
    if serve_cube {
        w.cfg(inner_cfg(serve_cfg.as_deref(), cube_cfg.as_deref()));
        w.line(format!(
            "Some(rt::BackendId::Cube) => {}(server),",
            names::serve_on(BackendId::Cube)
        ));
    }
    w.line("_ => server,");
    w.close("}");
    w.close("}");
    for (backend, ops, cfg) in [
        (BackendId::Flex, &flex, flex_cfg.clone()),
        (BackendId::Cube, &cube, cube_cfg.clone()),
    ] {
        if backend == BackendId::Cube && !serve_cube {
            continue;
        }
        w.blank();
        w.doc(&[format!(
            "The ops a {} server runs, and the handshake.",
            backend.key()
        )]);
        w.cfg(cfg.as_deref());
        w.open(signature(
            format!("fn {}", names::serve_on(backend)),
            vec![super::param("server", "rt::remote::RemoteServer")],
            " -> rt::remote::RemoteServer {",
        ));
        w.assign(
            format!("let {SERVE} = "),
            call(
                format!("rt::remote::Serve::<rt::{}>::new", backend.key()),
                ["server", "module_path!()"],
            ),
            ";",
        );
        for (facts, handler, op_cfg) in ops.iter() {
            w.cfg(inner_cfg(cfg.as_deref(), op_cfg.as_deref()));
            w.assign(
                format!("let {SERVE} = "),
                call(
                    format!("{SERVE}.op"),
                    // (`B` is inferred from the handler type `Serve::<B>::op` takes.)
                    [format!("&{facts}"), handler.clone()],
                ),
                ";",
            );
        }
        w.line(format!("{SERVE}.finish()"));
        w.close("}");
    }
}
