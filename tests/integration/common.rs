//! Helpers shared by the integration tests.
#![allow(dead_code)] // Each build configuration uses a different subset.

use std::panic::{AssertUnwindSafe, catch_unwind};

use burn_tensor::{Device, Int, Tensor, TensorData};

/// A small deterministic generator, so failures reproduce.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        #[allow(clippy::cast_precision_loss)]
        let unit = (self.0 >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * unit
    }

    pub fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
}

pub fn tensor<const D: usize>(values: &[f32], shape: [usize; D], device: &Device) -> Tensor<D> {
    Tensor::from_data(TensorData::new(values.to_vec(), shape), device)
}

pub fn values<const D: usize>(t: &Tensor<D>) -> Vec<f32> {
    t.clone()
        .into_data()
        .convert::<f32>()
        .try_to_vec::<f32>()
        .expect("float data")
}

pub fn ints<const D: usize>(t: &Tensor<D, Int>) -> Vec<i64> {
    t.clone()
        .into_data()
        .convert::<i64>()
        .try_to_vec::<i64>()
        .expect("int data")
}

pub fn assert_close(actual: &[f32], expected: &[f32], tol: f32, what: &str) {
    assert_eq!(actual.len(), expected.len(), "{what}: length");
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        assert!(
            (a - e).abs() <= tol * (1.0 + e.abs()),
            "{what}: element {i}: got {a}, expected {e} (tolerance {tol})\n  actual:   {actual:?}\n  expected: {expected:?}"
        );
    }
}

/// With only input `only` tracked, each input's gradient in `some`: `only`'s is within `tol` of
/// its gradient with every input tracked (`full`; `0.0` asks for the same bits), and no other
/// input has one.
pub fn assert_only_tracked_gets_its_gradient(
    some: &[Option<Vec<f32>>],
    full: &[Option<Vec<f32>>],
    only: usize,
    tol: f32,
    what: &str,
) {
    for (i, g) in some.iter().enumerate() {
        if i != only {
            assert!(g.is_none(), "{what}: untracked input {i} got a gradient");
            continue;
        }
        let (g, f) = (g.as_ref().expect("tracked"), full[i].as_ref().expect("all"));
        if tol == 0.0 {
            assert_eq!(g, f, "{what}: input {i} alone");
        } else {
            assert_close(g, f, tol, &format!("{what}: input {i} alone"));
        }
    }
}

/// Central finite differences of a scalar function of a flat input.
pub fn finite_difference(f: impl Fn(&[f32]) -> f64, at: &[f32], eps: f32) -> Vec<f32> {
    (0..at.len())
        .map(|i| {
            let mut plus = at.to_vec();
            let mut minus = at.to_vec();
            plus[i] += eps;
            minus[i] -= eps;
            #[allow(clippy::cast_possible_truncation)]
            let slope = ((f(&plus) - f(&minus)) / (2.0 * f64::from(eps))) as f32;
            slope
        })
        .collect()
}

/// The panic message of `f`, which must panic.
pub fn panic_message(f: impl FnOnce()) -> String {
    let payload = catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
    if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else {
        panic!("panic payload is not a string")
    }
}
