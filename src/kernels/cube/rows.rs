//! Row-wise kernels: one cube per row, `units` units striding over its `width` vectors, or
//! (`units == 1`) one unit per row looping over all of it.

use super::*;

#[cube(launch_unchecked)]
pub(super) fn rms_norm_kernel<N: Size>(
    x: &[Vector<f32, N>],
    weight: &[Vector<f32, N>],
    out: &mut [Vector<f32, N>],
    rows: u32,
    width: u32,
    eps: f32,
    #[comptime] units: usize,
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
        let v = x[base + i];
        acc += v * v;
        i += units;
    }
    let n = f32::cast_from(width * N::value());
    let mean_square = cube_sum(lanes_sum(acc), units) / n;
    let inverse = Vector::new(f32::new(1.0) / (mean_square + eps).sqrt());
    let mut i = unit;
    while i < width {
        out[base + i] = x[base + i] * inverse * weight[i];
        i += units;
    }
}

#[cube(launch_unchecked)]
pub(super) fn layer_norm_kernel<N: Size>(
    x: &[Vector<f32, N>],
    gamma: &[Vector<f32, N>],
    beta: &[Vector<f32, N>],
    out: &mut [Vector<f32, N>],
    rows: u32,
    width: u32,
    eps: f32,
    #[comptime] units: usize,
) {
    let row = row_index(units);
    if row >= rows as usize {
        terminate!();
    }
    let width = width as usize;
    let base = row * width;
    let unit = unit_index(units);
    let (mean, inverse) = row_standardizer::<N>(x, base, width, unit, eps, units);
    let mut i = unit;
    while i < width {
        out[base + i] = (x[base + i] - mean) * inverse * gamma[i] + beta[i];
        i += units;
    }
}

#[cube(launch_unchecked)]
pub(super) fn softmax_kernel<N: Size>(
    x: &[Vector<f32, N>],
    out: &mut [Vector<f32, N>],
    rows: u32,
    width: u32,
    #[comptime] units: usize,
) {
    let row = row_index(units);
    if row >= rows as usize {
        terminate!();
    }
    let width = width as usize;
    let base = row * width;
    let unit = unit_index(units);
    // Every unit starts from an element of the row (no -inf literal on every target).
    let mut acc = x[base];
    let mut i = unit;
    while i < width {
        acc = acc.max(x[base + i]);
        i += units;
    }
    let max = Vector::new(cube_max(lanes_max(acc), units));
    let mut acc = Vector::new(f32::new(0.0));
    let mut i = unit;
    while i < width {
        let e = Vector::exp(x[base + i] - max);
        out[base + i] = e;
        acc += e;
        i += units;
    }
    let inverse = Vector::new(f32::new(1.0) / cube_sum(lanes_sum(acc), units));
    // Each unit rescales the elements it wrote itself: no barrier needed.
    let mut i = unit;
    while i < width {
        out[base + i] *= inverse;
        i += units;
    }
}

/// The loss of every row, `max + ln(sum(exp(x - max))) - x[target]`, into `losses[row]`, and
/// into `losses[rows + row]` 1 when the row's target is outside `0..classes` (its loss then 0),
/// else 0: the targets are checked on the device, in their own int dtype `I`.
#[cube(launch_unchecked)]
pub(super) fn cross_entropy_rows_kernel<N: Size, I: Int>(
    logits: &[Vector<f32, N>],
    targets: &[I],
    losses: &mut [f32],
    rows: u32,
    width: u32,
    classes: u32,
    #[comptime] units: usize,
    #[define(I)] _int_dtype: ElemType,
) {
    let row = row_index(units);
    if row >= rows as usize {
        terminate!();
    }
    let width = width as usize;
    let base = row * width;
    let unit = unit_index(units);
    let mut acc = logits[base];
    let mut i = unit;
    while i < width {
        acc = acc.max(logits[base + i]);
        i += units;
    }
    let max = cube_max(lanes_max(acc), units);
    let max_vector = Vector::new(max);
    let mut acc = Vector::new(f32::new(0.0));
    let mut i = unit;
    while i < width {
        acc += Vector::exp(logits[base + i] - max_vector);
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
            let picked = logits[base + target / N::value()].extract_dynamic(target % N::value());
            losses[row] = max + sum.ln() - picked;
            losses[bad_row] = f32::new(0.0);
        }
    }
}

/// `out[0] = mean(values[..len])` and `bad[0] = sum(values[len..2 len])`: one cube (of one
/// unit, `units == 1`, where barriers are dear).
#[cube(launch_unchecked)]
pub(super) fn mean_kernel(
    values: &[f32],
    out: &mut [f32],
    bad: &mut [f32],
    len: u32,
    #[comptime] units: usize,
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
        out[0] = total / f32::cast_from(len);
        bad[0] = flags;
    }
}
