//! The gradient kernels. Each falls back to `backward::generic`, the default bodies of
//! `BackwardKernels`.

use super::*;
use crate::kernels::backward::generic;

/// A fresh tensor of `like`'s shape in `dtype`, and its kernel argument.
pub(super) fn fresh_output(like: &CubeTensor, dtype: DType) -> (CubeTensor, BufferArg) {
    let out = empty(like, like.shape(), dtype);
    let arg = out.clone().into_buffer_arg();
    (out, arg)
}

/// A one-vector buffer (`vector` elements of `dtype`: wgpu checks a binding holds one) bound
/// where a kernel wants an output it will not write (a gradient that is not wanted).
pub(super) fn placeholder(like: &CubeTensor, vector: usize, dtype: DType) -> BufferArg {
    empty(like, Shape::new([vector]), dtype).into_buffer_arg()
}

/// The gradient of a per-feature parameter when there are no rows: zeros.
pub(super) fn zero_row(x: &CubeTensor, param: &CubeTensor) -> CubeTensor {
    burn_cubecl::ops::numeric::zeros(x.device.clone(), param.shape(), param.dtype)
}

/// Sums `t` (contiguous, `rows` rows of `width`, any kernel float) over its rows, in `f32`,
/// into a fresh `[width]` tensor of `dtype`: the gradient of a per-feature parameter.
pub(super) fn column_sum(t: &CubeTensor, rows: usize, width: usize, dtype: DType) -> CubeTensor {
    let out = empty(t, Shape::new([width]), dtype);
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
            float_type(t),
            dtype_to_storage_type(dtype),
        );
    }
    out
}

/// The derivative of [`gelu`]: `cdf(z) + z pdf(z)`.
#[cube]
pub(super) fn gelu_derivative<N: Size>(z: Vector<f32, N>) -> Vector<f32, N> {
    let half = Vector::new(f32::new(0.5));
    let one = Vector::new(f32::new(1.0));
    let inv_sqrt2 = Vector::new(f32::new(core::f64::consts::FRAC_1_SQRT_2));
    let inv_sqrt2pi = Vector::new(f32::new(0.398_942_3));
    let cdf = half * (one + Vector::erf(z * inv_sqrt2));
    let pdf = inv_sqrt2pi * Vector::exp(-half * z * z);
    cdf + z * pdf
}

#[cube(launch_unchecked)]
pub(super) fn bias_gelu_backward_kernel<F: Float, N: Size>(
    x: &[Vector<F, N>],
    bias: &[Vector<F, N>],
    grad: &[Vector<F, N>],
    out: &mut [Vector<F, N>],
    len: u32,
    width: u32,
    #[define(F)] _float: ElemType,
) {
    let step = grid_units();
    let mut i = ABSOLUTE_POS;
    while i < len as usize {
        out[i] = down(up(grad[i]) * gelu_derivative(up(x[i]) + up(bias[i % width as usize])));
        i += step;
    }
}

#[cube(launch_unchecked)]
pub(super) fn swiglu_backward_kernel<F: Float, N: Size>(
    gate: &[Vector<F, N>],
    value: &[Vector<F, N>],
    grad: &[Vector<F, N>],
    d_gate: &mut [Vector<F, N>],
    d_value: &mut [Vector<F, N>],
    len: u32,
    #[comptime] want_gate: bool,
    #[comptime] want_value: bool,
    #[define(F)] _float: ElemType,
) {
    let step = grid_units();
    let mut i = ABSOLUTE_POS;
    while i < len as usize {
        let g = up(gate[i]);
        let d = up(grad[i]);
        let s = sigmoid(g);
        let silu = g * s;
        if want_value {
            d_value[i] = down(d * silu);
        }
        if want_gate {
            let one = Vector::new(f32::new(1.0));
            d_gate[i] = down(d * up(value[i]) * (s + silu * (one - s)));
        }
        i += step;
    }
}

/// Sums `src` (`rows` rows of `width`) over its rows in `f32`: one unit per column.
#[cube(launch_unchecked)]
pub(super) fn column_sum_kernel<S: Float, D: Float>(
    src: &[S],
    out: &mut [D],
    rows: u32,
    width: u32,
    #[define(S)] _source: ElemType,
    #[define(D)] _destination: ElemType,
) {
    let col = ABSOLUTE_POS;
    let width = width as usize;
    if col >= width {
        terminate!();
    }
    let mut sum = f32::new(0.0);
    for r in 0..rows as usize {
        sum += f32::cast_from(src[r * width + col]);
    }
    out[col] = D::cast_from(sum);
}

/// `dx = r (g w - x^ mean(g w x^))` with `r = 1 / sqrt(mean(x^2) + eps)` and `x^ = x r`; and,
/// when `want_part`, `part = g x^` in `f32` (summed over rows afterwards into `dweight`).
#[cube(launch_unchecked)]
pub(super) fn rms_norm_backward_kernel<F: Float, N: Size>(
    x: &[Vector<F, N>],
    weight: &[Vector<F, N>],
    grad: &[Vector<F, N>],
    dx: &mut [Vector<F, N>],
    part: &mut [Vector<f32, N>],
    rows: u32,
    width: u32,
    eps: f32,
    #[comptime] units: usize,
    #[comptime] want_part: bool,
    #[define(F)] _float: ElemType,
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
        let v = up(x[base + i]);
        squares += v * v;
        dots += up(grad[base + i]) * up(weight[i]) * v;
        i += units;
    }
    let mean_square = cube_sum(lanes_sum(squares), units) / n;
    let dot = cube_sum(lanes_sum(dots), units);
    let r = f32::new(1.0) / (mean_square + eps).sqrt();
    let inverse = Vector::new(r);
    let projection = Vector::new(r * dot / n);
    let mut i = unit;
    while i < width {
        let v = up(x[base + i]);
        let g = up(grad[base + i]);
        let normalized = v * inverse;
        if want_part {
            part[base + i] = g * normalized;
        }
        dx[base + i] = down(inverse * (g * up(weight[i]) - normalized * projection));
        i += units;
    }
}

/// `dx = r (g gamma - mean(g gamma) - x^ mean(g gamma x^))` with `r = 1 / sqrt(var + eps)` and
/// `x^ = (x - mean) r`; and, when `want_part`, `part = g x^` in `f32` (summed into `dgamma`).
#[cube(launch_unchecked)]
pub(super) fn layer_norm_backward_kernel<F: Float, N: Size>(
    x: &[Vector<F, N>],
    gamma: &[Vector<F, N>],
    grad: &[Vector<F, N>],
    dx: &mut [Vector<F, N>],
    part: &mut [Vector<f32, N>],
    rows: u32,
    width: u32,
    eps: f32,
    #[comptime] units: usize,
    #[comptime] want_part: bool,
    #[define(F)] _float: ElemType,
) {
    let row = row_index(units);
    if row >= rows as usize {
        terminate!();
    }
    let width = width as usize;
    let base = row * width;
    let unit = unit_index(units);
    let n = f32::cast_from(width * N::value());
    let (mean, inverse) = row_standardizer::<F, N>(x, base, width, unit, eps, units);
    let mut scaled = Vector::new(f32::new(0.0));
    let mut projected = Vector::new(f32::new(0.0));
    let mut i = unit;
    while i < width {
        let g = up(grad[base + i]) * up(gamma[i]);
        scaled += g;
        projected += g * (up(x[base + i]) - mean) * inverse;
        i += units;
    }
    let mean_g = Vector::new(cube_sum(lanes_sum(scaled), units) / n);
    let projection = Vector::new(cube_sum(lanes_sum(projected), units) / n);
    let mut i = unit;
    while i < width {
        let d = up(grad[base + i]);
        let normalized = (up(x[base + i]) - mean) * inverse;
        if want_part {
            part[base + i] = d * normalized;
        }
        dx[base + i] = down(inverse * (d * up(gamma[i]) - mean_g - normalized * projection));
        i += units;
    }
}

/// `dx = y (grad - sum(grad y))` over each row.
#[cube(launch_unchecked)]
pub(super) fn softmax_backward_kernel<F: Float, N: Size>(
    y: &[Vector<F, N>],
    grad: &[Vector<F, N>],
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
    let mut acc = Vector::new(f32::new(0.0));
    let mut i = unit;
    while i < width {
        acc += up(y[base + i]) * up(grad[base + i]);
        i += units;
    }
    let dot = Vector::new(cube_sum(lanes_sum(acc), units));
    let mut i = unit;
    while i < width {
        out[base + i] = down(up(y[base + i]) * (up(grad[base + i]) - dot));
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
        row_param(&bias, &x),
        grad.shape() == x.shape(),
        same_float(&grad, &x),
    ) else {
        return generic::bias_gelu_backward::<CubeBackend>(x, bias, grad, wanted);
    };
    let dtype = x.dtype;
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
            dtype_to_storage_type(dtype),
        );
    }
    // (From `dx` as stored: in f16 or bf16 each term was rounded once, the sum is f32.)
    let d_bias = wanted[1].then(|| column_sum(&dx, rows, width, dtype));
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
    if let (Some(_), true, true) = (is_empty(&grad), up.shape() == shape, grad.shape() == shape) {
        let [want_gate, want_up] = wanted;
        return [
            want_gate.then(|| empty(&grad, shape.clone(), grad.dtype)),
            want_up.then(|| empty(&grad, shape.clone(), grad.dtype)),
        ];
    }
    if !is_kernel_float(&gate)
        || !same_float(&up, &gate)
        || !same_float(&grad, &gate)
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
    let dtype = grad.dtype;
    let (d_gate, gate_arg) = if want_gate {
        let (t, arg) = output_over(&grad, 2);
        (Some(t), arg)
    } else {
        (None, placeholder(&grad, v, dtype))
    };
    let (d_up, up_arg) = if want_up {
        let (t, arg) = fresh_output(&grad, dtype);
        (Some(t), arg)
    } else {
        (None, placeholder(&grad, v, dtype))
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
            dtype_to_storage_type(dtype),
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
        row_param(&weight, &x),
        grad.shape() == x.shape(),
        same_float(&grad, &x),
    ) else {
        return generic::rms_norm_backward::<CubeBackend>(x, weight, eps, grad, wanted);
    };
    let dtype = x.dtype;
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
        let (t, arg) = fresh_output(&x, DType::F32);
        (Some(t), arg)
    } else {
        (None, placeholder(&x, v, DType::F32))
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
            dtype_to_storage_type(dtype),
        );
    }
    let d_weight = part.map(|part| column_sum(&part, rows, width, dtype));
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
        row_param(&gamma, &x),
        grad.shape() == x.shape(),
        same_float(&grad, &x),
    ) else {
        return generic::layer_norm_backward::<CubeBackend>(x, gamma, eps, grad, wanted);
    };
    let dtype = x.dtype;
    let [want_x, want_gamma, want_beta] = wanted;
    if !want_x && !want_gamma && !want_beta {
        return [None, None, None];
    }
    let x = contiguous(x);
    let gamma = contiguous(gamma);
    let grad = contiguous(grad);
    let d_beta = want_beta.then(|| column_sum(&grad, rows, width, dtype));
    let v = vector_size(&[&x, &gamma, &grad], width);
    let (dx, dx_arg) = output_over(&grad, 2);
    let (part, part_arg) = if want_gamma {
        let (t, arg) = fresh_output(&x, DType::F32);
        (Some(t), arg)
    } else {
        (None, placeholder(&x, v, DType::F32))
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
            dtype_to_storage_type(dtype),
        );
    }
    let d_gamma = part.map(|part| column_sum(&part, rows, width, dtype));
    [want_x.then_some(dx), d_gamma, d_beta]
}

/// `dx` of the last-dimension softmax with output `y`: `y (grad - sum(grad y))`, one unit or cube per
/// row (over the gradient's buffer when it is ours). Falls back to the composed gradient for
/// other dtypes or shapes.
pub fn softmax_last_backward(y: CubeTensor, grad: CubeTensor) -> CubeTensor {
    if let (Some(dx), true) = (is_empty(&grad), grad.shape() == y.shape()) {
        return dx;
    }
    let (Some((rows, width)), true, true) = (
        row_layout(&y),
        grad.shape() == y.shape(),
        same_float(&grad, &y),
    ) else {
        return generic::softmax_last_backward::<CubeBackend>(y, grad);
    };
    let y = contiguous(y);
    let grad = contiguous(grad);
    let v = vector_size(&[&y, &grad], width);
    let (out, out_arg) = output_over(&grad, 1);
    let (count, dim, units) = row_launch(&y.client, rows, width / v, width);
    let client = y.client.clone();
    let float = float_type(&y);
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
            float,
        );
    }
    out
}
