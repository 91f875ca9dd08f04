//! What generated code and errors say about an op: its backends, its inputs' names and kinds,
//! its policy (those three words from `burn-route-core`), and its static facts ([`OpInfo`]). Shared by routing and by the errors, which
//! depend on this module and not on each other.

use core::fmt;

use burn_backend::{DType, FloatDType};
use burn_route_core::FloatDtype;

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
    /// The float dtypes its kernels take (`dtypes` in the manifest), one bit each
    /// ([`dtype_bit`]); 0 when it declares none, so its kernels take every dtype.
    pub(crate) dtypes: u8,
    /// The same dtypes, in the manifest's order, for messages.
    pub(crate) declared_dtypes: &'static [FloatDType],
    /// What a float input of another dtype runs (`other_dtypes`).
    pub(crate) other_dtypes: OtherDtypes,
    /// `manifest:LINE` of `dtypes`.
    pub(crate) dtypes_location: &'static str,
}

/// What a call whose float inputs include a dtype the op's kernels do not take runs: the
/// manifest's `other_dtypes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtherDtypes {
    /// The op's `composition`, on the inputs' backend (and on `Autodiff<B, C>` for a
    /// `differentiable` op under an enabled autodiff context, which Burn's autodiff then
    /// differentiates: its gradients are the composition's, not those of a declared
    /// `backward`).
    Composition,
    /// Nothing: the call fails with [`RouteError::UnsupportedDtype`](super::RouteError).
    Error,
}

/// Core's word for Burn's `dtype`, when it is a float.
#[inline]
const fn float_dtype(dtype: DType) -> Option<FloatDtype> {
    match dtype {
        DType::F64 => Some(FloatDtype::F64),
        DType::F32 => Some(FloatDtype::F32),
        DType::Flex32 => Some(FloatDtype::Flex32),
        DType::F16 => Some(FloatDtype::F16),
        DType::BF16 => Some(FloatDtype::Bf16),
        _ => None,
    }
}

/// Core's word for Burn's float `dtype`.
const fn from_float_dtype(dtype: FloatDType) -> FloatDtype {
    match dtype {
        FloatDType::F64 => FloatDtype::F64,
        FloatDType::F32 => FloatDtype::F32,
        FloatDType::Flex32 => FloatDtype::Flex32,
        FloatDType::F16 => FloatDtype::F16,
        FloatDType::BF16 => FloatDtype::Bf16,
    }
}

/// The bit of a float dtype in [`OpInfo`]'s dtype set (core's [`FloatDtype::bit`]); 0 for a
/// dtype that is not a float.
#[inline]
pub(crate) const fn dtype_bit(dtype: DType) -> u8 {
    match float_dtype(dtype) {
        Some(float) => float.bit(),
        None => 0,
    }
}

/// How the manifest spells a dtype (`f32`, `bf16`), for messages; Burn's name for the others.
pub(crate) fn dtype_name(dtype: DType) -> String {
    match float_dtype(dtype) {
        Some(float) => float.key().to_owned(),
        None => format!("{dtype:?}"),
    }
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
            dtypes: 0,
            declared_dtypes: &[],
            other_dtypes: OtherDtypes::Error,
            dtypes_location: "",
        }
    }

    /// The facts of an op that declares the float dtypes its kernels take (`dtypes`, declared
    /// at `location`), and what a float input of any other dtype runs (`other`): planning sends
    /// such a call to the op's composition, or refuses it.
    #[must_use]
    pub const fn with_dtypes(
        mut self,
        dtypes: &'static [FloatDType],
        other: OtherDtypes,
        location: &'static str,
    ) -> Self {
        let mut bits = 0;
        let mut i = 0;
        while i < dtypes.len() {
            bits |= from_float_dtype(dtypes[i]).bit();
            i += 1;
        }
        self.dtypes = bits;
        self.declared_dtypes = dtypes;
        self.other_dtypes = other;
        self.dtypes_location = location;
        self
    }

    /// Whether the op's kernels take a float input of `dtype` (every dtype, when the op
    /// declares none; and any non-float dtype, which other checks refuse).
    #[inline]
    pub(crate) fn takes(&self, dtype: impl FnOnce() -> DType) -> bool {
        if self.dtypes == 0 {
            return true;
        }
        let bit = dtype_bit(dtype());
        bit == 0 || self.dtypes & bit != 0
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
