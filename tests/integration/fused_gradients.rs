#![cfg(feature = "autodiff")]
//! Gradients of the fused-layer ops through `Device::flex().autodiff()`, for every tensor input,
//! against central finite differences of `sum(w * op(...))` (random `w`, evaluated in `f64` on
//! the plain device) and against Burn's own autodiff of the same computation written with the
//! `Tensor` API. Inputs are contiguous leaves and strided views of leaves (a transposed buffer,
//! a step-2 slice): the gradient is always checked on the leaf.
//!
//! Also: the straight-through gradient of `clamp_ste`, the mask gradient of `dropout`, the
//! detached `topk_last`, partially tracked inputs, gradient checkpointing, and (when Flex runs on
//! rayon) the same bits from a chain of the ops on one thread and on two.

use crate::common;

use crate::common::{Rng, assert_close, finite_difference, panic_message, tensor, values};
use burn_route::{
    bias_gelu, clamp_ste, cross_entropy_logits, dropout, layer_norm, rms_norm, softmax_last,
    swiglu, topk_last,
};
use burn_tensor::activation::{gelu, log_softmax, silu, softmax};
use burn_tensor::{DType, Device, Gradients, Int, Tensor, TensorData, s};

/// Step of the central differences: a power of two, so `x ± EPS` is exact for most `f32` inputs.
const EPS: f32 = 1.0 / 128.0;
/// Autodiff gradient against finite differences.
const FD_TOL: f32 = 1e-3;
/// Autodiff gradient against Burn's autodiff of the Tensor-API composition.
const REF_TOL: f32 = 1e-4;

// --- The harness -----------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// The leaf itself.
    Contiguous,
    /// A leaf stored with the last two dimensions swapped, transposed back.
    Transposed,
    /// Every other element of the last dimension of a leaf twice as wide.
    Stepped,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rank {
    /// The op's rank `D` (`x`, `gate`, `up`, `logits`).
    Full,
    /// A `[features]` parameter (`bias`, `weight`, `gamma`, `beta`).
    Row,
}

/// One tensor input of an op: its logical dims, how it is stored, and its leaf's values.
#[derive(Clone, Debug)]
struct Input {
    name: &'static str,
    rank: Rank,
    dims: Vec<usize>,
    layout: Layout,
    leaf: Vec<f32>,
}

impl Input {
    fn new(
        rng: &mut Rng,
        name: &'static str,
        rank: Rank,
        dims: &[usize],
        layout: Layout,
        range: (f32, f32),
    ) -> Self {
        let mut input = Self {
            name,
            rank,
            dims: dims.to_vec(),
            layout,
            leaf: Vec::new(),
        };
        let n = input.leaf_dims().iter().product();
        input.leaf = rng.vec(n, range.0, range.1);
        input
    }

    fn leaf_dims(&self) -> Vec<usize> {
        let mut dims = self.dims.clone();
        let last = dims.len() - 1;
        match self.layout {
            Layout::Contiguous => {}
            Layout::Transposed => dims.swap(last - 1, last),
            Layout::Stepped => dims[last] *= 2,
        }
        dims
    }
}

/// The leaves (to read gradients from) and the op's inputs (views of the leaves).
enum Leaf<const D: usize> {
    Full(Tensor<D>),
    Row(Tensor<1>),
}

impl<const D: usize> Leaf<D> {
    fn grad(&self, grads: &Gradients) -> Option<Vec<f32>> {
        match self {
            Leaf::Full(t) => t.grad(grads).map(|g| values(&g)),
            Leaf::Row(t) => t.grad(grads).map(|g| values(&g)),
        }
    }
}

struct Built<const D: usize> {
    leaves: Vec<Leaf<D>>,
    full: Vec<Tensor<D>>,
    rows: Vec<Tensor<1>>,
}

fn view<const R: usize>(leaf: Tensor<R>, layout: Layout) -> Tensor<R> {
    match layout {
        Layout::Contiguous => leaf,
        Layout::Transposed => leaf.swap_dims(R - 2, R - 1),
        Layout::Stepped => leaf.slice_dim(R - 1, s![..;2]),
    }
}

fn leaf_tensor<const R: usize>(
    values: &[f32],
    dims: &[usize],
    device: &Device,
    dtype: DType,
) -> Tensor<R> {
    let dims: [usize; R] = dims.try_into().expect("rank");
    Tensor::from_data(TensorData::new(values.to_vec(), dims), (device, dtype))
}

/// Builds every input from `leaves` (one value vector per input) on `device` in `dtype`,
/// tracking the inputs whose `track` flag is set.
fn build<const D: usize>(
    inputs: &[Input],
    leaves: &[Vec<f32>],
    device: &Device,
    dtype: DType,
    track: &[bool],
) -> Built<D> {
    let mut built = Built {
        leaves: Vec::new(),
        full: Vec::new(),
        rows: Vec::new(),
    };
    for ((input, values), &tracked) in inputs.iter().zip(leaves).zip(track) {
        let dims = input.leaf_dims();
        match input.rank {
            Rank::Full => {
                let mut leaf = leaf_tensor::<D>(values, &dims, device, dtype);
                if tracked {
                    leaf = leaf.require_grad();
                }
                built.full.push(view(leaf.clone(), input.layout));
                built.leaves.push(Leaf::Full(leaf));
            }
            Rank::Row => {
                let mut leaf = leaf_tensor::<1>(values, &dims, device, dtype);
                if tracked {
                    leaf = leaf.require_grad();
                }
                built.rows.push(view(leaf.clone(), input.layout));
                built.leaves.push(Leaf::Row(leaf));
            }
        }
    }
    built
}

type OpFn<'a, const D: usize, const DO: usize> =
    &'a dyn Fn(&[Tensor<D>], &[Tensor<1>]) -> Tensor<DO>;

/// The gradient of `sum(w * f(inputs))` with respect to every leaf, on `device` (autodiff),
/// with only the inputs flagged in `track` requiring grad.
fn autodiff_grads<const D: usize, const DO: usize>(
    inputs: &[Input],
    w: &[f32],
    device: &Device,
    track: &[bool],
    f: OpFn<D, DO>,
) -> Vec<Option<Vec<f32>>> {
    let leaves: Vec<Vec<f32>> = inputs.iter().map(|i| i.leaf.clone()).collect();
    let built = build::<D>(inputs, &leaves, device, DType::F32, track);
    let out = f(&built.full, &built.rows);
    assert!(
        out.is_tracked(),
        "the output of a differentiable op must be tracked"
    );
    let weights = Tensor::<DO>::from_data(TensorData::new(w.to_vec(), out.dims()), device);
    let grads = (out * weights).sum().backward();
    built.leaves.iter().map(|leaf| leaf.grad(&grads)).collect()
}

/// Checks the gradient of `op` with respect to every input against finite differences of `op`
/// (evaluated in `fd_dtype` on the plain device) and against Burn's autodiff of `reference`.
fn check_gradients<const D: usize, const DO: usize>(
    what: &str,
    rng: &mut Rng,
    inputs: &[Input],
    fd_dtype: DType,
    op: OpFn<D, DO>,
    reference: OpFn<D, DO>,
) {
    let plain = Device::flex();
    let autodiff = Device::flex().autodiff();
    let leaves: Vec<Vec<f32>> = inputs.iter().map(|i| i.leaf.clone()).collect();
    let all = vec![true; inputs.len()];
    let none = vec![false; inputs.len()];

    let probe = {
        let built = build::<D>(inputs, &leaves, &plain, DType::F32, &none);
        op(&built.full, &built.rows)
    };
    let w = rng.vec(probe.dims().iter().product(), -1.0, 1.0);

    let loss = |leaves: &[Vec<f32>]| -> f64 {
        let built = build::<D>(inputs, leaves, &plain, fd_dtype, &none);
        let out = op(&built.full, &built.rows);
        assert_eq!(out.dtype(), fd_dtype, "{what}: finite-difference dtype");
        let out: Vec<f64> = out
            .into_data()
            .convert::<f64>()
            .try_to_vec::<f64>()
            .expect("float data");
        out.iter().zip(&w).map(|(o, w)| o * f64::from(*w)).sum()
    };

    let ad = autodiff_grads(inputs, &w, &autodiff, &all, op);
    let burn = autodiff_grads(inputs, &w, &autodiff, &all, reference);
    for (i, input) in inputs.iter().enumerate() {
        let label = format!(
            "{what}: d/d{} ({:?} {:?}, leaf {:?})",
            input.name,
            input.layout,
            input.dims,
            input.leaf_dims()
        );
        let fd = finite_difference(
            |v| {
                let mut varied = leaves.clone();
                varied[i] = v.to_vec();
                loss(&varied)
            },
            &leaves[i],
            EPS,
        );
        let grad = ad[i]
            .as_ref()
            .unwrap_or_else(|| panic!("{label}: no gradient"));
        assert_close(grad, &fd, FD_TOL, &format!("{label} vs finite differences"));
        let burn = burn[i]
            .as_ref()
            .unwrap_or_else(|| panic!("{label}: no Burn gradient"));
        assert_close(grad, burn, REF_TOL, &format!("{label} vs Burn's autodiff"));
    }

    // Each input alone tracked: it gets the same gradient, the others none.
    for i in 0..inputs.len() {
        let mut only = none.clone();
        only[i] = true;
        let grads = autodiff_grads(inputs, &w, &autodiff, &only, op);
        for (j, g) in grads.iter().enumerate() {
            let label = format!(
                "{what}: only {} tracked, d/d{}",
                inputs[i].name, inputs[j].name
            );
            if i == j {
                let g = g.as_ref().unwrap_or_else(|| panic!("{label}: no gradient"));
                assert_close(g, ad[i].as_ref().expect("gradient"), 1e-6, &label);
            } else {
                assert!(g.is_none(), "{label}: an untracked input got a gradient");
            }
        }
    }

    // Gradient checkpointing routes to the same backward pass.
    let checkpointed = Device::flex().autodiff().gradient_checkpointing();
    let grads = autodiff_grads(inputs, &w, &checkpointed, &all, op);
    for (i, g) in grads.iter().enumerate() {
        let label = format!("{what}: checkpointed d/d{}", inputs[i].name);
        let g = g.as_ref().unwrap_or_else(|| panic!("{label}: no gradient"));
        assert_close(g, ad[i].as_ref().expect("gradient"), 1e-6, &label);
    }
}

fn full_layouts<const D: usize>() -> Vec<Layout> {
    if D >= 2 {
        vec![Layout::Contiguous, Layout::Transposed, Layout::Stepped]
    } else {
        vec![Layout::Contiguous, Layout::Stepped]
    }
}

const ROW_LAYOUTS: [Layout; 2] = [Layout::Contiguous, Layout::Stepped];

// --- bias_gelu -------------------------------------------------------------------------------

fn bias_gelu_case<const D: usize>(rng: &mut Rng, dims: [usize; D]) {
    let features = [dims[D - 1]];
    for x_layout in full_layouts::<D>() {
        for bias_layout in ROW_LAYOUTS {
            let inputs = [
                Input::new(rng, "x", Rank::Full, &dims, x_layout, (-3.0, 3.0)),
                Input::new(rng, "bias", Rank::Row, &features, bias_layout, (-1.0, 1.0)),
            ];
            check_gradients::<D, D>(
                &format!("bias_gelu {dims:?}"),
                rng,
                &inputs,
                DType::F64,
                &|f, r| bias_gelu(f[0].clone(), r[0].clone()),
                &|f, r| gelu(f[0].clone() + r[0].clone().unsqueeze::<D>()),
            );
        }
    }
}

#[test]
fn bias_gelu_gradients() {
    let mut rng = Rng::new(201);
    bias_gelu_case(&mut rng, [1, 1]);
    bias_gelu_case(&mut rng, [3, 5]);
    bias_gelu_case(&mut rng, [2, 3, 7]);
    bias_gelu_case(&mut rng, [16, 9]);
    bias_gelu_case(&mut rng, [6]);
}

// --- swiglu ----------------------------------------------------------------------------------

fn swiglu_case<const D: usize>(rng: &mut Rng, dims: [usize; D]) {
    for gate_layout in full_layouts::<D>() {
        for up_layout in full_layouts::<D>() {
            let inputs = [
                Input::new(rng, "gate", Rank::Full, &dims, gate_layout, (-4.0, 4.0)),
                Input::new(rng, "up", Rank::Full, &dims, up_layout, (-2.0, 2.0)),
            ];
            check_gradients::<D, D>(
                &format!("swiglu {dims:?}"),
                rng,
                &inputs,
                DType::F64,
                &|f, _| swiglu(f[0].clone(), f[1].clone()),
                &|f, _| silu(f[0].clone()) * f[1].clone(),
            );
        }
    }
}

#[test]
fn swiglu_gradients() {
    let mut rng = Rng::new(202);
    swiglu_case(&mut rng, [1, 1]);
    swiglu_case(&mut rng, [3, 5]);
    swiglu_case(&mut rng, [2, 3, 7]);
    swiglu_case(&mut rng, [16, 9]);
}

#[test]
fn swiglu_of_one_tensor_as_both_inputs_accumulates_both_gradients() {
    // d/dx [silu(x) * x] = silu'(x) x + silu(x).
    let device = Device::flex().autodiff();
    let mut rng = Rng::new(203);
    let data = rng.vec(12, -3.0, 3.0);
    let w = rng.vec(12, -1.0, 1.0);
    let x = tensor(&data, [3, 4], &device).require_grad();
    let grads = (swiglu(x.clone(), x.clone()) * tensor(&w, [3, 4], &device))
        .sum()
        .backward();
    let fd = finite_difference(
        |v| {
            let x = tensor(v, [3, 4], &Device::flex());
            let out = values(&swiglu(x.clone(), x));
            out.iter()
                .zip(&w)
                .map(|(o, w)| f64::from(*o) * f64::from(*w))
                .sum()
        },
        &data,
        EPS,
    );
    assert_close(
        &values(&x.grad(&grads).expect("grad")),
        &fd,
        FD_TOL,
        "swiglu(x, x)",
    );
}

// --- rms_norm --------------------------------------------------------------------------------

fn rms_norm_case<const D: usize>(rng: &mut Rng, dims: [usize; D], eps: f32) {
    let features = [dims[D - 1]];
    for x_layout in full_layouts::<D>() {
        for weight_layout in ROW_LAYOUTS {
            let inputs = [
                Input::new(rng, "x", Rank::Full, &dims, x_layout, (-2.0, 2.0)),
                Input::new(
                    rng,
                    "weight",
                    Rank::Row,
                    &features,
                    weight_layout,
                    (0.5, 1.5),
                ),
            ];
            check_gradients::<D, D>(
                &format!("rms_norm {dims:?} eps {eps}"),
                rng,
                &inputs,
                DType::F64,
                &|f, r| rms_norm(f[0].clone(), r[0].clone(), eps),
                &|f, r| {
                    let x = f[0].clone();
                    let rms = x
                        .clone()
                        .powf_scalar(2.0)
                        .mean_dim(D - 1)
                        .add_scalar(eps)
                        .sqrt();
                    x / rms * r[0].clone().unsqueeze::<D>()
                },
            );
        }
    }
}

#[test]
fn rms_norm_gradients() {
    let mut rng = Rng::new(204);
    for eps in [1e-5, 0.1] {
        rms_norm_case(&mut rng, [1, 1], eps);
        rms_norm_case(&mut rng, [3, 5], eps);
        rms_norm_case(&mut rng, [2, 3, 7], eps);
        rms_norm_case(&mut rng, [16, 9], eps);
    }
}

// --- layer_norm ------------------------------------------------------------------------------

fn layer_norm_case<const D: usize>(rng: &mut Rng, dims: [usize; D], eps: f32) {
    let features = [dims[D - 1]];
    for x_layout in full_layouts::<D>() {
        for param_layout in ROW_LAYOUTS {
            let inputs = [
                Input::new(rng, "x", Rank::Full, &dims, x_layout, (-2.0, 3.0)),
                Input::new(rng, "gamma", Rank::Row, &features, param_layout, (0.5, 1.5)),
                Input::new(rng, "beta", Rank::Row, &features, param_layout, (-1.0, 1.0)),
            ];
            check_gradients::<D, D>(
                &format!("layer_norm {dims:?} eps {eps}"),
                rng,
                &inputs,
                DType::F64,
                &|f, r| layer_norm(f[0].clone(), r[0].clone(), r[1].clone(), eps),
                &|f, r| {
                    let x = f[0].clone();
                    let centered = x.clone() - x.mean_dim(D - 1);
                    let var = centered.clone().powf_scalar(2.0).mean_dim(D - 1);
                    centered / var.add_scalar(eps).sqrt() * r[0].clone().unsqueeze::<D>()
                        + r[1].clone().unsqueeze::<D>()
                },
            );
        }
    }
}

#[test]
fn layer_norm_gradients() {
    let mut rng = Rng::new(205);
    for eps in [1e-5, 0.1] {
        layer_norm_case(&mut rng, [1, 1], eps);
        layer_norm_case(&mut rng, [3, 5], eps);
        layer_norm_case(&mut rng, [2, 3, 7], eps);
        layer_norm_case(&mut rng, [16, 9], eps);
    }
}

// --- softmax_last ----------------------------------------------------------------------------

fn softmax_case<const D: usize>(rng: &mut Rng, dims: [usize; D]) {
    for x_layout in full_layouts::<D>() {
        let inputs = [Input::new(
            rng,
            "x",
            Rank::Full,
            &dims,
            x_layout,
            (-3.0, 3.0),
        )];
        check_gradients::<D, D>(
            &format!("softmax_last {dims:?}"),
            rng,
            &inputs,
            DType::F64,
            &|f, _| softmax_last(f[0].clone()),
            &|f, _| softmax(f[0].clone(), D - 1),
        );
    }
}

#[test]
fn softmax_last_gradients() {
    let mut rng = Rng::new(206);
    softmax_case(&mut rng, [1, 1]);
    softmax_case(&mut rng, [3, 5]);
    softmax_case(&mut rng, [2, 3, 7]);
    softmax_case(&mut rng, [16, 9]);
    softmax_case(&mut rng, [8]);
}

// --- cross_entropy_logits --------------------------------------------------------------------

fn cross_entropy_case(rng: &mut Rng, [batch, classes]: [usize; 2]) {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let targets: Vec<i64> = (0..batch)
        .map(|_| (rng.uniform(0.0, classes as f32) as i64).min(classes as i64 - 1))
        .collect();
    let int_targets = |device: &Device| -> Tensor<1, Int> {
        Tensor::from_data(TensorData::new(targets.clone(), [batch]), device)
    };
    for layout in full_layouts::<2>() {
        let inputs = [Input::new(
            rng,
            "logits",
            Rank::Full,
            &[batch, classes],
            layout,
            (-3.0, 3.0),
        )];
        // Finite differences in f32: `cross_entropy_logits` rejects f64 logits (see
        // `cross_entropy_logits_on_other_float_dtypes` in fused_forward.rs). The loss is a
        // smooth O(1) function, so f32 with EPS = 1/128 is accurate to about 1e-5.
        check_gradients::<2, 1>(
            &format!("cross_entropy_logits [{batch}, {classes}]"),
            rng,
            &inputs,
            DType::F32,
            &|f, _| cross_entropy_logits(f[0].clone(), int_targets(&f[0].device())),
            &|f, _| {
                let picked = log_softmax(f[0].clone(), 1)
                    .gather(1, int_targets(&f[0].device()).reshape([batch, 1]));
                picked.mean().neg()
            },
        );
    }
}

#[test]
fn cross_entropy_logits_gradients() {
    let mut rng = Rng::new(207);
    cross_entropy_case(&mut rng, [1, 1]);
    cross_entropy_case(&mut rng, [3, 5]);
    cross_entropy_case(&mut rng, [16, 9]);
    cross_entropy_case(&mut rng, [5, 2]);
}

#[test]
fn cross_entropy_logits_gradient_is_softmax_minus_one_hot_over_batch() {
    let device = Device::flex().autodiff();
    let data = [1.0, 2.0, 3.0, 0.0, 0.0, 0.0];
    let logits = tensor(&data, [2, 3], &device).require_grad();
    let targets = Tensor::<1, Int>::from_data([2, 0], &device);
    let grads = cross_entropy_logits(logits.clone(), targets).backward();
    let e: Vec<f64> = [1.0_f64, 2.0, 3.0].iter().map(|v| v.exp()).collect();
    let sum: f64 = e.iter().sum();
    #[allow(clippy::cast_possible_truncation)]
    let expected: Vec<f32> = [
        e[0] / sum,
        e[1] / sum,
        e[2] / sum - 1.0,
        1.0 / 3.0 - 1.0,
        1.0 / 3.0,
        1.0 / 3.0,
    ]
    .iter()
    .map(|v| (v / 2.0) as f32)
    .collect();
    assert_close(
        &values(&logits.grad(&grads).expect("grad")),
        &expected,
        1e-6,
        "d/dlogits",
    );
}

#[test]
fn cross_entropy_logits_rejects_out_of_range_targets_on_tracked_logits() {
    let device = Device::flex().autodiff();
    let logits =
        Tensor::<2>::from_data([[0.5, -1.0, 2.0], [0.25, 1.5, -0.5]], &device).require_grad();
    let targets = Tensor::<1, Int>::from_data([0, 5], &device);
    assert_eq!(
        panic_message(|| drop(cross_entropy_logits(logits.clone(), targets))),
        "cross_entropy_logits: target 5 of row 1 is outside 0..3"
    );
    // A transposed (strided) view of a tracked leaf.
    let leaf =
        Tensor::<2>::from_data([[0.5, 0.25], [-1.0, 1.5], [2.0, -0.5]], &device).require_grad();
    let targets = Tensor::<1, Int>::from_data([0, 5], &device);
    let message = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cross_entropy_logits(leaf.clone().transpose(), targets)
    }));
    match message {
        Err(payload) => assert_eq!(
            payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied()),
            Some("cross_entropy_logits: target 5 of row 1 is outside 0..3"),
            "strided tracked logits"
        ),
        Ok(loss) => panic!(
            "strided tracked logits: target 5 of row 1 (3 classes) did not panic; loss {:?}",
            values(&loss)
        ),
    }
}

// --- clamp_ste -------------------------------------------------------------------------------

#[test]
fn clamp_ste_gradient_is_the_incoming_gradient_even_where_clamped() {
    let device = Device::flex().autodiff();
    let mut rng = Rng::new(208);
    for layout in [Layout::Contiguous, Layout::Transposed, Layout::Stepped] {
        for dims in [[1, 1], [3, 5], [16, 9]] {
            let input = Input::new(&mut rng, "x", Rank::Full, &dims, layout, (-3.0, 3.0));
            let leaf = leaf_tensor::<2>(&input.leaf, &input.leaf_dims(), &device, DType::F32)
                .require_grad();
            let x = view(leaf.clone(), layout);
            let out = clamp_ste(x.clone(), -1.0, 1.0);
            assert!(out.is_tracked());
            let clamped = values(&x.clone().clamp(-1.0, 1.0));
            assert_eq!(values(&out), clamped, "{layout:?} {dims:?}: forward");
            let what = format!("{layout:?} {dims:?}");

            // `.sum()`: exactly ones, including the clamped elements (a view's gradient lands on
            // the elements of the leaf it shows; the others get zero).
            let grads = out.sum().backward();
            let ones = Tensor::<2>::ones(dims, &Device::flex());
            let expected = values(&view_grad(ones, &input));
            assert_eq!(
                values(&leaf.grad(&grads).expect("grad")),
                expected,
                "{what}: ones"
            );

            // Weighted: exactly the weights.
            let w = rng.vec(dims.iter().product(), -1.0, 1.0);
            let weights = tensor(&w, dims, &device);
            let grads = (clamp_ste(view(leaf.clone(), layout), -1.0, 1.0) * weights.clone())
                .sum()
                .backward();
            let expected = values(&view_grad(weights.without_autodiff(), &input));
            assert_eq!(
                values(&leaf.grad(&grads).expect("grad")),
                expected,
                "{what}: weights"
            );
        }
    }
    // Thresholds where everything is clamped, and lo == hi.
    let x = Tensor::<1>::from_data([-5.0, 0.0, 5.0], &device).require_grad();
    let grads = clamp_ste(x.clone(), 1.0, 1.0).sum().backward();
    assert_eq!(values(&x.grad(&grads).expect("grad")), [1.0, 1.0, 1.0]);
}

/// The gradient on the leaf of `input` of a loss whose gradient on the (logical) view is `g`:
/// `g` placed back where the view reads the leaf, zero elsewhere. `g` is untracked.
fn view_grad(g: Tensor<2>, input: &Input) -> Tensor<2> {
    let g = g.without_autodiff();
    match input.layout {
        Layout::Contiguous => g,
        Layout::Transposed => g.transpose(),
        Layout::Stepped => {
            let [rows, cols] = g.dims();
            let data = values(&g);
            let mut wide = vec![0.0; rows * cols * 2];
            for (i, v) in data.iter().enumerate() {
                wide[2 * i] = *v;
            }
            tensor(&wide, [rows, cols * 2], &Device::flex())
        }
    }
}

// --- dropout ---------------------------------------------------------------------------------

#[test]
fn dropout_gradient_is_the_mask_over_one_minus_p() {
    let device = Device::flex().autodiff();
    let mut rng = Rng::new(209);
    for layout in [Layout::Contiguous, Layout::Transposed, Layout::Stepped] {
        for p in [0.0_f32, 0.2, 0.5, 0.9, 1.0] {
            let dims = [40, 25];
            let input = Input::new(&mut rng, "x", Rank::Full, &dims, layout, (-2.0, 2.0));
            let leaf = leaf_tensor::<2>(&input.leaf, &input.leaf_dims(), &device, DType::F32)
                .require_grad();
            let x = view(leaf.clone(), layout);
            let (out, mask) = dropout(x.clone(), p, 17);
            assert!(out.is_tracked(), "dropout output must be tracked");
            // The same mask as on the plain device.
            let (_, plain_mask) = dropout(x.clone().without_autodiff(), p, 17);
            assert_eq!(
                common::ints(&mask.clone().int()),
                common::ints(&plain_mask.int()),
                "{layout:?} p {p}: mask"
            );
            let w = rng.vec(dims.iter().product(), -1.0, 1.0);
            let grads = (out * tensor(&w, dims, &device)).sum().backward();
            let scale = if p < 1.0 { 1.0 / (1.0 - p) } else { 0.0 };
            let keep = mask.without_autodiff().float();
            let expected = keep.clone().mul_scalar(scale) * tensor(&w, dims, &Device::flex());
            let expected = values(&view_grad(expected, &input));
            assert_close(
                &values(&leaf.grad(&grads).expect("grad")),
                &expected,
                1e-6,
                &format!("{layout:?} p {p}: d/dx"),
            );
            // `.sum()`: the mask over (1 - p) itself.
            let grads = dropout(view(leaf.clone(), layout), p, 17)
                .0
                .sum()
                .backward();
            let expected = values(&view_grad(keep.mul_scalar(scale), &input));
            assert_close(
                &values(&leaf.grad(&grads).expect("grad")),
                &expected,
                1e-6,
                &format!("{layout:?} p {p}: d/dx of sum"),
            );
        }
    }
}

#[test]
fn dropout_on_a_tracked_input_validates_p() {
    let device = Device::flex().autodiff();
    let x = Tensor::<1>::from_data([1.0, 2.0], &device).require_grad();
    assert_eq!(
        panic_message(|| drop(dropout(x.clone(), 1.5, 0))),
        "dropout: `p` must be a probability in [0, 1], got 1.5"
    );
    assert_eq!(
        panic_message(|| drop(clamp_ste(x, 1.0, -1.0))),
        "clamp_ste: `lo` (1) must not exceed `hi` (-1)"
    );
}

// --- topk_last -------------------------------------------------------------------------------

#[test]
fn topk_last_is_detached() {
    let device = Device::flex().autodiff();
    let mut rng = Rng::new(210);
    let data = rng.vec(4 * 7, -2.0, 2.0);
    let x = tensor(&data, [4, 7], &device).require_grad();
    for input in [
        x.clone(),
        x.clone().transpose().transpose(),
        (x.clone() * 2.0),
    ] {
        let (top, indices) = topk_last(&input, 3);
        assert!(
            top.is_autodiff(),
            "the output stays in the caller's autodiff context"
        );
        assert!(
            !top.is_tracked(),
            "a detached selection must not be tracked"
        );
        assert!(!indices.clone().float().is_tracked());
        // The values are right.
        let (expected, expected_indices) = input.clone().without_autodiff().topk_with_indices(3, 1);
        assert_eq!(values(&top), values(&expected));
        assert_eq!(common::ints(&indices), common::ints(&expected_indices));
        // A loss using the selection gives `x` exactly the gradient of its other term.
        let grads = (x.clone().sum() + top.sum()).backward();
        assert_eq!(values(&x.grad(&grads).expect("grad")), vec![1.0; 28]);
    }
    // Strided storage: a transposed leaf.
    let leaf = tensor(&data, [7, 4], &device).require_grad();
    let (top, _) = topk_last(&leaf.clone().transpose(), 2);
    assert!(!top.is_tracked());
    let grads = (leaf.clone().sum() * 3.0 + top.sum()).backward();
    assert_eq!(values(&leaf.grad(&grads).expect("grad")), vec![3.0; 28]);
}

// --- Every differentiable output is tracked, chained ops compose -----------------------------

#[test]
fn chained_fused_ops_match_burns_autodiff_of_the_composition() {
    let device = Device::flex().autodiff();
    let mut rng = Rng::new(211);
    let (batch, features) = (6, 8);
    let x_data = rng.vec(batch * features, -2.0, 2.0);
    let gamma_data = rng.vec(features, 0.5, 1.5);
    let beta_data = rng.vec(features, -0.5, 0.5);
    let bias_data = rng.vec(features, -0.5, 0.5);
    let weight_data = rng.vec(features, 0.5, 1.5);
    let targets = Tensor::<1, Int>::from_data([0, 7, 3, 3, 5, 1], &device);

    let leaves = || {
        (
            tensor(&x_data, [batch, features], &device).require_grad(),
            tensor(&gamma_data, [features], &device).require_grad(),
            tensor(&beta_data, [features], &device).require_grad(),
            tensor(&bias_data, [features], &device).require_grad(),
            tensor(&weight_data, [features], &device).require_grad(),
        )
    };
    let row = |t: &Tensor<1>| t.clone().unsqueeze::<2>();

    let (x, gamma, beta, bias, weight) = leaves();
    let h = layer_norm(x.clone(), gamma.clone(), beta.clone(), 1e-5);
    let h = bias_gelu(h, bias.clone());
    let h = swiglu(h.clone(), h);
    let h = rms_norm(h, weight.clone(), 1e-5);
    let h = clamp_ste(h, -10.0, 10.0);
    let loss = cross_entropy_logits(h, targets.clone());
    let grads = loss.backward();
    let grad1 = |t: &Tensor<1>| values(&t.grad(&grads).expect("grad"));
    let ours = [
        values(&x.grad(&grads).expect("grad")),
        grad1(&gamma),
        grad1(&beta),
        grad1(&bias),
        grad1(&weight),
    ];

    let (x, gamma, beta, bias, weight) = leaves();
    let centered = x.clone() - x.clone().mean_dim(1);
    let var = centered.clone().powf_scalar(2.0).mean_dim(1);
    let h = centered / var.add_scalar(1e-5).sqrt() * row(&gamma) + row(&beta);
    let h = gelu(h + row(&bias));
    let h = silu(h.clone()) * h;
    let h = h.clone() / h.powf_scalar(2.0).mean_dim(1).add_scalar(1e-5).sqrt() * row(&weight);
    let loss = log_softmax(h, 1)
        .gather(1, targets.reshape([batch, 1]))
        .mean()
        .neg();
    let grads = loss.backward();
    let grad1 = |t: &Tensor<1>| values(&t.grad(&grads).expect("grad"));
    let burn = [
        values(&x.grad(&grads).expect("grad")),
        grad1(&gamma),
        grad1(&beta),
        grad1(&bias),
        grad1(&weight),
    ];
    for ((name, ours), burn) in ["x", "gamma", "beta", "bias", "weight"]
        .iter()
        .zip(&ours)
        .zip(&burn)
    {
        assert_close(ours, burn, REF_TOL, &format!("chain d/d{name}"));
    }
}

/// The chain above, forward and backward, at a size where every kernel of it splits into pieces
/// shared by the threads when Flex runs on rayon ([`burn_route::flex::PARALLEL`]): run on a pool
/// of one thread and on a pool of two, the loss and every gradient agree bit for bit (each piece
/// computes the same values whoever claims it, and reductions add the pieces' partial sums in
/// piece order). Without rayon every kernel runs on the calling thread, so there is nothing to
/// compare.
#[test]
fn chained_fused_ops_agree_bit_for_bit_on_one_thread_and_on_two() {
    if !burn_route::flex::PARALLEL {
        return;
    }
    // 4,099 rows of 256: above every `Work` class's threshold (1M elements), a short last piece.
    let (batch, features) = (4099, 256);
    let mut rng = Rng::new(311);
    let x_data = rng.vec(batch * features, -2.0, 2.0);
    let gamma_data = rng.vec(features, 0.5, 1.5);
    let beta_data = rng.vec(features, -0.5, 0.5);
    let bias_data = rng.vec(features, -0.5, 0.5);
    let weight_data = rng.vec(features, 0.5, 1.5);
    let target_data: Vec<i64> = (0..batch).map(|i| (i * 37 % features) as i64).collect();

    let run = || {
        let device = Device::flex().autodiff();
        let x = tensor(&x_data, [batch, features], &device).require_grad();
        let gamma = tensor(&gamma_data, [features], &device).require_grad();
        let beta = tensor(&beta_data, [features], &device).require_grad();
        let bias = tensor(&bias_data, [features], &device).require_grad();
        let weight = tensor(&weight_data, [features], &device).require_grad();
        let targets =
            Tensor::<1, Int>::from_data(TensorData::new(target_data.clone(), [batch]), &device);
        let h = layer_norm(x.clone(), gamma.clone(), beta.clone(), 1e-5);
        let h = bias_gelu(h, bias.clone());
        let h = swiglu(h.clone(), h);
        let h = rms_norm(h, weight.clone(), 1e-5);
        let (h, _mask) = dropout(h, 0.25, 7);
        let h = softmax_last(h) * 8.0;
        let loss = cross_entropy_logits(h, targets);
        let grads = loss.backward();
        let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<u32>>();
        let grad1 = |t: &Tensor<1>| bits(values(&t.grad(&grads).expect("grad")));
        [
            bits(values(&loss)),
            bits(values(&x.grad(&grads).expect("grad"))),
            grad1(&gamma),
            grad1(&beta),
            grad1(&bias),
            grad1(&weight),
        ]
    };
    let on = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a pool")
            .install(run)
    };
    let (one, two) = (on(1), on(2));
    let names = [
        "loss",
        "d/dx",
        "d/dgamma",
        "d/dbeta",
        "d/dbias",
        "d/dweight",
    ];
    for ((name, one), two) in names.iter().zip(&one).zip(&two) {
        assert!(one.iter().any(|&b| b != 0), "{name}: all zero");
        if let Some(i) = one.iter().zip(two).position(|(a, b)| a != b) {
            panic!(
                "{name}: element {i}: {} on one thread, {} on two",
                f32::from_bits(one[i]),
                f32::from_bits(two[i])
            );
        }
    }
}

/// A small transformer-style block whose fused ops read tensors that memory-bound ops produced
/// (`x * 2 + 1`, a residual sum, a bias add): under gradient checkpointing those inputs come
/// back from Burn's checkpointer (recomputed) instead of being kept, and the loss and every
/// gradient are bit for bit those of the run without checkpointing.
#[test]
fn a_checkpointed_block_gives_bit_identical_loss_and_gradients() {
    fn run(device: &Device) -> (Vec<f32>, Vec<Vec<f32>>) {
        let mut rng = Rng::new(48);
        let mut leaf = |dims: &[usize]| {
            let n: usize = dims.iter().product();
            let values: Vec<f32> = (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect();
            Tensor::<2>::from_data(
                TensorData::new(values, [n / dims[dims.len() - 1], dims[dims.len() - 1]]),
                device,
            )
            .require_grad()
        };
        let (x, w1, w2, w3) = (
            leaf(&[24, 16]),
            leaf(&[16, 16]),
            leaf(&[16, 32]),
            leaf(&[16, 32]),
        );
        let gain =
            Tensor::<1>::from_data(TensorData::new(vec![0.75f32; 16], [16]), device).require_grad();
        let bias =
            Tensor::<1>::from_data(TensorData::new(vec![0.1f32; 16], [16]), device).require_grad();
        let h = x.clone() * 2.0 + 1.0;
        let n = rms_norm(h.clone(), gain.clone(), 1e-5);
        let a = softmax_last(n.clone().matmul(w1.clone()));
        let r = h + a.matmul(w1.clone());
        let m = swiglu(r.clone().matmul(w2.clone()), r.clone().matmul(w3.clone()));
        let g = bias_gelu(m.matmul(w3.clone().transpose()) + r, bias.clone());
        let targets = Tensor::<1, Int>::from_data(
            TensorData::new((0..24).map(|i| i % 16).collect::<Vec<i64>>(), [24]),
            device,
        );
        let loss = cross_entropy_logits(g, targets);
        let grads = loss.backward();
        let grad2 = |t: &Tensor<2>| values(&t.grad(&grads).expect("a gradient"));
        let grad1 = |t: &Tensor<1>| values(&t.grad(&grads).expect("a gradient"));
        (
            values(&loss),
            vec![
                grad2(&x),
                grad2(&w1),
                grad2(&w2),
                grad2(&w3),
                grad1(&gain),
                grad1(&bias),
            ],
        )
    }
    let plain = run(&Device::flex().autodiff());
    let checkpointed = run(&Device::flex().autodiff().gradient_checkpointing());
    assert_eq!(plain.0, checkpointed.0, "the loss");
    for (i, (a, b)) in plain.1.iter().zip(&checkpointed.1).enumerate() {
        assert!(a == b, "gradient {i} differs under checkpointing");
    }
}
