//! CubeCL kernels of the ops on `CubeBackend` (every cubecl runtime: wgpu, CUDA, ...).
//!
//! Each public function takes and returns `CubeTensor`s and mirrors a function of
//! [`composed`] (forward) or a method of the `BackwardKernels` trait (gradients). The kernels
//! read contiguous buffers of one float dtype, `f32`, `f16` or `bf16` (generic over cubecl's
//! `Float`, the dtype given at launch): every value is converted to `f32` when loaded, all the
//! arithmetic and every reduction (row sums, parameter-gradient sums) is `f32`, and each output
//! is rounded once to the input's dtype, the dtype the composition gives. A strided input is
//! copied contiguous first (`burn_cubecl::kernel::into_contiguous`); another dtype (`f64`),
//! inputs of mixed dtypes or broadcasting operands take the composition of Burn primitives
//! instead. Empty tensors get empty results (and zero
//! parameter gradients) without a launch: Burn's own Cube kernels do not all take them. Element-wise kernels are one launch
//! with vectorized loads where the sizes allow, each unit looping over about
//! `ITEMS_PER_UNIT` vectors. Row-wise kernels (the norms, softmax, cross-entropy and their
//! gradients) reduce each row inside one launch, in one of two layouts chosen on the host
//! (`row_launch`): one unit per row, looping over the whole row with no shared memory and no
//! barrier, for rows of at most `MAX_UNIT_ROW` elements on a device without plane operations
//! (lavapipe, where a barrier is dear); else one cube per row with a shared-memory tree
//! reduction and a strided loop over the row, so rows of any length work.
//! The output is written over an input's buffer when that buffer is ours (`can_mut`).
//!
//! On lavapipe (wgpu on the CPU) what a kernel costs is mostly per unit and per memory access
//! rather than per arithmetic operation: an access costs about the same whatever its width (a
//! 1M-element `add_relu` took twice as long with scalar accesses as with 4-lane vectors);
//! workgroup barriers are dear (the row kernels ran 2x to 5x faster without them); and
//! short-lived units cost more than long ones. The layouts above follow from that.

use burn_backend::cubecl::dtype_to_storage_type;
use burn_backend::{DType, Shape, TensorMetadata, get_or_init_device_settings};
use burn_cubecl::CubeBackend;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use cubecl::calculate_cube_count_elemwise;
use cubecl::prelude::*;

use super::composed;

/// The most units of one cube of a row-wise kernel (a power of two; every runtime allows 256).
const MAX_ROW_UNITS: usize = 256;

mod blocks;
mod elementwise;
mod forward;
mod grad;
mod host;
mod rows;
#[cfg(all(test, feature = "wgpu"))]
mod tests;

use blocks::*;
use elementwise::*;
use host::*;
use rows::*;

pub use forward::*;
pub use grad::{
    bias_gelu_backward, layer_norm_backward, rms_norm_backward, softmax_last_backward,
    swiglu_backward,
};
