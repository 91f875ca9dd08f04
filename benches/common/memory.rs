//! What the memory benches (`benches/memory.rs` on Flex, `benches/memory_cube.rs` on Cube)
//! share: their figures in KiB, and their training step, a small transformer-style block (embedding, attention scores through
//! `softmax_last`, `rms_norm`, a SwiGLU MLP, `layer_norm`, `bias_gelu`, and the output
//! projection with the loss), written with Burn's ops and compositions, with burn-route's fused
//! ops, and with those and the projections fused (see [`Model`]). Included by those two with `#[path]`.

use burn_tensor::activation::{gelu, silu, softmax};
use burn_tensor::{Device, Int, Tensor, TensorData};

use crate::common::uniform;
use crate::flex::{EPS, cross_entropy_burn, layer_norm_burn, rms_norm_burn};

/// How the block is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// Burn's ops and the compositions `burn::nn` writes.
    Burn,
    /// burn-route's fused ops, Burn's matmul for the projections.
    Fused,
    /// As `Fused`, with the MLP's and the dense layer's norm and gate fused with the projection
    /// after them (`rms_norm_linear`, `swiglu_linear`, `layer_norm_linear`).
    FusedLinear,
    /// As `FusedLinear`, with the whole MLP one op (`rms_norm_swiglu_mlp`).
    FusedMlp,
    /// As `FusedMlp`, with the attention one op too (`self_attention`).
    FusedAttention,
}

/// The models in the order the benches print them, with their names.
pub const MODELS: [(&str, Model); 5] = [
    ("Burn's ops and compositions", Model::Burn),
    ("burn-route's fused ops", Model::Fused),
    (
        "burn-route's fused ops, projections fused (`*_linear`)",
        Model::FusedLinear,
    ),
    (
        "burn-route's fused ops, the MLP one op (`rms_norm_swiglu_mlp`)",
        Model::FusedMlp,
    ),
    (
        "burn-route's fused ops, the MLP and the attention one op each (`self_attention`)",
        Model::FusedAttention,
    ),
];

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
    pub fn loss(&self, tokens: Tensor<1, Int>, targets: Tensor<1, Int>, model: Model) -> Tensor<1> {
        let fused = model != Model::Burn;
        let m = &self.matrices;
        let v = &self.vectors;
        let rows = BATCH * SEQ;
        let x = m[0].clone().select(0, tokens);
        // One head over the whole width; with `Model::FusedAttention` one op, which keeps only
        // its input under checkpointing.
        let attention = if model == Model::FusedAttention {
            burn_route::self_attention(
                x.clone().reshape([BATCH, SEQ, MODEL]),
                m[1].clone(),
                m[2].clone(),
                m[3].clone(),
                m[4].clone(),
                1,
                false,
            )
            .reshape([rows, MODEL])
        } else {
            let heads = |w: &Tensor<2>, x: &Tensor<2>| {
                x.clone().matmul(w.clone()).reshape([BATCH, SEQ, MODEL])
            };
            let (q, k, val) = (heads(&m[1], &x), heads(&m[2], &x), heads(&m[3], &x));
            #[allow(clippy::cast_precision_loss)]
            let scores = q.matmul(k.swap_dims(1, 2)) * (1.0 / (MODEL as f32).sqrt());
            let attn = if fused {
                burn_route::softmax_last(scores)
            } else {
                softmax(scores, 2)
            };
            let a = attn.matmul(val).reshape([rows, MODEL]);
            a.matmul(m[4].clone())
        };
        let x = x + attention;
        // The MLP and the dense layer: with `Model::FusedLinear`, burn-route's norm and gate
        // fused with the projection after them (the normalised tensor and the gate's product
        // are recomputed in the backward pass, not kept).
        let x = match model {
            Model::FusedMlp | Model::FusedAttention => {
                let mlp = burn_route::rms_norm_swiglu_mlp(
                    x.clone(),
                    v[0].clone(),
                    m[5].clone(),
                    m[6].clone(),
                    m[7].clone(),
                    EPS,
                );
                x + mlp
            }
            Model::FusedLinear => {
                let norm_linear = |w: &Tensor<2>| {
                    burn_route::rms_norm_linear(x.clone(), v[0].clone(), w.clone(), None, EPS)
                };
                let (gate, up) = (norm_linear(&m[5]), norm_linear(&m[6]));
                x.clone() + burn_route::swiglu_linear(gate, up, m[7].clone(), None)
            }
            Model::Fused => {
                let h = burn_route::rms_norm(x.clone(), v[0].clone(), EPS);
                let (gate, up) = (h.clone().matmul(m[5].clone()), h.matmul(m[6].clone()));
                x + burn_route::swiglu(gate, up).matmul(m[7].clone())
            }
            Model::Burn => {
                let h = rms_norm_burn(x.clone(), v[0].clone());
                let (gate, up) = (h.clone().matmul(m[5].clone()), h.matmul(m[6].clone()));
                x + (silu(gate) * up).matmul(m[7].clone())
            }
        };
        let dense = match model {
            Model::FusedLinear | Model::FusedMlp | Model::FusedAttention => {
                let z = burn_route::layer_norm_linear(
                    x.clone(),
                    v[1].clone(),
                    v[2].clone(),
                    m[8].clone(),
                    None,
                    EPS,
                );
                burn_route::bias_gelu(z, v[3].clone())
            }
            Model::Fused => {
                let h = burn_route::layer_norm(x.clone(), v[1].clone(), v[2].clone(), EPS);
                burn_route::bias_gelu(h.matmul(m[8].clone()), v[3].clone())
            }
            Model::Burn => {
                let h = layer_norm_burn(x.clone(), v[1].clone(), v[2].clone());
                gelu(h.matmul(m[8].clone()) + v[3].clone().unsqueeze::<2>())
            }
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
    pub fn step(self, tokens: Tensor<1, Int>, targets: Tensor<1, Int>, model: Model) -> Self {
        const LR: f32 = 0.1;
        let grads = self.loss(tokens, targets, model).backward();
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
