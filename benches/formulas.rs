//! Generated backward passes against Burn's own: forward + backward of ops whose backward pass
//! is a manifest formula (`tests/formulas/ops.toml`, the ops the integration tests check against
//! finite differences), on `Device::flex().autodiff()`.
//!
//! Each op's forward pass is its composition, the same Burn primitive the `burn_tensor` variant
//! calls, so the two differ only in the backward pass: the node the generator writes from the
//! formula (the runtime's `Tape`, the formula's primitives, the sum back to the input's shape)
//! against Burn's autodiff of the primitive. The goal: no generated backward pass slower than
//! Burn's (BENCHMARKS.md, "Formula backward passes").
//!
//! ```sh
//! cargo bench --bench formulas
//! cargo bench --bench formulas --features burn-dispatch/rayon,burn-dispatch/simd
//! ```

mod common;

use std::hint::black_box;

use burn_tensor::activation::{relu, sigmoid};
use burn_tensor::{Device, Tensor, TensorData};
use common::uniform;
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

#[path = "../tests/formulas/backward.rs"]
mod backward;
/// The compositions and the backward function `tests/formulas/ops.toml` names
/// (`crate::formulas::forward::...`, `crate::formulas::backward::...`).
#[allow(dead_code)]
#[path = "../tests/formulas/forward.rs"]
mod forward;

/// The generated modules of `tests/formulas/ops.toml`, as the integration tests include them.
#[allow(dead_code)]
mod formulas {
    pub(crate) use super::{backward, forward};

    /// The path the compositions name the declared types' primitives by, as in the tests.
    pub mod routed {
        pub use super::ops;
    }

    pub mod ops {
        include!("../tests/formulas/generated/routed_ops.rs");
    }
    pub mod dispatch {
        include!("../tests/formulas/generated/routed_dispatch.rs");
    }
    pub mod tensor {
        include!("../tests/formulas/generated/routed_tensor.rs");
    }

    // Every op has a composition: the trait's default bodies are the kernels of every backend
    // (the `Remote` impl is generated).
    impl ops::FormulaOps for burn_route::rt::Flex {}
    #[cfg(feature = "cube")]
    impl ops::FormulaOps for burn_route::rt::CubeBackend {}
}

use formulas::tensor as routed;

/// Element counts of the inputs (`[n / WIDTH, WIDTH]`), with their labels in benchmark ids.
const SIZES: [(usize, &str); 2] = [(1 << 16, "64K"), (1 << 20, "1M")];
const WIDTH: usize = 256;
const P: f32 = 1.5;

/// `[n / WIDTH, WIDTH]` values uniform in `[lo, hi)`.
fn matrix(n: usize, seed: u64, lo: f32, hi: f32) -> TensorData {
    TensorData::new(uniform(n, seed, lo, hi), [n / WIDTH, WIDTH])
}

/// A fresh gradient-tracked leaf with `data`'s values.
fn leaf(data: &TensorData, device: &Device) -> Tensor<2> {
    Tensor::from_data(data.clone(), device).require_grad()
}

/// The group `fwd_bwd/<name>`: `routed` and `burn` on fresh leaves of `n` values in `[lo, hi)`
/// (`inputs` of them), each timed through `.sum().backward()`.
fn compare(
    c: &mut Criterion,
    name: &str,
    (inputs, lo, hi): (usize, f32, f32),
    routed: impl Fn(Vec<Tensor<2>>) -> Tensor<2>,
    burn: impl Fn(Vec<Tensor<2>>) -> Tensor<2>,
) {
    let device = Device::flex().autodiff();
    let mut group = c.benchmark_group(format!("fwd_bwd/{name}"));
    for (n, label) in SIZES {
        let values: Vec<TensorData> = (0..inputs)
            .map(|i| matrix(n, 7 + i as u64, lo, hi))
            .collect();
        let fresh = || values.iter().map(|v| leaf(v, &device)).collect::<Vec<_>>();
        // Both variants compute the same values.
        let (a, b) = (routed(fresh()).into_data(), burn(fresh()).into_data());
        a.assert_approx_eq::<f32>(&b, burn_tensor::Tolerance::default());
        group.throughput(Throughput::Elements(n as u64));
        let batch = if n >= 1 << 20 {
            BatchSize::LargeInput
        } else {
            BatchSize::SmallInput
        };
        group.bench_function(BenchmarkId::new("burn_route", label), |b| {
            b.iter_batched(fresh, |x| routed(black_box(x)).sum().backward(), batch);
        });
        group.bench_function(BenchmarkId::new("burn_tensor", label), |b| {
            b.iter_batched(fresh, |x| burn(black_box(x)).sum().backward(), batch);
        });
    }
    group.finish();
}

fn one(mut x: Vec<Tensor<2>>) -> Tensor<2> {
    x.remove(0)
}

fn two(mut x: Vec<Tensor<2>>) -> (Tensor<2>, Tensor<2>) {
    let y = x.remove(1);
    (x.remove(0), y)
}

/// The formula ops, each with Burn's own op.
fn formula_ops(c: &mut Criterion) {
    let any = (1, -3.0, 3.0);
    let positive = (1, 0.1, 3.0);
    compare(
        c,
        "mul",
        (2, -3.0, 3.0),
        |x| {
            let (x, y) = two(x);
            routed::mul(x, y)
        },
        |x| {
            let (x, y) = two(x);
            x * y
        },
    );
    compare(c, "exp", any, |x| routed::exp(one(x)), |x| one(x).exp());
    compare(
        c,
        "log",
        positive,
        |x| routed::log(one(x)),
        |x| one(x).log(),
    );
    compare(
        c,
        "sqrt",
        positive,
        |x| routed::sqrt(one(x)),
        |x| one(x).sqrt(),
    );
    compare(c, "tanh", any, |x| routed::tanh(one(x)), |x| one(x).tanh());
    compare(
        c,
        "sigmoid",
        any,
        |x| routed::sigmoid(one(x)),
        |x| sigmoid(one(x)),
    );
    compare(
        c,
        "tanh_of_output",
        any,
        |x| routed::tanh_of_output(one(x)),
        |x| one(x).tanh(),
    );
    compare(
        c,
        "sigmoid_of_output",
        any,
        |x| routed::sigmoid_of_output(one(x)),
        |x| sigmoid(one(x)),
    );
    compare(c, "relu", any, |x| routed::relu(one(x)), |x| relu(one(x)));
    compare(
        c,
        "pow_scalar",
        positive,
        |x| routed::pow_scalar(one(x), P),
        |x| one(x).powf_scalar(P),
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(1));
    targets = formula_ops
}
criterion_main!(benches);
