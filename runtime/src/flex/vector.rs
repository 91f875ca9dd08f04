//! Runtime dispatch to wider instruction sets for the fused kernels' loops.
//!
//! The kernels' arithmetic ([`super::math`], and the element and row functions of the crates
//! that use this module) is straight-line code that the compiler vectorises for whatever
//! instruction set it compiles for. The baseline of x86-64 is SSE2, four `f32` lanes; x86-64
//! CPUs since 2013 have AVX2, eight, and server CPUs since 2017 AVX-512, sixteen. Two ways in:
//!
//! - [`vectorized`] runs its closure inside a function compiled for AVX2 when the CPU has it;
//!   the closure's loops, inlined there, use the wider registers. Every piece of work of
//!   [`update_rows`](super::update_rows) and the other piece functions runs inside it, so
//!   every kernel gets AVX2.
//! - [`simd_fn!`](crate::simd_fn) defines a function whose body is compiled once per
//!   instruction set (AVX-512, AVX2, the baseline) and picks one at run time. Closures inherit
//!   the instruction set of the function they are written in, so a kernel written inside one
//!   (its `update_rows` closure, the row functions inlined into it) runs on sixteen lanes on an
//!   AVX-512 CPU. The transcendental kernels, bound by arithmetic, are written this way.
//!
//! Why two: a dispatch that takes the kernel as a closure compiles the closure once, outside
//! the target-feature functions, unless the inliner copies it into each, which it does only for
//! a callee with one call site. With pulp 0.21's `Arch::dispatch` (one call site per
//! instruction set it knows) the kernels' closures stayed out of line, compiled for SSE2 (no
//! `ymm` register in `perf annotate`), and so did they here with an AVX-512 path beside
//! `vectorized`'s AVX2 one (`objdump` of `benches/ops.rs`: each target-feature function a dozen
//! instructions around a call). So `vectorized` keeps one wide path, and the wider one compiles
//! the kernel's own text per instruction set, which needs a macro at the kernel.
//!
//! No fused multiply-add is used (Rust never contracts `a * b + c`) and the reductions fix
//! their order of additions ([`sum_by`](super::sum_by): eight lanes, on every instruction set),
//! so every path gives the same bits: the kernels' results depend neither on the machine nor on
//! rayon. On other architectures the code runs as compiled (NEON is aarch64's baseline).
//! `BURN_ROUTE_FLEX_ISA=baseline|avx2|avx512`, read once, caps the instruction set (for
//! benchmarks and for checking that the paths agree); it never raises it above the CPU's.

use std::sync::OnceLock;

/// The widest instruction set the fused Flex kernels use on this machine: see [`isa`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isa {
    /// The target's baseline (SSE2 on x86-64; every other architecture).
    Baseline,
    /// AVX2 (x86-64): eight `f32` lanes.
    Avx2,
    /// AVX-512F (x86-64): sixteen `f32` lanes.
    Avx512,
}

impl Isa {
    /// The name `BURN_ROUTE_FLEX_ISA` takes for it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Baseline => "baseline",
            Self::Avx2 => "avx2",
            Self::Avx512 => "avx512",
        }
    }
}

/// The instruction set the fused kernels run on here: the widest this CPU has, capped by
/// `BURN_ROUTE_FLEX_ISA` when set (an unknown value is ignored). Detected once; later calls
/// are one atomic load.
///
/// ```
/// use burn_route_runtime::flex::{isa, Isa};
///
/// let here = isa();
/// assert!(here >= Isa::Baseline);
/// println!("fused Flex kernels run on {}", here.name());
/// ```
pub fn isa() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(|| {
        let cap = std::env::var("BURN_ROUTE_FLEX_ISA")
            .ok()
            .and_then(|name| {
                [Isa::Baseline, Isa::Avx2, Isa::Avx512]
                    .into_iter()
                    .find(|isa| isa.name() == name.trim())
            })
            .unwrap_or(Isa::Avx512);
        detected().min(cap)
    })
}

/// What the CPU has.
fn detected() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Isa::Avx512;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            return Isa::Avx2;
        }
    }
    Isa::Baseline
}

/// Runs `f`, its loops compiled for AVX2 where this CPU has it (see [`isa`]), else for the
/// target's baseline; the value is the same either way. Call it around a loop, not inside one
/// (the check costs an atomic load), and keep one call site per closure: the fused kernels get
/// it from [`update_rows`](super::update_rows) and the other piece functions of this module.
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
        if isa() >= Isa::Avx2 {
            // SAFETY: the CPU has AVX2 (`isa` never exceeds what it detected), all that
            // `with_avx2` is compiled for.
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

/// Defines a function whose body is compiled once per instruction set of [`isa`] (AVX-512,
/// AVX2 and the baseline on x86-64; once elsewhere) and runs the one [`isa`] picks. Every
/// closure written in the body is compiled for that instruction set too: write the kernel's
/// loop (its [`update_rows`](super::update_rows) closure) inside. A function the body calls is
/// compiled for it only where it is inlined: mark row functions `#[inline(always)]` and write
/// their loops as `for` loops (a closure written in such a function and passed to `for_each`
/// is one function shared by every caller, which may stay out of line, compiled for the
/// baseline). The results are the same bits on every path (see the module's docs).
///
/// The function takes named arguments (no patterns, no generic parameters; `impl Trait`
/// arguments are fine); attributes and docs above it are kept. The expansion calls the
/// AVX-512 and AVX2 builds in an `unsafe` block (the CPU's support is checked first), so a crate
/// that forbids `unsafe_code` cannot use it.
///
/// ```
/// use burn_route_runtime::flex::{Work, math, tensor, update_rows};
/// use burn_route_runtime::rt::backend::Shape;
/// use burn_route_runtime::rt::{Flex, FloatTensor};
///
/// burn_route_runtime::simd_fn! {
///     /// `exp(x) * scale`, in place where `x`'s buffer is ours.
///     fn scaled_exp(
///         x: FloatTensor<Flex>,
///         scale: f32,
///     ) -> Result<FloatTensor<Flex>, FloatTensor<Flex>> {
///         update_rows(x, Work::Heavy, |_, values| {
///             values.iter_mut().for_each(|v| *v = math::exp(*v) * scale);
///         })
///     }
/// }
///
/// let x = tensor(vec![0.0, 1.0], Shape::new([2]));
/// let y = scaled_exp(x, 2.0).expect("f32 rows");
/// assert_eq!(y.as_slice::<f32>().unwrap(), [2.0, math::exp(1.0) * 2.0]);
/// ```
#[macro_export]
macro_rules! simd_fn {
    (
        $(#[$attr:meta])*
        $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block
    ) => {
        $(#[$attr])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            // (`__`-prefixed: items, unlike local variables, are not hygienic, and the body
            // may call a function of its own crate.)
            fn __simd_baseline($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f")]
            fn __simd_avx512($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2")]
            fn __simd_avx2($($arg: $ty),*) $(-> $ret)? $body
            match $crate::flex::isa() {
                // SAFETY: the CPU has AVX-512F (`isa` never exceeds what it detected).
                #[cfg(target_arch = "x86_64")]
                $crate::flex::Isa::Avx512 => unsafe { __simd_avx512($($arg),*) },
                // SAFETY: the CPU has AVX2 (as above).
                #[cfg(target_arch = "x86_64")]
                $crate::flex::Isa::Avx2 => unsafe { __simd_avx2($($arg),*) },
                _ => __simd_baseline($($arg),*),
            }
        }
    };
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
        // (Direct calls, so that each function is inlined into the wide loops: `vectorized`'s
        // AVX2 one, and `simd_fn!`'s widest one on this CPU, AVX-512 where it has it.)
        println!("widest instruction set here: {}", super::isa().name());
        macro_rules! same_bits {
            ($f:path) => {{
                let mut wide = inputs.clone();
                vectorized(|| wide.iter_mut().for_each(|v| *v = $f(*v)));
                crate::simd_fn! {
                    fn widest(values: &mut [f32]) {
                        values.iter_mut().for_each(|v| *v = $f(*v));
                    }
                }
                let mut widest_values = inputs.clone();
                widest(&mut widest_values);
                for ((x, w), w2) in inputs.iter().zip(&wide).zip(&widest_values) {
                    let plain = $f(*x);
                    for (path, w) in [("vectorized", w), ("simd_fn", w2)] {
                        assert!(
                            plain.to_bits() == w.to_bits() || (plain.is_nan() && w.is_nan()),
                            "{}({x:e}): {plain:e} plain, {w:e} in `{path}`",
                            stringify!($f)
                        );
                    }
                }
            }};
        }
        same_bits!(math::exp);
        same_bits!(math::ln);
        same_bits!(math::sigmoid);
        same_bits!(math::tanh);
        same_bits!(math::erf);
        let plain = super::super::sum_by(&inputs[..1000], math::exp);
        let wide = vectorized(|| super::super::sum_by(&inputs[..1000], math::exp));
        crate::simd_fn! {
            fn widest_sum(values: &[f32]) -> f32 {
                super::super::sum_by(values, math::exp)
            }
        }
        assert_eq!(plain.to_bits(), wide.to_bits());
        assert_eq!(plain.to_bits(), widest_sum(&inputs[..1000]).to_bits());
    }
}
