//! What generated code and errors say about an op: its backends, its inputs' names and kinds,
//! its policy (those three words from `burn-route-core`), and its static facts ([`OpInfo`]). Shared by routing and by the errors, which
//! depend on this module and not on each other.

use core::fmt;

pub use burn_route_core::{BackendId, Policy};

/// The static facts of an op's custom operation on Remote (an op that runs on the server as one
/// operation), for routing and errors.
#[derive(Debug)]
pub struct RemoteOp {
    /// The op's name.
    pub op: &'static str,
    /// The hash of its declaration (its inputs' and outputs' names and forms).
    pub hash: u64,
    /// The crate that generated the op.
    pub krate: &'static str,
    /// The module that includes the generated dispatch code (`module_path!()`): one per
    /// manifest, where a crate may include several.
    pub module: &'static str,
    /// The path of the function a server calls to serve the manifest's ops.
    pub serve: &'static str,
}

impl RemoteOp {
    /// Its custom operation's id: `burn-route/MODULE/OP/HASH`.
    pub fn id(&self) -> String {
        format!("burn-route/{}/{}/{:016x}", self.module, self.op, self.hash)
    }
}

/// Static facts about a routed op, for planning and for error messages.
///
/// Generated code builds one per op in a `static`, naming the backends its routing arms are
/// compiled for (`cfg!` evaluated in the crate that includes the generated code), so that
/// planning itself refuses a backend or an autodiff route the generated code has no arm for.
#[derive(Debug)]
pub struct OpInfo {
    /// The op's name.
    pub name: &'static str,
    /// Its autodiff policy.
    pub policy: Policy,
    /// `manifest:LINE` of the line that declares the policy.
    pub location: &'static str,
    /// `manifest:LINE` of the backend list that routes the op.
    pub backends_location: &'static str,
    /// The backends with a compiled routing arm, one bit per [`BackendId`].
    pub(crate) routed: u8,
    /// Whether the `Autodiff<B, C>` arms are compiled (for a `differentiable` op).
    pub(crate) autodiff: bool,
    /// Every backend the manifest lists, with whether its arms are compiled and its cfg.
    pub(crate) backends: &'static [(BackendId, bool, &'static str)],
    /// The cfg predicate of the autodiff arms, as written in the generated code.
    pub(crate) autodiff_cfg: &'static str,
    /// The crate that compiled the generated code (`CARGO_PKG_NAME`), for messages.
    pub(crate) krate: &'static str,
    /// The op's custom operation on Remote, when it runs there as one.
    pub(crate) remote: Option<&'static RemoteOp>,
}

impl OpInfo {
    /// Creates the facts for one op. `backends` lists each backend the manifest names with
    /// whether its routing arms are compiled (the `cfg!` of its cfg) and that cfg's text (empty
    /// when it has none); `autodiff` says whether the `Autodiff<B, C>` arms are (the `cfg!` of
    /// `autodiff_cfg`; `false` for ops that are not `differentiable`). `krate` is the crate
    /// that includes the generated code. `remote` is the op's custom operation on Remote, when
    /// it runs there as one: planning then asks the server whether it serves it, before the
    /// first call on each device.
    #[allow(clippy::too_many_arguments)]
    pub const fn new(
        name: &'static str,
        policy: Policy,
        location: &'static str,
        backends_location: &'static str,
        backends: &'static [(BackendId, bool, &'static str)],
        autodiff: bool,
        autodiff_cfg: &'static str,
        krate: &'static str,
        remote: Option<&'static RemoteOp>,
    ) -> Self {
        let mut routed = 0;
        let mut i = 0;
        while i < backends.len() {
            if backends[i].1 {
                routed |= backends[i].0.bit();
            }
            i += 1;
        }
        Self {
            name,
            policy,
            location,
            backends_location,
            routed,
            autodiff,
            backends,
            autodiff_cfg,
            krate,
            remote,
        }
    }

    /// Whether a call on `backend` must first be known to be served (an op that runs on Remote as
    /// one operation), which
    /// only the full planner checks.
    #[inline]
    pub(crate) fn asks_server(&self, backend: BackendId) -> bool {
        matches!(backend, BackendId::Remote) && self.remote.is_some()
    }

    /// The cfg that compiled `backend`'s arms out, when the manifest lists it but this build
    /// of the crate does not compile it.
    pub fn compiled_out(&self, backend: BackendId) -> Option<&'static str> {
        self.backends
            .iter()
            .find(|(b, compiled, _)| *b == backend && !compiled)
            .map(|(_, _, cfg)| *cfg)
    }

    /// Whether the op has a compiled routing arm for `backend`.
    #[inline]
    pub const fn is_routed(&self, backend: BackendId) -> bool {
        self.routed & backend.bit() != 0
    }
}

pub use burn_route_core::TensorKind;

/// The name of an input as error messages show it: `x`, or `xs[2]` for an element of a `Vec`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputName {
    /// The parameter name.
    pub name: &'static str,
    /// The element index, for `Vec` inputs.
    pub index: Option<usize>,
}

impl InputName {
    /// A plain parameter.
    pub const fn new(name: &'static str) -> Self {
        Self { name, index: None }
    }

    /// Element `index` of a `Vec` parameter.
    pub const fn at(name: &'static str, index: usize) -> Self {
        Self {
            name,
            index: Some(index),
        }
    }
}

impl fmt::Display for InputName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(i) => write!(f, "{}[{i}]", self.name),
            None => f.write_str(self.name),
        }
    }
}
