//! The forward ops on `CubeBackend`: each checks its inputs, launches its kernel or falls back
//! to the composition.

use super::*;

/// An element-wise binary kernel over two tensors of one kernel float dtype and one shape, in place over whichever
/// buffer is ours (an empty result for empty operands); the inputs given back for other
/// dtypes or broadcasting.
pub(super) fn zip_launch(
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
    if !is_kernel_float(&lhs) || !same_float(&rhs, &lhs) || rhs.shape() != shape {
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
/// Falls back to [`composed::add_relu`] for dtypes other than f32, f16 and bf16 or broadcasting shapes.
pub fn add_relu(lhs: CubeTensor, rhs: CubeTensor) -> CubeTensor {
    zip_launch(lhs, rhs, |t, v, (count, dim), a, b, out, len| unsafe {
        add_relu_kernel::launch_unchecked(&t.client, count, dim, v, a, b, out, len, float_type(t));
    })
    .unwrap_or_else(|inputs| composed::add_relu::<CubeBackend>(inputs.0, inputs.1))
}

/// `silu(gate) * up` in one element-wise kernel (strided operands are copied contiguous
/// first). Falls back to [`composed::swiglu`] for dtypes other than f32, f16 and bf16 or broadcasting shapes.
pub fn swiglu(gate: CubeTensor, up: CubeTensor) -> CubeTensor {
    zip_launch(gate, up, |t, v, (count, dim), a, b, out, len| unsafe {
        swiglu_kernel::launch_unchecked(&t.client, count, dim, v, a, b, out, len, float_type(t));
    })
    .unwrap_or_else(|inputs| composed::swiglu::<CubeBackend>(inputs.0, inputs.1))
}

/// `gelu(x + bias)` (erf GELU) in one element-wise kernel, `bias` of `x`'s last-dimension size.
/// Falls back to [`composed::bias_gelu`] for dtypes other than f32, f16 and bf16 or a bias of another size.
pub fn bias_gelu(x: CubeTensor, bias: CubeTensor) -> CubeTensor {
    if let Some(out) = is_empty(&x) {
        return out;
    }
    let (Some((rows, width)), true) = (row_layout(&x), row_param(&bias, &x)) else {
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
    let float = float_type(&x);
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
            float,
        );
    }
    out
}

/// Rows each unit of a [`column_launch`] aims to take.
pub(super) const COLUMN_ROWS: usize = 16;

/// The fewest cubes (in `y`) of a [`column_launch`] while there are rows for them.
pub(super) const MIN_COLUMN_CUBES: usize = 8;

/// Cube count and dimension of a launch with a unit per column (`x`) of `vectors` and rows
/// (`y`) striding over `rows`: 256 units a cube, the grid capped in `y` (the units loop).
pub(super) fn column_launch(
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
    let (Some((rows, width)), true) = (row_layout(&x), row_param(&weight, &x)) else {
        return composed::rms_norm::<CubeBackend>(x, weight, eps);
    };
    let x = contiguous(x);
    let weight = contiguous(weight);
    let v = vector_size(&[&x, &weight], width);
    let (out, out_arg) = output_over(&x, 0);
    let (count, dim, units) = row_launch(&x.client, rows, width / v, width);
    let client = x.client.clone();
    let float = float_type(&x);
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
            float,
        );
    }
    out
}

/// `(x - mean) / sqrt(var + eps) * gamma + beta` over the last dimension, one unit or cube per
/// row.
/// Falls back to [`composed::layer_norm`] for dtypes other than f32, f16 and bf16 or parameters of another size.
pub fn layer_norm(x: CubeTensor, gamma: CubeTensor, beta: CubeTensor, eps: f32) -> CubeTensor {
    if let Some(out) = is_empty(&x) {
        return out;
    }
    let (Some((rows, width)), true, true) =
        (row_layout(&x), row_param(&gamma, &x), row_param(&beta, &x))
    else {
        return composed::layer_norm::<CubeBackend>(x, gamma, beta, eps);
    };
    let x = contiguous(x);
    let gamma = contiguous(gamma);
    let beta = contiguous(beta);
    let v = vector_size(&[&x, &gamma, &beta], width);
    let (out, out_arg) = output_over(&x, 0);
    let (count, dim, units) = row_launch(&x.client, rows, width / v, width);
    let client = x.client.clone();
    let float = float_type(&x);
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
            float,
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
    let float = float_type(&x);
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
            float,
        );
    }
    out
}

/// The mean over rows of `-log_softmax(logits)[target]`, shape `[1]`: one unit or cube per row
/// for the row losses, then one cube for their mean. The targets (`i32` or `u32`) are checked
/// in the row kernel, which flags a row whose target is outside `0..classes`; the flag count is
/// read back after the launches (the one wait of the call, on the computation itself), and only
/// when a row is flagged are the targets read on the host by `composed::target_classes` for
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
    let float = float_type(&logits);
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
            float,
            int_dtype,
        );
    }
    let out = empty(&logits, Shape::new([1]), logits.dtype);
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
            float,
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
    if !is_kernel_float(&x) || to_u32(numel).is_none() {
        return composed::dropout::<CubeBackend>(x, p, seed);
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let threshold = (f64::from(p) * 65536.0).ceil() as u32;
    let x = contiguous(x);
    let (out, out_arg) = output_over(&x, 0);
    let keep = empty(&x, x.shape(), bool_dtype);
    let words = numel.div_ceil(4);
    let client = x.client.clone();
    let float = float_type(&x);
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
                float,
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
            float,
            dtype_to_storage_type(bool_dtype),
        );
    }
    (out, keep)
}

/// Whether dropout over `x` (`numel` elements) into the mask `keep` reads and writes 4-lane
/// vectors: a whole number of hashes and 4-lane vectors offered for both dtypes.
pub(super) fn dropout_vectorized(x: &CubeTensor, keep: &CubeTensor, numel: usize) -> bool {
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
    if !is_kernel_float(&x) || numel == 0 || to_u32(numel).is_none() {
        return composed::clamp_ste::<CubeBackend>(x, lo, hi);
    }
    let x = contiguous(x);
    let v = vector_size(&[&x], numel);
    let units = numel / v;
    let (out, out_arg) = output_over(&x, 0);
    let (count, dim) = elementwise_launch(&x.client, units);
    let client = x.client.clone();
    let float = float_type(&x);
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
            float,
        );
    }
    out
}
