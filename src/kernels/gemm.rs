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

    /// The operand `offset` elements on (a batch's first element).
    pub fn offset_by(self, offset: isize) -> Self {
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

/// `lhs @ rhs` for `f32` tensors of one rank (at least 2) with the same leading (batch)
/// dimensions, each read in place at any non-negative strides (a transposed or head-split view
/// too), the product written by `gemm` into a fresh buffer: what `Flex::float_matmul` computes,
/// without its output's second allocation (its `empty` copies a zeroed byte vector into an
/// aligned buffer). `None` for other dtypes, broadcast batch dimensions or negative strides.
pub(crate) fn batched(lhs: &FlexTensor, rhs: &FlexTensor) -> Option<FlexTensor> {
    let (ls, rs) = (lhs.shape(), rhs.shape());
    let rank = ls.num_dims();
    if rank < 2 || rs.num_dims() != rank || ls[..rank - 2] != rs[..rank - 2] {
        return None;
    }
    let (m, k, n) = (ls[rank - 2], ls[rank - 1], rs[rank - 1]);
    if rs[rank - 2] != k {
        return None;
    }
    let (lhs_at, lhs_batch) = strided(lhs)?;
    let (rhs_at, rhs_batch) = strided(rhs)?;
    let batches: usize = ls[..rank - 2].iter().product();
    let mut out = vec![0.0_f32; batches * m * n];
    if k > 0 {
        for (b, dst) in out
            .chunks_exact_mut((m * n).max(1))
            .enumerate()
            .take(batches)
        {
            let (l, r) = (lhs_batch(b), rhs_batch(b));
            // SAFETY: `strided` checked that every element of each operand's batch `b` lies in
            // its storage; `dst` holds m × n values.
            unsafe {
                product(
                    (m, n, k),
                    Out::rows(dst, n),
                    false,
                    lhs_at.offset_by(l),
                    rhs_at.offset_by(r),
                );
            }
        }
    }
    let mut shape = ls.clone();
    shape[rank - 1] = n;
    Some(crate::flex::tensor(out, shape))
}

/// `t`'s last two dimensions as an [`Operand`] and the element offset of each batch (its
/// leading dimensions, flattened in row-major order), when `t` is `f32` with non-negative
/// strides and every element it reads lies in its storage.
fn strided(t: &FlexTensor) -> Option<(Operand, impl Fn(usize) -> isize + use<>)> {
    let layout = t.layout();
    let (shape, strides) = (layout.shape().clone(), layout.strides().to_vec());
    let rank = shape.num_dims();
    if t.dtype() != DType::F32 || strides.iter().any(|s| *s < 0) {
        return None;
    }
    let start = layout.start_offset();
    let storage = t.storage::<f32>();
    let extent = if shape.num_elements() == 0 {
        0
    } else {
        (0..rank)
            .map(|d| (shape[d] - 1) * strides[d].unsigned_abs())
            .sum::<usize>()
            + 1
    };
    let data = storage.get(start..start + extent)?;
    let operand = Operand {
        at: data.as_ptr(),
        row: strides[rank - 2],
        col: strides[rank - 1],
    };
    let batch_offset = move |mut b: usize| {
        let mut offset = 0_isize;
        for d in (0..rank - 2).rev() {
            offset += (b % shape[d]) as isize * strides[d];
            b /= shape[d];
        }
        offset
    };
    Some((operand, batch_offset))
}

#[cfg(test)]
mod tests {
    use burn_backend::backend::ops::FloatTensorOps;
    use burn_backend::{Shape, TensorMetadata};
    use burn_dispatch::backends::Flex;
    use burn_dispatch::backends::flex::FlexTensor;

    use super::batched;
    use crate::flex::tensor;

    /// A tensor of `shape` with values in [-1, 1) from `seed`.
    fn values(shape: &[usize], seed: u32) -> FlexTensor {
        let n: usize = shape.iter().product();
        let v = (0..n)
            .map(|i| {
                let h = (i as u32 ^ seed).wrapping_mul(2_654_435_761).rotate_left(7);
                (h % 2_000) as f32 / 1_000.0 - 1.0
            })
            .collect();
        tensor(v, Shape::from(shape.to_vec()))
    }

    fn read(t: FlexTensor) -> (Vec<usize>, Vec<f32>) {
        let shape = t.shape().to_vec();
        let data = Flex::float_into_data(t);
        let data = burn_tensor::read_sync(data).expect("readable");
        (shape, data.try_to_vec::<f32>().expect("f32"))
    }

    /// Flex's `float_matmul` and `batched` on the same operands: the same shape, and values
    /// within float rounding of each other.
    fn same_as_flex(lhs: FlexTensor, rhs: FlexTensor, what: &str) {
        let ours = batched(&lhs, &rhs).unwrap_or_else(|| panic!("{what}: not taken"));
        let (shape, got) = read(ours);
        let (want_shape, want) = read(Flex::float_matmul(lhs, rhs));
        assert_eq!(shape, want_shape, "{what}");
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                "{what}: {g} against {w}"
            );
        }
    }

    #[test]
    fn batched_products_match_flex_matmul_on_views() {
        same_as_flex(values(&[5, 7], 1), values(&[7, 3], 2), "2d");
        same_as_flex(values(&[2, 3, 4, 5], 3), values(&[2, 3, 5, 6], 4), "4d");
        // Head-split views: the middle dimensions swapped, and a transposed right operand.
        let lhs = Flex::float_swap_dims(values(&[2, 4, 3, 5], 5), 1, 2);
        let rhs = Flex::float_swap_dims(values(&[2, 3, 6, 5], 6), 2, 3);
        same_as_flex(lhs, rhs, "swapped views");
        // A view that starts inside its storage.
        let lhs = values(&[6, 7], 7).narrow(0, 2, 3);
        same_as_flex(lhs, values(&[7, 4], 8), "narrowed");
        // Empty: no rows, and no inner dimension (a zero product).
        same_as_flex(values(&[2, 0, 3], 9), values(&[2, 3, 4], 10), "no rows");
        same_as_flex(
            values(&[2, 3, 0], 11),
            values(&[2, 0, 4], 12),
            "no inner dimension",
        );
    }

    #[test]
    fn broadcast_batches_and_other_dtypes_are_left_to_flex() {
        assert!(batched(&values(&[2, 3, 4], 1), &values(&[1, 4, 5], 2)).is_none());
        assert!(batched(&values(&[3, 4], 1), &values(&[2, 4, 5], 2)).is_none());
        let half = Flex::float_cast(values(&[3, 4], 1), burn_backend::FloatDType::F16);
        assert!(batched(&half, &values(&[4, 5], 2)).is_none());
    }
}
