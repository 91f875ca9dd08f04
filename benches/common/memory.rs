//! What the memory benches (`benches/memory.rs` on Flex, `benches/memory_cube.rs` on Cube)
//! share: their figures in KiB, and their training step, a small transformer-style block (embedding, attention scores through
//! `softmax_last`, `rms_norm`, a SwiGLU MLP, `layer_norm`, `bias_gelu`, and the output
//! projection with the loss), written with burn-route's fused ops and with Burn's ops and
//! compositions. Included by those two with `#[path]`.

use burn_tensor::activation::{gelu, silu, softmax};
use burn_tensor::{Device, Int, Tensor, TensorData};

use crate::common::uniform;
use crate::flex::{EPS, cross_entropy_burn, layer_norm_burn, rms_norm_burn};

/// Batch, sequence, width, hidden width of the MLP, vocabulary.
pub const BATCH: usize = 32;
pub const SEQ: usize = 16;
pub const MODEL: usize = 64;
pub const HIDDEN: usize = 128;
pub const VOCAB: usize = 128;

/// The block's parameters: matrices (embedding, q, k, v, o, MLP gate/up/down, dense, output)
/// and vectors (norm weights and biases).
pub struct Block {
    matrices: Vec<Tensor<2>>,
    vectors: Vec<Tensor<1>>,
}

impl Block {
    pub fn new(device: &Device) -> Self {
        let shapes = [
            (VOCAB, MODEL),
            (MODEL, MODEL),
            (MODEL, MODEL),
            (MODEL, MODEL),
            (MODEL, MODEL),
            (MODEL, HIDDEN),
            (MODEL, HIDDEN),
            (HIDDEN, MODEL),
            (MODEL, MODEL),
            (MODEL, VOCAB),
        ];
        let matrices = shapes
            .iter()
            .zip(20u64..)
            .map(|(&(r, c), seed)| {
                Tensor::<2>::from_data(
                    TensorData::new(uniform(r * c, seed, -0.1, 0.1), [r, c]),
                    device,
                )
                .require_grad()
            })
            .collect();
        let vectors = [(0.5, 1.5), (0.5, 1.5), (-0.1, 0.1), (-0.1, 0.1)]
            .iter()
            .zip(40u64..)
            .map(|(&(lo, hi), seed)| {
                Tensor::<1>::from_data(
                    TensorData::new(uniform(MODEL, seed, lo, hi), [MODEL]),
                    device,
                )
                .require_grad()
            })
            .collect();
        Self { matrices, vectors }
    }

    /// The loss on `tokens` (and their next-token `targets`): with burn-route's fused ops, or
    /// with what a Burn user writes.
    pub fn loss(&self, tokens: Tensor<1, Int>, targets: Tensor<1, Int>, fused: bool) -> Tensor<1> {
        let m = &self.matrices;
        let v = &self.vectors;
        let rows = BATCH * SEQ;
        let x = m[0].clone().select(0, tokens);
        let heads =
            |w: &Tensor<2>, x: &Tensor<2>| x.clone().matmul(w.clone()).reshape([BATCH, SEQ, MODEL]);
        let (q, k, val) = (heads(&m[1], &x), heads(&m[2], &x), heads(&m[3], &x));
        #[allow(clippy::cast_precision_loss)]
        let scores = q.matmul(k.swap_dims(1, 2)) * (1.0 / (MODEL as f32).sqrt());
        let attn = if fused {
            burn_route::softmax_last(scores)
        } else {
            softmax(scores, 2)
        };
        let a = attn.matmul(val).reshape([rows, MODEL]);
        let x = x + a.matmul(m[4].clone());
        let h = if fused {
            burn_route::rms_norm(x.clone(), v[0].clone(), EPS)
        } else {
            rms_norm_burn(x.clone(), v[0].clone())
        };
        let (gate, up) = (h.clone().matmul(m[5].clone()), h.matmul(m[6].clone()));
        let mlp = if fused {
            burn_route::swiglu(gate, up)
        } else {
            silu(gate) * up
        };
        let x = x + mlp.matmul(m[7].clone());
        let h = if fused {
            burn_route::layer_norm(x.clone(), v[1].clone(), v[2].clone(), EPS)
        } else {
            layer_norm_burn(x.clone(), v[1].clone(), v[2].clone())
        };
        let z = h.matmul(m[8].clone());
        let dense = if fused {
            burn_route::bias_gelu(z, v[3].clone())
        } else {
            gelu(z + v[3].clone().unsqueeze::<2>())
        };
        let features = x + dense;
        // The output projection and the loss: burn-route's chunked `linear_cross_entropy`
        // (the `[rows, vocabulary]` logits never exist whole), or Burn's matmul and
        // cross-entropy.
        if fused {
            burn_route::linear_cross_entropy(
                features,
                m[9].clone().transpose(),
                None,
                targets,
                burn_route::CrossEntropyOptions::default(),
            )
        } else {
            cross_entropy_burn(features.matmul(m[9].clone()), targets)
        }
    }

    /// One step: forward, backward, and a plain SGD update of every parameter.
    pub fn step(self, tokens: Tensor<1, Int>, targets: Tensor<1, Int>, fused: bool) -> Self {
        const LR: f32 = 0.1;
        let grads = self.loss(tokens, targets, fused).backward();
        // The updated parameter keeps the step's checkpointing strategy (a tensor made with
        // `from_inner` gets the default one, which Burn refuses to mix).
        let update2 = |p: Tensor<2>| {
            let g = p.grad(&grads).expect("a gradient");
            let strategy = p
                .gradient_checkpointing_strategy()
                .expect("a tracked parameter");
            Tensor::<2>::from_inner(p.inner() - g * LR)
                .require_grad()
                .with_gradient_checkpointing_strategy(strategy)
        };
        let update1 = |p: Tensor<1>| {
            let g = p.grad(&grads).expect("a gradient");
            let strategy = p
                .gradient_checkpointing_strategy()
                .expect("a tracked parameter");
            Tensor::<1>::from_inner(p.inner() - g * LR)
                .require_grad()
                .with_gradient_checkpointing_strategy(strategy)
        };
        let matrices = self.matrices.into_iter().map(update2).collect();
        let vectors = self.vectors.into_iter().map(update1).collect();
        Self { matrices, vectors }
    }
}

/// The tokens (or next-token targets) of one step: `BATCH * SEQ` ids drawn from `offset`.
pub fn ids(offset: usize, device: &Device) -> Tensor<1, Int> {
    let rows = BATCH * SEQ;
    let t: Vec<i64> = (0..rows)
        .map(|i| i64::try_from((i * 31 + offset) % VOCAB).expect("fits"))
        .collect();
    Tensor::<1, Int>::from_data(TensorData::new(t, [rows]), device)
}

/// `bytes` in KiB, rounded up, with thousands separators.
pub fn kib(bytes: usize) -> String {
    let kib = bytes.div_ceil(1024);
    let digits = kib.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
