//! A tour of every op in `ops.toml`: each one on Flex without autodiff, then on an autodiff Flex
//! device with gradients, and what each autodiff policy does with a tracked input.
//!
//! Run it with `cargo run --example tour`.

use burn_route::{
    Affine, Fill, Moments, add_relu, affine, argmax_last, axpby, bias_gelu, clamp_ste,
    cross_entropy_logits, dequantize_relu, dispatch, dropout, fill_where, iota, layer_norm,
    layer_norm_linear, linear_cross_entropy, masked_fill_count, moments, nan_to_num, ramp,
    rms_norm, rms_norm_linear, rms_norm_swiglu_mlp, round_half_even, scale, self_attention,
    softmax_last, softplus, split_last, sum_all, swiglu, swiglu_linear, topk_last,
};
use burn_tensor::quantization::QuantScheme;
use burn_tensor::{Bool, Device, Int, Tensor};

fn values<const D: usize>(t: &Tensor<D>) -> Vec<f32> {
    t.clone().into_data().try_to_vec::<f32>().expect("f32 data")
}

fn ints<const D: usize>(t: &Tensor<D, Int>) -> Vec<i64> {
    t.clone()
        .into_data()
        .convert::<i64>()
        .try_to_vec::<i64>()
        .expect("int data")
}

/// Rounds for display, so the tour reads at a glance.
fn short(v: Vec<f32>) -> Vec<f32> {
    v.into_iter().map(|x| (x * 1e4).round() / 1e4).collect()
}

/// The fused layers on `device`: one line each with what the op computes and its values.
fn fused_layers(device: &Device) {
    let x = Tensor::<2>::from_data([[1.0, -2.0, 3.0], [-4.0, 5.0, -0.5]], device);
    let row = Tensor::<1>::from_data([0.5, -0.5, 1.0], device);
    let ones = Tensor::<1>::from_data([1.0, 1.0, 1.0], device);
    let zeros = Tensor::<1>::from_data([0.0, 0.0, 0.0], device);
    println!("x = {:?}, row = {:?}", values(&x), values(&row));
    let show =
        |name: &str, what: &str, v: Vec<f32>| println!("{name:<28} = {:?}   {what}", short(v));
    show(
        "bias_gelu(x, row)",
        "gelu(x + row), exact erf, one pass",
        values(&bias_gelu(x.clone(), row.clone())),
    );
    show(
        "swiglu(x, x)",
        "silu(gate) * up, one pass",
        values(&swiglu(x.clone(), x.clone())),
    );
    show(
        "rms_norm(x, ones, 1e-6)",
        "x / rms(row), rows of RMS 1",
        values(&rms_norm(x.clone(), ones.clone(), 1e-6)),
    );
    show(
        "layer_norm(x, ones, 0, 1e-5)",
        "(x - mean) / std per row",
        values(&layer_norm(x.clone(), ones, zeros, 1e-5)),
    );
    show(
        "softmax_last(x)",
        "rows sum to 1",
        values(&softmax_last(x.clone())),
    );
    let targets = Tensor::<1, Int>::from_data([2, 1], device);
    show(
        "cross_entropy_logits(x, [2, 1])",
        "mean -log softmax(x)[target]",
        values(&cross_entropy_logits(x.clone(), targets)),
    );
    let eye = Tensor::<2>::eye(3, device);
    let targets = Tensor::<1, Int>::from_data([2, 1], device);
    show(
        "linear_cross_entropy(x, I, [2, 1])",
        "cross_entropy_logits(x @ I^T), in row chunks",
        values(&linear_cross_entropy(
            x.clone(),
            eye,
            None,
            targets,
            Default::default(),
        )),
    );
    // The norm or gate fused with the projection after it, and the whole SwiGLU MLP: `[3, 2]`
    // and `[2, 3]` projections, `[in, out]` as Burn's `Linear` keeps them.
    let (w_in, w_out) = projections(device);
    show(
        "rms_norm_linear(x, 1, W)",
        "rms_norm, then x @ W: [2, 2]",
        values(&rms_norm_linear(
            x.clone(),
            row.clone() * 0.0 + 1.0,
            w_in.clone(),
            None,
            1e-6,
        )),
    );
    show(
        "layer_norm_linear(x, 1, 0, W)",
        "layer_norm, then x @ W",
        values(&layer_norm_linear(
            x.clone(),
            row.clone() * 0.0 + 1.0,
            row.clone() * 0.0,
            w_in.clone(),
            None,
            1e-5,
        )),
    );
    show(
        "swiglu_linear(x, x, W)",
        "swiglu, then @ W",
        values(&swiglu_linear(x.clone(), x.clone(), w_in.clone(), None)),
    );
    show(
        "rms_norm_swiglu_mlp(x, ..)",
        "the pre-norm SwiGLU MLP: [2, 3]",
        values(&rms_norm_swiglu_mlp(
            x.clone(),
            row.clone() * 0.0 + 1.0,
            w_in.clone(),
            w_in,
            w_out,
            1e-6,
        )),
    );
    // Causal self-attention over x's two rows as one sequence, identity projections, one head.
    let eye = || Tensor::<2>::eye(3, device);
    show(
        "self_attention(x, I, .., I)",
        "causal, one head: row 0 is x's row 0",
        values(&self_attention(
            x.clone().unsqueeze::<3>(),
            eye(),
            eye(),
            eye(),
            eye(),
            1,
            true,
        )),
    );
    let (dropped, keep) = dropout(x.clone(), 0.5, 7);
    show(
        "dropout(x, 0.5, seed 7)",
        "kept values doubled, the rest 0",
        values(&dropped),
    );
    println!(
        "{:<28} = {:?}   the keep mask, reproducible from the seed",
        "  mask",
        keep.into_data().try_to_vec::<bool>().expect("bool data")
    );
    show(
        "clamp_ste(x, -1, 1)",
        "clamp; the gradient passes straight through",
        values(&clamp_ste(x.clone(), -1.0, 1.0)),
    );
    let (top, index) = topk_last(&x, 2);
    println!(
        "{:<28} = {:?} at {:?}   the 2 largest per row (detach)",
        "topk_last(&x, 2)",
        values(&top),
        ints(&index)
    );
}

/// The projections of the `*_linear` ops and of the MLP: `[3, 2]` (in) and `[2, 3]` (out).
fn projections(device: &Device) -> (Tensor<2>, Tensor<2>) {
    (
        Tensor::<2>::from_data([[0.5, -1.0], [1.0, 0.25], [-0.5, 0.75]], device),
        Tensor::<2>::from_data([[1.0, 0.0, -1.0], [0.5, 2.0, 0.25]], device),
    )
}

/// Gradients of the fused layers' hand-written backward passes.
fn fused_gradients(device: &Device) {
    let x = Tensor::<2>::from_data([[1.0, -2.0, 3.0], [-4.0, 5.0, -0.5]], device).require_grad();
    let row = Tensor::<1>::from_data([0.5, -0.5, 1.0], device).require_grad();
    let w = Tensor::<2>::from_data([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]], device);
    let show = |name: &str, what: &str, t: &Tensor<2>, grads: &burn_tensor::Gradients| {
        println!(
            "  d/dx {name:<22} = {:?}   {what}",
            short(values(&t.grad(grads).expect("grad")))
        );
    };
    let grads = (bias_gelu(x.clone(), row.clone()) * w.clone())
        .sum()
        .backward();
    show("sum(w * bias_gelu)", "w * gelu'(x + row)", &x, &grads);
    println!(
        "  d/drow sum(w * bias_gelu)    = {:?}   summed over the rows",
        short(values(&row.grad(&grads).expect("grad")))
    );
    let grads = (swiglu(x.clone(), x.clone()) * w.clone()).sum().backward();
    show(
        "sum(w * swiglu(x, x))",
        "both inputs are x: the two paths add",
        &x,
        &grads,
    );
    let grads = (rms_norm(x.clone(), row.clone(), 1e-6) * w.clone())
        .sum()
        .backward();
    show(
        "sum(w * rms_norm)",
        "through the row RMS and the weight",
        &x,
        &grads,
    );
    let grads = (layer_norm(x.clone(), row.clone(), row.clone(), 1e-5) * w.clone())
        .sum()
        .backward();
    show(
        "sum(w * layer_norm)",
        "sums to 0 per row (shift invariance)",
        &x,
        &grads,
    );
    let grads = (softmax_last(x.clone()) * w.clone()).sum().backward();
    show("sum(w * softmax_last)", "sums to 0 per row", &x, &grads);
    let targets = Tensor::<1, Int>::from_data([2, 1], device);
    let grads = cross_entropy_logits(x.clone(), targets).backward();
    show(
        "cross_entropy_logits",
        "(softmax - one_hot) / batch",
        &x,
        &grads,
    );
    let targets = Tensor::<1, Int>::from_data([2, 1], device);
    let eye = Tensor::<2>::eye(3, device);
    let grads = linear_cross_entropy(x.clone(), eye, None, targets, Default::default()).backward();
    show(
        "linear_cross_entropy(x, I)",
        "the same, formed in the forward pass",
        &x,
        &grads,
    );
    let (w_in, w_out) = projections(device);
    let grads = rms_norm_linear(x.clone(), row.clone(), w_in.clone(), None, 1e-6)
        .sum()
        .backward();
    show(
        "sum(rms_norm_linear)",
        "the normalised x recomputed, not kept",
        &x,
        &grads,
    );
    let grads = layer_norm_linear(
        x.clone(),
        row.clone(),
        row.clone(),
        w_in.clone(),
        None,
        1e-5,
    )
    .sum()
    .backward();
    show("sum(layer_norm_linear)", "sums to 0 per row", &x, &grads);
    let grads = swiglu_linear(x.clone(), x.clone(), w_in.clone(), None)
        .sum()
        .backward();
    show(
        "sum(swiglu_linear(x, x))",
        "the product recomputed",
        &x,
        &grads,
    );
    let grads = (rms_norm_swiglu_mlp(x.clone(), row.clone(), w_in.clone(), w_in, w_out, 1e-6)
        * w.clone())
    .sum()
    .backward();
    show(
        "sum(w * rms_norm_swiglu_mlp)",
        "the projections kept, the normalised rows rebuilt",
        &x,
        &grads,
    );
    let grads = dropout(x.clone(), 0.5, 7).0.sum().backward();
    show("sum(dropout)", "2 where kept, 0 where dropped", &x, &grads);
    let grads = clamp_ste(x.clone(), -1.0, 1.0).sum().backward();
    show("sum(clamp_ste)", "1 everywhere, clamped or not", &x, &grads);
}

fn main() {
    println!("== Flex, no autodiff ==");
    let device = Device::flex();
    let lhs = Tensor::<2>::from_data([[1.0, -2.0, 3.0], [-4.0, 5.0, -0.5]], &device);
    let rhs = Tensor::<2>::from_data([[0.5, 1.0, -4.0], [2.0, -1.0, 0.25]], &device);
    println!("lhs                  = {:?}", values(&lhs));
    println!("rhs                  = {:?}", values(&rhs));
    println!(
        "add_relu(lhs, rhs)   = {:?}   relu(lhs + rhs), one pass",
        values(&add_relu(lhs.clone(), rhs.clone()))
    );
    println!(
        "scale(lhs, 2.5)      = {:?}   lhs * 2.5",
        values(&scale(lhs.clone(), 2.5))
    );
    println!(
        "argmax_last(&lhs)    = {:?}   index of the row maximum",
        ints(&argmax_last(&lhs))
    );
    println!(
        "axpby(lhs, Some(rhs), 2, -1) = {:?}   2 lhs - rhs (y is an Option)",
        values(&axpby(lhs.clone(), Some(rhs.clone()), 2.0, -1.0))
    );
    println!(
        "axpby(lhs, None, 2, -1)      = {:?}   2 lhs",
        values(&axpby(lhs.clone(), None, 2.0, -1.0))
    );
    println!(
        "sum_all(vec![lhs, rhs, lhs]) = {:?}   a Vec input (composite)",
        values(&sum_all(vec![lhs.clone(), rhs.clone(), lhs.clone()]))
    );
    let parts = split_last(lhs.clone(), vec![1, 2]);
    println!(
        "split_last(lhs, [1, 2])      = {:?} and {:?}   a Vec output (composite)",
        values(&parts[0]),
        values(&parts[1])
    );
    println!(
        "softplus(lhs, 1)             = {:?}   (composite)",
        values(&softplus(lhs.clone(), 1.0))
    );
    let mask = Tensor::<2, Bool>::from_data([[true, false, false], [false, true, true]], &device);
    let (filled, count) = masked_fill_count(lhs.clone(), &mask, 0.0);
    println!(
        "masked_fill_count(lhs, &mask, 0) = {:?}, count {:?}   a tuple output",
        values(&filled),
        ints(&count)
    );
    let with_nan = Tensor::<1>::from_data([1.0, f32::NAN, 3.0], &device);
    let (clean, nan_mask) = nan_to_num(with_nan, 0.0, true);
    println!(
        "nan_to_num([1, NaN, 3], 0, true) = {:?}, mask {:?}   an Option output",
        values(&clean),
        nan_mask.map(|m| m.into_data().try_to_vec::<bool>().unwrap())
    );
    let quantized = lhs.clone().quantize_dynamic(&QuantScheme::default());
    println!(
        "dequantize_relu(quantized lhs) = {:?}   a quantized input",
        values(&dequantize_relu(quantized))
    );
    println!(
        "iota(4, &device)             = {:?}   routed by its device",
        ints(&iota(4, &device))
    );
    println!(
        "ramp(4, &device)             = {:?}   routed by its device to any backend",
        values(&ramp(4, &device))
    );
    let halves = Tensor::<1>::from_data([0.5, 1.5, 2.5, -0.5, -1.5, 2.4], &device);
    println!(
        "round_half_even({:?}) = {:?}",
        values(&halves),
        values(&round_half_even(halves.clone()))
    );

    let with_nan = Tensor::<1>::from_data([1.0, f32::NAN, f32::INFINITY, 4.0], &device);
    println!(
        "count_nonfinite(&[1, NaN, inf, 4]) = {}   an async op (routed at the call, awaited here)",
        burn_route::check::block_on(burn_route::count_nonfinite(&with_nan))
    );

    println!("\n== Fused layers (Flex kernels: one pass over f32 rows of any stride) ==");
    fused_layers(&device);

    println!("\n== Flex with autodiff ==");
    let device = Device::flex().autodiff();
    let lhs = Tensor::<2>::from_data([[1.0, -2.0, 3.0], [-4.0, 5.0, -0.5]], &device).require_grad();
    let rhs = Tensor::<2>::from_data([[0.5, 1.0, -4.0], [2.0, -1.0, 0.25]], &device).require_grad();

    // differentiable: tracked floats go to the Autodiff<B, C> kernel.
    let out = add_relu(lhs.clone(), rhs.clone());
    let grads = out.clone().sum().backward();
    println!("add_relu              = {:?}", values(&out));
    println!(
        "  d sum / d lhs       = {:?}   1 where lhs + rhs > 0",
        values(&lhs.grad(&grads).expect("lhs grad"))
    );
    println!(
        "  d sum / d rhs       = {:?}",
        values(&rhs.grad(&grads).expect("rhs grad"))
    );

    let out = scale(lhs.clone(), 2.5);
    let grads = out.clone().sum().backward();
    println!("scale(lhs, 2.5)       = {:?}", values(&out));
    println!(
        "  d sum / d lhs       = {:?}   alpha everywhere",
        values(&lhs.grad(&grads).expect("lhs grad"))
    );

    let out = axpby(lhs.clone(), Some(rhs.clone()), 2.0, -1.0);
    let grads = out.sum().backward();
    println!(
        "axpby(lhs, Some(rhs), 2, -1): d/d lhs = {:?}, d/d rhs = {:?}",
        values(&lhs.grad(&grads).unwrap()),
        values(&rhs.grad(&grads).unwrap())
    );
    let grads = softplus(lhs.clone(), 1.0).sum().backward();
    println!(
        "softplus: d/d lhs = {:?}   sigmoid(lhs), from the composition",
        values(&lhs.grad(&grads).unwrap())
    );

    // detach: tracked input is fine, the output carries no gradient.
    let idx = argmax_last(&lhs);
    println!(
        "argmax_last(&lhs)     = {:?}   (detach: runs concretely, output untracked)",
        ints(&idx)
    );

    // reject: untracked autodiff-device input runs; tracked input is refused with a fix.
    let constant = Tensor::<1>::from_data([0.5, 1.5, 2.5], &device);
    println!(
        "round_half_even(untracked) = {:?}",
        values(&round_half_even(constant))
    );
    let tracked = Tensor::<1>::from_data([0.5, 1.5, 2.5], &device).require_grad();
    match dispatch::try_round_half_even(tracked.clone().into_dispatch()) {
        Ok(_) => println!("round_half_even(tracked) unexpectedly ran"),
        Err(err) => println!("round_half_even(tracked) -> error:\n  {err}"),
    }
    println!(
        "round_half_even(tracked.without_autodiff()) = {:?}",
        values(&round_half_even(tracked.without_autodiff()))
    );

    println!("\n== Fused layers with autodiff: hand-written backward passes ==");
    fused_gradients(&device);

    println!("\n== Shape contracts (checked before any kernel runs) ==");
    shape_contracts(&device);

    println!("\n== Declared types: structs and enums of tensors (`[[type]]` in ops.toml) ==");
    declared_types(&device);
}

/// A struct in (`Affine`), a struct out (`Moments`) and an enum in (`Fill`): routed by their
/// tensor fields, with gradients through the fields both ways.
fn declared_types(device: &Device) {
    let x = Tensor::<2>::from_data([[1.0, 2.0, 3.0], [4.0, 5.0, 9.0]], device).require_grad();
    let Moments { mean, variance } = moments(x.clone());
    println!(
        "moments(x: [2, 3]) = Moments {{ mean: {:?}, variance: {:?} }}   a struct output",
        short(values(&mean)),
        short(values(&variance))
    );
    let grads = variance.sum().backward();
    println!(
        "d sum(variance) / dx = {:?}   back through a struct field",
        short(values(&x.grad(&grads).unwrap()))
    );
    let scale = Tensor::<2>::from_data([[2.0, 0.5, -1.0]], device).require_grad();
    let p = Affine {
        scale: scale.clone(),
        shift: None,
    };
    let grads = affine(x.clone(), p).sum().backward();
    println!(
        "affine(x, Affine {{ scale: [1, 3], shift: None }}): d/dscale = {:?}   into a struct field",
        short(values(&scale.grad(&grads).unwrap()))
    );
    let mask = x.clone().greater_elem(4.5);
    println!(
        "fill_where(x, x > 4.5, Fill::Value(0.0)) = {:?}   an enum input",
        values(&fill_where(x.clone(), &mask, Fill::Value(0.0)))
    );
    let bad = burn_route::dispatch::try_fill_where(
        x.clone().into_dispatch(),
        &mask.into_dispatch(),
        burn_route::FillPrimitive::From(x.int().into_dispatch()),
    );
    match bad {
        Ok(_) => println!("fill_where(.., Fill::From(int tensor)) -> unexpectedly accepted"),
        Err(err) => println!("fill_where(.., Fill::From(int tensor)) -> error:\n  {err}"),
    }
}

/// A broadcast input gets a gradient of its own shape; a shape outside an op's contract is a
/// `RouteError::ShapeContract`, not a wrong result.
fn shape_contracts(device: &Device) {
    let gate = Tensor::<2>::from_data([[0.5, -1.0, 2.0, 1.0], [1.0, 0.0, -0.5, 3.0]], device);
    let up = Tensor::<2>::from_data([[0.5, -1.0, 2.0, 1.0]], device).require_grad();
    let grads = swiglu(gate.clone(), up.clone()).sum().backward();
    println!(
        "swiglu(gate: [2, 4], up: [1, 4]): d/dup has shape {:?} = {:?}",
        up.grad(&grads).unwrap().dims(),
        short(values(&up.grad(&grads).unwrap()))
    );
    let weight = Tensor::<1>::from_data([2.0], device);
    match burn_route::try_rms_norm(gate, weight, 1e-5) {
        Ok(_) => println!("rms_norm(x: [2, 4], weight: [1]) -> unexpectedly accepted"),
        Err(err) => println!("rms_norm(x: [2, 4], weight: [1]) -> error:\n  {err}"),
    }
}
