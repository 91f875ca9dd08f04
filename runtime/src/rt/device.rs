//! What a device is: its backend, and the autodiff context it implies. Read by routing and by
//! the Remote client alike.

use burn_dispatch::{DispatchAutodiffContext, DispatchDevice};

use super::op::BackendId;

/// The backend of a device and the autodiff context it implies.
#[allow(unreachable_patterns)]
#[inline]
pub(crate) fn describe_device(device: &DispatchDevice) -> (BackendId, DispatchAutodiffContext) {
    match device {
        DispatchDevice::Flex(_) => (BackendId::Flex, DispatchAutodiffContext::Disabled),
        #[cfg(any(feature = "wgpu", feature = "cuda"))]
        DispatchDevice::Cube(_) => (BackendId::Cube, DispatchAutodiffContext::Disabled),
        #[cfg(feature = "remote")]
        DispatchDevice::Remote(_) => (BackendId::Remote, DispatchAutodiffContext::Disabled),
        #[cfg(feature = "autodiff")]
        DispatchDevice::Autodiff(device) => {
            let strategy = device.gradient_checkpointing_strategy();
            let (backend, _) = describe_device(&device.clone().inner());
            (backend, DispatchAutodiffContext::Enabled(strategy))
        }
        _ => describe_unnamed_device(device),
    }
}

/// A device this build cannot name. Without the `autodiff` feature an autodiff device (which
/// Burn's feature unification may compile in) lands here: `inner()` unwraps it under Burn's own
/// cfg, so a changed variant shows the wrapper, and the device underneath names the backend.
/// Its checkpointing strategy cannot be read without naming the variant; it only matters for
/// the error that follows, which does not show it.
#[cold]
#[inline(never)]
fn describe_unnamed_device(device: &DispatchDevice) -> (BackendId, DispatchAutodiffContext) {
    let inner = device.clone().inner();
    if core::mem::discriminant(&inner) == core::mem::discriminant(device) {
        return (BackendId::Other, DispatchAutodiffContext::Disabled);
    }
    let (backend, _) = describe_device(&inner);
    (
        backend,
        DispatchAutodiffContext::Enabled(Default::default()),
    )
}
