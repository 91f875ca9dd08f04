//! Matrix products on `f32` buffers with `gemm`, for the Flex kernels that multiply chunks of
//! rows in place: strided operands (a transposed weight read as it is), the product written
//! into a block of a larger buffer, or added to what is there (`accumulate`), which Flex's
//! `float_matmul` cannot do without a temporary per chunk.

use burn_backend::{DType, TensorMetadata};
use burn_dispatch::backends::flex::FlexTensor;

use crate::flex::{Work, split};

/// A matrix operand: its first element and the strides of its rows and columns.
#[derive(Clone, Copy)]
pub(crate) struct Operand {
    pub at: *const f32,
    pub row: isize,
    pub col: isize,
}

/// The output of a matrix product: its first element and its row stride (columns adjacent).
#[derive(Clone, Copy)]
pub(crate) struct Out {
    pub at: *mut f32,
    pub row: isize,
}

// SAFETY: the pointers are only read (`Operand`) or written in blocks that no other thread
// touches (`Out`: each thread of `split` gets rows or columns of its own), while the buffers
// they point into outlive every thread (`split` returns only when each range is done).
unsafe impl Send for Operand {}
unsafe impl Sync for Operand {}
unsafe impl Send for Out {}
unsafe impl Sync for Out {}

impl Operand {
    /// Row-major `buffer` with rows of `width`.
    pub fn rows(buffer: &[f32], width: usize) -> Self {
        Self {
            at: buffer.as_ptr(),
            row: isize::try_from(width).expect("a row width fits isize"),
            col: 1,
        }
    }

    /// The operand from row `r` and column `c` on.
    pub fn at(self, r: usize, c: usize) -> Self {
        let offset = r as isize * self.row + c as isize * self.col;
        Self {
            at: self.at.wrapping_offset(offset),
            ..self
        }
    }

    /// Rows as columns.
    pub fn t(self) -> Self {
        Self {
            row: self.col,
            col: self.row,
            ..self
        }
    }
}

impl Out {
    /// Row-major `buffer` with rows of `width`.
    pub fn rows(buffer: &mut [f32], width: usize) -> Self {
        Self {
            at: buffer.as_mut_ptr(),
            row: isize::try_from(width).expect("a row width fits isize"),
        }
    }

    pub fn at(self, r: usize, c: usize) -> Self {
        Self {
            at: self.at.wrapping_offset(r as isize * self.row + c as isize),
            ..self
        }
    }
}

/// `dst (m × n) = lhs (m × k) · rhs (k × n)`, plus `dst` when `accumulate`, on the calling
/// thread.
///
/// # Safety
///
/// `dst` must be valid for writes and the operands for reads of `m × n`, `m × k` and `k × n`
/// elements at their strides, and no other thread may touch `dst`'s elements meanwhile.
pub(crate) unsafe fn matmul(
    (m, n, k): (usize, usize, usize),
    dst: Out,
    accumulate: bool,
    lhs: Operand,
    rhs: Operand,
) {
    // SAFETY: the caller's contract.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.at,
            1,
            dst.row,
            accumulate,
            lhs.at,
            lhs.col,
            lhs.row,
            rhs.at,
            rhs.col,
            rhs.row,
            1.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// A `[rows, cols]` Flex tensor of `f32` values read in place, any non-negative strides (a
/// transposed weight too), with the length of the storage it reads checked.
pub(crate) fn operand(t: &FlexTensor) -> Option<Operand> {
    let layout = t.layout();
    let (shape, strides) = (layout.shape(), layout.strides());
    if t.dtype() != DType::F32 || shape.num_dims() != 2 || strides.iter().any(|s| *s < 0) {
        return None;
    }
    let extent: usize = (0..2)
        .map(|d| shape[d].saturating_sub(1) * strides[d].unsigned_abs())
        .sum::<usize>()
        + 1;
    let start = layout.start_offset();
    let data = t.storage::<f32>().get(start..start + extent)?;
    Some(Operand {
        at: data.as_ptr(),
        row: strides[0],
        col: strides[1],
    })
}

/// [`matmul`] split by blocks of `dst`'s columns across rayon's threads when Flex runs on rayon
/// and the product is large enough ([`split`]); on the calling thread otherwise.
///
/// # Safety
///
/// As for [`matmul`].
pub(crate) unsafe fn product(
    (m, n, k): (usize, usize, usize),
    dst: Out,
    accumulate: bool,
    lhs: Operand,
    rhs: Operand,
) {
    split(n, m * k, Work::Heavy, |r| {
        // SAFETY: the caller's contract; this block writes only `dst`'s columns `r`.
        unsafe {
            matmul(
                (m, r.len(), k),
                dst.at(0, r.start),
                accumulate,
                lhs,
                rhs.at(0, r.start),
            );
        }
    });
}

/// The values of `t` when it is a contiguous `f32` tensor.
pub(crate) fn dense(t: &FlexTensor) -> Option<&[f32]> {
    let start = t.layout().start_offset();
    (t.dtype() == DType::F32 && t.layout().is_contiguous())
        .then(|| &t.storage::<f32>()[start..start + t.shape().num_elements()])
}
