//! Unwrapping inputs for, and wrapping outputs from, the implementation a route picked.

use core::ops::Deref;

use burn_backend::Backend;
use burn_backend::tensor::{BoolTensor, FloatTensor, IntTensor};
use burn_dispatch::backends::Flex;
use burn_dispatch::{BackendTensor, DispatchAutodiffContext, DispatchTensor, DispatchTensorKind};

use super::error::RouteError;
use super::route::{Route, describe};

/// A borrowed input, or an owned value standing in for it (an untracked float lifted into
/// `Autodiff<B, C>` as a constant). Dereferences to the primitive.
#[derive(Debug)]
pub enum Held<'a, T> {
    /// Borrowed straight from the caller's tensor.
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

/// A backend implementation a route can call: a concrete backend (`Flex`, ...) or
/// `Autodiff<B, C>` over one. Generated code unwraps each input with these functions, calls the
/// kernel, and wraps each output in the route's autodiff context.
pub trait Lane: Backend {
    /// Unwraps an owned float input.
    ///
    /// # Errors
    /// When the tensor does not fit the route (planning rules this out).
    fn float(
        route: &Route,
        input: &'static str,
        tensor: DispatchTensor,
    ) -> Result<FloatTensor<Self>, RouteError>;
    /// Unwraps a borrowed float input.
    ///
    /// # Errors
    /// When the tensor does not fit the route (planning rules this out).
    fn float_ref<'a>(
        route: &Route,
        input: &'static str,
        tensor: &'a DispatchTensor,
    ) -> Result<Held<'a, FloatTensor<Self>>, RouteError>;
    /// Unwraps an owned int input.
    ///
    /// # Errors
    /// When the tensor does not fit the route (planning rules this out).
    fn int(
        route: &Route,
        input: &'static str,
        tensor: DispatchTensor,
    ) -> Result<IntTensor<Self>, RouteError>;
    /// Unwraps a borrowed int input.
    ///
    /// # Errors
    /// When the tensor does not fit the route (planning rules this out).
    fn int_ref<'a>(
        route: &Route,
        input: &'static str,
        tensor: &'a DispatchTensor,
    ) -> Result<Held<'a, IntTensor<Self>>, RouteError>;
    /// Unwraps an owned bool input.
    ///
    /// # Errors
    /// When the tensor does not fit the route (planning rules this out).
    fn bool(
        route: &Route,
        input: &'static str,
        tensor: DispatchTensor,
    ) -> Result<BoolTensor<Self>, RouteError>;
    /// Unwraps a borrowed bool input.
    ///
    /// # Errors
    /// When the tensor does not fit the route (planning rules this out).
    fn bool_ref<'a>(
        route: &Route,
        input: &'static str,
        tensor: &'a DispatchTensor,
    ) -> Result<Held<'a, BoolTensor<Self>>, RouteError>;
    /// Wraps a float output in the route's context (tracked from an `Autodiff` kernel; an
    /// untracked autodiff primitive from a concrete kernel under an enabled context).
    fn float_out(route: &Route, out: FloatTensor<Self>) -> DispatchTensor;
    /// Wraps an int output; it carries the route's context.
    fn int_out(route: &Route, out: IntTensor<Self>) -> DispatchTensor;
    /// Wraps a bool output; it carries the route's context.
    fn bool_out(route: &Route, out: BoolTensor<Self>) -> DispatchTensor;
}

/// A concrete backend's variant of `DispatchTensorKind`.
pub trait Concrete: Backend {
    /// Moves the backend tensor out of `kind`; `None` when it is another backend's.
    fn take(kind: DispatchTensorKind) -> Option<BackendTensor<Self>>;
    /// Borrows the backend tensor in `kind`, when it is this backend's.
    fn peek(kind: &DispatchTensorKind) -> Option<&BackendTensor<Self>>;
    /// Puts a backend tensor into its `DispatchTensorKind` variant.
    fn put(tensor: BackendTensor<Self>) -> DispatchTensorKind;
}

// Only the variants of backends compiled into Burn exist; with a single backend the wildcard
// arms are unreachable, with several they are needed.
#[allow(unreachable_patterns)]
impl Concrete for Flex {
    fn take(kind: DispatchTensorKind) -> Option<BackendTensor<Self>> {
        match kind {
            DispatchTensorKind::Flex(t) => Some(t),
            _ => None,
        }
    }
    fn peek(kind: &DispatchTensorKind) -> Option<&BackendTensor<Self>> {
        match kind {
            DispatchTensorKind::Flex(t) => Some(t),
            _ => None,
        }
    }
    fn put(tensor: BackendTensor<Self>) -> DispatchTensorKind {
        DispatchTensorKind::Flex(tensor)
    }
}

/// Strips the `Autodiff` wrapper of a dispatch kind, if any.
#[allow(unreachable_patterns)]
fn unwrap_kind(kind: DispatchTensorKind) -> DispatchTensorKind {
    match kind {
        #[cfg(feature = "autodiff")]
        DispatchTensorKind::Autodiff(inner) => *inner,
        other => other,
    }
}

#[allow(unreachable_patterns)]
fn unwrap_kind_ref(kind: &DispatchTensorKind) -> &DispatchTensorKind {
    match kind {
        #[cfg(feature = "autodiff")]
        DispatchTensorKind::Autodiff(inner) => inner,
        other => other,
    }
}

/// Generic bodies of the concrete lane.
mod concrete {
    use super::*;

    #[allow(unreachable_patterns)]
    pub(super) fn float<B: Concrete>(
        route: &Route,
        input: &'static str,
        tensor: DispatchTensor,
    ) -> Result<FloatTensor<B>, RouteError> {
        let found = describe(&tensor.kind);
        match B::take(unwrap_kind(tensor.kind)) {
            Some(BackendTensor::Float(t)) => Ok(t),
            // Tracked inputs of `reject` ops never get here (planning refuses them); `detach`
            // ops and untracked autodiff floats run on the inner primitive.
            #[cfg(feature = "autodiff")]
            Some(BackendTensor::Autodiff(t)) => Ok(t.into_primitive()),
            _ => Err(route.mismatch(input, "float", found)),
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

/// Generic bodies of the `Autodiff<B, C>` lane.
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
        let found = describe(&tensor.kind);
        match B::take(unwrap_kind(tensor.kind)) {
            Some(BackendTensor::Autodiff(t)) => Ok(t),
            // An input with a disabled context next to tracked ones: a constant.
            Some(BackendTensor::Float(t)) => Ok(<Autodiff<B, C> as AutodiffBackend>::from_inner(t)),
            _ => Err(route.mismatch(input, "float", found)),
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

/// Int and bool primitives are shared between `B` and `Autodiff<B, C>`: one body serves both.
macro_rules! shared_kind {
    ($owned:ident, $borrowed:ident, $variant:ident, $name:literal, $prim:ident) => {
        fn $owned<B: Concrete>(
            route: &Route,
            input: &'static str,
            tensor: DispatchTensor,
        ) -> Result<$prim<B>, RouteError> {
            let found = describe(&tensor.kind);
            match B::take(tensor.kind) {
                Some(BackendTensor::$variant(t)) => Ok(t),
                _ => Err(route.mismatch(input, $name, found)),
            }
        }

        fn $borrowed<'a, B: Concrete>(
            route: &Route,
            input: &'static str,
            tensor: &'a DispatchTensor,
        ) -> Result<Held<'a, $prim<B>>, RouteError> {
            match B::peek(&tensor.kind) {
                Some(BackendTensor::$variant(t)) => Ok(Held::Borrowed(t)),
                _ => Err(route.mismatch(input, $name, describe(&tensor.kind))),
            }
        }
    };
}

shared_kind!(take_int, peek_int, Int, "int", IntTensor);
shared_kind!(take_bool, peek_bool, Bool, "bool", BoolTensor);

fn shared_out<B: Concrete>(route: &Route, tensor: BackendTensor<B>) -> DispatchTensor {
    DispatchTensor {
        kind: B::put(tensor),
        autodiff: route.context(),
    }
}

/// `Lane` for a concrete backend and for `Autodiff<B, C>` over it.
macro_rules! lanes {
    ($backend:ident) => {
        impl Lane for $backend {
            fn float(
                route: &Route,
                input: &'static str,
                tensor: DispatchTensor,
            ) -> Result<FloatTensor<Self>, RouteError> {
                concrete::float::<Self>(route, input, tensor)
            }
            fn float_ref<'a>(
                route: &Route,
                input: &'static str,
                tensor: &'a DispatchTensor,
            ) -> Result<Held<'a, FloatTensor<Self>>, RouteError> {
                concrete::float_ref::<Self>(route, input, tensor)
            }
            fn int(
                route: &Route,
                input: &'static str,
                tensor: DispatchTensor,
            ) -> Result<IntTensor<Self>, RouteError> {
                take_int::<Self>(route, input, tensor)
            }
            fn int_ref<'a>(
                route: &Route,
                input: &'static str,
                tensor: &'a DispatchTensor,
            ) -> Result<Held<'a, IntTensor<Self>>, RouteError> {
                peek_int::<Self>(route, input, tensor)
            }
            fn bool(
                route: &Route,
                input: &'static str,
                tensor: DispatchTensor,
            ) -> Result<BoolTensor<Self>, RouteError> {
                take_bool::<Self>(route, input, tensor)
            }
            fn bool_ref<'a>(
                route: &Route,
                input: &'static str,
                tensor: &'a DispatchTensor,
            ) -> Result<Held<'a, BoolTensor<Self>>, RouteError> {
                peek_bool::<Self>(route, input, tensor)
            }
            fn float_out(route: &Route, out: FloatTensor<Self>) -> DispatchTensor {
                concrete::float_out::<Self>(route, out)
            }
            fn int_out(route: &Route, out: IntTensor<Self>) -> DispatchTensor {
                shared_out::<Self>(route, BackendTensor::Int(out))
            }
            fn bool_out(route: &Route, out: BoolTensor<Self>) -> DispatchTensor {
                shared_out::<Self>(route, BackendTensor::Bool(out))
            }
        }

        #[cfg(feature = "autodiff")]
        impl<C: burn_autodiff::checkpoint::strategy::CheckpointStrategy> Lane
            for burn_autodiff::Autodiff<$backend, C>
        {
            fn float(
                route: &Route,
                input: &'static str,
                tensor: DispatchTensor,
            ) -> Result<FloatTensor<Self>, RouteError> {
                autodiff::float::<$backend, C>(route, input, tensor)
            }
            fn float_ref<'a>(
                route: &Route,
                input: &'static str,
                tensor: &'a DispatchTensor,
            ) -> Result<Held<'a, FloatTensor<Self>>, RouteError> {
                autodiff::float_ref::<$backend, C>(route, input, tensor)
            }
            fn int(
                route: &Route,
                input: &'static str,
                tensor: DispatchTensor,
            ) -> Result<IntTensor<Self>, RouteError> {
                take_int::<$backend>(route, input, tensor)
            }
            fn int_ref<'a>(
                route: &Route,
                input: &'static str,
                tensor: &'a DispatchTensor,
            ) -> Result<Held<'a, IntTensor<Self>>, RouteError> {
                peek_int::<$backend>(route, input, tensor)
            }
            fn bool(
                route: &Route,
                input: &'static str,
                tensor: DispatchTensor,
            ) -> Result<BoolTensor<Self>, RouteError> {
                take_bool::<$backend>(route, input, tensor)
            }
            fn bool_ref<'a>(
                route: &Route,
                input: &'static str,
                tensor: &'a DispatchTensor,
            ) -> Result<Held<'a, BoolTensor<Self>>, RouteError> {
                peek_bool::<$backend>(route, input, tensor)
            }
            fn float_out(route: &Route, out: FloatTensor<Self>) -> DispatchTensor {
                autodiff::float_out::<$backend>(route, out)
            }
            fn int_out(route: &Route, out: IntTensor<Self>) -> DispatchTensor {
                shared_out::<$backend>(route, BackendTensor::Int(out))
            }
            fn bool_out(route: &Route, out: BoolTensor<Self>) -> DispatchTensor {
                shared_out::<$backend>(route, BackendTensor::Bool(out))
            }
        }
    };
}

lanes!(Flex);
