//! Unwrapping inputs for, and wrapping outputs from, the implementation a route picked.

use core::ops::Deref;

use burn_backend::Backend;
use burn_backend::tensor::{BoolTensor, Device, FloatTensor, IntTensor, QuantizedTensor};
use burn_dispatch::backends::*;
use burn_dispatch::{
    BackendTensor, DispatchAutodiffContext, DispatchDevice, DispatchTensor, DispatchTensorKind,
};

use super::error::RouteError;
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

impl<T> Deref for Held<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self {
            Self::Borrowed(t) => t,
            Self::Owned(t) => t,
        }
    }
}

/// Declares `Lane`'s unwrap functions for one tensor kind.
macro_rules! lane_kind_fns {
    ($($owned:ident, $borrowed:ident, $out:ident, $prim:ident, $what:literal;)*) => {$(
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
pub trait Lane: Backend {
    lane_kind_fns! {
        float, float_ref, float_out, FloatTensor, "float";
        int, int_ref, int_out, IntTensor, "int";
        bool, bool_ref, bool_out, BoolTensor, "bool";
        quantized, quantized_ref, quantized_out, QuantizedTensor, "quantized";
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
pub trait Concrete: Backend {
    /// Moves the backend tensor out of `kind`; `None` when it is another backend's.
    fn take(kind: DispatchTensorKind) -> Option<BackendTensor<Self>>;
    /// Borrows the backend tensor in `kind`, when it is this backend's.
    fn peek(kind: &DispatchTensorKind) -> Option<&BackendTensor<Self>>;
    /// Puts a backend tensor into its `DispatchTensorKind` variant.
    fn put(tensor: BackendTensor<Self>) -> DispatchTensorKind;
    /// This backend's device in `device` (also inside an autodiff device).
    fn device_of(device: &DispatchDevice) -> Option<Held<'_, Device<Self>>>;
}

/// The value of an unwrap that planning guarantees; a failure is a burn-route bug, reported with
/// the error that describes it.
#[inline]
fn planned<T>(unwrapped: Result<T, RouteError>) -> T {
    match unwrapped {
        Ok(value) => value,
        Err(err) => super::route::planned_out(err),
    }
}

/// Strips the `Autodiff` wrapper of a dispatch kind, if any.
#[allow(unreachable_patterns)]
#[inline]
fn unwrap_kind(kind: DispatchTensorKind) -> DispatchTensorKind {
    match kind {
        #[cfg(feature = "autodiff")]
        DispatchTensorKind::Autodiff(inner) => *inner,
        other => other,
    }
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
) -> Result<Held<'a, Device<B>>, RouteError> {
    B::device_of(device).ok_or_else(|| route.device_mismatch(input, device))
}

/// Generic bodies of the concrete lane's float functions.
mod concrete {
    use super::*;

    #[allow(unreachable_patterns)]
    pub(super) fn float<B: Concrete>(
        route: &Route,
        input: &'static str,
        tensor: DispatchTensor,
    ) -> Result<FloatTensor<B>, RouteError> {
        // Describing the tensor for the error costs a walk of its kind: only on the (planned-out)
        // failure path, before the kind is moved.
        let fits = match B::peek(unwrap_kind_ref(&tensor.kind)) {
            Some(BackendTensor::Float(_)) => true,
            #[cfg(feature = "autodiff")]
            Some(BackendTensor::Autodiff(_)) => true,
            _ => false,
        };
        if !fits {
            return Err(route.mismatch(input, "float", describe(&tensor.kind)));
        }
        match B::take(unwrap_kind(tensor.kind)) {
            Some(BackendTensor::Float(t)) => Ok(t),
            // Tracked inputs of `reject` ops never get here (planning refuses them); `detach`
            // ops and untracked autodiff floats run on the inner primitive.
            #[cfg(feature = "autodiff")]
            Some(BackendTensor::Autodiff(t)) => Ok(t.into_primitive()),
            _ => unreachable!("peeked above"),
        }
    }

    #[allow(unreachable_patterns)]
    pub(super) fn float_ref<'a, B: Concrete>(
        route: &Route,
        input: &'static str,
        tensor: &'a DispatchTensor,
    ) -> Result<Held<'a, FloatTensor<B>>, RouteError> {
        match B::peek(unwrap_kind_ref(&tensor.kind)) {
            Some(BackendTensor::Float(t)) => Ok(Held::Borrowed(t)),
            #[cfg(feature = "autodiff")]
            Some(BackendTensor::Autodiff(t)) => Ok(Held::Borrowed(t.primitive())),
            _ => Err(route.mismatch(input, "float", describe(&tensor.kind))),
        }
    }

    pub(super) fn float_out<B: Concrete>(route: &Route, out: FloatTensor<B>) -> DispatchTensor {
        match route.context() {
            #[cfg(feature = "autodiff")]
            DispatchAutodiffContext::Enabled(strategy) => {
                use burn_backend::AutodiffBackend;
                let lifted = <burn_autodiff::Autodiff<B> as AutodiffBackend>::from_inner(out);
                DispatchTensor {
                    kind: DispatchTensorKind::Autodiff(Box::new(B::put(BackendTensor::Autodiff(
                        lifted,
                    )))),
                    autodiff: DispatchAutodiffContext::Enabled(strategy),
                }
            }
            _ => DispatchTensor {
                kind: B::put(BackendTensor::Float(out)),
                autodiff: DispatchAutodiffContext::Disabled,
            },
        }
    }
}

/// Generic bodies of the `Autodiff<B, C>` lane's float functions.
#[cfg(feature = "autodiff")]
mod autodiff {
    use super::*;
    use burn_autodiff::Autodiff;
    use burn_autodiff::checkpoint::strategy::CheckpointStrategy;
    use burn_backend::AutodiffBackend;

    pub(super) fn float<B: Concrete, C: CheckpointStrategy>(
        route: &Route,
        input: &'static str,
        tensor: DispatchTensor,
    ) -> Result<FloatTensor<Autodiff<B, C>>, RouteError> {
        if !matches!(
            B::peek(unwrap_kind_ref(&tensor.kind)),
            Some(BackendTensor::Float(_) | BackendTensor::Autodiff(_))
        ) {
            return Err(route.mismatch(input, "float", describe(&tensor.kind)));
        }
        match B::take(unwrap_kind(tensor.kind)) {
            Some(BackendTensor::Autodiff(t)) => Ok(t),
            // An input with a disabled context next to tracked ones: a constant.
            Some(BackendTensor::Float(t)) => Ok(<Autodiff<B, C> as AutodiffBackend>::from_inner(t)),
            _ => unreachable!("peeked above"),
        }
    }

    pub(super) fn float_ref<'a, B: Concrete, C: CheckpointStrategy>(
        route: &Route,
        input: &'static str,
        tensor: &'a DispatchTensor,
    ) -> Result<Held<'a, FloatTensor<Autodiff<B, C>>>, RouteError> {
        match B::peek(unwrap_kind_ref(&tensor.kind)) {
            Some(BackendTensor::Autodiff(t)) => Ok(Held::Borrowed(t)),
            Some(BackendTensor::Float(t)) => Ok(Held::Owned(
                <Autodiff<B, C> as AutodiffBackend>::from_inner(t.clone()),
            )),
            _ => Err(route.mismatch(input, "float", describe(&tensor.kind))),
        }
    }

    pub(super) fn float_out<B: Concrete>(
        route: &Route,
        out: FloatTensor<Autodiff<B>>,
    ) -> DispatchTensor {
        DispatchTensor {
            kind: DispatchTensorKind::Autodiff(Box::new(B::put(BackendTensor::Autodiff(out)))),
            autodiff: route.context(),
        }
    }
}

/// Int, bool and quantized primitives are shared between `B` and `Autodiff<B, C>`: one body
/// serves both lanes.
macro_rules! shared_kind {
    ($($owned:ident, $borrowed:ident, $out:ident, $variant:ident, $name:literal, $prim:ident;)*) => {$(
        fn $owned<B: Concrete>(route: &Route, input: &'static str, tensor: DispatchTensor) -> Result<$prim<B>, RouteError> {
            if !matches!(B::peek(&tensor.kind), Some(BackendTensor::$variant(_))) {
                return Err(route.mismatch(input, $name, describe(&tensor.kind)));
            }
            match B::take(tensor.kind) {
                Some(BackendTensor::$variant(t)) => Ok(t),
                _ => unreachable!("peeked above"),
            }
        }

        fn $borrowed<'a, B: Concrete>(route: &Route, input: &'static str, tensor: &'a DispatchTensor) -> Result<Held<'a, $prim<B>>, RouteError> {
            match B::peek(&tensor.kind) {
                Some(BackendTensor::$variant(t)) => Ok(Held::Borrowed(t)),
                _ => Err(route.mismatch(input, $name, describe(&tensor.kind))),
            }
        }

        fn $out<B: Concrete>(route: &Route, out: $prim<B>) -> DispatchTensor {
            DispatchTensor { kind: B::put(BackendTensor::$variant(out)), autodiff: route.context() }
        }
    )*};
}

shared_kind! {
    take_int, peek_int, wrap_int, Int, "int", IntTensor;
    take_bool, peek_bool, wrap_bool, Bool, "bool", BoolTensor;
    take_quantized, peek_quantized, wrap_quantized, Quantized, "quantized", QuantizedTensor;
}

/// The functions both lanes of a backend share (`$inner` is the concrete backend).
macro_rules! shared_lane_fns {
    ($inner:ty) => {
        fn int(route: &Route, input: &'static str, tensor: DispatchTensor) -> IntTensor<Self> {
            planned(take_int::<$inner>(route, input, tensor))
        }
        fn int_ref<'a>(
            route: &Route,
            input: &'static str,
            tensor: &'a DispatchTensor,
        ) -> Held<'a, IntTensor<Self>> {
            planned(peek_int::<$inner>(route, input, tensor))
        }
        fn int_out(route: &Route, out: IntTensor<Self>) -> DispatchTensor {
            wrap_int::<$inner>(route, out)
        }
        fn bool(route: &Route, input: &'static str, tensor: DispatchTensor) -> BoolTensor<Self> {
            planned(take_bool::<$inner>(route, input, tensor))
        }
        fn bool_ref<'a>(
            route: &Route,
            input: &'static str,
            tensor: &'a DispatchTensor,
        ) -> Held<'a, BoolTensor<Self>> {
            planned(peek_bool::<$inner>(route, input, tensor))
        }
        fn bool_out(route: &Route, out: BoolTensor<Self>) -> DispatchTensor {
            wrap_bool::<$inner>(route, out)
        }
        fn quantized(
            route: &Route,
            input: &'static str,
            tensor: DispatchTensor,
        ) -> QuantizedTensor<Self> {
            planned(take_quantized::<$inner>(route, input, tensor))
        }
        fn quantized_ref<'a>(
            route: &Route,
            input: &'static str,
            tensor: &'a DispatchTensor,
        ) -> Held<'a, QuantizedTensor<Self>> {
            planned(peek_quantized::<$inner>(route, input, tensor))
        }
        fn quantized_out(route: &Route, out: QuantizedTensor<Self>) -> DispatchTensor {
            wrap_quantized::<$inner>(route, out)
        }
        fn device<'a>(
            route: &Route,
            input: &'static str,
            device: &'a DispatchDevice,
        ) -> Held<'a, Device<Self>> {
            planned(self::device::<$inner>(route, input, device))
        }
    };
}

/// `Concrete` and `Lane` for a backend compiled in under `$cfg`, and `Lane` for
/// `Autodiff<B, C>` over it.
macro_rules! backend_lanes {
    ($backend:ident, $cfg:meta) => {
        // Only the variants of backends compiled into Burn exist; with a single backend the
        // wildcard arms are unreachable, with several they are needed.
        #[cfg($cfg)]
        #[allow(unreachable_patterns)]
        impl Concrete for $backend {
            fn take(kind: DispatchTensorKind) -> Option<BackendTensor<Self>> {
                match kind {
                    DispatchTensorKind::$backend(t) => Some(t),
                    _ => None,
                }
            }
            fn peek(kind: &DispatchTensorKind) -> Option<&BackendTensor<Self>> {
                match kind {
                    DispatchTensorKind::$backend(t) => Some(t),
                    _ => None,
                }
            }
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
        impl Lane for $backend {
            fn float(
                route: &Route,
                input: &'static str,
                tensor: DispatchTensor,
            ) -> FloatTensor<Self> {
                planned(concrete::float::<Self>(route, input, tensor))
            }
            fn float_ref<'a>(
                route: &Route,
                input: &'static str,
                tensor: &'a DispatchTensor,
            ) -> Held<'a, FloatTensor<Self>> {
                planned(concrete::float_ref::<Self>(route, input, tensor))
            }
            fn float_out(route: &Route, out: FloatTensor<Self>) -> DispatchTensor {
                concrete::float_out::<Self>(route, out)
            }
            shared_lane_fns!(Self);
        }

        #[cfg(all($cfg, feature = "autodiff"))]
        impl<C: burn_autodiff::checkpoint::strategy::CheckpointStrategy> Lane
            for burn_autodiff::Autodiff<$backend, C>
        {
            fn float(
                route: &Route,
                input: &'static str,
                tensor: DispatchTensor,
            ) -> FloatTensor<Self> {
                planned(autodiff::float::<$backend, C>(route, input, tensor))
            }
            fn float_ref<'a>(
                route: &Route,
                input: &'static str,
                tensor: &'a DispatchTensor,
            ) -> Held<'a, FloatTensor<Self>> {
                planned(autodiff::float_ref::<$backend, C>(route, input, tensor))
            }
            fn float_out(route: &Route, out: FloatTensor<Self>) -> DispatchTensor {
                autodiff::float_out::<$backend>(route, out)
            }
            shared_lane_fns!($backend);
        }
    };
}

backend_lanes!(Flex, all());
backend_lanes!(Cube, any(feature = "wgpu", feature = "cuda"));
backend_lanes!(Remote, feature = "remote");
