//! Device memory of burn-route's fused ops against what a Burn user gets, on Cube (cubecl's wgpu
//! runtime; lavapipe without a GPU), with the inputs and baselines of `benches/memory.rs`.
//!
//! cubecl reports the bytes its allocations hold now (`Device::memory_pool_usage`, its
//! `bytes_in_use`: requested sizes, without padding or reserved pages), not a peak in bytes, so
//! this bench measures what stays held: for each op at 64K and 1M elements, the bytes in use
//! after the forward pass on `Device::wgpu(..)` (the output), and after the forward pass on
//! its `autodiff()` device with every float input a `require_grad()` leaf (the output and
//! everything the backward pass keeps), above what was in use before the inputs were made; the
//! caller keeps only the output. Their difference is what the op keeps for its backward pass.
//! Each figure is the smallest of three runs (a first call may tune a kernel).
//!
//! Then the training step of `benches/memory.rs` (`common/memory.rs`): the bytes held after its
//! forward pass (the loss and the graph that the backward pass reads) above the parameters,
//! without and with `gradient_checkpointing()`.
//!
//! Run: `cargo bench --bench memory_cube --features wgpu` (prints Markdown tables;
//! BENCHMARKS.md has the figures). The byte counts do not depend on the machine's speed.

mod common;
#[path = "common/flex.rs"]
mod flex;
#[path = "common/memory.rs"]
mod shared;

use burn_tensor::activation::{gelu, relu, silu, softmax};
use burn_tensor::{Device, DeviceKind, Int, Tensor, TensorData};
use flex::{
    CLASSES, EPS, LCE, P, WIDTH, cross_entropy_burn, dropout_burn, features, float,
    layer_norm_burn, lce_inputs, leaf, linear_ce_burn, linear_ce_route, matrix, rms_norm_burn,
};
use shared::{Model, kib};

/// cubecl's bytes in use on `device` (after the work queued before).
fn in_use(device: &Device) -> usize {
    let bytes = device
        .memory_pool_usage()
        .expect("Cube reports its memory")
        .bytes_in_use;
    usize::try_from(bytes).expect("fits the address space")
}

/// The bytes held after `run` on inputs from `setup`, above what was in use before `setup`;
/// the smallest of three runs.
fn held<I, O>(device: &Device, setup: impl Fn() -> I, run: impl Fn(I) -> O) -> usize {
    (0..3)
        .map(|_| {
            let base = in_use(device);
            let out = run(setup());
            let after = in_use(device);
            drop(out);
            after.saturating_sub(base)
        })
        .min()
        .expect("three runs")
}

/// An op's inputs as data, and the calls measured on them: burn-route's and Burn's.
struct Inputs {
    x: TensorData,
    y: TensorData,
    bias: TensorData,
    gamma: TensorData,
    beta: TensorData,
    logits: TensorData,
    targets: TensorData,
}

/// One op: its name and its two forms, given the inputs and whether floats are leaves.
type Call = fn(&Inputs, &Device, bool) -> Tensor<2>;

fn input<const D: usize>(data: &TensorData, device: &Device, tracked: bool) -> Tensor<D> {
    if tracked {
        leaf::<D>(data, device)
    } else {
        float::<D>(data, device)
    }
}

const OPS: &[(&str, Call, Call)] = &[
    (
        "add_relu",
        |i, d, t| burn_route::add_relu(input(&i.x, d, t), input(&i.y, d, t)),
        |i, d, t| relu(input::<2>(&i.x, d, t) + input::<2>(&i.y, d, t)),
    ),
    (
        "bias_gelu",
        |i, d, t| burn_route::bias_gelu(input(&i.x, d, t), input(&i.bias, d, t)),
        |i, d, t| gelu(input::<2>(&i.x, d, t) + input::<1>(&i.bias, d, t).unsqueeze::<2>()),
    ),
    (
        "swiglu",
        |i, d, t| burn_route::swiglu(input(&i.x, d, t), input(&i.y, d, t)),
        |i, d, t| silu(input::<2>(&i.x, d, t)) * input::<2>(&i.y, d, t),
    ),
    (
        "rms_norm",
        |i, d, t| burn_route::rms_norm(input(&i.x, d, t), input(&i.gamma, d, t), EPS),
        |i, d, t| rms_norm_burn(input(&i.x, d, t), input(&i.gamma, d, t)),
    ),
    (
        "layer_norm",
        |i, d, t| {
            burn_route::layer_norm(
                input(&i.x, d, t),
                input(&i.gamma, d, t),
                input(&i.beta, d, t),
                EPS,
            )
        },
        |i, d, t| {
            layer_norm_burn(
                input(&i.x, d, t),
                input(&i.gamma, d, t),
                input(&i.beta, d, t),
            )
        },
    ),
    (
        "softmax_last",
        |i, d, t| burn_route::softmax_last(input(&i.x, d, t)),
        |i, d, t| softmax(input::<2>(&i.x, d, t), 1),
    ),
    (
        "cross_entropy_logits",
        |i, d, t| {
            let targets = Tensor::<1, Int>::from_data(i.targets.clone(), d);
            burn_route::cross_entropy_logits(input(&i.logits, d, t), targets).unsqueeze::<2>()
        },
        |i, d, t| {
            let targets = Tensor::<1, Int>::from_data(i.targets.clone(), d);
            cross_entropy_burn(input(&i.logits, d, t), targets).unsqueeze::<2>()
        },
    ),
    (
        "dropout",
        |i, d, t| burn_route::dropout(input(&i.x, d, t), P, 0x5EED).0,
        |i, d, t| dropout_burn(input(&i.x, d, t)),
    ),
];

fn ops(plain: &Device, tracked: &Device) {
    println!(
        "| op | size | burn-route: output, KiB | held, tracked, KiB | kept for backward, KiB | Burn: output, KiB | held, tracked, KiB | kept for backward, KiB | burn-route / Burn, kept |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for (n, size) in [(1 << 16, "64K"), (1 << 20, "1M")] {
        let inputs = Inputs {
            x: matrix(n, WIDTH, 1),
            y: matrix(n, WIDTH, 2),
            bias: features(4, -1.0, 1.0),
            gamma: features(5, 0.5, 1.5),
            beta: features(6, -0.5, 0.5),
            logits: matrix(n, CLASSES, 7),
            targets: TensorData::new(
                (0..n / CLASSES)
                    .map(|i| i64::try_from((i * 37 + 11) % CLASSES).expect("fits"))
                    .collect::<Vec<_>>(),
                [n / CLASSES],
            ),
        };
        let inputs = &inputs;
        for &(name, ours, burn) in OPS {
            let output = held(plain, || (), |()| ours(inputs, plain, false));
            let ours_held = held(tracked, || (), |()| ours(inputs, tracked, true));
            let burn_output = held(plain, || (), |()| burn(inputs, plain, false));
            let burn_held = held(tracked, || (), |()| burn(inputs, tracked, true));
            let kept = ours_held.saturating_sub(output);
            let burn_kept = burn_held.saturating_sub(burn_output);
            #[allow(clippy::cast_precision_loss)]
            let ratio = if burn_kept == 0 {
                "—".to_owned()
            } else {
                format!("{:.2}x", kept as f64 / burn_kept as f64)
            };
            println!(
                "| {name} | {size} | {} | {} | {} | {} | {} | {} | {ratio} |",
                kib(output),
                kib(ours_held),
                kib(kept),
                kib(burn_output),
                kib(burn_held),
                kib(burn_kept)
            );
        }
    }
}

/// The bytes held after the training step's forward pass (the loss alive, with the graph the
/// backward pass reads) above the parameters, the smallest of three after a warm-up step.
fn step_held(device: &Device, model: Model) -> usize {
    let block =
        shared::Block::new(device).step(shared::ids(3, device), shared::ids(4, device), model);
    held(
        device,
        || (shared::ids(3, device), shared::ids(4, device)),
        |(tokens, targets)| block.loss(tokens, targets, model),
    )
}

fn training_step(device: &Device) {
    println!();
    println!(
        "| training step, held after the forward pass | without checkpointing, KiB | with `gradient_checkpointing()`, KiB | with / without |"
    );
    println!("|---|---:|---:|---:|");
    let checkpointed = device.clone().gradient_checkpointing();
    for (name, model) in shared::MODELS {
        let without = step_held(device, model);
        let with = step_held(&checkpointed, model);
        #[allow(clippy::cast_precision_loss)]
        let ratio = with as f64 / without.max(1) as f64;
        println!(
            "| {name} | {} | {} | {ratio:.2}x |",
            kib(without),
            kib(with)
        );
    }
}

/// `linear_cross_entropy` at the sizes of `benches/memory.rs` (1,024 rows, 512 features, 32,768
/// classes) against `burn::nn::Linear` and cross-entropy: the bytes held after the forward pass,
/// the loss alone and with every input tracked (the chunked pass has formed the gradients by
/// then; Burn's graph keeps the logits it reads).
fn linear_cross_entropy(plain: &Device, tracked: &Device) {
    let (x, w, b, t) = lce_inputs();
    let (rows, features, classes) = LCE;
    println!();
    println!(
        "| `linear_cross_entropy`, {rows} x {features} -> {classes} | held after the loss, KiB | held after the tracked loss, KiB |"
    );
    println!("|---|---:|---:|");
    type Loss = fn(Tensor<2>, Tensor<2>, Tensor<1>, Tensor<1, Int>) -> Tensor<1>;
    let forms: [(&str, Loss); 2] = [
        ("Burn: `Linear` + cross-entropy", linear_ce_burn),
        ("burn-route", linear_ce_route),
    ];
    for (name, loss) in forms {
        let run = |device: &Device, tracked: bool| {
            held(
                device,
                || {
                    (
                        input::<2>(&x, device, tracked),
                        input::<2>(&w, device, tracked),
                        input::<1>(&b, device, tracked),
                        Tensor::<1, Int>::from_data(t.clone(), device),
                    )
                },
                |(x, w, b, t)| loss(x, w, b, t),
            )
        };
        println!(
            "| {name} | {} | {} |",
            kib(run(plain, false)),
            kib(run(tracked, true))
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter is not supported.
    let plain = Device::wgpu(DeviceKind::DefaultDevice);
    let tracked = plain.clone().autodiff();
    ops(&plain, &tracked);
    training_step(&tracked);
    linear_cross_entropy(&plain, &tracked);
}
