//! `exp`, `ln`, `sigmoid`, `tanh` and `erf` on `f32`, written so that a loop calling them
//! vectorises.
//!
//! libm's `expf`, `logf` and `erff` are calls: a loop over a row that calls them runs one
//! element at a time. These functions are straight-line code (a polynomial, integer operations
//! on the bits, selects for the edge cases; no branch, no call, no fused multiply-add), always
//! inlined, so a loop over a slice compiles to SIMD instructions of the instruction set it is
//! compiled for (four SSE2 lanes on x86-64's baseline, eight with AVX2 and sixteen with
//! AVX-512 through [`vectorized`](super::vectorized) and [`simd_fn!`](crate::simd_fn), NEON on
//! aarch64). Since no operation is fused, a vectorised loop gives the same bits as a scalar
//! call, on every target.
//!
//! Accuracy, measured against an `f64` reference over every `f32` input class (the tests sample
//! 10^7 points spread over the whole range, plus the edges):
//!
//! | function | error | edges |
//! |---|---|---|
//! | [`exp`] | below 1.5 ulp for normal results (1.27 the worst measured); results below `f32::MIN_POSITIVE` within one unit of the smallest subnormal | `exp(-inf) = 0`, `exp(inf) = inf`, overflow to `inf` above 88.72284, NaN stays NaN |
//! | [`ln`] | below 1 ulp, subnormal inputs included (0.76 the worst measured) | `ln(0) = -inf`, `ln(x < 0) = NaN`, `ln(inf) = inf`, NaN stays NaN |
//! | [`sigmoid`] | at most 4 ulp, or 1e-7 absolute where the result is below 2^-24 | `sigmoid(-inf) = 0`, `sigmoid(inf) = 1` |
//! | [`tanh`] | at most 4 ulp, or 1e-7 absolute for `|x| < 2^-4` | `tanh(±inf) = ±1` |
//! | [`erf`] | below 1.5 ulp, subnormal inputs included (1.29 the worst measured) | `erf(±0) = ±0`, `erf(±inf) = ±1`, exactly `±1` from `|x| >= 3.92`, NaN stays NaN |
//!
//! ```
//! use burn_route_runtime::flex::math;
//!
//! let mut row = vec![0.0_f32, 1.0, -2.0];
//! row.iter_mut().for_each(|v| *v = math::exp(*v));
//! assert!((row[1] - std::f32::consts::E).abs() <= f32::EPSILON * 3.0);
//! ```

/// `1.5 * 2^23`: adding it rounds an `f32` of magnitude below `2^22` to an integer, which its
/// low mantissa bits then hold (no `round` call, which SSE2 lacks).
const ROUND: f32 = 12_582_912.0;
/// `log2(e)`.
const LOG2_E: f32 = std::f32::consts::LOG2_E;
/// `ln(2)` in two parts: the high part has zero low bits, so `n * LN2_HI` is exact.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;

/// `e^x`. See the [module docs](self) for its accuracy.
#[inline(always)]
#[must_use]
pub fn exp(x: f32) -> f32 {
    // Below -104 the result rounds to 0, above 89 it overflows: clamping keeps `n` small and
    // NaN (which `clamp` passes through) still propagates.
    let x = x.clamp(-104.0, 89.0);
    // x = n ln2 + r with n = round(x / ln2), |r| <= ln2 / 2.
    let shifted = x * LOG2_E + ROUND;
    let n = shifted.to_bits() as i32 - ROUND.to_bits() as i32;
    let nf = shifted - ROUND;
    let r = (x - nf * LN2_HI) - nf * LN2_LO;
    // e^r on [-ln2/2, ln2/2]: 1 + r + r^2 P(r), P a degree-5 minimax fit.
    let p = 1.987_569_1e-4_f32;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 0.5;
    let er = 1.0 + r + r * r * p;
    // 2^n in two normal factors, so that results in the subnormal range round once and
    // n = 128 (just past the largest float) overflows to infinity: n in [-150, 128].
    let n1 = n >> 1;
    let n2 = n - n1;
    let s1 = f32::from_bits(((n1 + 127) as u32) << 23);
    let s2 = f32::from_bits(((n2 + 127) as u32) << 23);
    er * s1 * s2
}

/// The natural logarithm. See the [module docs](self) for its accuracy.
#[inline(always)]
#[must_use]
pub fn ln(x: f32) -> f32 {
    // A subnormal input is scaled into the normal range first (by 2^23, undone in `e`).
    let subnormal = x < f32::MIN_POSITIVE;
    let scaled = if subnormal { x * 8_388_608.0 } else { x };
    let bits = scaled.to_bits();
    let mut e = ((bits >> 23) & 0xff) as i32 - 127 - if subnormal { 23 } else { 0 };
    // x = 2^e m, m in [1, 2), then m in [sqrt(1/2), sqrt(2)) and ln(x) = e ln2 + ln(m).
    let m = f32::from_bits((bits & 0x007f_ffff) | 0x3f80_0000);
    let big = m > std::f32::consts::SQRT_2;
    let m = if big { m * 0.5 } else { m };
    e += i32::from(big);
    let f = m - 1.0;
    let z = f * f;
    // ln(1 + f) = f - f^2/2 + f^3 P(f), P a degree-8 minimax fit.
    let p = 7.037_683_6e-2_f32;
    let p = p * f - 1.151_461e-1;
    let p = p * f + 1.167_699_9e-1;
    let p = p * f - 1.242_014_1e-1;
    let p = p * f + 1.424_932_3e-1;
    let p = p * f - 1.666_805_8e-1;
    let p = p * f + 2.000_071_5e-1;
    let p = p * f - 2.499_999_4e-1;
    let p = p * f + 3.333_333e-1;
    let ef = e as f32;
    let y = f * z * p + ef * LN2_LO - 0.5 * z;
    let result = f + y + ef * LN2_HI;
    // The edges, as selects: 0 (and -0) to -inf, negatives and NaN to NaN, inf to inf.
    let result = if x == f32::INFINITY { x } else { result };
    let result = if x == 0.0 { f32::NEG_INFINITY } else { result };
    if x < 0.0 || x.is_nan() {
        f32::NAN
    } else {
        result
    }
}

/// The logistic function `1 / (1 + e^-x)`. See the [module docs](self) for its accuracy.
#[inline(always)]
#[must_use]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// The hyperbolic tangent. See the [module docs](self) for its accuracy.
#[inline(always)]
#[must_use]
pub fn tanh(x: f32) -> f32 {
    // tanh(x) = sign(x) (1 - e^-2|x|) / (1 + e^-2|x|); near 0 that loses the low bits, so
    // there an odd polynomial takes over: x + x^3 P(x^2) for |x| < 0.625.
    let a = x.abs();
    let e = exp(-2.0 * a);
    let far = (1.0 - e) / (1.0 + e);
    let z = x * x;
    let p = -5.704_988_7e-3_f32;
    let p = p * z + 2.063_908_5e-2;
    let p = p * z - 5.373_971_6e-2;
    let p = p * z + 1.333_144_5e-1;
    let p = p * z - 3.333_328e-1;
    let near = x + x * z * p;
    // (`copysign` also gives -0 for -0, which the polynomial's `x + ...` would make +0.)
    if a < 0.625 { near } else { far }.copysign(x)
}

/// The error function. See the [module docs](self) for its accuracy.
#[inline(always)]
#[must_use]
pub fn erf(x: f32) -> f32 {
    // Both halves are computed and one is selected, which keeps the code straight-line.
    // Below 1: x + x Q(x^2), Q a degree-6 fit of erf(x) / x - 1 (absolute error 1.3e-9).
    let z = x * x;
    let q = 7.875_875e-5_f32;
    let q = q * z - 8.016_864e-4;
    let q = q * z + 5.189_087e-3;
    let q = q * z - 2.685_421e-2;
    let q = q * z + 1.128_359_4e-1;
    let q = q * z - 3.761_262_6e-1;
    let q = q * z + 1.283_791_7e-1;
    let near = x + x * q;
    // From 1: 1 - erfc(|x|), erfc(a) = e^(-a^2) R(t) with t = 1 / (1 + a / 2), R a degree-6
    // fit of erfc(a) e^(a^2) over a in [1, 3.92] (absolute error 6.2e-9). From 3.92 on,
    // erfc(a) is below half the spacing of floats under 1, so erf rounds to 1: clamping `a` at
    // 4 keeps `t` in range and gives exactly 1 there.
    let a = x.abs().min(4.0);
    let t = 1.0 / (1.0 + 0.5 * a);
    let r = -5.174_723_6e-2_f32;
    let r = r * t - 6.288_132e-2;
    let r = r * t + 4.109_095_6e-1;
    let r = r * t + 9.650_324e-2;
    let r = r * t + 3.326_288_2e-1;
    let r = r * t + 2.732_639_6e-1;
    let r = r * t + 6.353_358e-4;
    let far = (1.0 - exp(-a * a) * r).copysign(x);
    // (NaN fails the comparison and takes `near`, which propagates it.)
    if x.abs() >= 1.0 { far } else { near }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The distance in ulp between `got` and the correctly rounded `f32` of `want`, counting
    /// representable floats (so subnormals count in their own, smaller steps).
    fn ulps(got: f32, want: f64) -> f64 {
        let want32 = want as f32;
        if got == want32 || (got.is_nan() && want.is_nan()) {
            return 0.0;
        }
        if got.is_nan() || want.is_nan() || got.is_infinite() || want32.is_infinite() {
            return f64::INFINITY;
        }
        // The spacing of floats at the wanted value, and how far `got` is in those steps.
        let spacing = f64::from(f32::from_bits(want32.abs().to_bits() + 1) - want32.abs());
        (f64::from(got) - want).abs() / spacing
    }

    /// 10^7 inputs (xorshift, fixed seed) spread over `[lo, hi]` uniformly, then the same count
    /// of random bit patterns (every exponent, subnormals and NaNs included), kept when in range.
    fn inputs(lo: f32, hi: f32) -> impl Iterator<Item = f32> {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        (0..10_000_000).map(move |i| {
            let bits = next();
            if i % 2 == 0 {
                let unit = (bits >> 40) as f32 / (1u64 << 24) as f32;
                lo + (hi - lo) * unit
            } else {
                f32::from_bits(bits as u32).clamp(lo, hi)
            }
        })
    }

    fn worst(f: fn(f32) -> f32, reference: fn(f64) -> f64, lo: f32, hi: f32) -> (f64, f32) {
        let mut worst = (0.0, 0.0);
        for x in inputs(lo, hi).filter(|x| !x.is_nan()) {
            let e = ulps(f(x), reference(f64::from(x)));
            if e > worst.0 {
                worst = (e, x);
            }
        }
        worst
    }

    #[test]
    fn exp_is_within_1_5_ulp_and_its_edges_are_exact() {
        // Normal results: x from the smallest normal result's input to the largest finite.
        let (e, at) = worst(exp, f64::exp, -87.33654, 88.72283);
        assert!(e <= 1.5, "exp: {e} ulp at {at}");
        // Subnormal results: within one unit of the smallest subnormal.
        for x in inputs(-103.9, -87.34).filter(|x| !x.is_nan()) {
            let want = f64::from(x).exp();
            let got = f64::from(exp(x));
            assert!(
                (got - want).abs() <= f64::from(f32::from_bits(1)),
                "exp({x}) = {got}, want {want}"
            );
        }
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert_eq!(exp(f32::from_bits(1)), 1.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(-104.0), 0.0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(88.723), f32::INFINITY);
        assert!(exp(88.7228).is_finite());
        assert!(exp(f32::NAN).is_nan());
    }

    #[test]
    fn ln_is_within_1_ulp_and_its_edges_are_exact() {
        let (e, at) = worst(ln, f64::ln, f32::from_bits(1), f32::MAX);
        assert!(e <= 1.0, "ln: {e} ulp at {at}");
        // Near 1, where ln is smallest.
        let (e, at) = worst(ln, f64::ln, 0.5, 2.0);
        assert!(e <= 1.0, "ln near 1: {e} ulp at {at}");
        assert_eq!(ln(1.0), 0.0);
        assert_eq!(ln(0.0), f32::NEG_INFINITY);
        assert_eq!(ln(-0.0), f32::NEG_INFINITY);
        assert_eq!(ln(f32::INFINITY), f32::INFINITY);
        assert!(ln(-1.0).is_nan());
        assert!(ln(f32::NEG_INFINITY).is_nan());
        assert!(ln(f32::NAN).is_nan());
    }

    #[test]
    fn sigmoid_and_tanh_are_within_4_ulp() {
        let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
        for x in inputs(-104.0, 89.0).filter(|x| !x.is_nan()) {
            let (got, want) = (sigmoid(x), sig(f64::from(x)));
            assert!(
                ulps(got, want) <= 4.0 || (want < 5.96e-8 && (f64::from(got) - want).abs() <= 1e-7),
                "sigmoid({x}) = {got}, want {want}"
            );
        }
        for x in inputs(-20.0, 20.0).filter(|x| !x.is_nan()) {
            let (got, want) = (tanh(x), f64::from(x).tanh());
            assert!(
                ulps(got, want) <= 4.0
                    || (x.abs() < 0.0625 && (f64::from(got) - want).abs() <= 1e-7),
                "tanh({x}) = {got}, want {want}"
            );
        }
        assert_eq!(sigmoid(f32::NEG_INFINITY), 0.0);
        assert_eq!(sigmoid(f32::INFINITY), 1.0);
        assert_eq!(sigmoid(0.0), 0.5);
        assert_eq!(tanh(f32::INFINITY), 1.0);
        assert_eq!(tanh(f32::NEG_INFINITY), -1.0);
        assert_eq!(tanh(0.0), 0.0);
        assert!(tanh(-0.0).is_sign_negative());
        assert!(sigmoid(f32::NAN).is_nan() && tanh(f32::NAN).is_nan());
    }

    #[test]
    fn erf_is_within_1_5_ulp_and_its_edges_are_exact() {
        // The whole range: most random bit patterns are far from 0 (erf = ±1) or tiny (erf
        // is x (2 / sqrt(pi))), so the uniform half of the samples covers [-6, 6].
        let (e, at) = worst(erf, libm::erf, -6.0, 6.0);
        assert!(e <= 1.5, "erf: {e} ulp at {at}");
        let (e, at) = worst(erf, libm::erf, -f32::MAX, f32::MAX);
        assert!(e <= 1.5, "erf: {e} ulp at {at}");
        // Near the switch between the two halves, and subnormal inputs.
        let (e, at) = worst(erf, libm::erf, 0.9, 1.1);
        assert!(e <= 1.5, "erf near 1: {e} ulp at {at}");
        let (e, at) = worst(erf, libm::erf, -1e-37, 1e-37);
        assert!(e <= 1.5, "erf near 0: {e} ulp at {at}");
        assert_eq!(erf(0.0).to_bits(), 0.0_f32.to_bits());
        assert_eq!(erf(-0.0).to_bits(), (-0.0_f32).to_bits());
        assert_eq!(erf(f32::INFINITY), 1.0);
        assert_eq!(erf(f32::NEG_INFINITY), -1.0);
        assert_eq!(erf(3.92), 1.0);
        assert_eq!(erf(-f32::MAX), -1.0);
        assert!(erf(3.5) < 1.0);
        assert!(erf(f32::NAN).is_nan());
    }

    #[test]
    fn a_loop_over_a_slice_gives_the_scalar_bits() {
        let xs: Vec<f32> = inputs(-110.0, 95.0).take(100_000).collect();
        let mut lanes = xs.clone();
        lanes.iter_mut().for_each(|v| *v = exp(*v));
        for (x, v) in xs.iter().zip(&lanes) {
            assert_eq!(v.to_bits(), exp(*x).to_bits(), "exp({x})");
        }
        let positive: Vec<f32> = xs.iter().map(|x| x.abs()).collect();
        let mut lanes = positive.clone();
        lanes.iter_mut().for_each(|v| *v = ln(*v));
        for (x, v) in positive.iter().zip(&lanes) {
            assert_eq!(v.to_bits(), ln(*x).to_bits(), "ln({x})");
        }
        let mut lanes = xs.clone();
        lanes.iter_mut().for_each(|v| *v = erf(*v));
        for (x, v) in xs.iter().zip(&lanes) {
            assert_eq!(v.to_bits(), erf(*x).to_bits(), "erf({x})");
        }
    }
}
