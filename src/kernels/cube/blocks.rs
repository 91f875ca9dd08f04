//! Kernel building blocks: indexing, wide multiplication, the hash of dropout, reductions.

use super::*;

/// A vector of the storage dtype `F` (`f32`, `f16`, `bf16`) in `f32`, where every kernel
/// computes.
#[cube]
pub(super) fn up<F: Float, N: Size>(v: Vector<F, N>) -> Vector<f32, N> {
    Vector::<f32, N>::cast_from(v)
}

/// An `f32` result rounded once to the storage dtype `F`.
#[cube]
pub(super) fn down<F: Float, N: Size>(v: Vector<f32, N>) -> Vector<F, N> {
    Vector::<F, N>::cast_from(v)
}

/// The number of units of the launch: the stride of a grid-stride loop.
#[cube]
pub(super) fn grid_units() -> usize {
    CUBE_COUNT * CUBE_DIM as usize
}

/// The sum of a vector's lanes.
#[cube]
pub(super) fn lanes_sum<N: Size>(v: Vector<f32, N>) -> f32 {
    let mut sum = f32::new(0.0);
    #[unroll]
    for k in 0..N::value() {
        sum += v.extract(k);
    }
    sum
}

/// The largest of a vector's lanes.
#[cube]
pub(super) fn lanes_max<N: Size>(v: Vector<f32, N>) -> f32 {
    let mut max = v.extract(0usize);
    #[unroll]
    for k in 1..N::value() {
        max = max.max(v.extract(k));
    }
    max
}

/// The row a unit works on: its cube's (one cube per row) or, with `units == 1`, its own (one
/// unit per row).
#[cube]
pub(super) fn row_index(#[comptime] units: usize) -> usize {
    let mut row = CUBE_POS;
    if comptime![units == 1] {
        row = ABSOLUTE_POS;
    }
    row
}

/// Where a unit starts in its row: its position in the cube, or 0 with one unit per row.
#[cube]
pub(super) fn unit_index(#[comptime] units: usize) -> usize {
    let mut unit = 0usize;
    if comptime![units > 1] {
        unit = UNIT_POS as usize;
    }
    unit
}

/// The mean of row `base..base + width` of `x` and `1 / sqrt(var + eps)`, as vectors, for layer
/// normalisation and its gradient (two passes over the row, each unit striding by `units`).
#[cube]
pub(super) fn row_standardizer<F: Float, N: Size>(
    x: &[Vector<F, N>],
    base: usize,
    width: usize,
    unit: usize,
    eps: f32,
    #[comptime] units: usize,
) -> (Vector<f32, N>, Vector<f32, N>) {
    let n = f32::cast_from(width * N::value());
    let mut acc = Vector::new(f32::new(0.0));
    let mut i = unit;
    while i < width {
        acc += up(x[base + i]);
        i += units;
    }
    let mean = Vector::new(cube_sum(lanes_sum(acc), units) / n);
    let mut acc = Vector::new(f32::new(0.0));
    let mut i = unit;
    while i < width {
        let c = up(x[base + i]) - mean;
        acc += c * c;
        i += units;
    }
    let var = cube_sum(lanes_sum(acc), units) / n;
    (mean, Vector::new(f32::new(1.0) / (var + eps).sqrt()))
}

/// The sum of `value` over the `units` units working on one row, given to every one of them:
/// `value` itself with one unit per row, else a tree in shared memory over the cube (`units`,
/// a power of two, is the cube dimension), the same order on every run.
#[cube]
pub(super) fn cube_sum(value: f32, #[comptime] units: usize) -> f32 {
    let mut total = value;
    if comptime![units > 1] {
        let mut shared = Shared::<[f32]>::new_slice(units);
        let unit = UNIT_POS as usize;
        shared[unit] = value;
        sync_cube();
        let mut stride = (CUBE_DIM / 2) as usize;
        while stride > 0 {
            if unit < stride {
                shared[unit] += shared[unit + stride];
            }
            sync_cube();
            stride /= 2;
        }
        total = shared[0];
    }
    total
}

/// The maximum of `value` over the units working on one row (see [`cube_sum`]).
#[cube]
pub(super) fn cube_max(value: f32, #[comptime] units: usize) -> f32 {
    let mut total = value;
    if comptime![units > 1] {
        let mut shared = Shared::<[f32]>::new_slice(units);
        let unit = UNIT_POS as usize;
        shared[unit] = value;
        sync_cube();
        let mut stride = (CUBE_DIM / 2) as usize;
        while stride > 0 {
            if unit < stride {
                shared[unit] = shared[unit].max(shared[unit + stride]);
            }
            sync_cube();
            stride /= 2;
        }
        total = shared[0];
    }
    total
}

/// `erf(x)` without an exponential: `1 - 1 / p(|x|)^16` with `p` the degree-6 polynomial of
/// Abramowitz and Stegun 7.1.28 (an absolute error under 3e-7, as cubecl's own `erf`, which
/// takes an `exp` and a division), the sign of `x` put back. On lavapipe the exponential was
/// most of the cost of `bias_gelu`.
#[cube]
pub(super) fn erf_rational<N: Size>(x: Vector<f32, N>) -> Vector<f32, N> {
    let one = Vector::new(f32::new(1.0));
    let a = x.abs();
    let mut p = Vector::new(f32::new(0.000_043_063_8));
    p = p * a + Vector::new(f32::new(0.000_276_567_2));
    p = p * a + Vector::new(f32::new(0.000_152_014_3));
    p = p * a + Vector::new(f32::new(0.009_270_527_2));
    p = p * a + Vector::new(f32::new(0.042_282_012_3));
    p = p * a + Vector::new(f32::new(0.070_523_078_4));
    p = p * a + one;
    let p2 = p * p;
    let p4 = p2 * p2;
    let p8 = p4 * p4;
    let magnitude = one - one / (p8 * p8);
    select_many(
        x.less_than(&Vector::new(f32::new(0.0))),
        -magnitude,
        magnitude,
    )
}

/// Exact (erf) GELU, as Burn's `gelu` (its `erf` from [`erf_rational`]).
#[cube]
pub(super) fn gelu<N: Size>(z: Vector<f32, N>) -> Vector<f32, N> {
    let half = Vector::new(f32::new(0.5));
    let one = Vector::new(f32::new(1.0));
    let inv_sqrt2 = Vector::new(f32::new(core::f64::consts::FRAC_1_SQRT_2));
    half * z * (one + erf_rational(z * inv_sqrt2))
}

#[cube]
pub(super) fn sigmoid<N: Size>(z: Vector<f32, N>) -> Vector<f32, N> {
    let one = Vector::new(f32::new(1.0));
    one / (one + Vector::exp(-z))
}
