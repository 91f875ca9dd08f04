//! Row-wise kernels: one cube per row, `units` units striding over its `width` vectors, or
//! (`units == 1`) one unit per row looping over all of it.

use super::*;

#[cube(launch_unchecked)]
pub(super) fn rms_norm_kernel<F: Float, N: Size>(
    x: &[Vector<F, N>],
    weight: &[Vector<F, N>],
    out: &mut [Vector<F, N>],
    rows: u32,
    width: u32,
    eps: f32,
    #[comptime] units: usize,
    #[define(F)] _float: ElemType,
) {
    let row = row_index(units);
    if row >= rows as usize {
        terminate!();
    }
    let width = width as usize;
    let base = row * width;
    let unit = unit_index(units);
    let mut acc = Vector::new(f32::new(0.0));
    let mut i = unit;
    while i < width {
        let v = up(x[base + i]);
        acc += v * v;
        i += units;
    }
    let n = f32::cast_from(width * N::value());
    let mean_square = cube_sum(lanes_sum(acc), units) / n;
    let inverse = Vector::new(f32::new(1.0) / (mean_square + eps).sqrt());
    let mut i = unit;
    while i < width {
        out[base + i] = down(up(x[base + i]) * inverse * up(weight[i]));
        i += units;
    }
}

#[cube(launch_unchecked)]
pub(super) fn layer_norm_kernel<F: Float, N: Size>(
    x: &[Vector<F, N>],
    gamma: &[Vector<F, N>],
    beta: &[Vector<F, N>],
    out: &mut [Vector<F, N>],
    rows: u32,
    width: u32,
    eps: f32,
    #[comptime] units: usize,
    #[define(F)] _float: ElemType,
) {
    let row = row_index(units);
    if row >= rows as usize {
        terminate!();
    }
    let width = width as usize;
    let base = row * width;
    let unit = unit_index(units);
    let (mean, inverse) = row_standardizer::<F, N>(x, base, width, unit, eps, units);
    let mut i = unit;
    while i < width {
        out[base + i] = down((up(x[base + i]) - mean) * inverse * up(gamma[i]) + up(beta[i]));
        i += units;
    }
}

#[cube(launch_unchecked)]
pub(super) fn softmax_kernel<F: Float, N: Size>(
    x: &[Vector<F, N>],
    out: &mut [Vector<F, N>],
    rows: u32,
    width: u32,
    #[comptime] units: usize,
    #[define(F)] _float: ElemType,
) {
    let row = row_index(units);
    if row >= rows as usize {
        terminate!();
    }
    let width = width as usize;
    let base = row * width;
    let unit = unit_index(units);
    // Every unit starts from an element of the row (no -inf literal on every target).
    let mut acc = up(x[base]);
    let mut i = unit;
    while i < width {
        acc = acc.max(up(x[base + i]));
        i += units;
    }
    let max = Vector::new(cube_max(lanes_max(acc), units));
    // The exponentials are summed in f32; each is stored in `F`, then scaled by the inverse
    // sum in f32 and rounded again (two roundings in f16/bf16, well within their tolerance),
    // so the row is read once.
    let mut acc = Vector::new(f32::new(0.0));
    let mut i = unit;
    while i < width {
        let e = Vector::exp(up(x[base + i]) - max);
        out[base + i] = down(e);
        acc += e;
        i += units;
    }
    let inverse = Vector::new(f32::new(1.0) / cube_sum(lanes_sum(acc), units));
    // Each unit rescales the elements it wrote itself: no barrier needed.
    let mut i = unit;
    while i < width {
        out[base + i] = down(up(out[base + i]) * inverse);
        i += units;
    }
}

/// The loss of every row, `max + ln(sum(exp(x - max))) - x[target]`, into `losses[row]`, and
/// into `losses[rows + row]` 1 when the row's target is outside `0..classes` (its loss then 0),
/// else 0: the targets are checked on the device, in their own int dtype `I`.
#[cube(launch_unchecked)]
pub(super) fn cross_entropy_rows_kernel<F: Float, N: Size, I: Int>(
    logits: &[Vector<F, N>],
    targets: &[I],
    losses: &mut [f32],
    rows: u32,
    width: u32,
    classes: u32,
    #[comptime] units: usize,
    #[define(F)] _float: ElemType,
    #[define(I)] _int_dtype: ElemType,
) {
    let row = row_index(units);
    if row >= rows as usize {
        terminate!();
    }
    let width = width as usize;
    let base = row * width;
    let unit = unit_index(units);
    let mut acc = up(logits[base]);
    let mut i = unit;
    while i < width {
        acc = acc.max(up(logits[base + i]));
        i += units;
    }
    let max = cube_max(lanes_max(acc), units);
    let max_vector = Vector::new(max);
    let mut acc = Vector::new(f32::new(0.0));
    let mut i = unit;
    while i < width {
        acc += Vector::exp(up(logits[base + i]) - max_vector);
        i += units;
    }
    let sum = cube_sum(lanes_sum(acc), units);
    if unit == 0 {
        let target = targets[row];
        let bad_row = rows as usize + row;
        if target < I::new(0) || target >= I::cast_from(classes) {
            losses[row] = f32::new(0.0);
            losses[bad_row] = f32::new(1.0);
        } else {
            let target = u32::cast_from(target) as usize;
            let picked =
                up(logits[base + target / N::value()]).extract_dynamic(target % N::value());
            losses[row] = max + sum.ln() - picked;
            losses[bad_row] = f32::new(0.0);
        }
    }
}

/// `out[0] = mean(values[..len])` (summed in `f32`, rounded once to `F`) and
/// `bad[0] = sum(values[len..2 len])`: one cube (of one unit, `units == 1`, where barriers are
/// dear).
#[cube(launch_unchecked)]
pub(super) fn mean_kernel<F: Float>(
    values: &[f32],
    out: &mut [F],
    bad: &mut [f32],
    len: u32,
    #[comptime] units: usize,
    #[define(F)] _float: ElemType,
) {
    let len = len as usize;
    let unit = unit_index(units);
    let mut acc = f32::new(0.0);
    let mut flags = f32::new(0.0);
    let mut i = unit;
    while i < len {
        acc += values[i];
        flags += values[len + i];
        i += units;
    }
    let total = cube_sum(acc, units);
    let flags = cube_sum(flags, units);
    if unit == 0 {
        out[0] = F::cast_from(total / f32::cast_from(len));
        bad[0] = flags;
    }
}
