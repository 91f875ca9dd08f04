//! The per-op table of the memory bench: each fused op's forward and forward+backward peak
//! against Burn's at 64K and 1M values (see `benches/memory.rs`).

use burn_tensor::activation::{gelu, relu, silu, softmax};
use burn_tensor::module::linear;
use burn_tensor::{Bool, Device, Int, Tensor, TensorData};

use super::peak;
use crate::common::uniform;
use crate::flex::{
    CLASSES, EPS, P, WIDTH, cross_entropy_burn, dropout_burn, features, float, layer_norm_burn,
    leaf, matrix, rms_norm_burn,
};
use crate::shared::kib;

/// Measures every op at 64K and 1M values and prints the table.
pub fn table() {
    let mut rows = Vec::new();
    for (n, size) in [(1 << 16, "64K"), (1 << 20, "1M")] {
        measure(n, size, &mut rows);
    }
    println!("| op | pass | size | burn-route, KiB | Burn, KiB | burn-route / Burn |");
    println!("|---|---|---|---:|---:|---:|");
    for r in &rows {
        // Below 64 KiB on both sides the op ran in place (the figures are bookkeeping), and a
        // ratio of two such figures says nothing.
        #[allow(clippy::cast_precision_loss)]
        let ratio = if r.ours.max(r.burn) < SMALL {
            "both in place".to_owned()
        } else if r.ours < SMALL {
            "burn-route in place".to_owned()
        } else {
            format!("{:.2}x", r.ours as f64 / r.burn.max(1) as f64)
        };
        println!(
            "| {} | {} | {} | {} | {} | {ratio} |",
            r.op,
            r.pass,
            r.size,
            kib(r.ours),
            kib(r.burn)
        );
    }
}

const SEED: u64 = 0x5EED;

fn targets(rows: usize) -> TensorData {
    let t: Vec<i64> = (0..rows)
        .map(|i| i64::try_from((i * 37 + 11) % CLASSES).expect("fits"))
        .collect();
    TensorData::new(t, [rows])
}

/// One row of the table: the op, the pass, the size, burn-route's and Burn's peaks.
struct Row {
    op: &'static str,
    pass: &'static str,
    size: &'static str,
    ours: usize,
    burn: usize,
}

#[allow(clippy::too_many_lines)]
fn measure(n: usize, size: &'static str, rows: &mut Vec<Row>) {
    let flex = Device::flex();
    let ad = Device::flex().autodiff();
    let (f, a) = (&flex, &ad);
    let x = matrix(n, WIDTH, 1);
    let y = matrix(n, WIDTH, 2);
    let w = matrix(n, WIDTH, 3);
    let bias = features(4, -1.0, 1.0);
    let gamma = features(5, 0.5, 1.5);
    let beta = features(6, -0.5, 0.5);
    let logits = matrix(n, CLASSES, 7);
    // The projection of the `*_linear` ops: `[WIDTH, WIDTH]`, scaled so outputs stay O(1).
    let proj = TensorData::new(uniform(WIDTH * WIDTH, 8, -0.06, 0.06), [WIDTH, WIDTH]);
    let t = targets(n / CLASSES);
    let mut row = |op, pass, ours, burn| {
        rows.push(Row {
            op,
            pass,
            size,
            ours,
            burn,
        });
    };

    // Forward.
    let fwd = "fwd";
    row(
        "add_relu",
        fwd,
        peak(
            || (float::<2>(&x, f), float::<2>(&y, f)),
            |(x, y)| burn_route::add_relu(x, y),
        ),
        peak(
            || (float::<2>(&x, f), float::<2>(&y, f)),
            |(x, y)| relu(x + y),
        ),
    );
    row(
        "bias_gelu",
        fwd,
        peak(
            || (float::<2>(&x, f), float::<1>(&bias, f)),
            |(x, b)| burn_route::bias_gelu(x, b),
        ),
        peak(
            || (float::<2>(&x, f), float::<1>(&bias, f)),
            |(x, b)| gelu(x + b.unsqueeze::<2>()),
        ),
    );
    row(
        "swiglu",
        fwd,
        peak(
            || (float::<2>(&x, f), float::<2>(&y, f)),
            |(g, u)| burn_route::swiglu(g, u),
        ),
        peak(
            || (float::<2>(&x, f), float::<2>(&y, f)),
            |(g, u)| silu(g) * u,
        ),
    );
    row(
        "rms_norm",
        fwd,
        peak(
            || (float::<2>(&x, f), float::<1>(&gamma, f)),
            |(x, g)| burn_route::rms_norm(x, g, EPS),
        ),
        peak(
            || (float::<2>(&x, f), float::<1>(&gamma, f)),
            |(x, g)| rms_norm_burn(x, g),
        ),
    );
    row(
        "layer_norm",
        fwd,
        peak(
            || {
                (
                    float::<2>(&x, f),
                    float::<1>(&gamma, f),
                    float::<1>(&beta, f),
                )
            },
            |(x, g, b)| burn_route::layer_norm(x, g, b, EPS),
        ),
        peak(
            || {
                (
                    float::<2>(&x, f),
                    float::<1>(&gamma, f),
                    float::<1>(&beta, f),
                )
            },
            |(x, g, b)| layer_norm_burn(x, g, b),
        ),
    );
    row(
        "softmax_last",
        fwd,
        peak(|| float::<2>(&x, f), burn_route::softmax_last),
        peak(|| float::<2>(&x, f), |x| softmax(x, 1)),
    );
    row(
        "cross_entropy_logits",
        fwd,
        peak(
            || {
                (
                    float::<2>(&logits, f),
                    Tensor::<1, Int>::from_data(t.clone(), f),
                )
            },
            |(l, t)| burn_route::cross_entropy_logits(l, t),
        ),
        peak(
            || {
                (
                    float::<2>(&logits, f),
                    Tensor::<1, Int>::from_data(t.clone(), f),
                )
            },
            |(l, t)| cross_entropy_burn(l, t),
        ),
    );
    row(
        "dropout",
        fwd,
        peak(|| float::<2>(&x, f), |x| burn_route::dropout(x, P, SEED)),
        peak(|| float::<2>(&x, f), dropout_burn),
    );

    // Forward and backward: the loss of `benches/ops.rs` (a weighted sum for the row-wise ops).
    row(
        "rms_norm_linear",
        fwd,
        peak(
            || {
                (
                    float::<2>(&x, f),
                    float::<1>(&gamma, f),
                    float::<2>(&proj, f),
                )
            },
            |(x, g, p)| burn_route::rms_norm_linear(x, g, p, None, EPS),
        ),
        peak(
            || {
                (
                    float::<2>(&x, f),
                    float::<1>(&gamma, f),
                    float::<2>(&proj, f),
                )
            },
            |(x, g, p)| linear(rms_norm_burn(x, g), p, None),
        ),
    );
    row(
        "layer_norm_linear",
        fwd,
        peak(
            || {
                let (x, g, b) = (
                    float::<2>(&x, f),
                    float::<1>(&gamma, f),
                    float::<1>(&beta, f),
                );
                (x, g, b, float::<2>(&proj, f))
            },
            |(x, g, b, p)| burn_route::layer_norm_linear(x, g, b, p, None, EPS),
        ),
        peak(
            || {
                let (x, g, b) = (
                    float::<2>(&x, f),
                    float::<1>(&gamma, f),
                    float::<1>(&beta, f),
                );
                (x, g, b, float::<2>(&proj, f))
            },
            |(x, g, b, p)| linear(layer_norm_burn(x, g, b), p, None),
        ),
    );
    row(
        "swiglu_linear",
        fwd,
        peak(
            || (float::<2>(&x, f), float::<2>(&y, f), float::<2>(&proj, f)),
            |(g, u, p)| burn_route::swiglu_linear(g, u, p, None),
        ),
        peak(
            || (float::<2>(&x, f), float::<2>(&y, f), float::<2>(&proj, f)),
            |(g, u, p)| linear(silu(g) * u, p, None),
        ),
    );

    row(
        "rms_norm_swiglu_mlp",
        fwd,
        peak(
            || mlp_inputs([&x, &gamma, &proj], f, false),
            |(x, g, [wg, wu, wd])| burn_route::rms_norm_swiglu_mlp(x, g, wg, wu, wd, EPS),
        ),
        peak(
            || mlp_inputs([&x, &gamma, &proj], f, false),
            |(x, g, [wg, wu, wd])| mlp_burn(x, g, [wg, wu, wd]),
        ),
    );
    row(
        "self_attention",
        fwd,
        peak(
            || attention_inputs(&x, &proj, f, false),
            |(x, [wq, wk, wv, wo])| burn_route::self_attention(x, wq, wk, wv, wo, HEADS, true),
        ),
        peak(
            || attention_inputs(&x, &proj, f, false),
            |(x, weights)| attention_burn(x, weights),
        ),
    );

    let bwd = "fwd+bwd";
    row(
        "add_relu",
        bwd,
        peak(
            || (leaf::<2>(&x, a), leaf::<2>(&y, a)),
            |(x, y)| burn_route::add_relu(x, y).sum().backward(),
        ),
        peak(
            || (leaf::<2>(&x, a), leaf::<2>(&y, a)),
            |(x, y)| relu(x + y).sum().backward(),
        ),
    );
    row(
        "bias_gelu",
        bwd,
        peak(
            || (leaf::<2>(&x, a), leaf::<1>(&bias, a)),
            |(x, b)| burn_route::bias_gelu(x, b).sum().backward(),
        ),
        peak(
            || (leaf::<2>(&x, a), leaf::<1>(&bias, a)),
            |(x, b)| gelu(x + b.unsqueeze::<2>()).sum().backward(),
        ),
    );
    row(
        "swiglu",
        bwd,
        peak(
            || (leaf::<2>(&x, a), leaf::<2>(&y, a)),
            |(g, u)| burn_route::swiglu(g, u).sum().backward(),
        ),
        peak(
            || (leaf::<2>(&x, a), leaf::<2>(&y, a)),
            |(g, u)| (silu(g) * u).sum().backward(),
        ),
    );
    row(
        "rms_norm",
        bwd,
        peak(
            || (leaf::<2>(&x, a), leaf::<1>(&gamma, a), float::<2>(&w, a)),
            |(x, g, w)| (burn_route::rms_norm(x, g, EPS) * w).sum().backward(),
        ),
        peak(
            || (leaf::<2>(&x, a), leaf::<1>(&gamma, a), float::<2>(&w, a)),
            |(x, g, w)| (rms_norm_burn(x, g) * w).sum().backward(),
        ),
    );
    row(
        "layer_norm",
        bwd,
        peak(
            || {
                (
                    leaf::<2>(&x, a),
                    leaf::<1>(&gamma, a),
                    leaf::<1>(&beta, a),
                    float::<2>(&w, a),
                )
            },
            |(x, g, b, w)| (burn_route::layer_norm(x, g, b, EPS) * w).sum().backward(),
        ),
        peak(
            || {
                (
                    leaf::<2>(&x, a),
                    leaf::<1>(&gamma, a),
                    leaf::<1>(&beta, a),
                    float::<2>(&w, a),
                )
            },
            |(x, g, b, w)| (layer_norm_burn(x, g, b) * w).sum().backward(),
        ),
    );
    row(
        "softmax_last",
        bwd,
        peak(
            || (leaf::<2>(&x, a), float::<2>(&w, a)),
            |(x, w)| (burn_route::softmax_last(x) * w).sum().backward(),
        ),
        peak(
            || (leaf::<2>(&x, a), float::<2>(&w, a)),
            |(x, w)| (softmax(x, 1) * w).sum().backward(),
        ),
    );
    row(
        "cross_entropy_logits",
        bwd,
        peak(
            || {
                (
                    leaf::<2>(&logits, a),
                    Tensor::<1, Int>::from_data(t.clone(), a),
                )
            },
            |(l, t)| burn_route::cross_entropy_logits(l, t).backward(),
        ),
        peak(
            || {
                (
                    leaf::<2>(&logits, a),
                    Tensor::<1, Int>::from_data(t.clone(), a),
                )
            },
            |(l, t)| cross_entropy_burn(l, t).backward(),
        ),
    );
    row(
        "dropout",
        bwd,
        peak(
            || leaf::<2>(&x, a),
            |x| burn_route::dropout(x, P, SEED).0.sum().backward(),
        ),
        peak(|| leaf::<2>(&x, a), |x| dropout_burn(x).sum().backward()),
    );
    row(
        "rms_norm_linear",
        bwd,
        peak(
            || {
                (
                    leaf::<2>(&x, a),
                    leaf::<1>(&gamma, a),
                    leaf::<2>(&proj, a),
                    float::<2>(&w, a),
                )
            },
            |(x, g, p, w)| {
                (burn_route::rms_norm_linear(x, g, p, None, EPS) * w)
                    .sum()
                    .backward()
            },
        ),
        peak(
            || {
                (
                    leaf::<2>(&x, a),
                    leaf::<1>(&gamma, a),
                    leaf::<2>(&proj, a),
                    float::<2>(&w, a),
                )
            },
            |(x, g, p, w)| (linear(rms_norm_burn(x, g), p, None) * w).sum().backward(),
        ),
    );
    row(
        "layer_norm_linear",
        bwd,
        peak(
            || {
                let (x, g, b) = (leaf::<2>(&x, a), leaf::<1>(&gamma, a), leaf::<1>(&beta, a));
                (x, g, b, leaf::<2>(&proj, a), float::<2>(&w, a))
            },
            |(x, g, b, p, w)| {
                (burn_route::layer_norm_linear(x, g, b, p, None, EPS) * w)
                    .sum()
                    .backward()
            },
        ),
        peak(
            || {
                let (x, g, b) = (leaf::<2>(&x, a), leaf::<1>(&gamma, a), leaf::<1>(&beta, a));
                (x, g, b, leaf::<2>(&proj, a), float::<2>(&w, a))
            },
            |(x, g, b, p, w)| {
                (linear(layer_norm_burn(x, g, b), p, None) * w)
                    .sum()
                    .backward()
            },
        ),
    );
    row(
        "swiglu_linear",
        bwd,
        peak(
            || {
                (
                    leaf::<2>(&x, a),
                    leaf::<2>(&y, a),
                    leaf::<2>(&proj, a),
                    float::<2>(&w, a),
                )
            },
            |(g, u, p, w)| {
                (burn_route::swiglu_linear(g, u, p, None) * w)
                    .sum()
                    .backward()
            },
        ),
        peak(
            || {
                (
                    leaf::<2>(&x, a),
                    leaf::<2>(&y, a),
                    leaf::<2>(&proj, a),
                    float::<2>(&w, a),
                )
            },
            |(g, u, p, w)| (linear(silu(g) * u, p, None) * w).sum().backward(),
        ),
    );
    row(
        "rms_norm_swiglu_mlp",
        bwd,
        peak(
            || (mlp_inputs([&x, &gamma, &proj], a, true), float::<2>(&w, a)),
            |((x, g, [wg, wu, wd]), w)| {
                (burn_route::rms_norm_swiglu_mlp(x, g, wg, wu, wd, EPS) * w)
                    .sum()
                    .backward()
            },
        ),
        peak(
            || (mlp_inputs([&x, &gamma, &proj], a, true), float::<2>(&w, a)),
            |((x, g, weights), w)| (mlp_burn(x, g, weights) * w).sum().backward(),
        ),
    );
    let w3 = |d: &Device| float::<2>(&w, d).reshape(attention_shape(n));
    row(
        "self_attention",
        bwd,
        peak(
            || (attention_inputs(&x, &proj, a, true), w3(a)),
            |((x, [wq, wk, wv, wo]), w)| {
                (burn_route::self_attention(x, wq, wk, wv, wo, HEADS, true) * w)
                    .sum()
                    .backward()
            },
        ),
        peak(
            || (attention_inputs(&x, &proj, a, true), w3(a)),
            |((x, weights), w)| (attention_burn(x, weights) * w).sum().backward(),
        ),
    );
}

/// `self_attention`'s sequence length and heads in the per-op rows.
const SEQUENCE: usize = 16;
const HEADS: usize = 4;

/// `x`'s `[n / WIDTH / SEQUENCE, SEQUENCE, WIDTH]`.
fn attention_shape(n: usize) -> [usize; 3] {
    [n / WIDTH / SEQUENCE, SEQUENCE, WIDTH]
}

/// `self_attention`'s inputs: `x` as sequences of `SEQUENCE` rows and four `[WIDTH, WIDTH]`
/// projections, tracked leaves when `tracked` (on an autodiff device).
fn attention_inputs(
    x: &TensorData,
    proj: &TensorData,
    device: &Device,
    tracked: bool,
) -> (Tensor<3>, [Tensor<2>; 4]) {
    let n = x.num_elements();
    let two = |d| float::<2>(d, device);
    let x = two(x).reshape(attention_shape(n)).set_require_grad(tracked);
    (x, [0; 4].map(|_| two(proj).set_require_grad(tracked)))
}

/// Causal multi-head self-attention as a Burn user writes it: `module::linear` for the four
/// projections, the heads by `reshape` and `swap_dims`, `matmul`, a `mask_fill` above the
/// diagonal and Burn's `softmax`.
fn attention_burn(x: Tensor<3>, [wq, wk, wv, wo]: [Tensor<2>; 4]) -> Tensor<3> {
    let [b, s, f] = x.dims();
    let head = f / HEADS;
    let split = |w: Tensor<2>| {
        linear(x.clone(), w, None)
            .reshape([b, s, HEADS, head])
            .swap_dims(1, 2)
    };
    let (q, k, v) = (split(wq), split(wk), split(wv));
    #[allow(clippy::cast_precision_loss)]
    let scores = q.matmul(k.swap_dims(2, 3)) * (1.0 / (head as f32).sqrt());
    let mask = Tensor::<2, Bool>::tril_mask([s, s], 0, &x.device())
        .unsqueeze::<4>()
        .expand([b, HEADS, s, s]);
    let weights = softmax(scores.mask_fill(mask, f32::NEG_INFINITY), 3);
    linear(
        weights.matmul(v).swap_dims(1, 2).reshape([b, s, f]),
        wo,
        None,
    )
}

/// `rms_norm_swiglu_mlp`'s inputs: `x`, the norm's weight and three `[WIDTH, WIDTH]`
/// projections, tracked leaves when `tracked` (on an autodiff device).
fn mlp_inputs(
    [x, gamma, proj]: [&TensorData; 3],
    device: &Device,
    tracked: bool,
) -> (Tensor<2>, Tensor<1>, [Tensor<2>; 3]) {
    let two = |d| float::<2>(d, device).set_require_grad(tracked);
    let g = float::<1>(gamma, device).set_require_grad(tracked);
    (two(x), g, [two(proj), two(proj), two(proj)])
}

/// The pre-norm SwiGLU MLP as a Burn user writes it: `RmsNorm`'s composition, then
/// `module::linear` for the gate, up and down projections.
fn mlp_burn(x: Tensor<2>, g: Tensor<1>, [wg, wu, wd]: [Tensor<2>; 3]) -> Tensor<2> {
    let h = rms_norm_burn(x, g);
    let up = linear(h.clone(), wu, None);
    linear(silu(linear(h, wg, None)) * up, wd, None)
}

/// Peaks below this on both sides are bookkeeping, not tensor buffers.
const SMALL: usize = 64 * 1024;
