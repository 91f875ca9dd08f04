//! Unwrapping inputs for, and wrapping outputs from, the implementation a route picked.

use core::ops::Deref;

use burn_backend::Backend;
use burn_backend::tensor::{BoolTensor, Device, FloatTensor, IntTensor, QuantizedTensor};
use burn_dispatch::backends::*;
use burn_dispatch::{
    BackendTensor, DispatchAutodiffContext, DispatchDevice, DispatchTensor, DispatchTensorKind,
};

use super::route::{Route, describe};

/// A borrowed input, or an owned value standing in for it (an untracked float lifted into
/// `Autodiff<B, C>` as a constant, or the inner device of an autodiff device). Dereferences to
/// the value.
#[derive(Debug)]
pub enum Held<'a, T> {
    /// Borrowed straight from the caller's value.
    Borrowed(&'a T),
    /// Built for this call.
    Owned(T),
}

impl<T: Clone> Held<'_, T> {
    /// The value itself: the owned one, or a clone of the borrowed one (what an async op's
    /// future keeps, so that it borrows nothing from the caller).
    #[inline]
    pub fn into_owned(self) -> T {
        match self {
            Self::Borrowed(t) => t.clone(),
            Self::Owned(t) => t,
        }
    }
}

impl<T> Deref for Held<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self {
            Self::Borrowed(t) => t,
            Self::Owned(t) => t,
        }
    }
}

/// Declares `Target`'s unwrap functions for one tensor kind.
macro_rules! target_kind_fns {
    ($($owned:ident, $borrowed:ident, $out:ident, $opt:ident, $ref_opt:ident, $vec:ident, $out_opt:ident, $out_vec:ident, $prim:ident, $what:literal;)*) => {$(
        #[doc = concat!("Unwraps an owned optional ", $what, " input.")]
        #[inline]
        fn $opt(route: &Route, input: &'static str, tensor: Option<DispatchTensor>) -> Option<$prim<Self>> {
            tensor.map(|t| Self::$owned(route, input, t))
        }
        #[doc = concat!("Unwraps a borrowed optional ", $what, " input.")]
        #[inline]
        fn $ref_opt<'a>(route: &Route, input: &'static str, tensor: Option<&'a DispatchTensor>) -> Option<Held<'a, $prim<Self>>> {
            tensor.map(|t| Self::$borrowed(route, input, t))
        }
        #[doc = concat!("Unwraps a `Vec` of ", $what, " inputs.")]
        #[inline]
        fn $vec(route: &Route, input: &'static str, tensors: Vec<DispatchTensor>) -> Vec<$prim<Self>> {
            tensors.into_iter().map(|t| Self::$owned(route, input, t)).collect()
        }
        #[doc = concat!("Wraps an optional ", $what, " output.")]
        #[inline]
        fn $out_opt(route: &Route, out: Option<$prim<Self>>) -> Option<DispatchTensor> {
            out.map(|t| Self::$out(route, t))
        }
        #[doc = concat!("Wraps a `Vec` of ", $what, " outputs.")]
        #[inline]
        fn $out_vec(route: &Route, out: Vec<$prim<Self>>) -> Vec<DispatchTensor> {
            out.into_iter().map(|t| Self::$out(route, t)).collect()
        }
        #[doc = concat!("Unwraps an owned ", $what, " input.")]
        ///
        /// # Panics
        /// When the tensor does not fit the route, which planning rules out: a burn-route bug.
        fn $owned(route: &Route, input: &'static str, tensor: DispatchTensor) -> $prim<Self>;
        #[doc = concat!("Unwraps a borrowed ", $what, " input.")]
        ///
        /// # Panics
        /// When the tensor does not fit the route, which planning rules out: a burn-route bug.
        fn $borrowed<'a>(route: &Route, input: &'static str, tensor: &'a DispatchTensor) -> Held<'a, $prim<Self>>;
        #[doc = concat!("Wraps a ", $what, " output in the route's autodiff context.")]
        fn $out(route: &Route, out: $prim<Self>) -> DispatchTensor;
    )*};
}

/// A backend implementation a route can call: a concrete backend (`Flex`, ...) or
/// `Autodiff<B, C>` over one. Generated code unwraps each input with these functions, calls the
/// kernel, and wraps each output in the route's autodiff context: float outputs of an
/// `Autodiff` kernel stay tracked; those of a concrete kernel under an enabled context become
/// untracked autodiff primitives; int, bool and quantized outputs carry the context.
///
/// The owned unwraps are the routing hot path: each backend's impl moves the primitive out of
/// the `DispatchTensorKind` in one match on the expected variant, and leaves every other shape
/// (an `Autodiff` wrapper, a primitive to convert) to an out-of-line function.
pub trait Target: Backend {
    target_kind_fns! {
        float, float_ref, float_out, float_opt, float_ref_opt, float_vec, float_out_opt, float_out_vec, FloatTensor, "float";
        int, int_ref, int_out, int_opt, int_ref_opt, int_vec, int_out_opt, int_out_vec, IntTensor, "int";
        bool, bool_ref, bool_out, bool_opt, bool_ref_opt, bool_vec, bool_out_opt, bool_out_vec, BoolTensor, "bool";
        quantized, quantized_ref, quantized_out, quantized_opt, quantized_ref_opt, quantized_vec, quantized_out_opt, quantized_out_vec, QuantizedTensor, "quantized";
    }

    /// Unwraps the device argument.
    ///
    /// # Panics
    /// When the device is on another backend than the route, which planning rules out: a
    /// burn-route bug.
    fn device<'a>(
        route: &Route,
        input: &'static str,
        device: &'a DispatchDevice,
    ) -> Held<'a, Device<Self>>;
}

/// A concrete backend's variants of `DispatchTensorKind` and `DispatchDevice`.
// `take` hands the caller's own value back on a mismatch, as `Rc::try_unwrap` does, so that the
// failure can be described; a large `Err` is the point (boxing it would allocate to no end).
#[allow(clippy::result_large_err)]
pub trait Concrete: Backend {
    /// Moves the backend tensor out of `kind`.
    ///
    /// # Errors
    /// `kind` itself, untouched, when it does not hold this backend's tensor (including when
    /// it is an `Autodiff` wrapper: see [`Concrete::take_unwrapped`]).
    fn take(kind: DispatchTensorKind) -> Result<BackendTensor<Self>, DispatchTensorKind>;
    /// [`Concrete::take`] through an `Autodiff` wrapper, if `kind` has one.
    ///
    /// # Errors
    /// `kind`, wrapper included, when it does not hold this backend's tensor.
    #[allow(unreachable_patterns)]
    fn take_unwrapped(kind: DispatchTensorKind) -> Result<BackendTensor<Self>, DispatchTensorKind> {
        match kind {
            #[cfg(feature = "autodiff")]
            DispatchTensorKind::Autodiff(inner) => {
                Self::take(*inner).map_err(|kind| DispatchTensorKind::Autodiff(Box::new(kind)))
            }
            other => Self::take(other),
        }
    }
    /// Borrows the backend tensor in `kind`, when it is this backend's.
    fn peek(kind: &DispatchTensorKind) -> Option<&BackendTensor<Self>>;
    /// Puts a backend tensor into its `DispatchTensorKind` variant.
    fn put(tensor: BackendTensor<Self>) -> DispatchTensorKind;
    /// This backend's device in `device` (also inside an autodiff device).
    fn device_of(device: &DispatchDevice) -> Option<Held<'_, Device<Self>>>;
}

/// An input that planning accepted but that does not fit the route: a burn-route bug.
#[cold]
#[inline(never)]
fn unplanned(
    route: &Route,
    input: &'static str,
    expected: &'static str,
    kind: &DispatchTensorKind,
) -> ! {
    super::route::planned_out(route.mismatch(input, expected, describe(kind)))
}

#[allow(unreachable_patterns)]
#[inline]
fn unwrap_kind_ref(kind: &DispatchTensorKind) -> &DispatchTensorKind {
    match kind {
        #[cfg(feature = "autodiff")]
        DispatchTensorKind::Autodiff(inner) => inner,
        other => other,
    }
}

fn device<'a, B: Concrete>(
    route: &Route,
    input: &'static str,
    device: &'a DispatchDevice,
) -> Held<'a, Device<B>> {
    match B::device_of(device) {
        Some(device) => device,
        None => route.device_unplanned(input, device),
    }
}

/// The concrete lane's float functions, generic over the backend.
mod concrete {
    use super::*;

    /// An owned float input that is not a plain primitive of `B`: the inner primitive of an
    /// autodiff float (a `detach` op's input, or an untracked float next to tracked ones).
    #[allow(unreachable_patterns)]
    #[inline(never)]
    pub(super) fn float<B: Concrete>(
        route: &Route,
        input: &'static str,
        kind: DispatchTensorKind,
    ) -> FloatTensor<B> {
        match B::take_unwrapped(kind) {
            Ok(BackendTensor::Float(t)) => t,
            // Tracked inputs of `reject` ops never get here (planning refuses them).
            #[cfg(feature = "autodiff")]
            Ok(BackendTensor::Autodiff(t)) => t.into_primitive(),
            Ok(other) => unplanned(route, input, "float", &B::put(other)),
            Err(kind) => unplanned(route, input, "float", &kind),
        }
    }

    #[allow(unreachable_patterns)]
    #[inline]
    pub(super) fn float_ref<'a, B: Concrete>(
        route: &Route,
        input: &'static str,
        tensor: &'a DispatchTensor,
    ) -> Held<'a, FloatTensor<B>> {
        match B::peek(unwrap_kind_ref(&tensor.kind)) {
            Some(BackendTensor::Float(t)) => Held::Borrowed(t),
            #[cfg(feature = "autodiff")]
            Some(BackendTensor::Autodiff(t)) => Held::Borrowed(t.primitive()),
            _ => unplanned(route, input, "float", &tensor.kind),
        }
    }

    /// A concrete kernel's float output under an enabled context: an untracked autodiff
    /// tensor. Out of line: the disabled context is the hot path.
    #[inline(never)]
    pub(super) fn lift<B: Concrete>(
        out: FloatTensor<B>,
        context: DispatchAutodiffContext,
    ) -> DispatchTensor {
        #[cfg(feature = "autodiff")]
        {
            use burn_backend::AutodiffBackend;
            let lifted = <burn_autodiff::Autodiff<B> as AutodiffBackend>::from_inner(out);
            DispatchTensor {
                kind: DispatchTensorKind::Autodiff(Box::new(B::put(BackendTensor::Autodiff(
                    lifted,
                )))),
                autodiff: context,
            }
        }
        // Planning refuses an enabled context in a build without autodiff.
        #[cfg(not(feature = "autodiff"))]
        DispatchTensor {
            kind: B::put(BackendTensor::Float(out)),
            autodiff: context,
        }
    }
}

/// The `Autodiff<B, C>` lane's float functions, generic over the backend.
#[cfg(feature = "autodiff")]
mod autodiff {
    use super::*;
    use burn_autodiff::Autodiff;
    use burn_autodiff::checkpoint::strategy::CheckpointStrategy;
    use burn_backend::AutodiffBackend;

    #[inline]
    pub(super) fn float<B: Concrete, C: CheckpointStrategy>(
        route: &Route,
        input: &'static str,
        tensor: DispatchTensor,
    ) -> FloatTensor<Autodiff<B, C>> {
        match B::take_unwrapped(tensor.kind) {
            Ok(BackendTensor::Autodiff(t)) => t,
            // An input with a disabled context next to tracked ones: a constant.
            Ok(BackendTensor::Float(t)) => <Autodiff<B, C> as AutodiffBackend>::from_inner(t),
            Ok(other) => unplanned(route, input, "float", &B::put(other)),
            Err(kind) => unplanned(route, input, "float", &kind),
        }
    }

    #[inline]
    pub(super) fn float_ref<'a, B: Concrete, C: CheckpointStrategy>(
        route: &Route,
        input: &'static str,
        tensor: &'a DispatchTensor,
    ) -> Held<'a, FloatTensor<Autodiff<B, C>>> {
        match B::peek(unwrap_kind_ref(&tensor.kind)) {
            Some(BackendTensor::Autodiff(t)) => Held::Borrowed(t),
            Some(BackendTensor::Float(t)) => {
                Held::Owned(<Autodiff<B, C> as AutodiffBackend>::from_inner(t.clone()))
            }
            _ => unplanned(route, input, "float", &tensor.kind),
        }
    }
}

/// The functions both lanes of a backend share: int, bool and quantized primitives are the same
/// types for `B` and `Autodiff<B, C>`, and never inside an `Autodiff` wrapper (planning refuses
/// one).
macro_rules! shared_lane_fns {
    ($backend:ident; $($owned:ident, $borrowed:ident, $out:ident, $variant:ident, $name:literal, $prim:ident;)*) => {$(
        #[inline]
        fn $owned(route: &Route, input: &'static str, tensor: DispatchTensor) -> $prim<Self> {
            match tensor.kind {
                DispatchTensorKind::$backend(BackendTensor::$variant(t)) => t,
                other => unplanned(route, input, $name, &other),
            }
        }
        #[inline]
        fn $borrowed<'a>(
            route: &Route,
            input: &'static str,
            tensor: &'a DispatchTensor,
        ) -> Held<'a, $prim<Self>> {
            match &tensor.kind {
                DispatchTensorKind::$backend(BackendTensor::$variant(t)) => Held::Borrowed(t),
                other => unplanned(route, input, $name, other),
            }
        }
        #[inline]
        fn $out(route: &Route, out: $prim<Self>) -> DispatchTensor {
            DispatchTensor {
                kind: DispatchTensorKind::$backend(BackendTensor::$variant(out)),
                autodiff: route.context(),
            }
        }
    )*
        fn device<'a>(
            route: &Route,
            input: &'static str,
            device: &'a DispatchDevice,
        ) -> Held<'a, Device<Self>> {
            self::device::<$backend>(route, input, device)
        }
    };
}

/// `Concrete` and `Target` for a backend compiled in under `$cfg`, and `Target` for
/// `Autodiff<B, C>` over it.
macro_rules! backend_lanes {
    ($backend:ident, $cfg:meta) => {
        // Only the variants of backends compiled into Burn exist; with a single backend the
        // wildcard arms are unreachable, with several they are needed.
        #[cfg($cfg)]
        #[allow(unreachable_patterns)]
        impl Concrete for $backend {
            #[inline]
            fn take(kind: DispatchTensorKind) -> Result<BackendTensor<Self>, DispatchTensorKind> {
                match kind {
                    DispatchTensorKind::$backend(t) => Ok(t),
                    other => Err(other),
                }
            }
            #[inline]
            fn peek(kind: &DispatchTensorKind) -> Option<&BackendTensor<Self>> {
                match kind {
                    DispatchTensorKind::$backend(t) => Some(t),
                    _ => None,
                }
            }
            #[inline]
            fn put(tensor: BackendTensor<Self>) -> DispatchTensorKind {
                DispatchTensorKind::$backend(tensor)
            }
            fn device_of(device: &DispatchDevice) -> Option<Held<'_, Device<Self>>> {
                match device {
                    DispatchDevice::$backend(d) => Some(Held::Borrowed(d)),
                    #[cfg(feature = "autodiff")]
                    DispatchDevice::Autodiff(ad) => match ad.clone().inner() {
                        DispatchDevice::$backend(d) => Some(Held::Owned(d)),
                        _ => None,
                    },
                    _ => None,
                }
            }
        }

        #[cfg($cfg)]
        #[allow(unreachable_patterns)]
        impl Target for $backend {
            #[inline]
            fn float(
                route: &Route,
                input: &'static str,
                tensor: DispatchTensor,
            ) -> FloatTensor<Self> {
                match tensor.kind {
                    DispatchTensorKind::$backend(BackendTensor::Float(t)) => t,
                    other => concrete::float::<Self>(route, input, other),
                }
            }
            #[inline]
            fn float_ref<'a>(
                route: &Route,
                input: &'static str,
                tensor: &'a DispatchTensor,
            ) -> Held<'a, FloatTensor<Self>> {
                concrete::float_ref::<Self>(route, input, tensor)
            }
            #[inline]
            fn float_out(route: &Route, out: FloatTensor<Self>) -> DispatchTensor {
                match route.context() {
                    DispatchAutodiffContext::Disabled => DispatchTensor {
                        kind: DispatchTensorKind::$backend(BackendTensor::Float(out)),
                        autodiff: DispatchAutodiffContext::Disabled,
                    },
                    context => concrete::lift::<Self>(out, context),
                }
            }
            shared_lane_fns! {
                $backend;
                int, int_ref, int_out, Int, "int", IntTensor;
                bool, bool_ref, bool_out, Bool, "bool", BoolTensor;
                quantized, quantized_ref, quantized_out, Quantized, "quantized", QuantizedTensor;
            }
        }

        #[cfg(all($cfg, feature = "autodiff"))]
        #[allow(unreachable_patterns)]
        impl<C: burn_autodiff::checkpoint::strategy::CheckpointStrategy> Target
            for burn_autodiff::Autodiff<$backend, C>
        {
            #[inline]
            fn float(
                route: &Route,
                input: &'static str,
                tensor: DispatchTensor,
            ) -> FloatTensor<Self> {
                autodiff::float::<$backend, C>(route, input, tensor)
            }
            #[inline]
            fn float_ref<'a>(
                route: &Route,
                input: &'static str,
                tensor: &'a DispatchTensor,
            ) -> Held<'a, FloatTensor<Self>> {
                autodiff::float_ref::<$backend, C>(route, input, tensor)
            }
            #[inline]
            fn float_out(route: &Route, out: FloatTensor<Self>) -> DispatchTensor {
                DispatchTensor {
                    kind: DispatchTensorKind::Autodiff(Box::new(DispatchTensorKind::$backend(
                        BackendTensor::Autodiff(out),
                    ))),
                    autodiff: route.context(),
                }
            }
            shared_lane_fns! {
                $backend;
                int, int_ref, int_out, Int, "int", IntTensor;
                bool, bool_ref, bool_out, Bool, "bool", BoolTensor;
                quantized, quantized_ref, quantized_out, Quantized, "quantized", QuantizedTensor;
            }
        }
    };
}

backend_lanes!(Flex, all());
backend_lanes!(Cube, any(feature = "wgpu", feature = "cuda"));
backend_lanes!(Remote, feature = "remote");
