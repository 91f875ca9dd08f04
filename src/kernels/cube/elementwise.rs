//! Element-wise kernels.

use super::*;

#[cube(launch_unchecked)]
pub(super) fn add_relu_kernel<F: Float, N: Size>(
    lhs: &[Vector<F, N>],
    rhs: &[Vector<F, N>],
    out: &mut [Vector<F, N>],
    len: u32,
    #[define(F)] _float: ElemType,
) {
    let step = grid_units();
    let mut i = ABSOLUTE_POS;
    while i < len as usize {
        let zero = Vector::new(f32::new(0.0));
        out[i] = down((up(lhs[i]) + up(rhs[i])).max(zero));
        i += step;
    }
}

/// `gelu(x + bias)` over `rows` rows of `width` vectors: a unit per column (`x` of the launch
/// grid) reads its bias once and strides over rows (`y`), no division per element.
#[cube(launch_unchecked)]
pub(super) fn bias_gelu_kernel<F: Float, N: Size>(
    x: &[Vector<F, N>],
    bias: &[Vector<F, N>],
    out: &mut [Vector<F, N>],
    rows: u32,
    width: u32,
    #[define(F)] _float: ElemType,
) {
    let col = ABSOLUTE_POS_X as usize;
    let width = width as usize;
    if col >= width {
        terminate!();
    }
    let b = up(bias[col]);
    let step = (CUBE_COUNT_Y * CUBE_DIM_Y) as usize;
    let mut row = ABSOLUTE_POS_Y as usize;
    while row < rows as usize {
        let i = row * width + col;
        out[i] = down(gelu(up(x[i]) + b));
        row += step;
    }
}

#[cube(launch_unchecked)]
pub(super) fn swiglu_kernel<F: Float, N: Size>(
    gate: &[Vector<F, N>],
    value: &[Vector<F, N>],
    out: &mut [Vector<F, N>],
    len: u32,
    #[define(F)] _float: ElemType,
) {
    let step = grid_units();
    let mut i = ABSOLUTE_POS;
    while i < len as usize {
        let g = up(gate[i]);
        out[i] = down(g * sigmoid(g) * up(value[i]));
        i += step;
    }
}

#[cube(launch_unchecked)]
pub(super) fn clamp_kernel<F: Float, N: Size>(
    x: &[Vector<F, N>],
    out: &mut [Vector<F, N>],
    len: u32,
    lo: f32,
    hi: f32,
    #[define(F)] _float: ElemType,
) {
    let step = grid_units();
    let mut i = ABSOLUTE_POS;
    while i < len as usize {
        out[i] = down(clamp_nan(up(x[i]), Vector::new(lo), Vector::new(hi)));
        i += step;
    }
}

/// `(hi, lo)` of the 64-bit product of two `u32`, from 16-bit halves (no 64-bit integers).
#[cube]
pub(super) fn mul_wide(a: u32, b: u32) -> (u32, u32) {
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
pub(super) fn mul64(ah: u32, al: u32, bh: u32, bl: u32) -> (u32, u32) {
    let (ph, pl) = mul_wide(al, bl);
    (ph + al * bh + ah * bl, pl)
}

/// `composed::dropout_hash(seed, word)` (the splitmix64 finaliser) on `u32` pairs.
#[cube]
pub(super) fn splitmix(seed_hi: u32, seed_lo: u32, word: u32) -> (u32, u32) {
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
pub(super) fn dropout_element<F: Float, B: Int>(
    x: &[F],
    out: &mut [F],
    keep: &mut [B],
    idx: usize,
    draw: u32,
    threshold: u32,
    scale: f32,
) {
    let v = f32::cast_from(x[idx]);
    if draw >= threshold {
        out[idx] = F::cast_from(v * f32::new(1.0) * scale);
        keep[idx] = B::new(1);
    } else {
        out[idx] = F::cast_from(v * f32::new(0.0) * scale);
        keep[idx] = B::new(0);
    }
}

/// One unit per four elements (one hash): see `composed::dropout_keep_into`.
#[cube(launch_unchecked)]
pub(super) fn dropout_kernel<F: Float, B: Int>(
    x: &[F],
    out: &mut [F],
    keep: &mut [B],
    len: u32,
    seed_hi: u32,
    seed_lo: u32,
    threshold: u32,
    scale: f32,
    #[define(F)] _float: ElemType,
    #[define(B)] _bool_dtype: ElemType,
) {
    let word = ABSOLUTE_POS;
    let len = len as usize;
    let first = word * 4;
    if first >= len {
        terminate!();
    }
    let (hi, lo) = splitmix(seed_hi, seed_lo, word as u32);
    dropout_element::<F, B>(x, out, keep, first, lo & 0xFFFFu32, threshold, scale);
    if first + 1 < len {
        dropout_element::<F, B>(x, out, keep, first + 1, lo >> 16u32, threshold, scale);
    }
    if first + 2 < len {
        dropout_element::<F, B>(x, out, keep, first + 2, hi & 0xFFFFu32, threshold, scale);
    }
    if first + 3 < len {
        dropout_element::<F, B>(x, out, keep, first + 3, hi >> 16u32, threshold, scale);
    }
}

/// Element `x` of dropout and its keep flag: kept when its 16-bit `draw` is at least
/// `threshold` (`x * 1 * scale`, else `x * 0 * scale`, as the composition).
#[cube]
pub(super) fn dropout_lane<B: Int>(x: f32, draw: u32, threshold: u32, scale: f32) -> (f32, B) {
    let kept = draw >= threshold;
    let factor = select(kept, f32::new(1.0), f32::new(0.0));
    (x * factor * scale, select(kept, B::new(1), B::new(0)))
}

/// One unit per four elements (one hash), read and written as 4-lane vectors (`N` is 4): the
/// elements of one hash are one vector of `x`, of the output and of the mask.
#[cube(launch_unchecked)]
pub(super) fn dropout_vector_kernel<F: Float, N: Size, B: Int>(
    x: &[Vector<F, N>],
    out: &mut [Vector<F, N>],
    keep: &mut [Vector<B, N>],
    words: u32,
    seed_hi: u32,
    seed_lo: u32,
    threshold: u32,
    scale: f32,
    #[define(F)] _float: ElemType,
    #[define(B)] _bool_dtype: ElemType,
) {
    let step = grid_units();
    let mut word = ABSOLUTE_POS;
    while word < words as usize {
        let (hi, lo) = splitmix(seed_hi, seed_lo, word as u32);
        let v = up(x[word]);
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
        out[word] = down(values);
        keep[word] = flags;
        word += step;
    }
}
