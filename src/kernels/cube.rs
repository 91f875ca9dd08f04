//! CubeCL kernels of the ops on `CubeBackend` (every cubecl runtime: wgpu, CUDA, ...).
//!
//! Each public function takes and returns `CubeTensor`s and mirrors a function of
//! [`composed`] (forward) or a method of the `BackwardKernels` trait (gradients). The kernels
//! read contiguous `f32` buffers: a strided input is copied contiguous first
//! (`burn_cubecl::kernel::into_contiguous`); another dtype or broadcasting operands take the
//! composition of Burn primitives instead. Empty tensors get empty results (and zero
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

// ---------------------------------------------------------------------------------------------
// Host-side helpers
// ---------------------------------------------------------------------------------------------

fn is_f32(t: &CubeTensor) -> bool {
    t.dtype == DType::F32
}

/// The size of the last dimension (0 for a scalar).
fn width_of(t: &CubeTensor) -> usize {
    let shape = t.shape();
    shape
        .num_dims()
        .checked_sub(1)
        .map_or(0, |last| shape[last])
}

/// The widest vector the runtime offers for `f32` that divides `len` and keeps every tensor's
/// buffer offset aligned to it.
fn vector_size(tensors: &[&CubeTensor], len: usize) -> usize {
    let client = &tensors[0].client;
    client
        .io_optimized_vector_sizes(size_of::<f32>())
        .filter(|&v| {
            v > 0
                && len.is_multiple_of(v)
                && tensors.iter().all(|t| {
                    let offset = t.handle.offset_start.unwrap_or(0);
                    offset.is_multiple_of((v * size_of::<f32>()) as u64)
                })
        })
        .max()
        .unwrap_or(1)
}

/// A fresh contiguous tensor of `shape` and `dtype` on `like`'s device.
fn empty(like: &CubeTensor, shape: Shape, dtype: DType) -> CubeTensor {
    empty_device_contiguous_dtype(like.client.clone(), like.device.clone(), shape, dtype)
}

/// The output tensor and its kernel argument: over `input` (the kernel's argument number
/// `position`) when its buffer is ours, else a fresh `f32` buffer of the same shape.
fn output_over(input: &CubeTensor, position: usize) -> (CubeTensor, BufferArg) {
    let len = input.shape().num_elements();
    if input.can_mut() && input.is_contiguous() {
        (input.clone(), BufferArg::alias(position, len))
    } else {
        let out = empty(input, input.shape(), DType::F32);
        let arg = out.clone().into_buffer_arg();
        (out, arg)
    }
}

/// The result of an op on an empty tensor: an empty tensor of its shape and dtype. Burn's own
/// kernels do not all take empty tensors on Cube, so the compositions are not used for them.
fn is_empty(x: &CubeTensor) -> Option<CubeTensor> {
    let shape = x.shape();
    (shape.num_elements() == 0).then(|| empty(x, shape, x.dtype))
}

/// Cube count and dimension of a launch with one unit per work item (of `units`).
fn unit_launch(client: &cubecl::client::Client, units: usize) -> (CubeCount, CubeDim) {
    let dim = CubeDim::new(client, units);
    (calculate_cube_count_elemwise(client, units, dim), dim)
}

/// Work items each unit of an element-wise launch aims to take (in a grid-stride loop).
const ITEMS_PER_UNIT: usize = 16;

/// The fewest cubes of an element-wise launch while there are work items for them.
const MIN_CUBES: usize = 8;

/// Cube count and dimension of an element-wise launch over `items` work items, each unit
/// looping over about [`ITEMS_PER_UNIT`] of them (see [`grid_units`]) while that leaves at
/// least [`MIN_CUBES`] cubes. Fewer, longer-lived units: on lavapipe the cost of a unit is
/// far from free, and a 1M-element kernel ran 1.5x faster for it; GPUs keep thousands of them.
fn elementwise_launch(client: &cubecl::client::Client, items: usize) -> (CubeCount, CubeDim) {
    let dim = CubeDim::new(client, items);
    let per_cube = dim.num_elems() as usize;
    let cubes = items
        .div_ceil(per_cube * ITEMS_PER_UNIT)
        .max(items.div_ceil(per_cube).min(MIN_CUBES));
    (
        calculate_cube_count_elemwise(client, cubes * per_cube, dim),
        dim,
    )
}

/// The widest row (in elements) that one unit reduces alone on a device without plane
/// (subgroup) operations.
const MAX_UNIT_ROW: usize = 1024;

/// Units per cube when every unit works on a row of its own.
const ROWS_PER_CUBE: u32 = 64;

/// Whether a row-wise kernel runs one unit per row (`units == 1`: a unit loops over its whole
/// row, no shared memory, no barrier) rather than one cube per row. Chosen for rows of at most
/// [`MAX_UNIT_ROW`] elements on devices without plane operations: wgpu reports none on a CPU
/// adapter (lavapipe), where a workgroup barrier makes the invocations of a workgroup run as
/// coroutines that switch at every barrier, the cost that dominated the tree reduction there.
/// Devices with plane operations (real GPUs) keep one cube per row and coalesced reads.
fn unit_per_row(client: &cubecl::client::Client, width: usize) -> bool {
    width <= MAX_UNIT_ROW
        && !client
            .properties()
            .features
            .plane
            .contains(cubecl::features::Plane::Ops)
}

/// Cube count, cube dimension and unit count of a row-wise launch over `rows` rows of
/// `vectors` vectors (`width` elements): one unit per row when [`unit_per_row`] (unit count
/// 1), else one cube per row of the smallest power of two of units that covers a row (at
/// most [`MAX_ROW_UNITS`]).
fn row_launch(
    client: &cubecl::client::Client,
    rows: usize,
    vectors: usize,
    width: usize,
) -> (CubeCount, CubeDim, usize) {
    if unit_per_row(client, width) {
        let dim = CubeDim::new_1d(ROWS_PER_CUBE.min(unit_cap(client) as u32));
        return (calculate_cube_count_elemwise(client, rows, dim), dim, 1);
    }
    cube_per_row_launch(client, rows, vectors)
}

/// The most units of one cube of a row-wise kernel on `client`'s device.
fn unit_cap(client: &cubecl::client::Client) -> usize {
    let hardware = &client.properties().hardware;
    (hardware.max_units_per_cube.min(hardware.max_cube_dim.0) as usize).clamp(1, MAX_ROW_UNITS)
}

/// [`row_launch`] with one cube per row.
fn cube_per_row_launch(
    client: &cubecl::client::Client,
    rows: usize,
    vectors: usize,
) -> (CubeCount, CubeDim, usize) {
    let cap = unit_cap(client);
    // The largest power of two within the cap.
    let max = if cap.is_power_of_two() {
        cap
    } else {
        cap.next_power_of_two() / 2
    };
    // At least two units: one unit means one unit per row to the kernels.
    let units = vectors.next_power_of_two().clamp(2, max.max(2));
    let dim = CubeDim::new_1d(units as u32);
    (
        calculate_cube_count_elemwise(client, rows * units, dim),
        dim,
        units,
    )
}

fn to_u32(n: usize) -> Option<u32> {
    u32::try_from(n).ok()
}

/// `t` laid out row-major and contiguous (a copy only when it is not already).
fn contiguous(t: CubeTensor) -> CubeTensor {
    into_contiguous(t)
}

/// A per-feature parameter (`[features]`, or any shape of `width` elements) usable by the row
/// kernels: `f32` with `width` elements, made contiguous.
fn row_param(param: &CubeTensor, width: usize) -> bool {
    is_f32(param) && param.shape().num_elements() == width
}

/// What every row-wise kernel needs of `x`: `f32`, rank >= 1, non-empty, row count and width
/// that fit `u32`.
fn row_layout(x: &CubeTensor) -> Option<(usize, usize)> {
    let width = width_of(x);
    let numel = x.shape().num_elements();
    if !is_f32(x) || x.shape().num_dims() == 0 || width == 0 || numel == 0 {
        return None;
    }
    let rows = numel / width;
    to_u32(numel)?;
    Some((rows, width))
}

// ---------------------------------------------------------------------------------------------
// Kernel building blocks
// ---------------------------------------------------------------------------------------------

/// The number of units of the launch: the stride of a grid-stride loop.
#[cube]
fn grid_units() -> usize {
    CUBE_COUNT * CUBE_DIM as usize
}

/// The sum of a vector's lanes.
#[cube]
fn lanes_sum<N: Size>(v: Vector<f32, N>) -> f32 {
    let mut sum = f32::new(0.0);
    #[unroll]
    for k in 0..N::value() {
        sum += v.extract(k);
    }
    sum
}

/// The largest of a vector's lanes.
#[cube]
fn lanes_max<N: Size>(v: Vector<f32, N>) -> f32 {
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
fn row_index(#[comptime] units: usize) -> usize {
    let mut row = CUBE_POS;
    if comptime![units == 1] {
        row = ABSOLUTE_POS;
    }
    row
}

/// Where a unit starts in its row: its position in the cube, or 0 with one unit per row.
#[cube]
fn unit_index(#[comptime] units: usize) -> usize {
    let mut unit = 0usize;
    if comptime![units > 1] {
        unit = UNIT_POS as usize;
    }
    unit
}

/// The mean of row `base..base + width` of `x` and `1 / sqrt(var + eps)`, as vectors, for layer
/// normalisation and its gradient (two passes over the row, each unit striding by `units`).
#[cube]
fn row_standardizer<N: Size>(
    x: &[Vector<f32, N>],
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
        acc += x[base + i];
        i += units;
    }
    let mean = Vector::new(cube_sum(lanes_sum(acc), units) / n);
    let mut acc = Vector::new(f32::new(0.0));
    let mut i = unit;
    while i < width {
        let c = x[base + i] - mean;
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
fn cube_sum(value: f32, #[comptime] units: usize) -> f32 {
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
fn cube_max(value: f32, #[comptime] units: usize) -> f32 {
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
fn erf_rational<N: Size>(x: Vector<f32, N>) -> Vector<f32, N> {
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
fn gelu<N: Size>(z: Vector<f32, N>) -> Vector<f32, N> {
    let half = Vector::new(f32::new(0.5));
    let one = Vector::new(f32::new(1.0));
    let inv_sqrt2 = Vector::new(f32::new(core::f64::consts::FRAC_1_SQRT_2));
    half * z * (one + erf_rational(z * inv_sqrt2))
}

#[cube]
fn sigmoid<N: Size>(z: Vector<f32, N>) -> Vector<f32, N> {
    let one = Vector::new(f32::new(1.0));
    one / (one + Vector::exp(-z))
}

// ---------------------------------------------------------------------------------------------
// Element-wise kernels
// ---------------------------------------------------------------------------------------------

#[cube(launch_unchecked)]
fn add_relu_kernel<N: Size>(
    lhs: &[Vector<f32, N>],
    rhs: &[Vector<f32, N>],
    out: &mut [Vector<f32, N>],
    len: u32,
) {
    let step = grid_units();
    let mut i = ABSOLUTE_POS;
    while i < len as usize {
        let zero = Vector::new(f32::new(0.0));
        out[i] = (lhs[i] + rhs[i]).max(zero);
        i += step;
    }
}

/// `gelu(x + bias)` over `rows` rows of `width` vectors: a unit per column (`x` of the launch
/// grid) reads its bias once and strides over rows (`y`), no division per element.
#[cube(launch_unchecked)]
fn bias_gelu_kernel<N: Size>(
    x: &[Vector<f32, N>],
    bias: &[Vector<f32, N>],
    out: &mut [Vector<f32, N>],
    rows: u32,
    width: u32,
) {
    let col = ABSOLUTE_POS_X as usize;
    let width = width as usize;
    if col >= width {
        terminate!();
    }
    let b = bias[col];
    let step = (CUBE_COUNT_Y * CUBE_DIM_Y) as usize;
    let mut row = ABSOLUTE_POS_Y as usize;
    while row < rows as usize {
        let i = row * width + col;
        out[i] = gelu(x[i] + b);
        row += step;
    }
}

#[cube(launch_unchecked)]
fn swiglu_kernel<N: Size>(
    gate: &[Vector<f32, N>],
    up: &[Vector<f32, N>],
    out: &mut [Vector<f32, N>],
    len: u32,
) {
    let step = grid_units();
    let mut i = ABSOLUTE_POS;
    while i < len as usize {
        let g = gate[i];
        out[i] = g * sigmoid(g) * up[i];
        i += step;
    }
}

#[cube(launch_unchecked)]
fn clamp_kernel<N: Size>(
    x: &[Vector<f32, N>],
    out: &mut [Vector<f32, N>],
    len: u32,
    lo: f32,
    hi: f32,
) {
    let step = grid_units();
    let mut i = ABSOLUTE_POS;
    while i < len as usize {
        out[i] = clamp_nan(x[i], Vector::new(lo), Vector::new(hi));
        i += step;
    }
}

/// `(hi, lo)` of the 64-bit product of two `u32`, from 16-bit halves (no 64-bit integers).
#[cube]
fn mul_wide(a: u32, b: u32) -> (u32, u32) {
    let a0 = a & 0xFFFFu32;
    let a1 = a >> 16u32;
    let b0 = b & 0xFFFFu32;
    let b1 = b >> 16u32;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    let mid = (p00 >> 16u32) + (p01 & 0xFFFFu32) + (p10 & 0xFFFFu32);
    let lo = (mid << 16u32) | (p00 & 0xFFFFu32);
    let hi = p11 + (p01 >> 16u32) + (p10 >> 16u32) + (mid >> 16u32);
    (hi, lo)
}

/// The 64-bit wrapping product `(ah, al) * (bh, bl)` as `(hi, lo)`.
#[cube]
fn mul64(ah: u32, al: u32, bh: u32, bl: u32) -> (u32, u32) {
    let (ph, pl) = mul_wide(al, bl);
    (ph + al * bh + ah * bl, pl)
}

/// `composed::dropout_hash(seed, word)` (the splitmix64 finaliser) on `u32` pairs.
#[cube]
fn splitmix(seed_hi: u32, seed_lo: u32, word: u32) -> (u32, u32) {
    // word * 0x9E37_79B9_7F4A_7C15 (word < 2^32)
    let (mh, ml) = mul64(0u32, word, 0x9E37_79B9u32, 0x7F4A_7C15u32);
    let zh = seed_hi ^ mh;
    let zl = seed_lo ^ ml;
    // (z ^ (z >> 30)) * 0xBF58_476D_1CE4_E5B9
    let xl = zl ^ ((zl >> 30u32) | (zh << 2u32));
    let xh = zh ^ (zh >> 30u32);
    let (zh, zl) = mul64(xh, xl, 0xBF58_476Du32, 0x1CE4_E5B9u32);
    // (z ^ (z >> 27)) * 0x94D0_49BB_1331_11EB
    let xl = zl ^ ((zl >> 27u32) | (zh << 5u32));
    let xh = zh ^ (zh >> 27u32);
    let (zh, zl) = mul64(xh, xl, 0x94D0_49BBu32, 0x1331_11EBu32);
    // z ^ (z >> 31)
    (zh ^ (zh >> 31u32), zl ^ ((zl >> 31u32) | (zh << 1u32)))
}

/// Writes element `idx` of dropout: kept when its 16-bit `draw` is at least `threshold`.
#[cube]
fn dropout_element<B: Int>(
    x: &[f32],
    out: &mut [f32],
    keep: &mut [B],
    idx: usize,
    draw: u32,
    threshold: u32,
    scale: f32,
) {
    if draw >= threshold {
        out[idx] = x[idx] * f32::new(1.0) * scale;
        keep[idx] = B::new(1);
    } else {
        out[idx] = x[idx] * f32::new(0.0) * scale;
        keep[idx] = B::new(0);
    }
}

/// One unit per four elements (one hash): see `composed::dropout_keep_into`.
#[cube(launch_unchecked)]
fn dropout_kernel<B: Int>(
    x: &[f32],
    out: &mut [f32],
    keep: &mut [B],
    len: u32,
    seed_hi: u32,
    seed_lo: u32,
    threshold: u32,
    scale: f32,
    #[define(B)] _bool_dtype: ElemType,
) {
    let word = ABSOLUTE_POS;
    let len = len as usize;
    let first = word * 4;
    if first >= len {
        terminate!();
    }
    let (hi, lo) = splitmix(seed_hi, seed_lo, word as u32);
    dropout_element::<B>(x, out, keep, first, lo & 0xFFFFu32, threshold, scale);
    if first + 1 < len {
        dropout_element::<B>(x, out, keep, first + 1, lo >> 16u32, threshold, scale);
    }
    if first + 2 < len {
        dropout_element::<B>(x, out, keep, first + 2, hi & 0xFFFFu32, threshold, scale);
    }
    if first + 3 < len {
        dropout_element::<B>(x, out, keep, first + 3, hi >> 16u32, threshold, scale);
    }
}

/// Element `x` of dropout and its keep flag: kept when its 16-bit `draw` is at least
/// `threshold` (`x * 1 * scale`, else `x * 0 * scale`, as the composition).
#[cube]
fn dropout_lane<B: Int>(x: f32, draw: u32, threshold: u32, scale: f32) -> (f32, B) {
    let kept = draw >= threshold;
    let factor = select(kept, f32::new(1.0), f32::new(0.0));
    (x * factor * scale, select(kept, B::new(1), B::new(0)))
}

/// One unit per four elements (one hash), read and written as 4-lane vectors (`N` is 4): the
/// elements of one hash are one vector of `x`, of the output and of the mask.
#[cube(launch_unchecked)]
fn dropout_vector_kernel<N: Size, B: Int>(
    x: &[Vector<f32, N>],
    out: &mut [Vector<f32, N>],
    keep: &mut [Vector<B, N>],
    words: u32,
    seed_hi: u32,
    seed_lo: u32,
    threshold: u32,
    scale: f32,
    #[define(B)] _bool_dtype: ElemType,
) {
    let step = grid_units();
    let mut word = ABSOLUTE_POS;
    while word < words as usize {
        let (hi, lo) = splitmix(seed_hi, seed_lo, word as u32);
        let v = x[word];
        let mut values = Vector::<f32, N>::empty();
        let mut flags = Vector::<B, N>::empty();
        let (value, flag) = dropout_lane::<B>(v.extract(0usize), lo & 0xFFFFu32, threshold, scale);
        values.insert(0usize, value);
        flags.insert(0usize, flag);
        let (value, flag) = dropout_lane::<B>(v.extract(1usize), lo >> 16u32, threshold, scale);
        values.insert(1usize, value);
        flags.insert(1usize, flag);
        let (value, flag) = dropout_lane::<B>(v.extract(2usize), hi & 0xFFFFu32, threshold, scale);
        values.insert(2usize, value);
        flags.insert(2usize, flag);
        let (value, flag) = dropout_lane::<B>(v.extract(3usize), hi >> 16u32, threshold, scale);
        values.insert(3usize, value);
        flags.insert(3usize, flag);
        out[word] = values;
        keep[word] = flags;
        word += step;
    }
}

// ---------------------------------------------------------------------------------------------
// Row-wise kernels: one cube per row, `units` units striding over its `width` vectors, or
// (`units == 1`) one unit per row looping over all of it.
// ---------------------------------------------------------------------------------------------

#[cube(launch_unchecked)]
fn rms_norm_kernel<N: Size>(
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
fn layer_norm_kernel<N: Size>(
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
fn softmax_kernel<N: Size>(
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
fn cross_entropy_rows_kernel<N: Size, I: Int>(
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
fn mean_kernel(
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

// ---------------------------------------------------------------------------------------------
// Forward ops
// ---------------------------------------------------------------------------------------------

/// An element-wise binary kernel over two `f32` tensors of one shape, in place over whichever
/// buffer is ours (an empty result for empty operands); the inputs given back for other
/// dtypes or broadcasting.
fn zip_launch(
    lhs: CubeTensor,
    rhs: CubeTensor,
    launch: impl FnOnce(&CubeTensor, usize, (CubeCount, CubeDim), BufferArg, BufferArg, BufferArg, u32),
) -> Result<CubeTensor, Box<(CubeTensor, CubeTensor)>> {
    let shape = lhs.shape();
    let numel = shape.num_elements();
    if rhs.shape() == shape
        && lhs.dtype == rhs.dtype
        && let Some(out) = is_empty(&lhs)
    {
        return Ok(out);
    }
    if !is_f32(&lhs) || !is_f32(&rhs) || rhs.shape() != shape {
        return Err(Box::new((lhs, rhs)));
    }
    let lhs = contiguous(lhs);
    let rhs = contiguous(rhs);
    let v = vector_size(&[&lhs, &rhs], numel);
    let units = numel / v;
    let Some(len) = to_u32(units) else {
        return Err(Box::new((lhs, rhs)));
    };
    let (out, out_arg) = if lhs.can_mut() {
        output_over(&lhs, 0)
    } else {
        output_over(&rhs, 1)
    };
    let grid = elementwise_launch(&lhs.client, units);
    let client_tensor = lhs.clone();
    launch(
        &client_tensor,
        v,
        grid,
        lhs.into_buffer_arg(),
        rhs.into_buffer_arg(),
        out_arg,
        len,
    );
    Ok(out)
}

/// `relu(lhs + rhs)` in one element-wise kernel (strided operands are copied contiguous first).
/// Falls back to [`composed::add_relu`] for other dtypes or broadcasting shapes.
pub fn add_relu(lhs: CubeTensor, rhs: CubeTensor) -> CubeTensor {
    zip_launch(lhs, rhs, |t, v, (count, dim), a, b, out, len| unsafe {
        add_relu_kernel::launch_unchecked(&t.client, count, dim, v, a, b, out, len);
    })
    .unwrap_or_else(|inputs| composed::add_relu::<CubeBackend>(inputs.0, inputs.1))
}

/// `silu(gate) * up` in one element-wise kernel (strided operands are copied contiguous
/// first). Falls back to [`composed::swiglu`] for other dtypes or broadcasting shapes.
pub fn swiglu(gate: CubeTensor, up: CubeTensor) -> CubeTensor {
    zip_launch(gate, up, |t, v, (count, dim), a, b, out, len| unsafe {
        swiglu_kernel::launch_unchecked(&t.client, count, dim, v, a, b, out, len);
    })
    .unwrap_or_else(|inputs| composed::swiglu::<CubeBackend>(inputs.0, inputs.1))
}

/// `gelu(x + bias)` (erf GELU) in one element-wise kernel, `bias` of `x`'s last-dimension size.
/// Falls back to [`composed::bias_gelu`] for other dtypes or a bias of another size.
pub fn bias_gelu(x: CubeTensor, bias: CubeTensor) -> CubeTensor {
    if let Some(out) = is_empty(&x) {
        return out;
    }
    let (Some((rows, width)), true) = (row_layout(&x), row_param(&bias, width_of(&x))) else {
        return composed::bias_gelu::<CubeBackend>(x, bias);
    };
    let x = contiguous(x);
    let bias = contiguous(bias);
    let v = vector_size(&[&x, &bias], width);
    let Some((count, dim)) = column_launch(&x.client, rows, width / v) else {
        return composed::bias_gelu::<CubeBackend>(x, bias);
    };
    let (out, out_arg) = output_over(&x, 0);
    let client = x.client.clone();
    unsafe {
        bias_gelu_kernel::launch_unchecked(
            &client,
            count,
            dim,
            v,
            x.into_buffer_arg(),
            bias.into_buffer_arg(),
            out_arg,
            rows as u32,
            (width / v) as u32,
        );
    }
    out
}

/// Rows each unit of a [`column_launch`] aims to take.
const COLUMN_ROWS: usize = 16;

/// The fewest cubes (in `y`) of a [`column_launch`] while there are rows for them.
const MIN_COLUMN_CUBES: usize = 8;

/// Cube count and dimension of a launch with a unit per column (`x`) of `vectors` and rows
/// (`y`) striding over `rows`: 256 units a cube, the grid capped in `y` (the units loop).
fn column_launch(
    client: &cubecl::client::Client,
    rows: usize,
    vectors: usize,
) -> Option<(CubeCount, CubeDim)> {
    let total = unit_cap(client).min(256) as u32;
    let dim_x = (vectors.next_power_of_two() as u32).min(total);
    let dim_y = total / dim_x;
    let max_count = client.properties().hardware.max_cube_count;
    let cubes_x = u32::try_from(vectors.div_ceil(dim_x as usize))
        .ok()
        .filter(|&cubes| cubes <= max_count.0)?;
    let max_y = max_count.1.max(1) as usize;
    // Each unit takes about `COLUMN_ROWS` rows (its bias vector read once for them), as long
    // as that leaves a few cubes for the device's cores.
    let cubes_y = rows
        .div_ceil(dim_y as usize * COLUMN_ROWS)
        .max(rows.div_ceil(dim_y as usize).min(MIN_COLUMN_CUBES))
        .min(max_y) as u32;
    Some((
        CubeCount::Static(cubes_x, cubes_y, 1),
        CubeDim::new_2d(dim_x, dim_y),
    ))
}

/// `x / sqrt(mean(x^2) + eps) * weight` over the last dimension, one unit or cube per row. Falls back
/// to [`composed::rms_norm`] for other dtypes or a weight of another size.
pub fn rms_norm(x: CubeTensor, weight: CubeTensor, eps: f32) -> CubeTensor {
    if let Some(out) = is_empty(&x) {
        return out;
    }
    let (Some((rows, width)), true) = (row_layout(&x), row_param(&weight, width_of(&x))) else {
        return composed::rms_norm::<CubeBackend>(x, weight, eps);
    };
    let x = contiguous(x);
    let weight = contiguous(weight);
    let v = vector_size(&[&x, &weight], width);
    let (out, out_arg) = output_over(&x, 0);
    let (count, dim, units) = row_launch(&x.client, rows, width / v, width);
    let client = x.client.clone();
    unsafe {
        rms_norm_kernel::launch_unchecked(
            &client,
            count,
            dim,
            v,
            x.into_buffer_arg(),
            weight.into_buffer_arg(),
            out_arg,
            rows as u32,
            (width / v) as u32,
            eps,
            units,
        );
    }
    out
}

/// `(x - mean) / sqrt(var + eps) * gamma + beta` over the last dimension, one unit or cube per
/// row.
/// Falls back to [`composed::layer_norm`] for other dtypes or parameters of another size.
pub fn layer_norm(x: CubeTensor, gamma: CubeTensor, beta: CubeTensor, eps: f32) -> CubeTensor {
    if let Some(out) = is_empty(&x) {
        return out;
    }
    let width = width_of(&x);
    let (Some((rows, width)), true, true) = (
        row_layout(&x),
        row_param(&gamma, width),
        row_param(&beta, width),
    ) else {
        return composed::layer_norm::<CubeBackend>(x, gamma, beta, eps);
    };
    let x = contiguous(x);
    let gamma = contiguous(gamma);
    let beta = contiguous(beta);
    let v = vector_size(&[&x, &gamma, &beta], width);
    let (out, out_arg) = output_over(&x, 0);
    let (count, dim, units) = row_launch(&x.client, rows, width / v, width);
    let client = x.client.clone();
    unsafe {
        layer_norm_kernel::launch_unchecked(
            &client,
            count,
            dim,
            v,
            x.into_buffer_arg(),
            gamma.into_buffer_arg(),
            beta.into_buffer_arg(),
            out_arg,
            rows as u32,
            (width / v) as u32,
            eps,
            units,
        );
    }
    out
}

/// The softmax over the last dimension (maximum subtracted first), one unit or cube per row. Falls back
/// to [`composed::softmax_last`] for other dtypes.
pub fn softmax_last(x: CubeTensor) -> CubeTensor {
    if let Some(out) = is_empty(&x) {
        return out;
    }
    let Some((rows, width)) = row_layout(&x) else {
        return composed::softmax_last::<CubeBackend>(x);
    };
    let x = contiguous(x);
    let v = vector_size(&[&x], width);
    let (out, out_arg) = output_over(&x, 0);
    let (count, dim, units) = row_launch(&x.client, rows, width / v, width);
    let client = x.client.clone();
    unsafe {
        softmax_kernel::launch_unchecked(
            &client,
            count,
            dim,
            v,
            x.into_buffer_arg(),
            out_arg,
            rows as u32,
            (width / v) as u32,
            units,
        );
    }
    out
}

/// The mean over rows of `-log_softmax(logits)[target]`, shape `[1]`: one unit or cube per row
/// for the row losses, then one cube for their mean. The targets (`i32` or `u32`) are checked
/// in the row kernel, which flags a row whose target is outside `0..classes`; the flag count is
/// read back after the launches (the one wait of the call, on the computation itself), and only
/// when a row is flagged are the targets read on the host by [`composed::target_classes`] for
/// its panic. Targets of another int dtype or of another count take that host check first, as
/// [`composed::cross_entropy_logits`] does; falls back to it for other float dtypes, empty
/// logits or a rank other than 2.
pub fn cross_entropy_logits(logits: CubeTensor, targets: CubeTensor) -> CubeTensor {
    let shape = logits.shape();
    let (Some((rows, width)), 2, Some(_)) = (
        row_layout(&logits),
        shape.num_dims(),
        to_u32(2 * shape.num_elements() / width_of(&logits).max(1)),
    ) else {
        return composed::cross_entropy_logits::<CubeBackend>(logits, targets);
    };
    let on_device = matches!(targets.dtype, DType::I32 | DType::U32)
        && targets.shape().num_elements() == rows
        && i32::try_from(width).is_ok();
    let logits = contiguous(logits);
    let client = logits.client.clone();
    let targets = if on_device {
        contiguous(targets)
    } else {
        let classes = composed::target_classes::<CubeBackend>(&targets, rows, width);
        let classes: Vec<u32> = classes.into_iter().map(|c| c as u32).collect();
        CubeTensor::new_contiguous(
            client.clone(),
            logits.device.clone(),
            Shape::new([rows]),
            client.create_from_slice(u32::as_bytes(&classes)),
            DType::U32,
        )
    };
    let v = vector_size(&[&logits], width);
    let losses = empty(&logits, Shape::new([2 * rows]), DType::F32);
    let (count, dim, units) = row_launch(&client, rows, width / v, width);
    let int_dtype = dtype_to_storage_type(targets.dtype);
    unsafe {
        cross_entropy_rows_kernel::launch_unchecked(
            &client,
            count,
            dim,
            v,
            logits.clone().into_buffer_arg(),
            targets.clone().into_buffer_arg(),
            losses.clone().into_buffer_arg(),
            rows as u32,
            (width / v) as u32,
            width as u32,
            units,
            int_dtype,
        );
    }
    let out = empty(&logits, Shape::new([1]), DType::F32);
    let bad = empty(&logits, Shape::new([1]), DType::F32);
    // One unit adds up to 2^16 row losses alone where barriers are dear (see `unit_per_row`).
    let (count, dim, units) = if rows <= 1 << 16 && unit_per_row(&client, 1) {
        (CubeCount::Static(1, 1, 1), CubeDim::new_1d(1), 1)
    } else {
        cube_per_row_launch(&client, 1, rows)
    };
    unsafe {
        mean_kernel::launch_unchecked(
            &client,
            count,
            dim,
            losses.into_buffer_arg(),
            out.clone().into_buffer_arg(),
            bad.clone().into_buffer_arg(),
            rows as u32,
            units,
        );
    }
    if on_device {
        let flagged = burn_cubecl::ops::into_data_sync(bad)
            .convert::<f32>()
            .try_to_vec::<f32>()
            .expect("cross_entropy_logits: reading the target check failed");
        if flagged[0] != 0.0 {
            // Panics with the row and value of the first bad target.
            composed::target_classes::<CubeBackend>(&targets, rows, width);
            unreachable!("cross_entropy_logits: the device flagged a target the host accepts");
        }
    }
    // Loss = -mean(log p[target]) = mean(row losses).
    out
}

/// `(x * keep * scale, keep)`: the keep mask bit-identical to [`composed::dropout`]'s (the same
/// splitmix64 draws, computed on `u32` pairs in the kernel), in the device's bool dtype, and
/// `scale = 1 / (1 - p)`. Panics when `p` is not in `[0, 1]`. Falls back to
/// [`composed::dropout`] for other dtypes or more than `u32::MAX` elements.
pub fn dropout(x: CubeTensor, p: f32, seed: u64) -> (CubeTensor, CubeTensor) {
    let scale = composed::dropout_scale(p);
    let numel = x.shape().num_elements();
    let bool_dtype = DType::from(get_or_init_device_settings::<CubeBackend>(&x.device).bool_dtype);
    if let Some(out) = is_empty(&x) {
        return (out, empty(&x, x.shape(), bool_dtype));
    }
    if !is_f32(&x) || to_u32(numel).is_none() {
        return composed::dropout::<CubeBackend>(x, p, seed);
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let threshold = (f64::from(p) * 65536.0).ceil() as u32;
    let x = contiguous(x);
    let (out, out_arg) = output_over(&x, 0);
    let keep = empty(&x, x.shape(), bool_dtype);
    let words = numel.div_ceil(4);
    let client = x.client.clone();
    let vectorized = dropout_vectorized(&x, &keep, numel);
    if vectorized {
        let (count, dim) = elementwise_launch(&client, words);
        unsafe {
            dropout_vector_kernel::launch_unchecked(
                &client,
                count,
                dim,
                4,
                x.into_buffer_arg(),
                out_arg,
                keep.clone().into_buffer_arg(),
                words as u32,
                (seed >> 32) as u32,
                seed as u32,
                threshold,
                scale,
                dtype_to_storage_type(bool_dtype),
            );
        }
        return (out, keep);
    }
    // The scalar kernel (a count not a multiple of 4): one unit per hash.
    let (count, dim) = unit_launch(&client, words);
    unsafe {
        dropout_kernel::launch_unchecked(
            &client,
            count,
            dim,
            x.into_buffer_arg(),
            out_arg,
            keep.clone().into_buffer_arg(),
            numel as u32,
            (seed >> 32) as u32,
            seed as u32,
            threshold,
            scale,
            dtype_to_storage_type(bool_dtype),
        );
    }
    (out, keep)
}

/// Whether dropout over `x` (`numel` elements) into the mask `keep` reads and writes 4-lane
/// vectors: a whole number of hashes and 4-lane vectors offered for both dtypes.
fn dropout_vectorized(x: &CubeTensor, keep: &CubeTensor, numel: usize) -> bool {
    let bool_size = keep.dtype.size();
    numel.is_multiple_of(4)
        && vector_size(&[x], 4) == 4
        && x.client
            .io_optimized_vector_sizes(bool_size)
            .any(|v| v == 4)
        && keep
            .handle
            .offset_start
            .unwrap_or(0)
            .is_multiple_of((4 * bool_size) as u64)
}

/// `x` clamped to `[lo, hi]` (NaN kept, as Burn's clamp), one element-wise kernel; its
/// straight-through gradient is the autodiff layer's. Panics when `lo > hi`. Falls back to
/// [`composed::clamp_ste`] for other dtypes.
pub fn clamp_ste(x: CubeTensor, lo: f32, hi: f32) -> CubeTensor {
    composed::check_clamp_bounds(lo, hi);
    if let Some(out) = is_empty(&x) {
        return out;
    }
    let numel = x.shape().num_elements();
    if !is_f32(&x) || numel == 0 || to_u32(numel).is_none() {
        return composed::clamp_ste::<CubeBackend>(x, lo, hi);
    }
    let x = contiguous(x);
    let v = vector_size(&[&x], numel);
    let units = numel / v;
    let (out, out_arg) = output_over(&x, 0);
    let (count, dim) = elementwise_launch(&x.client, units);
    let client = x.client.clone();
    unsafe {
        clamp_kernel::launch_unchecked(
            &client,
            count,
            dim,
            v,
            x.into_buffer_arg(),
            out_arg,
            units as u32,
            lo,
            hi,
        );
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Backward ops (what `BackwardKernels for CubeBackend` runs; the trait needs `autodiff`)
// ---------------------------------------------------------------------------------------------

#[cfg(feature = "autodiff")]
pub use grad::{
    bias_gelu_backward, layer_norm_backward, rms_norm_backward, softmax_last_backward,
    swiglu_backward,
};

/// The gradient kernels. Each falls back to `backward::generic`, the default bodies of
/// `BackwardKernels`.
#[cfg(feature = "autodiff")]
mod grad {
    use super::*;
    use crate::kernels::backward::generic;

    /// A fresh `f32` tensor of `like`'s shape and its kernel argument.
    fn fresh_output(like: &CubeTensor) -> (CubeTensor, BufferArg) {
        let out = empty(like, like.shape(), DType::F32);
        let arg = out.clone().into_buffer_arg();
        (out, arg)
    }

    /// A one-vector buffer (`vector` elements: wgpu checks a binding holds one) bound where a
    /// kernel wants an output it will not write (a gradient that is not wanted).
    fn placeholder(like: &CubeTensor, vector: usize) -> BufferArg {
        empty(like, Shape::new([vector]), DType::F32).into_buffer_arg()
    }

    /// The gradient of a per-feature parameter when there are no rows: zeros.
    fn zero_row(x: &CubeTensor, param: &CubeTensor) -> CubeTensor {
        burn_cubecl::ops::numeric::zeros(x.device.clone(), param.shape(), param.dtype)
    }

    /// Sums `t` (contiguous `f32`, `rows` rows of `width`) over its rows into a fresh `[width]`
    /// tensor: the gradient of a per-feature parameter.
    fn column_sum(t: &CubeTensor, rows: usize, width: usize) -> CubeTensor {
        let out = empty(t, Shape::new([width]), DType::F32);
        let (count, dim) = unit_launch(&t.client, width);
        unsafe {
            column_sum_kernel::launch_unchecked(
                &t.client,
                count,
                dim,
                t.clone().into_buffer_arg(),
                out.clone().into_buffer_arg(),
                rows as u32,
                width as u32,
            );
        }
        out
    }

    /// The derivative of [`gelu`]: `cdf(z) + z pdf(z)`.
    #[cube]
    fn gelu_derivative<N: Size>(z: Vector<f32, N>) -> Vector<f32, N> {
        let half = Vector::new(f32::new(0.5));
        let one = Vector::new(f32::new(1.0));
        let inv_sqrt2 = Vector::new(f32::new(core::f64::consts::FRAC_1_SQRT_2));
        let inv_sqrt2pi = Vector::new(f32::new(0.398_942_3));
        let cdf = half * (one + Vector::erf(z * inv_sqrt2));
        let pdf = inv_sqrt2pi * Vector::exp(-half * z * z);
        cdf + z * pdf
    }

    #[cube(launch_unchecked)]
    fn bias_gelu_backward_kernel<N: Size>(
        x: &[Vector<f32, N>],
        bias: &[Vector<f32, N>],
        grad: &[Vector<f32, N>],
        out: &mut [Vector<f32, N>],
        len: u32,
        width: u32,
    ) {
        let step = grid_units();
        let mut i = ABSOLUTE_POS;
        while i < len as usize {
            out[i] = grad[i] * gelu_derivative(x[i] + bias[i % width as usize]);
            i += step;
        }
    }

    #[cube(launch_unchecked)]
    fn swiglu_backward_kernel<N: Size>(
        gate: &[Vector<f32, N>],
        up: &[Vector<f32, N>],
        grad: &[Vector<f32, N>],
        d_gate: &mut [Vector<f32, N>],
        d_up: &mut [Vector<f32, N>],
        len: u32,
        #[comptime] want_gate: bool,
        #[comptime] want_up: bool,
    ) {
        let step = grid_units();
        let mut i = ABSOLUTE_POS;
        while i < len as usize {
            let g = gate[i];
            let d = grad[i];
            let s = sigmoid(g);
            let silu = g * s;
            if want_up {
                d_up[i] = d * silu;
            }
            if want_gate {
                let one = Vector::new(f32::new(1.0));
                d_gate[i] = d * up[i] * (s + silu * (one - s));
            }
            i += step;
        }
    }

    /// Sums `src` (`rows` rows of `width`) over its rows: one unit per column.
    #[cube(launch_unchecked)]
    fn column_sum_kernel(src: &[f32], out: &mut [f32], rows: u32, width: u32) {
        let col = ABSOLUTE_POS;
        let width = width as usize;
        if col >= width {
            terminate!();
        }
        let mut sum = f32::new(0.0);
        for r in 0..rows as usize {
            sum += src[r * width + col];
        }
        out[col] = sum;
    }

    /// `dx = r (g w - x^ mean(g w x^))` with `r = 1 / sqrt(mean(x^2) + eps)` and `x^ = x r`; and,
    /// when `want_part`, `part = g x^` (summed over rows afterwards into `dweight`).
    #[cube(launch_unchecked)]
    fn rms_norm_backward_kernel<N: Size>(
        x: &[Vector<f32, N>],
        weight: &[Vector<f32, N>],
        grad: &[Vector<f32, N>],
        dx: &mut [Vector<f32, N>],
        part: &mut [Vector<f32, N>],
        rows: u32,
        width: u32,
        eps: f32,
        #[comptime] units: usize,
        #[comptime] want_part: bool,
    ) {
        let row = row_index(units);
        if row >= rows as usize {
            terminate!();
        }
        let width = width as usize;
        let base = row * width;
        let unit = unit_index(units);
        let n = f32::cast_from(width * N::value());
        let mut squares = Vector::new(f32::new(0.0));
        let mut dots = Vector::new(f32::new(0.0));
        let mut i = unit;
        while i < width {
            let v = x[base + i];
            squares += v * v;
            dots += grad[base + i] * weight[i] * v;
            i += units;
        }
        let mean_square = cube_sum(lanes_sum(squares), units) / n;
        let dot = cube_sum(lanes_sum(dots), units);
        let r = f32::new(1.0) / (mean_square + eps).sqrt();
        let inverse = Vector::new(r);
        let projection = Vector::new(r * dot / n);
        let mut i = unit;
        while i < width {
            let v = x[base + i];
            let g = grad[base + i];
            let normalized = v * inverse;
            if want_part {
                part[base + i] = g * normalized;
            }
            dx[base + i] = inverse * (g * weight[i] - normalized * projection);
            i += units;
        }
    }

    /// `dx = r (g gamma - mean(g gamma) - x^ mean(g gamma x^))` with `r = 1 / sqrt(var + eps)` and
    /// `x^ = (x - mean) r`; and, when `want_part`, `part = g x^` (summed into `dgamma`).
    #[cube(launch_unchecked)]
    fn layer_norm_backward_kernel<N: Size>(
        x: &[Vector<f32, N>],
        gamma: &[Vector<f32, N>],
        grad: &[Vector<f32, N>],
        dx: &mut [Vector<f32, N>],
        part: &mut [Vector<f32, N>],
        rows: u32,
        width: u32,
        eps: f32,
        #[comptime] units: usize,
        #[comptime] want_part: bool,
    ) {
        let row = row_index(units);
        if row >= rows as usize {
            terminate!();
        }
        let width = width as usize;
        let base = row * width;
        let unit = unit_index(units);
        let n = f32::cast_from(width * N::value());
        let (mean, inverse) = row_standardizer::<N>(x, base, width, unit, eps, units);
        let mut scaled = Vector::new(f32::new(0.0));
        let mut projected = Vector::new(f32::new(0.0));
        let mut i = unit;
        while i < width {
            let g = grad[base + i] * gamma[i];
            scaled += g;
            projected += g * (x[base + i] - mean) * inverse;
            i += units;
        }
        let mean_g = Vector::new(cube_sum(lanes_sum(scaled), units) / n);
        let projection = Vector::new(cube_sum(lanes_sum(projected), units) / n);
        let mut i = unit;
        while i < width {
            let d = grad[base + i];
            let normalized = (x[base + i] - mean) * inverse;
            if want_part {
                part[base + i] = d * normalized;
            }
            dx[base + i] = inverse * (d * gamma[i] - mean_g - normalized * projection);
            i += units;
        }
    }

    /// `dx = y (grad - sum(grad y))` over each row.
    #[cube(launch_unchecked)]
    fn softmax_backward_kernel<N: Size>(
        y: &[Vector<f32, N>],
        grad: &[Vector<f32, N>],
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
        let mut acc = Vector::new(f32::new(0.0));
        let mut i = unit;
        while i < width {
            acc += y[base + i] * grad[base + i];
            i += units;
        }
        let dot = Vector::new(cube_sum(lanes_sum(acc), units));
        let mut i = unit;
        while i < width {
            out[base + i] = y[base + i] * (grad[base + i] - dot);
            i += units;
        }
    }

    /// `[dx, dbias]` of `gelu(x + bias)`: `dx` in one element-wise kernel (over the gradient's
    /// buffer when it is ours), `dbias` its sum over rows. Falls back to the composed gradient
    /// (Burn's `gelu_backward`) for other dtypes or shapes.
    pub fn bias_gelu_backward(
        x: CubeTensor,
        bias: CubeTensor,
        grad: CubeTensor,
        wanted: [bool; 2],
    ) -> [Option<CubeTensor>; 2] {
        if let (Some(dx), true) = (is_empty(&grad), grad.shape() == x.shape()) {
            return [Some(dx), wanted[1].then(|| zero_row(&x, &bias))];
        }
        let (Some((rows, width)), true, true, true) = (
            row_layout(&x),
            row_param(&bias, width_of(&x)),
            grad.shape() == x.shape(),
            is_f32(&grad),
        ) else {
            return generic::bias_gelu_backward::<CubeBackend>(x, bias, grad, wanted);
        };
        let numel = rows * width;
        let x = contiguous(x);
        let bias = contiguous(bias);
        let grad = contiguous(grad);
        let v = vector_size(&[&x, &bias, &grad], width);
        let units = numel / v;
        let (dx, dx_arg) = output_over(&grad, 2);
        let (count, dim) = elementwise_launch(&x.client, units);
        let client = x.client.clone();
        unsafe {
            bias_gelu_backward_kernel::launch_unchecked(
                &client,
                count,
                dim,
                v,
                x.into_buffer_arg(),
                bias.into_buffer_arg(),
                grad.into_buffer_arg(),
                dx_arg,
                units as u32,
                (width / v) as u32,
            );
        }
        let d_bias = wanted[1].then(|| column_sum(&dx, rows, width));
        [Some(dx), d_bias]
    }

    /// `[dgate, dup]` of `silu(gate) * up`, both in one element-wise kernel (`dgate` over the
    /// gradient's buffer when it is ours). Falls back to the composed gradient for other dtypes
    /// or broadcasting shapes.
    pub fn swiglu_backward(
        gate: CubeTensor,
        up: CubeTensor,
        grad: CubeTensor,
        wanted: [bool; 2],
    ) -> [Option<CubeTensor>; 2] {
        let shape = gate.shape();
        let numel = shape.num_elements();
        if let (Some(_), true, true) = (is_empty(&grad), up.shape() == shape, grad.shape() == shape)
        {
            let [want_gate, want_up] = wanted;
            return [
                want_gate.then(|| empty(&grad, shape.clone(), grad.dtype)),
                want_up.then(|| empty(&grad, shape.clone(), grad.dtype)),
            ];
        }
        if !is_f32(&gate)
            || !is_f32(&up)
            || !is_f32(&grad)
            || up.shape() != shape
            || grad.shape() != shape
            || numel == 0
            || to_u32(numel).is_none()
        {
            return generic::swiglu_backward::<CubeBackend>(gate, up, grad, wanted);
        }
        let [want_gate, want_up] = wanted;
        if !want_gate && !want_up {
            return [None, None];
        }
        let gate = contiguous(gate);
        let up = contiguous(up);
        let grad = contiguous(grad);
        let v = vector_size(&[&gate, &up, &grad], numel);
        let units = numel / v;
        let (d_gate, gate_arg) = if want_gate {
            let (t, arg) = output_over(&grad, 2);
            (Some(t), arg)
        } else {
            (None, placeholder(&grad, v))
        };
        let (d_up, up_arg) = if want_up {
            let (t, arg) = fresh_output(&grad);
            (Some(t), arg)
        } else {
            (None, placeholder(&grad, v))
        };
        let (count, dim) = elementwise_launch(&gate.client, units);
        let client = gate.client.clone();
        unsafe {
            swiglu_backward_kernel::launch_unchecked(
                &client,
                count,
                dim,
                v,
                gate.into_buffer_arg(),
                up.into_buffer_arg(),
                grad.into_buffer_arg(),
                gate_arg,
                up_arg,
                units as u32,
                want_gate,
                want_up,
            );
        }
        [d_gate, d_up]
    }

    /// `[dx, dweight]` of RMS normalisation: `dx` one unit or cube per row (over the gradient's buffer
    /// when it is ours), `dweight` the row sum of the per-element `grad * x^` the same kernel
    /// writes. Falls back to the composed gradient for other dtypes or shapes.
    pub fn rms_norm_backward(
        x: CubeTensor,
        weight: CubeTensor,
        eps: f32,
        grad: CubeTensor,
        wanted: [bool; 2],
    ) -> [Option<CubeTensor>; 2] {
        if let (Some(dx), true) = (is_empty(&grad), grad.shape() == x.shape()) {
            return [
                wanted[0].then_some(dx),
                wanted[1].then(|| zero_row(&x, &weight)),
            ];
        }
        let (Some((rows, width)), true, true, true) = (
            row_layout(&x),
            row_param(&weight, width_of(&x)),
            grad.shape() == x.shape(),
            is_f32(&grad),
        ) else {
            return generic::rms_norm_backward::<CubeBackend>(x, weight, eps, grad, wanted);
        };
        let [want_x, want_weight] = wanted;
        if !want_x && !want_weight {
            return [None, None];
        }
        let x = contiguous(x);
        let weight = contiguous(weight);
        let grad = contiguous(grad);
        let v = vector_size(&[&x, &weight, &grad], width);
        let (dx, dx_arg) = output_over(&grad, 2);
        let (part, part_arg) = if want_weight {
            let (t, arg) = fresh_output(&x);
            (Some(t), arg)
        } else {
            (None, placeholder(&x, v))
        };
        let (count, dim, units) = row_launch(&x.client, rows, width / v, width);
        let client = x.client.clone();
        unsafe {
            rms_norm_backward_kernel::launch_unchecked(
                &client,
                count,
                dim,
                v,
                x.into_buffer_arg(),
                weight.into_buffer_arg(),
                grad.into_buffer_arg(),
                dx_arg,
                part_arg,
                rows as u32,
                (width / v) as u32,
                eps,
                units,
                want_weight,
            );
        }
        let d_weight = part.map(|part| column_sum(&part, rows, width));
        [want_x.then_some(dx), d_weight]
    }

    /// `[dx, dgamma, dbeta]` of layer normalisation: `dx` one unit or cube per row (over the gradient's
    /// buffer when it is ours), `dgamma` and `dbeta` row sums of `grad * x^` (written by the same
    /// kernel) and of `grad`. Falls back to the composed gradient for other dtypes or shapes.
    pub fn layer_norm_backward(
        x: CubeTensor,
        gamma: CubeTensor,
        eps: f32,
        grad: CubeTensor,
        wanted: [bool; 3],
    ) -> [Option<CubeTensor>; 3] {
        if let (Some(dx), true) = (is_empty(&grad), grad.shape() == x.shape()) {
            let [want_x, want_gamma, want_beta] = wanted;
            return [
                want_x.then_some(dx),
                want_gamma.then(|| zero_row(&x, &gamma)),
                want_beta.then(|| zero_row(&x, &gamma)),
            ];
        }
        let (Some((rows, width)), true, true, true) = (
            row_layout(&x),
            row_param(&gamma, width_of(&x)),
            grad.shape() == x.shape(),
            is_f32(&grad),
        ) else {
            return generic::layer_norm_backward::<CubeBackend>(x, gamma, eps, grad, wanted);
        };
        let [want_x, want_gamma, want_beta] = wanted;
        if !want_x && !want_gamma && !want_beta {
            return [None, None, None];
        }
        let x = contiguous(x);
        let gamma = contiguous(gamma);
        let grad = contiguous(grad);
        let d_beta = want_beta.then(|| column_sum(&grad, rows, width));
        let v = vector_size(&[&x, &gamma, &grad], width);
        let (dx, dx_arg) = output_over(&grad, 2);
        let (part, part_arg) = if want_gamma {
            let (t, arg) = fresh_output(&x);
            (Some(t), arg)
        } else {
            (None, placeholder(&x, v))
        };
        let (count, dim, units) = row_launch(&x.client, rows, width / v, width);
        let client = x.client.clone();
        unsafe {
            layer_norm_backward_kernel::launch_unchecked(
                &client,
                count,
                dim,
                v,
                x.into_buffer_arg(),
                gamma.into_buffer_arg(),
                grad.into_buffer_arg(),
                dx_arg,
                part_arg,
                rows as u32,
                (width / v) as u32,
                eps,
                units,
                want_gamma,
            );
        }
        let d_gamma = part.map(|part| column_sum(&part, rows, width));
        [want_x.then_some(dx), d_gamma, d_beta]
    }

    /// `dx` of the last-dimension softmax with output `y`: `y (grad - sum(grad y))`, one unit or cube per
    /// row (over the gradient's buffer when it is ours). Falls back to the composed gradient for
    /// other dtypes or shapes.
    pub fn softmax_last_backward(y: CubeTensor, grad: CubeTensor) -> CubeTensor {
        if let (Some(dx), true) = (is_empty(&grad), grad.shape() == y.shape()) {
            return dx;
        }
        let (Some((rows, width)), true, true) =
            (row_layout(&y), grad.shape() == y.shape(), is_f32(&grad))
        else {
            return generic::softmax_last_backward::<CubeBackend>(y, grad);
        };
        let y = contiguous(y);
        let grad = contiguous(grad);
        let v = vector_size(&[&y, &grad], width);
        let (out, out_arg) = output_over(&grad, 1);
        let (count, dim, units) = row_launch(&y.client, rows, width / v, width);
        let client = y.client.clone();
        unsafe {
            softmax_backward_kernel::launch_unchecked(
                &client,
                count,
                dim,
                v,
                y.into_buffer_arg(),
                grad.into_buffer_arg(),
                out_arg,
                rows as u32,
                (width / v) as u32,
                units,
            );
        }
        out
    }
}
#[cfg(all(test, feature = "wgpu"))]
mod tests {
    use super::*;
    use burn_backend::TensorData;
    use burn_backend::ops::{BoolTensorOps, FloatTensorOps, IntTensorOps};
    use burn_backend::{FloatDType, IntDType};
    use burn_cubecl::CubeDevice;
    use burn_cubecl::cubecl::wgpu::{WgpuDevice, WgpuDeviceKind};
    use burn_cubecl::ops::into_data_sync;

    type B = CubeBackend;

    /// wgpu on the CPU (lavapipe where there is no GPU), as tests/integration/cube.rs uses.
    fn device() -> CubeDevice {
        CubeDevice::from(WgpuDevice::new(WgpuDeviceKind::Cpu))
    }

    /// Deterministic values in about [-3, 3] (a small LCG).
    fn ramp(n: usize, seed: u64) -> Vec<f32> {
        let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                ((state >> 40) as f32 / (1u64 << 24) as f32) * 6.0 - 3.0
            })
            .collect()
    }

    fn tensor(values: Vec<f32>, shape: &[usize]) -> CubeTensor {
        B::float_from_data(TensorData::new(values, shape.to_vec()), &device())
    }

    fn random(shape: &[usize], seed: u64) -> CubeTensor {
        tensor(ramp(shape.iter().product(), seed), shape)
    }

    fn values(t: CubeTensor) -> Vec<f32> {
        into_data_sync(t)
            .convert::<f32>()
            .try_to_vec::<f32>()
            .unwrap()
    }

    /// A strided view of a fresh tensor: `shape` with its first two dimensions swapped in
    /// memory (the values of `random(shape)` transposed and transposed back).
    fn strided(shape: &[usize], seed: u64) -> CubeTensor {
        let mut swapped = shape.to_vec();
        swapped.swap(0, 1);
        let t = random(&swapped, seed);
        let view = B::float_swap_dims(t, 0, 1);
        assert!(!view.is_contiguous(), "the test wants a strided view");
        view
    }

    #[track_caller]
    fn assert_close(actual: CubeTensor, expected: CubeTensor, tol: f32) {
        assert_eq!(actual.shape(), expected.shape(), "shapes differ");
        let (a, e) = (values(actual), values(expected));
        assert_eq!(a.len(), e.len());
        for (i, (a, e)) in a.iter().zip(&e).enumerate() {
            let bound = tol * e.abs().max(1.0);
            assert!(
                (a - e).abs() <= bound,
                "element {i}: {a} vs expected {e} (tolerance {bound})"
            );
        }
    }

    const TOL: f32 = 1e-5;

    /// The shapes every kernel is checked on: small, 3-d, rows longer than a cube, one long
    /// odd row, widths not a multiple of the vector size.
    const SHAPES: &[&[usize]] = &[
        &[3, 5],
        &[2, 3, 8],
        &[4, 1000],
        &[1, 4097],
        &[5, 6],
        &[7, 3],
        &[2, 2, 130],
        &[1, 1],
    ];

    #[test]
    fn add_relu_matches_composed() {
        for (k, shape) in SHAPES.iter().enumerate() {
            let (a, b) = (random(shape, k as u64), random(shape, 100 + k as u64));
            let expected = composed::add_relu::<B>(a.clone(), b.clone());
            assert_close(add_relu(a, b), expected, TOL);
        }
        // Strided operands.
        let (a, b) = (strided(&[4, 6, 3], 1), strided(&[4, 6, 3], 2));
        let expected = composed::add_relu::<B>(a.clone(), b.clone());
        assert_close(add_relu(a, b), expected, TOL);
        // Broadcasting: the composition.
        let (a, b) = (random(&[3, 5], 3), random(&[1, 5], 4));
        let expected = composed::add_relu::<B>(a.clone(), b.clone());
        assert_close(add_relu(a, b), expected, TOL);
    }

    /// Which buffer a tensor lives in.
    fn memory(t: &CubeTensor) -> String {
        format!("{:?}", t.handle.memory.descriptor().id)
    }

    /// `op` on a fresh (unshared) tensor of `values` writes over its buffer, and gives the
    /// same values as `reference` on a copy.
    #[track_caller]
    fn assert_in_place(
        values: &[f32],
        shape: &[usize],
        op: impl FnOnce(CubeTensor) -> CubeTensor,
        reference: impl FnOnce(CubeTensor) -> CubeTensor,
    ) {
        let expected = reference(tensor(values.to_vec(), shape));
        let input = tensor(values.to_vec(), shape);
        assert!(input.can_mut());
        let buffer = memory(&input);
        let out = op(input);
        assert_eq!(memory(&out), buffer, "not written in place");
        assert_close(out, expected, 1e-4);
    }

    #[test]
    fn outputs_reuse_unshared_inputs() {
        let (shape, n) = (&[5, 8][..], 40);
        let (a, b) = (ramp(n, 1), ramp(n, 2));
        let row = ramp(8, 3);
        let other = || tensor(b.clone(), shape);
        let param = || tensor(row.clone(), &[8]);
        assert_in_place(
            &a,
            shape,
            |x| add_relu(x, other()),
            |x| composed::add_relu::<B>(x, other()),
        );
        // Only the second operand unshared: written over it.
        let shared = other();
        let keep = shared.clone();
        let out = add_relu(shared, tensor(a.clone(), shape));
        assert_ne!(memory(&out), memory(&keep));
        assert_in_place(
            &a,
            shape,
            |x| add_relu(keep.clone(), x),
            |x| composed::add_relu::<B>(keep.clone(), x),
        );
        assert_in_place(
            &a,
            shape,
            |x| swiglu(x, other()),
            |x| composed::swiglu::<B>(x, other()),
        );
        assert_in_place(
            &a,
            shape,
            |x| bias_gelu(x, param()),
            |x| composed::bias_gelu::<B>(x, param()),
        );
        assert_in_place(
            &a,
            shape,
            |x| rms_norm(x, param(), 1e-5),
            |x| composed::rms_norm::<B>(x, param(), 1e-5),
        );
        assert_in_place(
            &a,
            shape,
            |x| layer_norm(x, param(), param(), 1e-5),
            |x| composed::layer_norm::<B>(x, param(), param(), 1e-5),
        );
        assert_in_place(&a, shape, softmax_last, composed::softmax_last::<B>);
        assert_in_place(
            &a,
            shape,
            |x| clamp_ste(x, -0.5, 0.5),
            |x| composed::clamp_ste::<B>(x, -0.5, 0.5),
        );
        assert_in_place(
            &a,
            shape,
            |x| dropout(x, 0.3, 5).0,
            |x| composed::dropout::<B>(x, 0.3, 5).0,
        );
    }

    #[cfg(feature = "autodiff")]
    #[test]
    fn gradients_reuse_unshared_gradients() {
        let (shape, n) = (&[5, 8][..], 40);
        let (a, b) = (ramp(n, 1), ramp(n, 2));
        let row = ramp(8, 3);
        let other = || tensor(b.clone(), shape);
        let param = || tensor(row.clone(), &[8]);
        let x = || tensor(b.clone(), shape);
        assert_in_place(
            &a,
            shape,
            |d| softmax_last_backward(x(), d),
            |d| crate::kernels::backward::generic::softmax_last_backward::<B>(x(), d),
        );
        assert_in_place(
            &a,
            shape,
            |d| {
                rms_norm_backward(x(), param(), 1e-5, d, [true, true])[0]
                    .take()
                    .unwrap()
            },
            |d| {
                crate::kernels::backward::generic::rms_norm_backward::<B>(
                    x(),
                    param(),
                    1e-5,
                    d,
                    [true, true],
                )[0]
                .take()
                .unwrap()
            },
        );
        assert_in_place(
            &a,
            shape,
            |d| {
                layer_norm_backward(x(), param(), 1e-5, d, [true; 3])[0]
                    .take()
                    .unwrap()
            },
            |d| {
                crate::kernels::backward::generic::layer_norm_backward::<B>(
                    x(),
                    param(),
                    1e-5,
                    d,
                    [true; 3],
                )[0]
                .take()
                .unwrap()
            },
        );
        assert_in_place(
            &a,
            shape,
            |d| {
                bias_gelu_backward(x(), param(), d, [true, true])[0]
                    .take()
                    .unwrap()
            },
            |d| {
                crate::kernels::backward::generic::bias_gelu_backward::<B>(
                    x(),
                    param(),
                    d,
                    [true, true],
                )[0]
                .take()
                .unwrap()
            },
        );
        assert_in_place(
            &a,
            shape,
            |d| {
                swiglu_backward(x(), other(), d, [true, true])[0]
                    .take()
                    .unwrap()
            },
            |d| {
                crate::kernels::backward::generic::swiglu_backward::<B>(
                    x(),
                    other(),
                    d,
                    [true, true],
                )[0]
                .take()
                .unwrap()
            },
        );
    }

    #[test]
    fn swiglu_matches_composed() {
        for (k, shape) in SHAPES.iter().enumerate() {
            let (g, u) = (random(shape, k as u64), random(shape, 50 + k as u64));
            let expected = composed::swiglu::<B>(g.clone(), u.clone());
            assert_close(swiglu(g, u), expected, TOL);
        }
        let (g, u) = (strided(&[5, 3], 7), random(&[5, 3], 8));
        let expected = composed::swiglu::<B>(g.clone(), u.clone());
        assert_close(swiglu(g, u), expected, TOL);
        let (g, u) = (random(&[4, 1], 9), random(&[4, 6], 10));
        let expected = composed::swiglu::<B>(g.clone(), u.clone());
        assert_close(swiglu(g, u), expected, TOL);
    }

    #[test]
    fn bias_gelu_matches_composed() {
        for (k, shape) in SHAPES.iter().enumerate() {
            let x = random(shape, k as u64);
            let bias = random(&[*shape.last().unwrap()], 70 + k as u64);
            let expected = composed::bias_gelu::<B>(x.clone(), bias.clone());
            assert_close(bias_gelu(x, bias), expected, TOL);
        }
        let (x, bias) = (strided(&[6, 4, 5], 11), random(&[5], 12));
        let expected = composed::bias_gelu::<B>(x.clone(), bias.clone());
        assert_close(bias_gelu(x, bias), expected, TOL);
        // Far into both tails (the erf approximation saturates) and near 0.
        let wide: Vec<f32> = ramp(4 * 64, 15).into_iter().map(|v| v * 15.0).collect();
        let small: Vec<f32> = ramp(64, 16).into_iter().map(|v| v * 1e-3).collect();
        let (x, bias) = (tensor(wide, &[4, 64]), tensor(small, &[64]));
        let expected = composed::bias_gelu::<B>(x.clone(), bias.clone());
        assert_close(bias_gelu(x, bias), expected, TOL);
        let (x, bias) = (
            tensor(
                ramp(64, 17).into_iter().map(|v| v * 1e-3).collect(),
                &[1, 64],
            ),
            tensor(vec![0.0; 64], &[64]),
        );
        let expected = composed::bias_gelu::<B>(x.clone(), bias.clone());
        assert_close(bias_gelu(x, bias), expected, TOL);
        // In place over an unshared `x`.
        let (xv, bv) = (ramp(24, 13), ramp(8, 14));
        let expected =
            composed::bias_gelu::<B>(tensor(xv.clone(), &[3, 8]), tensor(bv.clone(), &[8]));
        assert_close(
            bias_gelu(tensor(xv, &[3, 8]), tensor(bv, &[8])),
            expected,
            TOL,
        );
    }

    #[test]
    fn rms_norm_matches_composed() {
        for (k, shape) in SHAPES.iter().enumerate() {
            let x = random(shape, k as u64);
            let w = random(&[*shape.last().unwrap()], 30 + k as u64);
            let expected = composed::rms_norm::<B>(x.clone(), w.clone(), 1e-5);
            assert_close(rms_norm(x, w, 1e-5), expected, TOL);
        }
        let (x, w) = (strided(&[3, 4, 9], 15), random(&[9], 16));
        let expected = composed::rms_norm::<B>(x.clone(), w.clone(), 1e-6);
        assert_close(rms_norm(x, w, 1e-6), expected, TOL);
        let (xv, wv) = (ramp(3 * 1000, 17), ramp(1000, 18));
        let expected = composed::rms_norm::<B>(
            tensor(xv.clone(), &[3, 1000]),
            tensor(wv.clone(), &[1000]),
            1e-5,
        );
        assert_close(
            rms_norm(tensor(xv, &[3, 1000]), tensor(wv, &[1000]), 1e-5),
            expected,
            TOL,
        );
    }

    #[test]
    fn layer_norm_matches_composed() {
        for (k, shape) in SHAPES.iter().enumerate() {
            let width = *shape.last().unwrap();
            let x = random(shape, k as u64);
            let (g, b) = (
                random(&[width], 40 + k as u64),
                random(&[width], 60 + k as u64),
            );
            let expected = composed::layer_norm::<B>(x.clone(), g.clone(), b.clone(), 1e-5);
            // A one-element row normalises to 0: the absolute error is what is left of it.
            assert_close(layer_norm(x, g, b, 1e-5), expected, 2e-5);
        }
        let (x, g, b) = (
            strided(&[7, 2, 33], 19),
            random(&[33], 20),
            random(&[33], 21),
        );
        let expected = composed::layer_norm::<B>(x.clone(), g.clone(), b.clone(), 1e-5);
        assert_close(layer_norm(x, g, b, 1e-5), expected, 2e-5);
    }

    #[test]
    fn softmax_last_matches_composed() {
        for (k, shape) in SHAPES.iter().enumerate() {
            let x = random(shape, k as u64);
            let expected = composed::softmax_last::<B>(x.clone());
            assert_close(softmax_last(x), expected, TOL);
        }
        let x = strided(&[6, 5, 7], 22);
        let expected = composed::softmax_last::<B>(x.clone());
        assert_close(softmax_last(x), expected, TOL);
        // Large logits: the maximum is subtracted.
        let big: Vec<f32> = ramp(2 * 9, 23).into_iter().map(|v| v * 40.0).collect();
        let expected = composed::softmax_last::<B>(tensor(big.clone(), &[2, 9]));
        let out = softmax_last(tensor(big, &[2, 9]));
        assert!(values(out.clone()).iter().all(|v| v.is_finite()));
        assert_close(out, expected, TOL);
    }

    fn targets(classes: &[i64]) -> CubeTensor {
        let int_dtype = get_or_init_device_settings::<B>(&device()).int_dtype;
        let t = B::int_from_data(
            TensorData::new(classes.to_vec(), [classes.len()]),
            &device(),
        );
        if IntDType::from(t.dtype) == int_dtype {
            t
        } else {
            B::int_cast(t, int_dtype)
        }
    }

    #[test]
    fn cross_entropy_matches_composed() {
        for (rows, classes) in [(3, 5), (4, 1000), (1, 4097), (5, 6), (2, 1), (300, 7)] {
            let logits = random(&[rows, classes], (rows * classes) as u64);
            let picked: Vec<i64> = (0..rows).map(|r| ((r * 7 + 3) % classes) as i64).collect();
            let expected = composed::cross_entropy_logits::<B>(logits.clone(), targets(&picked));
            let out = cross_entropy_logits(logits, targets(&picked));
            assert_eq!(out.shape(), Shape::new([1]));
            assert_close(out, expected, TOL);
        }
        let logits = strided(&[6, 4], 24);
        let expected =
            composed::cross_entropy_logits::<B>(logits.clone(), targets(&[0, 1, 2, 3, 0, 1]));
        assert_close(
            cross_entropy_logits(logits, targets(&[0, 1, 2, 3, 0, 1])),
            expected,
            TOL,
        );
    }

    #[test]
    #[should_panic(expected = "outside 0..5")]
    fn cross_entropy_checks_targets() {
        cross_entropy_logits(random(&[2, 5], 1), targets(&[0, 5]));
    }

    /// The mask as `bool`s, from whichever bool store the device uses.
    fn mask_values(mask: CubeTensor) -> Vec<bool> {
        let int_dtype = get_or_init_device_settings::<B>(&device()).int_dtype;
        let ints = B::bool_into_int(mask, int_dtype);
        into_data_sync(ints)
            .convert::<i64>()
            .try_to_vec::<i64>()
            .unwrap()
            .into_iter()
            .map(|v| v != 0)
            .collect()
    }

    #[test]
    fn dropout_mask_is_bit_identical() {
        let sizes: &[&[usize]] = &[
            &[1],
            &[3],
            &[5],
            &[7, 3],
            &[2, 3, 11],
            &[4, 1001],
            &[1, 4097],
        ];
        for (k, shape) in sizes.iter().enumerate() {
            for (seed, p) in [
                (0u64, 0.5f32),
                (42, 0.1),
                (0xDEAD_BEEF_CAFE_F00D, 0.9),
                (u64::MAX, 0.3),
                (7 + k as u64, 0.0),
                (9, 1.0),
                (1 << 33, 0.25),
            ] {
                let n: usize = shape.iter().product();
                let xv = ramp(n, seed.wrapping_add(k as u64));
                let x = tensor(xv.clone(), shape);
                let (out, mask) = dropout(x.clone(), p, seed);
                assert_eq!(
                    mask.dtype,
                    DType::from(get_or_init_device_settings::<B>(&device()).bool_dtype)
                );
                assert_eq!(mask.shape(), Shape::from(shape.to_vec()));
                let keep = composed::dropout_keep(n, p, seed);
                assert_eq!(
                    mask_values(mask.clone()),
                    keep,
                    "seed {seed} p {p} shape {shape:?}"
                );
                // The same bytes as the composed mask.
                let (c_out, c_mask) = composed::dropout::<B>(x, p, seed);
                let (m, cm) = (into_data_sync(mask), into_data_sync(c_mask));
                assert_eq!(m.dtype(), cm.dtype());
                assert_eq!(m.as_bytes(), cm.as_bytes());
                let scale = composed::dropout_scale(p);
                let got = values(out.clone());
                for (i, ((g, x), k)) in got.iter().zip(&xv).zip(&keep).enumerate() {
                    let want = if *k { x * scale } else { 0.0 };
                    assert_eq!(*g, want, "element {i}");
                }
                assert_close(out, c_out, 0.0);
            }
        }
        // Strided input.
        let x = strided(&[5, 3], 3);
        let (out, mask) = dropout(x.clone(), 0.4, 77);
        let (c_out, c_mask) = composed::dropout::<B>(x, 0.4, 77);
        assert_eq!(mask_values(mask), mask_values(c_mask));
        assert_close(out, c_out, 0.0);
    }

    #[test]
    #[should_panic(expected = "must be a probability")]
    fn dropout_checks_p() {
        dropout(random(&[3], 1), 1.5, 0);
    }

    #[test]
    fn clamp_ste_matches_composed() {
        for (k, shape) in SHAPES.iter().enumerate() {
            let x = random(shape, k as u64);
            let expected = composed::clamp_ste::<B>(x.clone(), -1.0, 0.5);
            assert_close(clamp_ste(x, -1.0, 0.5), expected, 0.0);
        }
        let x = strided(&[3, 7], 5);
        let expected = composed::clamp_ste::<B>(x.clone(), 0.0, 0.0);
        assert_close(clamp_ste(x, 0.0, 0.0), expected, 0.0);
    }

    #[test]
    #[should_panic(expected = "must not exceed")]
    fn clamp_ste_checks_bounds() {
        clamp_ste(random(&[3], 1), 1.0, 0.0);
    }

    #[cfg(feature = "autodiff")]
    fn assert_grads<const K: usize>(
        actual: [Option<CubeTensor>; K],
        expected: [Option<CubeTensor>; K],
        tol: f32,
    ) {
        for (i, (a, e)) in actual.into_iter().zip(expected).enumerate() {
            match (a, e) {
                (Some(a), Some(e)) => assert_close(a, e, tol),
                (None, None) => {}
                (a, e) => panic!("gradient {i}: {:?} vs {:?}", a.is_some(), e.is_some()),
            }
        }
    }

    #[cfg(feature = "autodiff")]
    #[test]
    fn bias_gelu_backward_matches_composed() {
        for (k, shape) in SHAPES.iter().enumerate() {
            let width = *shape.last().unwrap();
            let (x, bias, grad) = (
                random(shape, k as u64),
                random(&[width], 3 + k as u64),
                random(shape, 9 + k as u64),
            );
            for wanted in [[true, true], [true, false]] {
                let expected = crate::kernels::backward::generic::bias_gelu_backward::<B>(
                    x.clone(),
                    bias.clone(),
                    grad.clone(),
                    wanted,
                );
                let actual = bias_gelu_backward(x.clone(), bias.clone(), grad.clone(), wanted);
                assert_grads(actual, expected, 1e-4);
            }
        }
        let (x, bias, grad) = (
            strided(&[4, 3, 6], 1),
            random(&[6], 2),
            strided(&[4, 3, 6], 3),
        );
        let expected = crate::kernels::backward::generic::bias_gelu_backward::<B>(
            x.clone(),
            bias.clone(),
            grad.clone(),
            [true, true],
        );
        assert_grads(
            bias_gelu_backward(x, bias, grad, [true, true]),
            expected,
            1e-4,
        );
    }

    #[cfg(feature = "autodiff")]
    #[test]
    fn swiglu_backward_matches_composed() {
        for (k, shape) in SHAPES.iter().enumerate() {
            let (g, u, d) = (
                random(shape, k as u64),
                random(shape, 5 + k as u64),
                random(shape, 11 + k as u64),
            );
            for wanted in [[true, true], [true, false], [false, true], [false, false]] {
                let expected = crate::kernels::backward::generic::swiglu_backward::<B>(
                    g.clone(),
                    u.clone(),
                    d.clone(),
                    wanted,
                );
                let actual = swiglu_backward(g.clone(), u.clone(), d.clone(), wanted);
                assert_grads(actual, expected, TOL);
            }
        }
        // A broadcast gradient (stride 0), as the gradient of a sum is.
        let (g, u) = (random(&[3, 4], 1), strided(&[3, 4], 2));
        let d = B::float_expand(random(&[1, 1], 3), Shape::new([3, 4]));
        let expected = crate::kernels::backward::generic::swiglu_backward::<B>(
            g.clone(),
            u.clone(),
            d.clone(),
            [true, true],
        );
        assert_grads(swiglu_backward(g, u, d, [true, true]), expected, TOL);
    }

    #[cfg(feature = "autodiff")]
    #[test]
    fn rms_norm_backward_matches_composed() {
        for (k, shape) in SHAPES.iter().enumerate() {
            let width = *shape.last().unwrap();
            let (x, w, d) = (
                random(shape, k as u64),
                random(&[width], 4 + k as u64),
                random(shape, 8 + k as u64),
            );
            for wanted in [[true, true], [true, false], [false, true]] {
                let expected = crate::kernels::backward::generic::rms_norm_backward::<B>(
                    x.clone(),
                    w.clone(),
                    1e-5,
                    d.clone(),
                    wanted,
                );
                let actual = rms_norm_backward(x.clone(), w.clone(), 1e-5, d.clone(), wanted);
                assert_grads(actual, expected, 1e-4);
            }
        }
        let (x, w) = (strided(&[5, 2, 12], 1), random(&[12], 2));
        let d = B::float_expand(random(&[1, 1, 1], 3), Shape::new([5, 2, 12]));
        let expected = crate::kernels::backward::generic::rms_norm_backward::<B>(
            x.clone(),
            w.clone(),
            1e-5,
            d.clone(),
            [true, true],
        );
        assert_grads(
            rms_norm_backward(x, w, 1e-5, d, [true, true]),
            expected,
            1e-4,
        );
    }

    #[cfg(feature = "autodiff")]
    #[test]
    fn layer_norm_backward_matches_composed() {
        for (k, shape) in SHAPES.iter().enumerate() {
            let width = *shape.last().unwrap();
            if width == 1 {
                // A one-element row has a zero variance: both sides are rounding noise.
                continue;
            }
            let (x, g, d) = (
                random(shape, k as u64),
                random(&[width], 4 + k as u64),
                random(shape, 8 + k as u64),
            );
            for wanted in [
                [true, true, true],
                [true, false, false],
                [false, true, false],
                [false, false, true],
            ] {
                let expected = crate::kernels::backward::generic::layer_norm_backward::<B>(
                    x.clone(),
                    g.clone(),
                    1e-5,
                    d.clone(),
                    wanted,
                );
                let actual = layer_norm_backward(x.clone(), g.clone(), 1e-5, d.clone(), wanted);
                assert_grads(actual, expected, 1e-4);
            }
        }
        let (x, g, d) = (
            strided(&[3, 5, 10], 1),
            random(&[10], 2),
            strided(&[3, 5, 10], 3),
        );
        let expected = crate::kernels::backward::generic::layer_norm_backward::<B>(
            x.clone(),
            g.clone(),
            1e-5,
            d.clone(),
            [true, true, true],
        );
        assert_grads(
            layer_norm_backward(x, g, 1e-5, d, [true, true, true]),
            expected,
            1e-4,
        );
    }

    #[cfg(feature = "autodiff")]
    #[test]
    fn softmax_last_backward_matches_composed() {
        for (k, shape) in SHAPES.iter().enumerate() {
            let y = composed::softmax_last::<B>(random(shape, k as u64));
            let d = random(shape, 20 + k as u64);
            let expected =
                crate::kernels::backward::generic::softmax_last_backward::<B>(y.clone(), d.clone());
            assert_close(softmax_last_backward(y, d), expected, TOL);
        }
        let y = composed::softmax_last::<B>(strided(&[4, 3, 5], 1));
        let d = strided(&[4, 3, 5], 2);
        let expected =
            crate::kernels::backward::generic::softmax_last_backward::<B>(y.clone(), d.clone());
        assert_close(softmax_last_backward(y, d), expected, TOL);
    }

    /// More rows than one dimension of a launch grid holds (65535 cubes on wgpu).
    #[test]
    fn many_rows() {
        let shape = [70_001, 3];
        let x = random(&shape, 1);
        let w = random(&[3], 2);
        let expected = composed::rms_norm::<B>(x.clone(), w.clone(), 1e-5);
        assert_close(rms_norm(x.clone(), w, 1e-5), expected, TOL);
        let expected = composed::softmax_last::<B>(x.clone());
        assert_close(softmax_last(x.clone()), expected.clone(), TOL);
        #[cfg(feature = "autodiff")]
        {
            let d = random(&shape, 3);
            let reference = crate::kernels::backward::generic::softmax_last_backward::<B>(
                expected.clone(),
                d.clone(),
            );
            assert_close(softmax_last_backward(expected, d), reference, TOL);
        }
        // Against the loss computed on the host in f64: the composition is no reference
        // here, as Burn's `float_sum_dim` / `float_mean_dim` on Cube (wgpu on lavapipe) come
        // out wrong over more than 65535 elements (the sum of 70001 ones is 65533).
        let picked: Vec<i64> = (0..shape[0]).map(|r| (r % 3) as i64).collect();
        let rows = values(x.clone());
        let total: f64 = rows
            .chunks(3)
            .zip(&picked)
            .map(|(row, &t)| {
                let max = f64::from(row.iter().copied().fold(f32::MIN, f32::max));
                let sum: f64 = row.iter().map(|&e| (f64::from(e) - max).exp()).sum();
                max + sum.ln() - f64::from(row[t as usize])
            })
            .sum();
        let loss = values(cross_entropy_logits(x, targets(&picked)))[0];
        let want = total / picked.len() as f64;
        assert!(
            (f64::from(loss) - want).abs() < 1e-5 * want.abs(),
            "{loss} vs {want}"
        );
    }

    /// The kernels read whole vectors where the runtime offers them and the sizes allow.
    #[test]
    fn vector_sizes() {
        let t = random(&[4, 1000], 1);
        let widest = t.client.io_optimized_vector_sizes(4).max().unwrap_or(1);
        eprintln!("f32 vector sizes offered: {widest} at most");
        assert_eq!(vector_size(&[&t], 1000), widest.min(8));
        assert_eq!(vector_size(&[&t], 4097), 1);
        assert!(vector_size(&[&t], 6) <= 2);
    }

    /// Another float dtype takes the composition (when the device has one).
    #[test]
    fn other_dtypes_fall_back() {
        let dev = device();
        let dtype = [FloatDType::F16, FloatDType::BF16, FloatDType::F64]
            .into_iter()
            .find(|d| <B as burn_backend::Backend>::supports_dtype(&dev, DType::from(*d)));
        let Some(dtype) = dtype else {
            eprintln!("no float dtype but f32 on this device: nothing to fall back for");
            return;
        };
        eprintln!("falling back for {dtype:?}");
        let x = B::float_cast(random(&[3, 5], 1), dtype);
        let w = B::float_cast(random(&[5], 2), dtype);
        let out = rms_norm(x.clone(), w.clone(), 1e-5);
        assert_eq!(out.dtype, DType::from(dtype));
        assert_close(
            B::float_cast(out, FloatDType::F32),
            B::float_cast(composed::rms_norm::<B>(x.clone(), w, 1e-5), FloatDType::F32),
            1e-2,
        );
        let out = softmax_last(x.clone());
        assert_eq!(out.dtype, DType::from(dtype));
        let out = add_relu(x.clone(), x);
        assert_eq!(out.dtype, DType::from(dtype));
    }

    /// Empty tensors take the composition and keep their shape.
    #[test]
    fn empty_tensors() {
        let x = tensor(vec![], &[0, 4]);
        assert_eq!(softmax_last(x.clone()).shape(), Shape::new([0, 4]));
        assert_eq!(add_relu(x.clone(), x.clone()).shape(), Shape::new([0, 4]));
        assert_eq!(clamp_ste(x.clone(), 0.0, 1.0).shape(), Shape::new([0, 4]));
        let w = tensor(vec![0.5; 4], &[4]);
        assert_eq!(
            rms_norm(x.clone(), w.clone(), 1e-5).shape(),
            Shape::new([0, 4])
        );
        assert_eq!(
            layer_norm(x.clone(), w.clone(), w.clone(), 1e-5).shape(),
            Shape::new([0, 4])
        );
        assert_eq!(bias_gelu(x.clone(), w.clone()).shape(), Shape::new([0, 4]));
        #[cfg(feature = "autodiff")]
        {
            let [dx, dw] = rms_norm_backward(x.clone(), w.clone(), 1e-5, x.clone(), [true, true]);
            assert_eq!(dx.unwrap().shape(), Shape::new([0, 4]));
            assert_eq!(values(dw.unwrap()), vec![0.0; 4]);
            let [_, dg, db] = layer_norm_backward(x.clone(), w.clone(), 1e-5, x.clone(), [true; 3]);
            assert_eq!(values(dg.unwrap()), vec![0.0; 4]);
            assert_eq!(values(db.unwrap()), vec![0.0; 4]);
            let [_, db] = bias_gelu_backward(x.clone(), w.clone(), x.clone(), [true, true]);
            assert_eq!(values(db.unwrap()), vec![0.0; 4]);
            assert_eq!(
                softmax_last_backward(x.clone(), x.clone()).shape(),
                Shape::new([0, 4])
            );
        }
        let (out, mask) = dropout(x, 0.5, 1);
        assert_eq!(
            (out.shape(), mask.shape()),
            (Shape::new([0, 4]), Shape::new([0, 4]))
        );
    }

    /// Rows on both sides of `MAX_UNIT_ROW`: one unit per row up to it and one cube per row
    /// past it (on a device without plane operations, as lavapipe), forward and backward.
    #[test]
    fn row_kernels_narrow_and_wide_rows() {
        let client = random(&[1], 0).client;
        eprintln!(
            "one unit per row up to {MAX_UNIT_ROW} elements: {}",
            unit_per_row(&client, MAX_UNIT_ROW)
        );
        assert!(!unit_per_row(&client, MAX_UNIT_ROW + 1));
        let shapes: &[&[usize]] = &[
            &[64, 256],
            &[3, MAX_UNIT_ROW],
            &[3, MAX_UNIT_ROW + 1],
            &[2, 3000],
            &[9, 2, 17],
        ];
        for (k, shape) in shapes.iter().enumerate() {
            let width = *shape.last().unwrap();
            let seed = 200 + 10 * k as u64;
            let x = random(shape, seed);
            let (w, b) = (random(&[width], seed + 1), random(&[width], seed + 2));
            assert_close(
                rms_norm(x.clone(), w.clone(), 1e-5),
                composed::rms_norm::<B>(x.clone(), w.clone(), 1e-5),
                TOL,
            );
            assert_close(
                layer_norm(x.clone(), w.clone(), b.clone(), 1e-5),
                composed::layer_norm::<B>(x.clone(), w.clone(), b.clone(), 1e-5),
                2e-5,
            );
            assert_close(
                softmax_last(x.clone()),
                composed::softmax_last::<B>(x.clone()),
                TOL,
            );
            assert_close(
                bias_gelu(x.clone(), b.clone()),
                composed::bias_gelu::<B>(x.clone(), b.clone()),
                TOL,
            );
            if shape.len() == 2 {
                let picked: Vec<i64> = (0..shape[0])
                    .map(|r| ((r * 13 + 5) % width) as i64)
                    .collect();
                assert_close(
                    cross_entropy_logits(x.clone(), targets(&picked)),
                    composed::cross_entropy_logits::<B>(x.clone(), targets(&picked)),
                    TOL,
                );
            }
            #[cfg(feature = "autodiff")]
            {
                use crate::kernels::backward::generic;
                let d = random(shape, seed + 3);
                assert_grads(
                    rms_norm_backward(x.clone(), w.clone(), 1e-5, d.clone(), [true, true]),
                    generic::rms_norm_backward::<B>(
                        x.clone(),
                        w.clone(),
                        1e-5,
                        d.clone(),
                        [true, true],
                    ),
                    1e-4,
                );
                assert_grads(
                    layer_norm_backward(x.clone(), w.clone(), 1e-5, d.clone(), [true; 3]),
                    generic::layer_norm_backward::<B>(
                        x.clone(),
                        w.clone(),
                        1e-5,
                        d.clone(),
                        [true; 3],
                    ),
                    1e-4,
                );
                let y = composed::softmax_last::<B>(x.clone());
                assert_close(
                    softmax_last_backward(y.clone(), d.clone()),
                    generic::softmax_last_backward::<B>(y, d),
                    TOL,
                );
            }
        }
    }

    /// The targets checked on the device (the device's int dtype) and on the host (another
    /// int dtype) give the same loss.
    #[test]
    fn cross_entropy_target_dtypes() {
        let picked = [4i64, 0, 2];
        let logits = random(&[3, 5], 7);
        let expected = composed::cross_entropy_logits::<B>(logits.clone(), targets(&picked));
        for dtype in [IntDType::I32, IntDType::U32, IntDType::I64] {
            if !<B as burn_backend::Backend>::supports_dtype(&device(), DType::from(dtype)) {
                continue;
            }
            let t = B::int_cast(targets(&picked), dtype);
            assert_close(
                cross_entropy_logits(logits.clone(), t),
                expected.clone(),
                TOL,
            );
        }
    }

    #[test]
    #[should_panic(expected = "target -1 of row 1 is outside 0..5")]
    fn cross_entropy_checks_negative_targets() {
        cross_entropy_logits(random(&[3, 5], 1), targets(&[0, -1, 9]));
    }

    /// A bad target in rows of one cube each (wider than `MAX_UNIT_ROW`).
    #[test]
    #[should_panic(expected = "target 1500 of row 2 is outside 0..1500")]
    fn cross_entropy_checks_targets_of_wide_rows() {
        cross_entropy_logits(random(&[3, 1500], 1), targets(&[0, 1499, 1500]));
    }

    /// The targets' count is checked before any launch.
    #[test]
    #[should_panic(expected = "2 targets for 3 rows")]
    fn cross_entropy_checks_target_count() {
        cross_entropy_logits(random(&[3, 5], 1), targets(&[0, 1]));
    }

    /// Dropout reads and writes 4-lane vectors when the element count is a multiple of 4.
    #[test]
    fn dropout_vector_path() {
        let x = random(&[4, 1001], 1);
        let bool_dtype = DType::from(get_or_init_device_settings::<B>(&device()).bool_dtype);
        let keep = empty(&x, x.shape(), bool_dtype);
        eprintln!(
            "bool dtype {bool_dtype:?}: 4-lane dropout {}",
            dropout_vectorized(&x, &keep, 4004)
        );
        assert!(!dropout_vectorized(&x, &keep, 4003));
    }

    /// Tensors large enough that each unit of an element-wise kernel loops over many vectors
    /// (`ITEMS_PER_UNIT`), vectorized and not.
    #[test]
    fn elementwise_units_loop() {
        for (k, shape) in [[300usize, 1000], [301, 999]].iter().enumerate() {
            let n = shape[0] * shape[1];
            let seed = 300 + 10 * k as u64;
            let (a, b) = (random(shape, seed), random(shape, seed + 1));
            let bias = random(&[shape[1]], seed + 2);
            assert_close(
                add_relu(a.clone(), b.clone()),
                composed::add_relu::<B>(a.clone(), b.clone()),
                TOL,
            );
            assert_close(
                swiglu(a.clone(), b.clone()),
                composed::swiglu::<B>(a.clone(), b.clone()),
                TOL,
            );
            assert_close(
                clamp_ste(a.clone(), -0.5, 1.0),
                composed::clamp_ste::<B>(a.clone(), -0.5, 1.0),
                0.0,
            );
            assert_close(
                bias_gelu(a.clone(), bias.clone()),
                composed::bias_gelu::<B>(a.clone(), bias.clone()),
                TOL,
            );
            let (out, mask) = dropout(a.clone(), 0.3, 11);
            let (c_out, c_mask) = composed::dropout::<B>(a.clone(), 0.3, 11);
            assert_eq!(mask_values(mask), composed::dropout_keep(n, 0.3, 11));
            assert_eq!(
                into_data_sync(c_mask).as_bytes(),
                into_data_sync(dropout(a.clone(), 0.3, 11).1).as_bytes()
            );
            assert_close(out, c_out, 0.0);
            #[cfg(feature = "autodiff")]
            {
                use crate::kernels::backward::generic;
                let d = random(shape, seed + 3);
                assert_grads(
                    bias_gelu_backward(a.clone(), bias.clone(), d.clone(), [true, true]),
                    generic::bias_gelu_backward::<B>(
                        a.clone(),
                        bias.clone(),
                        d.clone(),
                        [true, true],
                    ),
                    1e-4,
                );
                assert_grads(
                    swiglu_backward(a.clone(), b.clone(), d.clone(), [true, true]),
                    generic::swiglu_backward::<B>(a.clone(), b.clone(), d.clone(), [true, true]),
                    TOL,
                );
            }
        }
    }
}
