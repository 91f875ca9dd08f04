//! burn-route's routed ops against the same computation written with Burn's `Tensor` API, on
//! Flex (Burn's pure-Rust CPU backend).
//!
//! For each op, the group `fwd/<op>` times the forward pass on `Device::flex()` and, for the
//! differentiable ops, `fwd_bwd/<op>` times forward + backward on `Device::flex().autodiff()`
//! (every float input a `require_grad()` leaf). Each group has the ids `burn_route/<size>` (the
//! `burn_route::<op>` function) and `burn_tensor/<size>` (the composition a user would write
//! without burn-route), at 1K, 64K and 1M elements: `[n / 256, 256]` inputs, `[n / 128, 128]`
//! logits for cross-entropy, `[256]` per-feature parameters.
//!
//! `fwd_view/<op>` and `fwd_bwd_view/<op>` feed the layouts a transformer does: `gate` and `up`
//! (or `a` and `b`) sliced out of one `[rows, 512]` projection along the last dimension, and a
//! sequence-first `[seq, 2, 256]` tensor swapped to batch-first. `floor/in_place/<size>` is the
//! memory-bandwidth floor: one in-place pass over a fresh buffer of as many floats.
//! `fwd_chained/<op>` times the compute-bound ops at 1M on inputs as a previous fused op of a
//! model leaves them (see [`chained`]), where `fwd/<op>` is an op called alone.
//!
//! Both variants of a benchmark get fresh, uniquely owned copies of the same input values from
//! `iter_batched`'s untimed setup (the Flex kernels of both work in place on a buffer they own),
//! and their outputs are dropped outside the timed part. The backward loss is the same for both:
//! `out.sum()` for element-wise ops, `(out * w).sum()` with a fixed random `w` for the row-wise
//! ops (whose plain sum has a constant or trivial gradient), the loss itself for cross-entropy.
//! Before timing, a check at 1K elements asserts that both variants compute the same forward
//! values (dropout: the same keep rate and scale, as the masks differ).
//!
//! Two configurations, as BENCHMARKS.md records them: this repository's defaults (Flex without
//! `rayon` or `simd`), and Flex's default features, which a default `burn` or `burn-tensor`
//! dependency brings (`--features burn-dispatch/rayon,burn-dispatch/simd`). `scripts/bench-summary` turns the two
//! runs into BENCHMARKS.md's tables:
//!
//! ```sh
//! CRITERION_HOME=target/criterion-default cargo bench --bench ops
//! CRITERION_HOME=target/criterion-flex-defaults cargo bench --bench ops --features burn-dispatch/rayon,burn-dispatch/simd
//! cargo bench --bench ops -- rms_norm          # fwd/rms_norm, fwd_bwd/rms_norm and the views
//! cargo bench --bench ops -- 'burn_route/1M'   # one variant at one size, every op
//! ```
//!
//! `fwd_f16/<op>` and `fwd_bf16/<op>` time the forward pass of the ops with a fused Flex kernel
//! of several primitives on inputs in that dtype, against Burn's composition in the same dtype
//! (`cargo bench --bench ops -- fwd_f16/`).
//!
//! The short configuration (10 samples, 0.5 s warm-up, 1 s measurement) can be overridden on the
//! command line (`-- --sample-size 50 --measurement-time 5`).

mod common;
#[path = "common/flex.rs"]
mod flex;

use std::hint::black_box;
use std::time::Duration;

use burn_tensor::activation::{gelu, relu, silu, softmax};
use burn_tensor::{Device, Int, Tensor, TensorData};
use common::uniform;
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
#[cfg(feature = "autodiff")]
use flex::leaf;
use flex::{
    CLASSES, EPS, P, WIDTH, cross_entropy_burn, dropout_burn, features, float, layer_norm_burn,
    matrix, rms_norm_burn,
};

/// Element counts of the inputs, with their labels in benchmark ids.
const SIZES: [(usize, &str); 3] = [(1 << 10, "1K"), (1 << 16, "64K"), (1 << 20, "1M")];
/// The routed dropout's mask seed.
const SEED: u64 = 0x5EED;
/// Clamp bounds (inputs are uniform in `[-3, 3)`).
const LO: f32 = -1.0;
const HI: f32 = 1.0;
const ALPHA: f32 = 0.5;
const BETA: f32 = -2.0;
/// `k` of top-k along the last dimension.
const K: usize = 8;

/// Small batches amortise the timer below 1M elements; at 1M one input at a time keeps a batch of
/// prepared inputs from crowding the caches.
fn batch_size(n: usize) -> BatchSize {
    if n >= 1 << 20 {
        BatchSize::LargeInput
    } else {
        BatchSize::SmallInput
    }
}

/// The group `name`: at every size, `prepare(n)` makes the input values once (untimed), `fresh`
/// turns them into new tensors for every iteration (untimed), and `burn_route` / `burn_tensor`
/// consume those tensors (timed).
fn compare<P, I, O1, O2>(
    c: &mut Criterion,
    name: &str,
    prepare: impl Fn(usize) -> P,
    fresh: impl Fn(&P) -> I,
    burn_route: impl Fn(I) -> O1,
    burn_tensor: impl Fn(I) -> O2,
) {
    let mut group = c.benchmark_group(name);
    for (n, label) in SIZES {
        let values = prepare(n);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::new("burn_route", label), |b| {
            b.iter_batched(
                || fresh(&values),
                |inputs| burn_route(black_box(inputs)),
                batch_size(n),
            );
        });
        group.bench_function(BenchmarkId::new("burn_tensor", label), |b| {
            b.iter_batched(
                || fresh(&values),
                |inputs| burn_tensor(black_box(inputs)),
                batch_size(n),
            );
        });
    }
    group.finish();
}

// --- Inputs. ---

fn two(n: usize) -> (TensorData, TensorData) {
    (matrix(n, WIDTH, 1), matrix(n, WIDTH, 2))
}

fn one(n: usize) -> TensorData {
    matrix(n, WIDTH, 3)
}

/// `x`, a `[WIDTH]` bias, and the loss weights.
fn with_bias(n: usize) -> (TensorData, TensorData, TensorData) {
    (
        matrix(n, WIDTH, 4),
        features(5, -1.0, 1.0),
        matrix(n, WIDTH, 6),
    )
}

/// `x`, `gamma`, `beta` and the loss weights.
fn norm(n: usize) -> (TensorData, TensorData, TensorData, TensorData) {
    (
        matrix(n, WIDTH, 7),
        features(8, 0.5, 1.5),
        features(9, -0.5, 0.5),
        matrix(n, WIDTH, 10),
    )
}

/// `[n / CLASSES, CLASSES]` logits and one target class per row.
fn logits(n: usize) -> (TensorData, TensorData) {
    let rows = n / CLASSES;
    let targets: Vec<i64> = (0..rows)
        .map(|i| i64::try_from((i * 37 + 11) % CLASSES).expect("class fits in i64"))
        .collect();
    (matrix(n, CLASSES, 11), TensorData::new(targets, [rows]))
}

// --- The groups. ---

/// The forward pass of the fused ops of several primitives in `f16` and `bf16`, each against
/// Burn's composition in the same dtype (`fwd_f16/<op>`, `fwd_bf16/<op>`).
fn half(c: &mut Criterion) {
    use burn_tensor::FloatDType;
    let flex = Device::flex();
    let d = &flex;
    for (dtype, label) in [(FloatDType::F16, "f16"), (FloatDType::BF16, "bf16")] {
        let h2 = |data: &TensorData| float::<2>(data, d).cast(dtype);
        let h1 = |data: &TensorData| float::<1>(data, d).cast(dtype);
        compare(
            c,
            &format!("fwd_{label}/add_relu"),
            two,
            |(a, b)| (h2(a), h2(b)),
            |(a, b)| burn_route::add_relu(a, b),
            |(a, b)| relu(a + b),
        );
        compare(
            c,
            &format!("fwd_{label}/bias_gelu"),
            with_bias,
            |(x, b, _)| (h2(x), h1(b)),
            |(x, b)| burn_route::bias_gelu(x, b),
            |(x, b)| gelu(x + b.unsqueeze::<2>()),
        );
        compare(
            c,
            &format!("fwd_{label}/swiglu"),
            two,
            |(g, u)| (h2(g), h2(u)),
            |(g, u)| burn_route::swiglu(g, u),
            |(g, u)| silu(g) * u,
        );
        compare(
            c,
            &format!("fwd_{label}/axpby"),
            two,
            |(x, y)| (h2(x), h2(y)),
            |(x, y)| burn_route::axpby(x, Some(y), ALPHA, BETA),
            |(x, y)| x * ALPHA + y * BETA,
        );
        compare(
            c,
            &format!("fwd_{label}/dropout"),
            one,
            |x| h2(x),
            |x| burn_route::dropout(x, P, SEED),
            dropout_burn,
        );
        compare(
            c,
            &format!("fwd_{label}/rms_norm"),
            norm,
            |(x, g, _, _)| (h2(x), h1(g)),
            |(x, g)| burn_route::rms_norm(x, g, EPS),
            |(x, g)| rms_norm_burn(x, g),
        );
        compare(
            c,
            &format!("fwd_{label}/layer_norm"),
            norm,
            |(x, g, b, _)| (h2(x), h1(g), h1(b)),
            |(x, g, b)| burn_route::layer_norm(x, g, b, EPS),
            |(x, g, b)| layer_norm_burn(x, g, b),
        );
        compare(
            c,
            &format!("fwd_{label}/softmax_last"),
            one,
            |x| h2(x),
            burn_route::softmax_last,
            |x| softmax(x, 1),
        );
        compare(
            c,
            &format!("fwd_{label}/cross_entropy_logits"),
            logits,
            |(l, t)| (h2(l), Tensor::<1, Int>::from_data(t.clone(), d)),
            |(l, t)| burn_route::cross_entropy_logits(l, t),
            |(l, t)| cross_entropy_burn(l, t),
        );
    }
}

fn elementwise(c: &mut Criterion) {
    let flex = Device::flex();
    let d = &flex;

    compare(
        c,
        "fwd/add_relu",
        two,
        |(a, b)| (float::<2>(a, d), float::<2>(b, d)),
        |(a, b)| burn_route::add_relu(a, b),
        |(a, b)| relu(a + b),
    );
    compare(
        c,
        "fwd/bias_gelu",
        with_bias,
        |(x, b, _)| (float::<2>(x, d), float::<1>(b, d)),
        |(x, b)| burn_route::bias_gelu(x, b),
        |(x, b)| gelu(x + b.unsqueeze::<2>()),
    );
    compare(
        c,
        "fwd/swiglu",
        two,
        |(g, u)| (float::<2>(g, d), float::<2>(u, d)),
        |(g, u)| burn_route::swiglu(g, u),
        |(g, u)| silu(g) * u,
    );
    compare(
        c,
        "fwd/dropout",
        one,
        |x| float::<2>(x, d),
        |x| burn_route::dropout(x, P, SEED),
        dropout_burn,
    );
    compare(
        c,
        "fwd/clamp_ste",
        one,
        |x| float::<2>(x, d),
        |x| burn_route::clamp_ste(x, LO, HI),
        |x| x.clamp(LO, HI),
    );
    compare(
        c,
        "fwd/scale",
        one,
        |x| float::<2>(x, d),
        |x| burn_route::scale(x, ALPHA),
        |x| x * ALPHA,
    );
    compare(
        c,
        "fwd/axpby",
        two,
        |(x, y)| (float::<2>(x, d), float::<2>(y, d)),
        |(x, y)| burn_route::axpby(x, Some(y), ALPHA, BETA),
        |(x, y)| x * ALPHA + y * BETA,
    );
}

fn rowwise(c: &mut Criterion) {
    let flex = Device::flex();
    let d = &flex;

    compare(
        c,
        "fwd/rms_norm",
        norm,
        |(x, w, _, _)| (float::<2>(x, d), float::<1>(w, d)),
        |(x, w)| burn_route::rms_norm(x, w, EPS),
        |(x, w)| rms_norm_burn(x, w),
    );
    compare(
        c,
        "fwd/layer_norm",
        norm,
        |(x, g, b, _)| (float::<2>(x, d), float::<1>(g, d), float::<1>(b, d)),
        |(x, g, b)| burn_route::layer_norm(x, g, b, EPS),
        |(x, g, b)| layer_norm_burn(x, g, b),
    );
    compare(
        c,
        "fwd/softmax_last",
        one,
        |x| float::<2>(x, d),
        burn_route::softmax_last,
        |x| softmax(x, 1),
    );
    compare(
        c,
        "fwd/cross_entropy_logits",
        logits,
        |(l, t)| (float::<2>(l, d), Tensor::<1, Int>::from_data(t.clone(), d)),
        |(l, t)| burn_route::cross_entropy_logits(l, t),
        |(l, t)| cross_entropy_burn(l, t),
    );
    // The selections borrow their input; it is dropped in the timed part, like the input Burn's
    // versions consume.
    compare(
        c,
        "fwd/topk_last",
        one,
        |x| float::<2>(x, d),
        |x| {
            let out = burn_route::topk_last(&x, K);
            drop(x);
            out
        },
        |x| x.topk_with_indices(K, 1),
    );
    compare(
        c,
        "fwd/argmax_last",
        one,
        |x| float::<2>(x, d),
        |x| {
            let out = burn_route::argmax_last(&x);
            drop(x);
            out
        },
        |x| x.argmax(1),
    );
}

/// `linear_cross_entropy` at `flex::LCE` (logits of 128 MiB) against `burn::nn::Linear` and
/// cross-entropy: the loss with the gradients of `x`, the weight and the bias. Ten samples of
/// one call each (a call takes seconds).
#[cfg(feature = "autodiff")]
fn linear_cross_entropy(c: &mut Criterion) {
    let d = &Device::flex().autodiff();
    let (x, w, b, t) = flex::lce_inputs();
    let mut group = c.benchmark_group("fwd_bwd/linear_cross_entropy");
    group.sample_size(10);
    let inputs = || {
        (
            leaf::<2>(&x, d),
            leaf::<2>(&w, d),
            leaf::<1>(&b, d),
            Tensor::<1, Int>::from_data(t.clone(), d),
        )
    };
    group.bench_function("burn_route", |bch| {
        bch.iter_batched(
            inputs,
            |(x, w, b, t)| flex::linear_ce_route(x, w, b, t).backward(),
            BatchSize::PerIteration,
        );
    });
    group.bench_function("burn_tensor", |bch| {
        bch.iter_batched(
            inputs,
            |(x, w, b, t)| flex::linear_ce_burn(x, w, b, t).backward(),
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

#[cfg(feature = "autodiff")]
fn backward(c: &mut Criterion) {
    let autodiff = Device::flex().autodiff();
    let d = &autodiff;

    compare(
        c,
        "fwd_bwd/add_relu",
        two,
        |(a, b)| (leaf::<2>(a, d), leaf::<2>(b, d)),
        |(a, b)| burn_route::add_relu(a, b).sum().backward(),
        |(a, b)| relu(a + b).sum().backward(),
    );
    compare(
        c,
        "fwd_bwd/bias_gelu",
        with_bias,
        |(x, b, _)| (leaf::<2>(x, d), leaf::<1>(b, d)),
        |(x, b)| burn_route::bias_gelu(x, b).sum().backward(),
        |(x, b)| gelu(x + b.unsqueeze::<2>()).sum().backward(),
    );
    compare(
        c,
        "fwd_bwd/swiglu",
        two,
        |(g, u)| (leaf::<2>(g, d), leaf::<2>(u, d)),
        |(g, u)| burn_route::swiglu(g, u).sum().backward(),
        |(g, u)| (silu(g) * u).sum().backward(),
    );
    compare(
        c,
        "fwd_bwd/rms_norm",
        norm,
        |(x, w, _, lw)| (leaf::<2>(x, d), leaf::<1>(w, d), float::<2>(lw, d)),
        |(x, w, lw)| (burn_route::rms_norm(x, w, EPS) * lw).sum().backward(),
        |(x, w, lw)| (rms_norm_burn(x, w) * lw).sum().backward(),
    );
    compare(
        c,
        "fwd_bwd/layer_norm",
        norm,
        |(x, g, b, lw)| {
            (
                leaf::<2>(x, d),
                leaf::<1>(g, d),
                leaf::<1>(b, d),
                float::<2>(lw, d),
            )
        },
        |(x, g, b, lw)| (burn_route::layer_norm(x, g, b, EPS) * lw).sum().backward(),
        |(x, g, b, lw)| (layer_norm_burn(x, g, b) * lw).sum().backward(),
    );
    compare(
        c,
        "fwd_bwd/softmax_last",
        with_bias,
        |(x, _, lw)| (leaf::<2>(x, d), float::<2>(lw, d)),
        |(x, lw)| (burn_route::softmax_last(x) * lw).sum().backward(),
        |(x, lw)| (softmax(x, 1) * lw).sum().backward(),
    );
    compare(
        c,
        "fwd_bwd/cross_entropy_logits",
        logits,
        |(l, t)| (leaf::<2>(l, d), Tensor::<1, Int>::from_data(t.clone(), d)),
        |(l, t)| burn_route::cross_entropy_logits(l, t).backward(),
        |(l, t)| cross_entropy_burn(l, t).backward(),
    );
    compare(
        c,
        "fwd_bwd/dropout",
        one,
        |x| leaf::<2>(x, d),
        |x| burn_route::dropout(x, P, SEED).0.sum().backward(),
        |x| dropout_burn(x).sum().backward(),
    );
    compare(
        c,
        "fwd_bwd/clamp_ste",
        one,
        |x| leaf::<2>(x, d),
        |x| burn_route::clamp_ste(x, LO, HI).sum().backward(),
        |x| x.clamp(LO, HI).sum().backward(),
    );
    compare(
        c,
        "fwd_bwd/scale",
        one,
        |x| leaf::<2>(x, d),
        |x| burn_route::scale(x, ALPHA).sum().backward(),
        |x| (x * ALPHA).sum().backward(),
    );
    compare(
        c,
        "fwd_bwd/axpby",
        two,
        |(x, y)| (leaf::<2>(x, d), leaf::<2>(y, d)),
        |(x, y)| burn_route::axpby(x, Some(y), ALPHA, BETA).sum().backward(),
        |(x, y)| (x * ALPHA + y * BETA).sum().backward(),
    );
}

// --- Views: the layouts a transformer feeds these ops. ---

/// `[rows, 2 * WIDTH]` projection values, sliced into two `[rows, WIDTH]` views along the last
/// dimension (`gate` and `up` out of one matmul output).
fn projection(n: usize) -> TensorData {
    matrix(2 * n, 2 * WIDTH, 12)
}

fn halves(t: Tensor<2>) -> (Tensor<2>, Tensor<2>) {
    (t.clone().narrow(1, 0, WIDTH), t.narrow(1, WIDTH, WIDTH))
}

/// `[seq, 2, WIDTH]` sequence-first values (`n` elements), to be swapped to `[2, seq, WIDTH]`.
fn sequence_first(n: usize) -> TensorData {
    TensorData::new(uniform(n, 13, -3.0, 3.0), [n / (2 * WIDTH), 2, WIDTH])
}

fn views(c: &mut Criterion) {
    let flex = Device::flex();
    let d = &flex;

    compare(
        c,
        "fwd_view/swiglu",
        projection,
        |p| float::<2>(p, d),
        |p| {
            let (g, u) = halves(p);
            burn_route::swiglu(g, u)
        },
        |p| {
            let (g, u) = halves(p);
            silu(g) * u
        },
    );
    compare(
        c,
        "fwd_view/add_relu",
        projection,
        |p| float::<2>(p, d),
        |p| {
            let (a, b) = halves(p);
            burn_route::add_relu(a, b)
        },
        |p| {
            let (a, b) = halves(p);
            relu(a + b)
        },
    );
    compare(
        c,
        "fwd_view/rms_norm",
        |n| (sequence_first(n), features(8, 0.5, 1.5)),
        |(x, w)| (float::<3>(x, d).swap_dims(0, 1), float::<1>(w, d)),
        |(x, w)| burn_route::rms_norm(x, w, EPS),
        |(x, w)| x.clone() / (x.square().mean_dim(2) + EPS).sqrt() * w.unsqueeze::<3>(),
    );
    compare(
        c,
        "fwd_view/layer_norm",
        |n| {
            (
                sequence_first(n),
                features(8, 0.5, 1.5),
                features(9, -0.5, 0.5),
            )
        },
        |(x, g, b)| {
            (
                float::<3>(x, d).swap_dims(0, 1),
                float::<1>(g, d),
                float::<1>(b, d),
            )
        },
        |(x, g, b)| burn_route::layer_norm(x, g, b, EPS),
        |(x, g, b)| {
            let (var, mean) = x.clone().var_mean_bias(2);
            (x - mean) / (var + EPS).sqrt() * g.unsqueeze::<3>() + b.unsqueeze::<3>()
        },
    );
    compare(
        c,
        "fwd_view/softmax_last",
        sequence_first,
        |x| float::<3>(x, d).swap_dims(0, 1),
        burn_route::softmax_last,
        |x| softmax(x, 2),
    );
}

#[cfg(feature = "autodiff")]
fn views_backward(c: &mut Criterion) {
    let autodiff = Device::flex().autodiff();
    let d = &autodiff;

    compare(
        c,
        "fwd_bwd_view/swiglu",
        projection,
        |p| leaf::<2>(p, d),
        |p| {
            let (g, u) = halves(p);
            burn_route::swiglu(g, u).sum().backward()
        },
        |p| {
            let (g, u) = halves(p);
            (silu(g) * u).sum().backward()
        },
    );
    compare(
        c,
        "fwd_bwd_view/rms_norm",
        |n| (sequence_first(n), features(8, 0.5, 1.5)),
        |(x, w)| (leaf::<3>(x, d).swap_dims(0, 1), leaf::<1>(w, d)),
        |(x, w)| burn_route::rms_norm(x, w, EPS).sum().backward(),
        |(x, w)| {
            (x.clone() / (x.square().mean_dim(2) + EPS).sqrt() * w.unsqueeze::<3>())
                .sum()
                .backward()
        },
    );
    compare(
        c,
        "fwd_bwd_view/softmax_last",
        |n| (sequence_first(n), sequence_first(n)),
        |(x, lw)| {
            (
                leaf::<3>(x, d).swap_dims(0, 1),
                float::<3>(lw, d).swap_dims(0, 1),
            )
        },
        |(x, lw)| (burn_route::softmax_last(x) * lw).sum().backward(),
        |(x, lw)| (softmax(x, 2) * lw).sum().backward(),
    );
}

// --- Ops in a chain: inputs as a previous fused op leaves them. ---

/// `fwd_chained/<op>/burn_route/1M`: the forward pass of the compute-bound ops (and `rms_norm`)
/// at 1M elements, burn-route only, on inputs as the previous op of a model leaves them rather
/// than as the calling thread has just written them (`fwd/<op>`). In the untimed setup every
/// input of 1M floats goes through `clamp_ste` over the whole `f32` range, a fused op that
/// keeps its values: with Flex on rayon, the calling thread and a pool thread each wrote their
/// share of its pieces (each claims from the same end again in the timed op: the caller from
/// the back, the helper from the front) and the pool thread is still awake when the op starts.
/// On one thread this is `fwd/<op>` with one more pass in the setup. `fwd/<op>` is the other
/// end, the first op after the data is loaded: the pool thread wakes during the call and reads
/// every input from the calling thread's cache.
fn chained(c: &mut Criterion) {
    let flex = Device::flex();
    let d = &flex;
    let n = 1 << 20;
    let chain = |x: &TensorData| burn_route::clamp_ste(float::<2>(x, d), f32::MIN, f32::MAX);
    chained_op(
        c,
        "bias_gelu",
        with_bias(n),
        |(x, b, _)| (chain(x), float::<1>(b, d)),
        |(x, b)| burn_route::bias_gelu(x, b),
    );
    chained_op(
        c,
        "swiglu",
        two(n),
        |(g, u)| (chain(g), chain(u)),
        |(g, u)| burn_route::swiglu(g, u),
    );
    chained_op(
        c,
        "rms_norm",
        norm(n),
        |(x, w, _, _)| (chain(x), float::<1>(w, d)),
        |(x, w)| burn_route::rms_norm(x, w, EPS),
    );
    chained_op(
        c,
        "layer_norm",
        norm(n),
        |(x, g, b, _)| (chain(x), float::<1>(g, d), float::<1>(b, d)),
        |(x, g, b)| burn_route::layer_norm(x, g, b, EPS),
    );
    chained_op(c, "softmax_last", one(n), chain, burn_route::softmax_last);
    chained_op(
        c,
        "cross_entropy_logits",
        logits(n),
        |(l, t)| (chain(l), Tensor::<1, Int>::from_data(t.clone(), d)),
        |(l, t)| burn_route::cross_entropy_logits(l, t),
    );
    chained_op(c, "dropout", one(n), chain, |x| {
        burn_route::dropout(x, P, SEED)
    });
}

/// One `fwd_chained/<name>` group at 1M elements: `fresh(&values)` makes the op's inputs
/// (untimed), `op` consumes them (timed).
fn chained_op<P, I, O>(
    c: &mut Criterion,
    name: &str,
    values: P,
    fresh: impl Fn(&P) -> I,
    op: impl Fn(I) -> O,
) {
    let mut group = c.benchmark_group(format!("fwd_chained/{name}"));
    group.throughput(Throughput::Elements(1 << 20));
    group.bench_function(BenchmarkId::new("burn_route", "1M"), |b| {
        b.iter_batched(
            || fresh(&values),
            |inputs| op(black_box(inputs)),
            batch_size(1 << 20),
        );
    });
    group.finish();
}

// --- The memory-bandwidth floor: one in-place pass over `n` floats. ---

/// `floor/<size>`: multiplies every element of a fresh (uniquely owned, already written)
/// buffer of `n` floats by a constant, in place: the least any op that reads and writes `n`
/// floats can cost on this machine (one thread: on the 2-core machine of BENCHMARKS.md two
/// threads were slower at these sizes).
fn floor(c: &mut Criterion) {
    let mut group = c.benchmark_group("floor");
    for (n, label) in SIZES {
        let values = uniform(n, 14, -3.0, 3.0);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::new("in_place", label), |b| {
            b.iter_batched(
                || values.clone(),
                |mut buffer| {
                    pass(&mut buffer);
                    buffer
                },
                batch_size(n),
            );
        });
    }
    group.finish();
}

/// `v * ALPHA` over `buffer`, in place, on this thread.
fn pass(buffer: &mut [f32]) {
    buffer.iter_mut().for_each(|v| *v *= ALPHA);
}

// --- The roofline: what this machine can do for each op, measured in the same run. ---

/// Floats in each buffer of a compute floor: 8 KiB, so an op's two inputs and its output stay
/// in L1 (32 KiB on the machine of BENCHMARKS.md) however often the loop passes over them.
const L1: usize = 2048;

/// The other bandwidth floors, on one thread like `floor/in_place`: `floor/two_inputs` (`a +=
/// b` in place: two reads and one write, the bytes of `add_relu`, `axpby` and `swiglu`) and
/// `floor/read` (a sum in lanes: one read, the bytes of `cross_entropy_logits`).
fn floors(c: &mut Criterion) {
    let mut group = c.benchmark_group("floor");
    for (n, label) in SIZES {
        let (a, b) = (uniform(n, 15, -3.0, 3.0), uniform(n, 16, -3.0, 3.0));
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::new("two_inputs", label), |bench| {
            bench.iter_batched(
                || (a.clone(), b.clone()),
                |(mut a, b)| {
                    a.iter_mut().zip(&b).for_each(|(a, b)| *a += b);
                    (a, b)
                },
                batch_size(n),
            );
        });
        group.bench_function(BenchmarkId::new("read", label), |bench| {
            // (The buffer goes back to be dropped outside the timed part.)
            bench.iter_batched(
                || a.clone(),
                |a| (black_box(lanes_sum(&a)), a),
                batch_size(n),
            );
        });
    }
    group.finish();
}

/// The sum of `values` in 16 independent lanes (a loop the compiler vectorises; one running
/// sum would wait on each addition).
fn lanes_sum(values: &[f32]) -> f32 {
    let mut lanes = [0.0_f32; 16];
    let chunks = values.chunks_exact(16);
    let tail: f32 = chunks.remainder().iter().sum();
    for chunk in chunks {
        lanes.iter_mut().zip(chunk).for_each(|(l, v)| *l += v);
    }
    lanes.iter().sum::<f32>() + tail
}

/// A compute-floor pass of an element-wise op of two inputs: `f` over `a` and `b` into a buffer
/// of its own. (A macro, so that the pass is a closure written in `compute`, compiled for its
/// instruction set; and `f` is inlined into it: through a function pointer the loop stays
/// scalar.)
macro_rules! zip_pass {
    ($a:expr, $b:expr, $f:expr) => {{
        let (a, b, f): (Vec<f32>, Vec<f32>, _) = ($a, $b, $f);
        let mut out = vec![0.0_f32; a.len()];
        move || {
            out.iter_mut()
                .zip(a.iter().zip(&b))
                .for_each(|(o, (a, b))| *o = f(*a, *b));
            black_box(&mut out);
        }
    }};
}

/// Elements of one piece of a compute floor on threads: the kernels' pieces (`flex`'s
/// `PIECE`), eight L1 passes.
const PIECE: usize = 1 << 14;

/// `compute/<name>`: a pass made by `make`, run once per L1 buffer's worth of `n` elements, as
/// one piece of `flex::map_pieces`, the way the kernels' loops run: a pass written in
/// [`compute`] is compiled per instruction set with it, one written in [`compute_on_avx2`] runs
/// inside `flex::vectorized`, on AVX2. (The lock is taken once per iteration, outside the
/// passes.)
///
/// `compute_threads/<name>`, when Flex runs on rayon: the same passes cut into the kernels'
/// pieces and run by `flex::map_pieces` on the calling thread and rayon's pool, each
/// participant on a pass of its own (its own L1 buffers): what this machine's threads can do
/// for the op's arithmetic, hand-off included, with none of the kernel's memory traffic.
fn compute_group<P: FnMut() + Send>(c: &mut Criterion, name: &str, make: impl Fn() -> P) {
    use burn_route::flex::{PARALLEL, Work, map_pieces};
    use std::sync::Mutex;

    let pass = Mutex::new(make());
    let mut group = c.benchmark_group(format!("compute/{name}"));
    for (n, label) in &SIZES[1..] {
        group.throughput(Throughput::Elements(*n as u64));
        group.bench_function(BenchmarkId::from_parameter(label), |bench| {
            bench.iter(|| {
                map_pieces(1, 1, Work::Light, |_, _| {
                    let mut pass = pass.lock().expect("one benchmark at a time");
                    for _ in 0..n / L1 {
                        pass();
                    }
                })
            });
        });
    }
    group.finish();
    if !PARALLEL {
        return;
    }
    // One pass per participant: the caller and at most one helper per other pool thread.
    let passes: Vec<Mutex<P>> = (0..rayon::current_num_threads())
        .map(|_| Mutex::new(make()))
        .collect();
    let mut group = c.benchmark_group(format!("compute_threads/{name}"));
    for (n, label) in &SIZES[1..] {
        group.throughput(Throughput::Elements(*n as u64));
        group.bench_function(BenchmarkId::from_parameter(label), |bench| {
            bench.iter(|| {
                // One row of PIECE elements per piece; `Work::Heavy` splits from 64K.
                map_pieces(n / PIECE, PIECE, Work::Heavy, |_, rows| {
                    let mut pass = passes
                        .iter()
                        .find_map(|pass| pass.try_lock().ok())
                        .expect("a pass per participant");
                    for _ in 0..rows * PIECE / L1 {
                        pass();
                    }
                })
            });
        });
    }
    group.finish();
}

burn_route::flex::simd_fn! {
    /// The compute floor of each fused op, `compute/<op>/<size>`: the op's arithmetic (the
    /// same `burn_route::kernels::arith` functions its Flex kernel calls) over `size` elements,
    /// as passes over [`L1`]-float buffers that stay in the cache, on one thread (and on every
    /// thread, `compute_threads/`, when Flex runs on rayon: see [`compute_group`]), compiled for
    /// the instruction set its kernel runs on: the widest the CPU has for the ops whose kernels
    /// are written in `flex::simd_fn!` (here), AVX2 for the others ([`compute_on_avx2`]).
    /// Element-wise ops write into a buffer of their own; row-wise ops copy their inputs into
    /// one (in L1) and work in place there, as their kernels do (applied to its own output
    /// again, a norm would shrink the rows its weights scale down into subnormals);
    /// cross-entropy only reads. What is left of an op's time above the larger of its two
    /// floors is memory traffic the op could overlap, and overhead.
    fn compute(c: &mut Criterion) {
        use burn_route::kernels::arith;

        let a = uniform(L1, 17, -3.0, 3.0);
        let b = uniform(L1, 18, -3.0, 3.0);
        let bias = uniform(WIDTH, 19, -1.0, 1.0);
        let classes: Vec<usize> = (0..L1 / CLASSES).map(|i| (i * 37 + 11) % CLASSES).collect();

        // (Each pass owns its buffers.)
        // The element-wise ops of two inputs, into a buffer of their own.
        compute_group(c, "add_relu", || {
            zip_pass!(a.clone(), b.clone(), arith::add_relu)
        });
        compute_group(c, "axpby", || {
            zip_pass!(a.clone(), b.clone(), |x, y| arith::axpby(x, y, ALPHA, BETA))
        });
        compute_group(c, "swiglu", || {
            zip_pass!(a.clone(), b.clone(), arith::swiglu)
        });
        compute_group(c, "bias_gelu", || {
            let (x, bias, mut out) = (a.clone(), bias.clone(), vec![0.0_f32; L1]);
            move || {
                // (A copy of the inputs, then the kernel's own row function in place.)
                out.copy_from_slice(&x);
                for row in out.chunks_exact_mut(WIDTH) {
                    arith::bias_gelu_row(row, &bias);
                }
                black_box(&mut out);
            }
        });
        compute_group(c, "softmax_last", || {
            let (x, mut out) = (a.clone(), vec![0.0_f32; L1]);
            move || {
                out.copy_from_slice(&x);
                for row in out.chunks_exact_mut(WIDTH) {
                    arith::softmax_row(row);
                }
                black_box(&mut out);
            }
        });
        compute_group(c, "cross_entropy_logits", || {
            let (x, classes) = (a.clone(), classes.clone());
            move || {
                let loss: f64 = (0..L1 / CLASSES)
                    .map(|r| arith::cross_entropy_row(&x[r * CLASSES..][..CLASSES], classes[r]))
                    .sum();
                black_box(loss);
            }
        });
    }
}

/// The compute floors of the ops whose kernels run on AVX2 (`flex::vectorized`, not
/// `flex::simd_fn!`): the norms and dropout. See [`compute`]. Their passes are written in a
/// function compiled for AVX2 (where the CPU has it, as `flex::vectorized` picks), so that they
/// run on it whether or not they are inlined: each pass is called from two places (`compute/`
/// and `compute_threads/`), and a closure compiled on its own gets the baseline otherwise.
fn compute_on_avx2(c: &mut Criterion) {
    #[cfg(target_arch = "x86_64")]
    if burn_route::flex::isa() >= burn_route::flex::Isa::Avx2 {
        // SAFETY: the CPU has AVX2 (`isa` never exceeds what it detected).
        unsafe { avx2_floors_on_avx2(c) };
        return;
    }
    avx2_floors_on_baseline(c);
}

/// The body of [`compute_on_avx2`], compiled twice.
macro_rules! avx2_floors {
    ($c:ident) => {{
        let c: &mut Criterion = $c;
        use burn_route::kernels::arith;

        let a = uniform(L1, 17, -3.0, 3.0);
        let gamma = uniform(WIDTH, 20, 0.5, 1.5);
        let beta = uniform(WIDTH, 21, -0.5, 0.5);
        let scale = 1.0 / (1.0 - P);
        compute_group(c, "rms_norm", || {
            let (x, g, mut out) = (a.clone(), gamma.clone(), vec![0.0_f32; L1]);
            move || {
                out.copy_from_slice(&x);
                for row in out.chunks_exact_mut(WIDTH) {
                    arith::rms_norm_row(row, &g, EPS);
                }
                black_box(&mut out);
            }
        });
        compute_group(c, "layer_norm", || {
            let (x, g, b, mut out) = (a.clone(), gamma.clone(), beta.clone(), vec![0.0_f32; L1]);
            move || {
                out.copy_from_slice(&x);
                for row in out.chunks_exact_mut(WIDTH) {
                    arith::layer_norm_row(row, &g, &b, EPS);
                }
                black_box(&mut out);
            }
        });
        compute_group(c, "dropout", || {
            let (x, mut out) = (a.clone(), a.clone());
            let mut keep = vec![std::mem::MaybeUninit::<bool>::uninit(); L1];
            let mut start = 0;
            move || {
                burn_route::kernels::composed::dropout_keep_into(&mut keep, start, P, SEED);
                start += L1;
                // SAFETY: `dropout_keep_into` wrote every element of `keep`.
                let kept = unsafe { std::slice::from_raw_parts(keep.as_ptr().cast::<bool>(), L1) };
                arith::dropout_apply(&mut out, kept, scale);
                // (Kept values grow by `scale` each pass: start over from the inputs now and then.)
                if start % (64 * L1) == 0 {
                    out.copy_from_slice(&x);
                }
                black_box(&mut out);
            }
        });
    }};
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avx2_floors_on_avx2(c: &mut Criterion) {
    avx2_floors!(c);
}

fn avx2_floors_on_baseline(c: &mut Criterion) {
    avx2_floors!(c);
}

// --- Both variants compute the same thing (checked once, at 1K elements, before timing). ---

fn floats<const D: usize>(t: &Tensor<D>) -> Vec<f32> {
    t.try_to_vec_as::<f32>().expect("float values")
}

fn ints<const D: usize>(t: &Tensor<D, Int>) -> Vec<i64> {
    t.try_to_vec_as::<i64>().expect("int values")
}

#[track_caller]
fn assert_close<const D: usize>(ours: &Tensor<D>, theirs: &Tensor<D>, what: &str) {
    assert_eq!(ours.shape(), theirs.shape(), "{what}: shapes differ");
    for (i, (a, b)) in floats(ours).iter().zip(floats(theirs)).enumerate() {
        assert!(
            (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
            "{what}: the two variants differ at element {i}: {a} vs {b}"
        );
    }
}

fn same_values(_: &mut Criterion) {
    let d = &Device::flex();
    let n = SIZES[0].0;
    let (a, b) = two(n);
    let (a, b) = (float::<2>(&a, d), float::<2>(&b, d));
    let (x, bias, _) = with_bias(n);
    let (x, bias) = (float::<2>(&x, d), float::<1>(&bias, d));
    let (_, gamma, beta, _) = norm(n);
    let (gamma, beta) = (float::<1>(&gamma, d), float::<1>(&beta, d));

    let close = |ours: Tensor<2>, theirs: Tensor<2>, what| assert_close(&ours, &theirs, what);
    close(
        burn_route::add_relu(a.clone(), b.clone()),
        relu(a.clone() + b.clone()),
        "add_relu",
    );
    close(
        burn_route::bias_gelu(x.clone(), bias.clone()),
        gelu(x.clone() + bias.clone().unsqueeze::<2>()),
        "bias_gelu",
    );
    close(
        burn_route::swiglu(a.clone(), b.clone()),
        silu(a.clone()) * b.clone(),
        "swiglu",
    );
    close(
        burn_route::rms_norm(x.clone(), gamma.clone(), EPS),
        rms_norm_burn(x.clone(), gamma.clone()),
        "rms_norm",
    );
    close(
        burn_route::layer_norm(x.clone(), gamma.clone(), beta.clone(), EPS),
        layer_norm_burn(x.clone(), gamma, beta),
        "layer_norm",
    );
    close(
        burn_route::softmax_last(x.clone()),
        softmax(x.clone(), 1),
        "softmax_last",
    );
    close(
        burn_route::clamp_ste(x.clone(), LO, HI),
        x.clone().clamp(LO, HI),
        "clamp_ste",
    );
    close(
        burn_route::scale(x.clone(), ALPHA),
        x.clone() * ALPHA,
        "scale",
    );
    close(
        burn_route::axpby(a.clone(), Some(b.clone()), ALPHA, BETA),
        a.clone() * ALPHA + b * BETA,
        "axpby",
    );
    let (ours, ours_idx) = burn_route::topk_last(&x, K);
    let (theirs, theirs_idx) = x.clone().topk_with_indices(K, 1);
    close(ours, theirs, "topk_last values");
    assert_eq!(ints(&ours_idx), ints(&theirs_idx), "topk_last indices");
    assert_eq!(
        ints(&burn_route::argmax_last(&x)),
        ints(&x.clone().argmax(1)),
        "argmax_last"
    );

    let (l, t) = logits(n);
    let (l, t) = (float::<2>(&l, d), Tensor::<1, Int>::from_data(t, d));
    assert_close(
        &burn_route::cross_entropy_logits(l.clone(), t.clone()),
        &cross_entropy_burn(l, t),
        "cross_entropy_logits",
    );

    // Different masks: compare what survives, and how often, on a large input.
    let big = one(SIZES[2].0);
    let input = floats(&float::<2>(&big, d));
    for (what, out) in [
        (
            "burn_route",
            burn_route::dropout(float::<2>(&big, d), P, SEED).0,
        ),
        ("burn_tensor", dropout_burn(float::<2>(&big, d))),
    ] {
        let out = floats(&out);
        let kept = out.iter().zip(&input).filter(|(o, _)| **o != 0.0);
        let mut count = 0_usize;
        for (o, i) in kept {
            assert!(
                (o - i / (1.0 - P)).abs() <= 1e-5 * (1.0 + o.abs()),
                "dropout {what}: scale"
            );
            count += 1;
        }
        #[allow(clippy::cast_precision_loss)] // Counts up to 2^20.
        let rate = count as f32 / input.len() as f32;
        assert!(
            (rate - (1.0 - P)).abs() < 0.01,
            "dropout {what}: keep rate {rate}"
        );
    }
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(1))
}

#[cfg(feature = "autodiff")]
criterion_group! {
    name = benches;
    config = config();
    targets = same_values, floor, floors, compute, compute_on_avx2, elementwise, rowwise, chained, views, backward, views_backward, half, linear_cross_entropy
}

#[cfg(not(feature = "autodiff"))]
criterion_group! {
    name = benches;
    config = config();
    targets = same_values, floor, floors, compute, compute_on_avx2, elementwise, rowwise, chained, views, half
}

criterion_main!(benches);
