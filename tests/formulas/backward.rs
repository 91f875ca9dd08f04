//! The backward function of `scaled_by` (`no_gradient = ["w"]`): it is told `w` is not tracked,
//! and would be ignored if it gave `w` a gradient anyway. The manifest names it
//! `crate::formulas::backward::scaled_by`; shared like `forward.rs`.

use burn_route::rt::{Backend, FloatTensor};

pub fn scaled_by<B: Backend>(
    w: FloatTensor<B>,
    grad: FloatTensor<B>,
    tracked: [bool; 2],
) -> [Option<FloatTensor<B>>; 2] {
    assert!(!tracked[1], "`w` is declared `no_gradient`");
    [
        tracked[0].then(|| B::float_mul(grad.clone(), w)),
        Some(grad),
    ]
}
