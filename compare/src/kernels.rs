//! Kernels of burn-route's `identity` (the traits generated from `ops.toml`).

use burn_route_runtime::rt::{Flex, FloatTensor};

use crate::ops::CompareOps;

impl CompareOps for Flex {
    fn identity(x: FloatTensor<Self>) -> FloatTensor<Self> {
        x
    }

    fn identity_f32(x: FloatTensor<Self>) -> FloatTensor<Self> {
        x
    }
}

#[cfg(feature = "autodiff")]
mod autodiff {
    use burn_route_runtime::rt::autodiff::Autodiff;
    use burn_route_runtime::rt::autodiff::ops::Backward;
    use burn_route_runtime::rt::{CheckpointStrategy, FloatTensor};

    use crate::backward::IdentityBackward;
    use crate::ops::{CompareOps, CompareOpsAutodiff};

    impl<B: CompareOps, C: CheckpointStrategy> CompareOpsAutodiff for Autodiff<B, C> {
        fn identity(x: FloatTensor<Self>) -> FloatTensor<Self> {
            let (x, node) = x.into_parts();
            IdentityBackward
                .prepare::<C>([node])
                .compute_bound()
                .stateless(B::identity(x))
        }
    }
}
