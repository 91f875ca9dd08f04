//! Host-side helpers: dtype checks, contiguous inputs, outputs over an input's buffer, launch
//! sizes and layouts.

use super::*;

/// Whether the kernels take `t`'s dtype: `f32`, `f16` or `bf16` storage. They compute in `f32`
/// whatever the storage (every load converted up, every store rounded once), and accumulate
/// reductions in `f32`.
pub(super) fn is_kernel_float(t: &CubeTensor) -> bool {
    matches!(t.dtype, DType::F32 | DType::F16 | DType::BF16)
}

/// Whether `t` is a kernel float of `like`'s dtype (the kernels take one float dtype per
/// launch; mixed dtypes take the composition, which decides what they mean).
pub(super) fn same_float(t: &CubeTensor, like: &CubeTensor) -> bool {
    is_kernel_float(t) && t.dtype == like.dtype
}

/// `t`'s dtype as the kernels' `#[define(F)]` argument.
pub(super) fn float_type(t: &CubeTensor) -> ElemType {
    dtype_to_storage_type(t.dtype)
}

/// The size of the last dimension (0 for a scalar).
pub(super) fn width_of(t: &CubeTensor) -> usize {
    let shape = t.shape();
    shape
        .num_dims()
        .checked_sub(1)
        .map_or(0, |last| shape[last])
}

/// The widest vector the runtime offers for the first tensor's dtype that divides `len` and
/// keeps every tensor's buffer offset aligned to it.
pub(super) fn vector_size(tensors: &[&CubeTensor], len: usize) -> usize {
    let client = &tensors[0].client;
    let size = tensors[0].dtype.size();
    client
        .io_optimized_vector_sizes(size)
        .filter(|&v| {
            v > 0
                && len.is_multiple_of(v)
                && tensors.iter().all(|t| {
                    let offset = t.handle.offset_start.unwrap_or(0);
                    offset.is_multiple_of((v * t.dtype.size()) as u64)
                })
        })
        .max()
        .unwrap_or(1)
}

/// A fresh contiguous tensor of `shape` and `dtype` on `like`'s device.
pub(super) fn empty(like: &CubeTensor, shape: Shape, dtype: DType) -> CubeTensor {
    empty_device_contiguous_dtype(like.client.clone(), like.device.clone(), shape, dtype)
}

/// The output tensor and its kernel argument: over `input` (the kernel's argument number
/// `position`) when its buffer is ours, else a fresh buffer of the same shape and dtype.
pub(super) fn output_over(input: &CubeTensor, position: usize) -> (CubeTensor, BufferArg) {
    let len = input.shape().num_elements();
    if input.can_mut() && input.is_contiguous() {
        (input.clone(), BufferArg::alias(position, len))
    } else {
        let out = empty(input, input.shape(), input.dtype);
        let arg = out.clone().into_buffer_arg();
        (out, arg)
    }
}

/// The result of an op on an empty tensor: an empty tensor of its shape and dtype. Burn's own
/// kernels do not all take empty tensors on Cube, so the compositions are not used for them.
pub(super) fn is_empty(x: &CubeTensor) -> Option<CubeTensor> {
    let shape = x.shape();
    (shape.num_elements() == 0).then(|| empty(x, shape, x.dtype))
}

/// Cube count and dimension of a launch with one unit per work item (of `units`).
pub(super) fn unit_launch(client: &cubecl::client::Client, units: usize) -> (CubeCount, CubeDim) {
    let dim = CubeDim::new(client, units);
    (calculate_cube_count_elemwise(client, units, dim), dim)
}

/// Work items each unit of an element-wise launch aims to take (in a grid-stride loop).
pub(super) const ITEMS_PER_UNIT: usize = 16;

/// The fewest cubes of an element-wise launch while there are work items for them.
pub(super) const MIN_CUBES: usize = 8;

/// Cube count and dimension of an element-wise launch over `items` work items, each unit
/// looping over about [`ITEMS_PER_UNIT`] of them (see [`grid_units`]) while that leaves at
/// least [`MIN_CUBES`] cubes. Fewer, longer-lived units: on lavapipe the cost of a unit is
/// far from free, and a 1M-element kernel ran 1.5x faster for it; GPUs keep thousands of them.
pub(super) fn elementwise_launch(
    client: &cubecl::client::Client,
    items: usize,
) -> (CubeCount, CubeDim) {
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
pub(super) const MAX_UNIT_ROW: usize = 1024;

/// Units per cube when every unit works on a row of its own.
pub(super) const ROWS_PER_CUBE: u32 = 64;

/// Whether a row-wise kernel runs one unit per row (`units == 1`: a unit loops over its whole
/// row, no shared memory, no barrier) rather than one cube per row. Chosen for rows of at most
/// [`MAX_UNIT_ROW`] elements on devices without plane operations: wgpu reports none on a CPU
/// adapter (lavapipe), where a workgroup barrier makes the invocations of a workgroup run as
/// coroutines that switch at every barrier, the cost that dominated the tree reduction there.
/// Devices with plane operations (real GPUs) keep one cube per row and coalesced reads.
pub(super) fn unit_per_row(client: &cubecl::client::Client, width: usize) -> bool {
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
pub(super) fn row_launch(
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
pub(super) fn unit_cap(client: &cubecl::client::Client) -> usize {
    let hardware = &client.properties().hardware;
    (hardware.max_units_per_cube.min(hardware.max_cube_dim.0) as usize).clamp(1, MAX_ROW_UNITS)
}

/// [`row_launch`] with one cube per row.
pub(super) fn cube_per_row_launch(
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

pub(super) fn to_u32(n: usize) -> Option<u32> {
    u32::try_from(n).ok()
}

/// `t` laid out row-major and contiguous (a copy only when it is not already).
pub(super) fn contiguous(t: CubeTensor) -> CubeTensor {
    into_contiguous(t)
}

/// A per-feature parameter (`[features]`, or any shape of `width` elements) usable by the row
/// kernels over `x`: `x`'s dtype with `width` elements (made contiguous by the caller).
pub(super) fn row_param(param: &CubeTensor, x: &CubeTensor) -> bool {
    same_float(param, x) && param.shape().num_elements() == width_of(x)
}

/// What every row-wise kernel needs of `x`: a kernel float, rank >= 1, non-empty, row count
/// and width that fit `u32`.
pub(super) fn row_layout(x: &CubeTensor) -> Option<(usize, usize)> {
    let width = width_of(x);
    let numel = x.shape().num_elements();
    if !is_kernel_float(x) || x.shape().num_dims() == 0 || width == 0 || numel == 0 {
        return None;
    }
    let rows = numel / width;
    to_u32(numel)?;
    Some((rows, width))
}
