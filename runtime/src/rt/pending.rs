//! The futures of async ops (`async = true` in the manifest).
//!
//! The generated routing of an async op plans the call, checks its shape contracts and unwraps
//! its inputs when it is called, before any future exists; what it returns is only the kernel's
//! future (a [`Pending`]), which owns everything it needs: it borrows nothing from the caller.
//! A routing error is therefore known at the call: the panicking forms panic there, and the
//! `try_` forms return a [`Planned`] that resolves to the error when first polled.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::RouteError;

/// What an async op's trait methods return: `impl Async<T>` is `impl Future<Output = T> + Send`,
/// so an implementation may be written `async fn op(..) -> T` (its future must be `Send`).
pub trait Async<T>: Future<Output = T> + Send {}

impl<T, F: Future<Output = T> + Send> Async<T> for F {}

/// The future of a routed async op's kernel: planned, its inputs unwrapped, the kernel not yet
/// polled. `Send` and `'static`, so it can be spawned on a multi-threaded executor.
pub type Pending<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What the `try_` function of an async op returns at the `Tensor<D>` level: the future of its
/// outputs or of the routing error.
pub type PendingResult<T> = Pending<Result<T, RouteError>>;

/// What the `try_` function of an async op returns at the `Dispatch` level: the kernel's future
/// when the call routed, else the routing error, which the future resolves to when first polled.
///
/// Routing happened when the `try_` function was called; [`Planned::error`] looks at its outcome
/// without polling, and [`Planned::or_panic`] turns it into the panicking form's future.
#[must_use = "futures do nothing unless polled"]
pub struct Planned<T> {
    state: Result<Pending<T>, Option<RouteError>>,
}

impl<T> Planned<T> {
    /// The outcome of routing a call.
    pub fn new(routed: Result<Pending<T>, RouteError>) -> Self {
        Self {
            state: routed.map_err(Some),
        }
    }

    /// A routed call: the kernel's future.
    pub fn routed(pending: Pending<T>) -> Self {
        Self { state: Ok(pending) }
    }

    /// A call that failed to route.
    pub fn failed(err: RouteError) -> Self {
        Self {
            state: Err(Some(err)),
        }
    }

    /// The routing error, if the call did not route (`None` once the future has returned it).
    pub fn error(&self) -> Option<&RouteError> {
        self.state.as_ref().err().and_then(Option::as_ref)
    }

    /// The kernel's future, or a panic with the routing error's message (what the panicking
    /// forms of an async op do at the call).
    #[track_caller]
    pub fn or_panic(self) -> Pending<T> {
        match self.state {
            Ok(pending) => pending,
            Err(Some(err)) => panic!("{err}"),
            Err(None) => panic!("`Planned` polled after it returned its routing error"),
        }
    }
}

impl<T> Future for Planned<T> {
    type Output = Result<T, RouteError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // `Pending` is `Unpin` (a pinned box) and so is the error: `Planned` is `Unpin`.
        let this = self.get_mut();
        match &mut this.state {
            Ok(pending) => pending.as_mut().poll(cx).map(Ok),
            Err(err) => match err.take() {
                Some(err) => Poll::Ready(Err(err)),
                None => panic!("`Planned` polled after it returned its routing error"),
            },
        }
    }
}

impl<T> fmt::Debug for Planned<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.state {
            Ok(_) => f.write_str("Planned(routed)"),
            Err(Some(err)) => f.debug_tuple("Planned").field(err).finish(),
            Err(None) => f.write_str("Planned(done)"),
        }
    }
}
