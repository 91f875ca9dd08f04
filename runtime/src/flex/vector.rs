//! Runtime dispatch to AVX2 for the fused kernels' loops.
//!
//! The kernels' arithmetic ([`super::math`], and the element and row functions of the crates
//! that use this module) is straight-line code that the compiler vectorises for whatever
//! instruction set it compiles for. The baseline of x86-64 is SSE2, four `f32` lanes; x86-64
//! CPUs since 2013 have AVX2, eight. [`vectorized`] runs its closure inside a function compiled
//! for AVX2 when the CPU has it (detected once by `std`, then one atomic load per call), and
//! the closure's loops, inlined there, use the wider registers. No fused multiply-add is
//! enabled and the reductions fix their order of additions, so AVX2 and SSE2 give the same bits
//! (the kernels' results depend neither on the machine nor on rayon). On other architectures
//! the closure runs as compiled (NEON is aarch64's baseline).
//!
//! Why `std::arch` and not pulp or macerator (both in the dependency tree): a dispatch takes the
//! kernel as a closure, and the closure is compiled once, outside the target-feature function,
//! unless the inliner copies it in, which it does only for a callee with few call sites. With
//! pulp 0.21's `Arch::dispatch` (one call site per instruction set it knows) the kernels'
//! closures stayed out of line, compiled for SSE2 (no `ymm` register in `perf annotate`), and
//! so did they here with an AVX-512 path beside the AVX2 one (`objdump` of `benches/ops.rs`:
//! each target-feature function a dozen instructions around a call). With the AVX2 path alone
//! they are inlined, and the transcendental kernels run about twice as fast (BENCHMARKS.md).
//! AVX-512 would double the lanes again on CPUs that execute it at full width; it waits for a
//! dispatch that compiles the kernel once per instruction set (a macro at the kernel).

/// Runs `f`, its loops compiled for AVX2 where this CPU has it, else for the target's
/// baseline; the value is the same either way. Call it around a loop, not inside one (the check
/// costs an atomic load), and keep one call site per closure: the fused kernels get it from
/// [`update_rows`](super::update_rows) and the other piece functions of this module.
///
/// ```
/// use burn_route_runtime::flex::{math, vectorized};
///
/// let mut row = vec![0.5_f32; 1000];
/// vectorized(|| row.iter_mut().for_each(|v| *v = math::exp(*v)));
/// assert_eq!(row[0], math::exp(0.5));
/// ```
#[inline(always)]
pub fn vectorized<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, all that `with_avx2` is compiled for.
            return unsafe { with_avx2(f) };
        }
    }
    f()
}

/// `f()`, compiled for AVX2 (and what it implies: AVX, SSE4.2 and below).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn with_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(test)]
mod tests {
    use super::super::math;
    use super::vectorized;

    /// The same bits inside and outside `vectorized`, for every function of `math` over a
    /// spread of inputs (edges included), and for a lane reduction.
    #[test]
    fn the_wide_loops_give_the_same_bits() {
        let mut inputs: Vec<f32> = (0..200_000)
            .map(|i| {
                f32::from_bits(0x3000_0000_u32.wrapping_add(i * 7919))
                    * if i % 2 == 0 { 1.0 } else { -1.0 }
            })
            .collect();
        inputs.extend([
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            88.8,
            -104.0,
            1e-40,
        ]);
        // (Direct calls, so that each function is inlined into the AVX2 loop.)
        macro_rules! same_bits {
            ($f:path) => {
                let mut wide = inputs.clone();
                vectorized(|| wide.iter_mut().for_each(|v| *v = $f(*v)));
                for (x, w) in inputs.iter().zip(&wide) {
                    let plain = $f(*x);
                    assert!(
                        plain.to_bits() == w.to_bits() || (plain.is_nan() && w.is_nan()),
                        "{}({x:e}): {plain:e} plain, {w:e} in `vectorized`",
                        stringify!($f)
                    );
                }
            };
        }
        same_bits!(math::exp);
        same_bits!(math::ln);
        same_bits!(math::sigmoid);
        same_bits!(math::tanh);
        let plain = super::super::sum_by(&inputs[..1000], math::exp);
        let wide = vectorized(|| super::super::sum_by(&inputs[..1000], math::exp));
        assert_eq!(plain.to_bits(), wide.to_bits());
    }
}
