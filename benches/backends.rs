//! Every routed op beyond Flex. Software-GPU figures: on a machine without a GPU, `Cube` is wgpu
//! on lavapipe (Mesa's Vulkan on the CPU), and `Remote` is a burn-remote server on loopback.
//!
//! - `cube/<op>` (feature `wgpu`): the op's forward pass on `Device::flex()` (`flex`) and on
//!   wgpu (`cube`; the adapter `BURN_ROUTE_WGPU_ADAPTER` names, a CPU one by default), `[256, 256]` inputs (64K elements), each call
//!   followed by `device.sync()` so the device's queued work is inside the timing.
//! - `remote/<op>` (feature `remote`): latency per op on a Flex device served on 127.0.0.1 over
//!   WebSocket, `[4, 256]` inputs (1K elements): `routed` is the `burn_route` op, `direct` the
//!   same computation written with Burn's `Tensor` API (each primitive an operation); both end
//!   with a `device.sync()` round trip. `flex` is the routed op on local Flex, for scale.
//!
//! - `remote_ops/<op>/<size>` (feature `remote`): each op that runs on the server as one
//!   operation, at 64K and 1M elements, against its composition shipped primitive by primitive
//!   and against local Flex; `remote_ops/round_trip/<size>` is one `device.sync()` (see
//!   [`remote_ops`]).
//!
//! - `gpu_<config>/<dtype>/<op>/<size>` (feature `wgpu`): each op with a CubeCL kernel against
//!   its composition with Burn's `Tensor` API, on Cube, in `f32`, `f16` and `bf16` (each where
//!   the device stores it), 64K and 1M elements, the time of one call with 32 queued per wait;
//!   `plain` or `fusion` after what `Cube` is in the build (see [`gpu_kernels`]).
//! - `gpu_eager/<op>/<size>` (features `wgpu,burn-tensor/fusion`): an op as one deferred
//!   operation against the same kernel run eagerly (no output metadata), see [`gpu_eager`].
//!
//! On a machine with a GPU, `BURN_ROUTE_WGPU_ADAPTER=gpu` runs the Cube groups on the first
//! discrete GPU instead of a CPU adapter (`scripts/gpu-check` does).
//!
//! ```sh
//! cargo bench --features wgpu,remote --bench backends      # both tables (a few minutes)
//! cargo bench --features wgpu --bench backends -- gpu_      # kernels vs compositions, fusion off
//! cargo bench --features wgpu,burn-tensor/fusion --bench backends -- gpu_   # fusion on
//! cargo bench --features wgpu,burn-tensor/fusion --bench backends -- gpu_eager  # eager vs lazy
//! cargo bench --features cuda --bench backends -- gpu_      # the same on an NVIDIA GPU
//! cargo bench --features wgpu --bench backends -- cube/     # Cube against Flex only
//! cargo bench --features remote --bench backends -- remote/ # loopback latency only
//! cargo bench --features remote --bench backends -- remote_ops/  # one operation vs primitives
//! BURN_ROUTE_BENCH_SERVER=ws://127.0.0.1:3000 cargo bench --features remote --bench backends -- remote_ops/
//! ```
//!
//! Without either feature the binary has nothing to run and says so.
// The op tables and helpers are unused in a build with neither backend.
#![cfg_attr(not(any(feature = "wgpu", feature = "remote")), allow(dead_code))]

#[cfg(feature = "remote")]
#[path = "../tests/support/loopback.rs"]
mod loopback;

mod common;

#[cfg(feature = "wgpu")]
#[path = "../tests/support/adapter.rs"]
mod adapter;

/// `tests/eager/ops.toml`'s generated modules: ops without output metadata, which run eagerly on
/// `Fusion<B>` (`gpu_eager`).
#[cfg(feature = "wgpu")]
#[allow(dead_code)]
mod eager {
    pub mod ops {
        include!("../tests/eager/generated/routed_ops.rs");
    }
    pub mod dispatch {
        include!("../tests/eager/generated/routed_dispatch.rs");
    }
    pub mod tensor {
        include!("../tests/eager/generated/routed_tensor.rs");
    }
}

#[cfg(feature = "wgpu")]
#[allow(dead_code)]
#[path = "../tests/eager/kernels.rs"]
mod eager_kernels;

use std::any::Any;
use std::hint::black_box;
use std::time::Duration;

use burn_tensor::activation::{gelu, log_softmax, relu, silu, softmax, softplus};
use burn_tensor::quantization::QuantScheme;
use burn_tensor::{Bool, Device, Int, Tensor, TensorData};
use common::uniform;
use criterion::{Criterion, criterion_group, criterion_main};

const WIDTH: usize = 256;
const EPS: f32 = 1e-5;
const ALPHA: f32 = 0.5;
const BETA: f32 = -2.0;
const P: f32 = 0.1;
const SEED: u64 = 0x5EED;
const K: usize = 8;

/// One set of inputs on one device; every op borrows what it needs and clones it.
struct Inputs {
    x: Tensor<2>,
    y: Tensor<2>,
    weight: Tensor<1>,
    bias: Tensor<1>,
    targets: Tensor<1, Int>,
    mask: Tensor<2, Bool>,
    holes: Tensor<2>,
    quantized: Tensor<2>,
}

impl Inputs {
    /// `[rows, WIDTH]` inputs on `device`, float ones in `dtype`.
    #[cfg(feature = "wgpu")]
    fn new_in(rows: usize, device: &Device, dtype: burn_tensor::FloatDType) -> Self {
        let inputs = Self::new(rows, device);
        Self {
            x: inputs.x.cast(dtype),
            y: inputs.y.cast(dtype),
            weight: inputs.weight.cast(dtype),
            bias: inputs.bias.cast(dtype),
            holes: inputs.holes.cast(dtype),
            ..inputs
        }
    }

    /// `[rows, WIDTH]` inputs on `device`.
    fn new(rows: usize, device: &Device) -> Self {
        let n = rows * WIDTH;
        let matrix = |seed| {
            Tensor::<2>::from_data(
                TensorData::new(uniform(n, seed, -3.0, 3.0), [rows, WIDTH]),
                device,
            )
        };
        let row = |seed, lo, hi| {
            Tensor::<1>::from_data(
                TensorData::new(uniform(WIDTH, seed, lo, hi), [WIDTH]),
                device,
            )
        };
        let x = matrix(1);
        let targets: Vec<i64> = (0..rows)
            .map(|i| i64::try_from((i * 37 + 11) % WIDTH).expect("class fits in i64"))
            .collect();
        let holes = x.clone().mask_fill(x.clone().greater_elem(2.0), f32::NAN);
        Self {
            mask: x.clone().greater_elem(0.5),
            quantized: x.clone().quantize_dynamic(&QuantScheme::default()),
            y: matrix(2),
            weight: row(3, 0.5, 1.5),
            bias: row(4, -0.5, 0.5),
            targets: Tensor::from_data(TensorData::new(targets, [rows]), device),
            holes,
            x,
        }
    }
}

/// An op on prepared inputs; the output is kept alive until the device has synced.
type Op = fn(&Inputs) -> Box<dyn Any>;

/// Every op of `ops.toml` but `iota` (routed to Flex only), through burn-route.
const ROUTED: &[(&str, Op)] = &[
    ("add_relu", |i| {
        Box::new(burn_route::add_relu(i.x.clone(), i.y.clone()))
    }),
    ("scale", |i| Box::new(burn_route::scale(i.x.clone(), ALPHA))),
    ("axpby", |i| {
        Box::new(burn_route::axpby(
            i.x.clone(),
            Some(i.y.clone()),
            ALPHA,
            BETA,
        ))
    }),
    ("round_half_even", |i| {
        Box::new(burn_route::round_half_even(i.x.clone()))
    }),
    ("sum_all", |i| {
        Box::new(burn_route::sum_all(vec![i.x.clone(), i.y.clone()]))
    }),
    ("split_last", |i| {
        Box::new(burn_route::split_last(i.x.clone(), vec![64, 192]))
    }),
    ("softplus", |i| {
        Box::new(burn_route::softplus(i.x.clone(), 2.0))
    }),
    ("masked_fill_count", |i| {
        Box::new(burn_route::masked_fill_count(i.x.clone(), &i.mask, -1.0))
    }),
    ("nan_to_num", |i| {
        Box::new(burn_route::nan_to_num(i.holes.clone(), 0.0, true))
    }),
    ("dequantize_relu", |i| {
        Box::new(burn_route::dequantize_relu(i.quantized.clone()))
    }),
    ("argmax_last", |i| Box::new(burn_route::argmax_last(&i.x))),
    ("topk_last", |i| Box::new(burn_route::topk_last(&i.x, K))),
    ("bias_gelu", |i| {
        Box::new(burn_route::bias_gelu(i.x.clone(), i.bias.clone()))
    }),
    ("swiglu", |i| {
        Box::new(burn_route::swiglu(i.x.clone(), i.y.clone()))
    }),
    ("rms_norm", |i| {
        Box::new(burn_route::rms_norm(i.x.clone(), i.weight.clone(), EPS))
    }),
    ("layer_norm", |i| {
        Box::new(burn_route::layer_norm(
            i.x.clone(),
            i.weight.clone(),
            i.bias.clone(),
            EPS,
        ))
    }),
    ("softmax_last", |i| {
        Box::new(burn_route::softmax_last(i.x.clone()))
    }),
    ("cross_entropy_logits", |i| {
        Box::new(burn_route::cross_entropy_logits(
            i.x.clone(),
            i.targets.clone(),
        ))
    }),
    ("dropout", |i| {
        Box::new(burn_route::dropout(i.x.clone(), P, SEED))
    }),
    ("clamp_ste", |i| {
        Box::new(burn_route::clamp_ste(i.x.clone(), -1.0, 1.0))
    }),
];

/// The same computations with Burn's `Tensor` API, in the order of [`ROUTED`].
const DIRECT: &[(&str, Op)] = &[
    ("add_relu", |i| Box::new(relu(i.x.clone() + i.y.clone()))),
    ("scale", |i| Box::new(i.x.clone() * ALPHA)),
    ("axpby", |i| {
        Box::new(i.x.clone() * ALPHA + i.y.clone() * BETA)
    }),
    ("round_half_even", |i| Box::new(i.x.clone().round())),
    ("sum_all", |i| Box::new(i.x.clone() + i.y.clone())),
    ("split_last", |i| {
        Box::new(i.x.clone().split_with_sizes(vec![64, 192], 1))
    }),
    ("softplus", |i| Box::new(softplus(i.x.clone(), 2.0))),
    ("masked_fill_count", |i| {
        let count = i.mask.clone().int().sum();
        Box::new((i.x.clone().mask_fill(i.mask.clone(), -1.0), count))
    }),
    ("nan_to_num", |i| {
        let nan = i.holes.clone().is_nan();
        Box::new((i.holes.clone().mask_fill(nan.clone(), 0.0), nan))
    }),
    ("dequantize_relu", |i| {
        Box::new(relu(i.quantized.clone().dequantize()))
    }),
    ("argmax_last", |i| Box::new(i.x.clone().argmax(1))),
    ("topk_last", |i| {
        Box::new(i.x.clone().topk_with_indices(K, 1))
    }),
    ("bias_gelu", |i| {
        Box::new(gelu(i.x.clone() + i.bias.clone().unsqueeze::<2>()))
    }),
    ("swiglu", |i| Box::new(silu(i.x.clone()) * i.y.clone())),
    ("rms_norm", |i| {
        let x = i.x.clone();
        Box::new(
            x.clone() / (x.square().mean_dim(1) + EPS).sqrt() * i.weight.clone().unsqueeze::<2>(),
        )
    }),
    // What `burn::nn::LayerNorm` calls: Burn's own op.
    ("layer_norm", |i| {
        Box::new(burn_tensor::module::layer_norm(
            i.x.clone(),
            i.weight.clone(),
            Some(i.bias.clone()),
            f64::from(EPS),
        ))
    }),
    ("softmax_last", |i| Box::new(softmax(i.x.clone(), 1))),
    ("cross_entropy_logits", |i| {
        Box::new(
            -log_softmax(i.x.clone(), 1)
                .gather(1, i.targets.clone().unsqueeze_dim::<2>(1))
                .mean(),
        )
    }),
    ("dropout", |i| {
        let x = i.x.clone();
        let keep = x.random_like(burn_tensor::Distribution::Bernoulli(f64::from(1.0 - P)));
        Box::new(x * keep / (1.0 - P))
    }),
    ("clamp_ste", |i| Box::new(i.x.clone().clamp(-1.0, 1.0))),
];

/// Times `op` on `inputs`, waiting for `device` to finish each call.
fn time_op(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    id: &str,
    op: Op,
    inputs: &Inputs,
    device: &Device,
) {
    time_calls(group, id, op, inputs, device, 1);
}

/// Calls of an op queued between two waits in the `gpu_` groups: a wait for the device costs
/// about 100 µs on a real GPU (measured on an H200 through Vulkan), more than most of these
/// kernels, so one wait per call would time the wait.
#[cfg(feature = "wgpu")]
const GPU_CALLS: u32 = 32;

/// The time of one call of `op` on `inputs`, with `calls` calls queued per wait for `device`
/// (their outputs kept alive until it has finished them).
fn time_calls(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    id: &str,
    op: Op,
    inputs: &Inputs,
    device: &Device,
    calls: u32,
) {
    group.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let start = std::time::Instant::now();
            for _ in 0..iters {
                let outs: Vec<Box<dyn Any>> = (0..calls).map(|_| op(black_box(inputs))).collect();
                device.sync().expect("the device runs the op");
                drop(outs);
            }
            start.elapsed() / calls
        });
    });
}

#[cfg(feature = "wgpu")]
fn cube(c: &mut Criterion) {
    let flex = Device::flex();
    let gpu = Device::wgpu(adapter::device_kind());
    let on_flex = Inputs::new(WIDTH, &flex);
    let on_gpu = Inputs::new(WIDTH, &gpu);
    gpu.sync().expect("the wgpu device is up");
    for &(name, op) in ROUTED {
        let mut group = c.benchmark_group(format!("cube/{name}"));
        time_op(&mut group, "flex", op, &on_flex, &flex);
        time_op(&mut group, "cube", op, &on_gpu, &gpu);
        group.finish();
    }
}

#[cfg(not(feature = "wgpu"))]
fn cube(_: &mut Criterion) {
    eprintln!("cube/*: skipped, build with `--features wgpu`");
}

/// The ops with a CubeCL kernel on `Cube` (`src/kernels/cube/`).
#[cfg(feature = "wgpu")]
const KERNELS: &[&str] = &[
    "add_relu",
    "bias_gelu",
    "swiglu",
    "rms_norm",
    "layer_norm",
    "softmax_last",
    "cross_entropy_logits",
    "dropout",
    "clamp_ste",
];

#[cfg(any(feature = "wgpu", feature = "remote"))]
fn op_named(table: &[(&str, Op)], name: &str) -> Op {
    table
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, op)| *op)
        .expect("every op named is in the table")
}

/// `gpu_<config>/<dtype>/<op>/<size>`: each op with a CubeCL kernel on Cube (`kernel`, the
/// routed op) against its composition with Burn's `Tensor` API (`composition`), in each float
/// dtype the device stores (one it does not is skipped, and the reason printed), `[256, 256]`
/// (64K) and `[4096, 256]` (1M) inputs: the time of one call, with [`GPU_CALLS`] calls queued
/// per `device.sync()` (see [`time_calls`]). `<config>` is
/// `plain` when `Cube` is `CubeBackend` and `fusion` when it is `Fusion<CubeBackend>` (build
/// with `--features wgpu,burn-tensor/fusion`): there `kernel` is one deferred operation and
/// `composition` is what Burn's fuser makes of the composition.
#[cfg(feature = "wgpu")]
fn gpu_kernels(c: &mut Criterion) {
    use burn_tensor::FloatDType;
    let gpu = Device::wgpu(adapter::device_kind());
    let config = if std::any::type_name::<burn_route::rt::Cube>().contains("Fusion") {
        "fusion"
    } else {
        "plain"
    };
    for (dtype, label) in [
        (FloatDType::F32, "f32"),
        (FloatDType::F16, "f16"),
        (FloatDType::BF16, "bf16"),
    ] {
        if !gpu.supports_dtype(dtype) {
            eprintln!("gpu_{config}/{label}/*: skipped, the device does not store {label}");
            continue;
        }
        for (rows, size) in [(256, "64K"), (4096, "1M")] {
            let inputs = Inputs::new_in(rows, &gpu, dtype);
            gpu.sync().expect("the wgpu device is up");
            for name in KERNELS {
                let mut group = c.benchmark_group(format!("gpu_{config}/{label}/{name}/{size}"));
                time_calls(
                    &mut group,
                    "kernel",
                    op_named(ROUTED, name),
                    &inputs,
                    &gpu,
                    GPU_CALLS,
                );
                time_calls(
                    &mut group,
                    "composition",
                    op_named(DIRECT, name),
                    &inputs,
                    &gpu,
                    GPU_CALLS,
                );
                group.finish();
            }
        }
    }
}

/// `gpu_eager/<op>/<size>` (fusion on only): burn-route's `rms_norm` kernel as one deferred
/// operation (`lazy`, the op as shipped, with output metadata) and as an eager call
/// (`eager`: `tests/eager/ops.toml`'s `rms_norm`, the same kernel without metadata), `f32`,
/// 64K and 1M elements, alone and between Burn ops (`*_chain`: `rms_norm(x * 2 + 1) * 3`),
/// the time of one call with [`GPU_CALLS`] queued per wait. An eager call waits for the
/// stream to compute its inputs, so it pays a wait per call where the lazy one queues.
#[cfg(feature = "wgpu")]
fn gpu_eager(c: &mut Criterion) {
    if !std::any::type_name::<burn_route::rt::Cube>().contains("Fusion") {
        eprintln!(
            "gpu_eager/*: skipped, `Cube` is not `Fusion<CubeBackend>` in this build (add `burn-tensor/fusion`)"
        );
        return;
    }
    let gpu = Device::wgpu(adapter::device_kind());
    let lazy: Op = |i| Box::new(burn_route::rms_norm(i.x.clone(), i.weight.clone(), 1e-5));
    let eager: Op = |i| Box::new(eager::tensor::rms_norm(i.x.clone(), i.weight.clone(), 1e-5));
    let lazy_chain: Op = |i| {
        let x = i.x.clone() * 2.0 + 1.0;
        Box::new(burn_route::rms_norm(x, i.weight.clone(), 1e-5) * 3.0)
    };
    let eager_chain: Op = |i| {
        let x = i.x.clone() * 2.0 + 1.0;
        Box::new(eager::tensor::rms_norm(x, i.weight.clone(), 1e-5) * 3.0)
    };
    for (rows, size) in [(256, "64K"), (4096, "1M")] {
        let inputs = Inputs::new_in(rows, &gpu, burn_tensor::FloatDType::F32);
        gpu.sync().expect("the wgpu device is up");
        let mut group = c.benchmark_group(format!("gpu_eager/rms_norm/{size}"));
        for (id, op) in [
            ("lazy", lazy),
            ("eager", eager),
            ("lazy_chain", lazy_chain),
            ("eager_chain", eager_chain),
        ] {
            time_calls(&mut group, id, op, &inputs, &gpu, GPU_CALLS);
        }
        group.finish();
    }
}

#[cfg(not(feature = "wgpu"))]
fn gpu_eager(_: &mut Criterion) {
    eprintln!("gpu_eager/*: skipped, build with `--features wgpu,burn-tensor/fusion`");
}

#[cfg(not(feature = "wgpu"))]
fn gpu_kernels(_: &mut Criterion) {
    eprintln!("gpu_*/*: skipped, build with `--features wgpu`");
}

#[cfg(feature = "remote")]
fn remote(c: &mut Criterion) {
    let server = loopback::LoopbackServer::start();
    let far = server.device();
    let flex = Device::flex();
    let on_server = Inputs::new(4, &far);
    let local = Inputs::new(4, &flex);
    far.sync().expect("the loopback server answers");
    for (&(name, routed), &(direct_name, direct)) in ROUTED.iter().zip(DIRECT) {
        assert_eq!(name, direct_name, "DIRECT follows the order of ROUTED");
        let mut group = c.benchmark_group(format!("remote/{name}"));
        time_op(&mut group, "routed", routed, &on_server, &far);
        time_op(&mut group, "direct", direct, &on_server, &far);
        time_op(&mut group, "flex", routed, &local, &flex);
        group.finish();
    }
    drop(on_server);
    drop(server);
}

#[cfg(not(feature = "remote"))]
fn remote(_: &mut Criterion) {
    eprintln!("remote/*: skipped, build with `--features remote`");
}

/// The ops that run on a Remote server as one operation (their outputs declare `shape` and
/// `dtype`; `serve_remote_ops` registers them) and that have a fused kernel on Flex.
#[cfg(feature = "remote")]
const SERVED: &[&str] = &[
    "add_relu",
    "bias_gelu",
    "swiglu",
    "rms_norm",
    "layer_norm",
    "softmax_last",
    "cross_entropy_logits",
    "dropout",
];

/// `remote_ops/<op>/<size>`: each op that runs on the server as one operation, through a
/// loopback server (one Flex device, in this process, over WebSocket), at `[256, 256]` (64K)
/// and `[4096, 256]` (1M): `one_op` is the routed op (one custom operation, the server's fused
/// Flex kernel), `composition` the same computation with Burn's `Tensor` API (each primitive an
/// operation), `flex` the routed op on local Flex; `round_trip/<size>` is a `device.sync()`
/// alone. Every call ends with `device.sync()`.
///
/// With `BURN_ROUTE_BENCH_SERVER=ws://HOST:PORT` it times that server instead (for example
/// `examples/remote_server.rs` in another process, each process pinned to its own core).
#[cfg(feature = "remote")]
fn remote_ops(c: &mut Criterion) {
    let (server, far) = match std::env::var("BURN_ROUTE_BENCH_SERVER") {
        Ok(address) => {
            let host = burn_tensor::remote::RemoteHost::websocket(&address);
            let device = Device::remote_options(&host)
                .init()
                .expect("connect to BURN_ROUTE_BENCH_SERVER");
            (None, device)
        }
        Err(_) => {
            let server = loopback::LoopbackServer::start();
            let device = server.device();
            (Some(server), device)
        }
    };
    let flex = Device::flex();
    for (rows, size) in [(256, "64K"), (4096, "1M")] {
        let on_server = Inputs::new(rows, &far);
        let local = Inputs::new(rows, &flex);
        far.sync().expect("the loopback server answers");
        let mut group = c.benchmark_group(format!("remote_ops/round_trip/{size}"));
        group.bench_function("sync", |b| {
            b.iter(|| far.sync().expect("the loopback server answers"));
        });
        group.finish();
        for name in SERVED {
            let routed = op_named(ROUTED, name);
            let mut group = c.benchmark_group(format!("remote_ops/{name}/{size}"));
            time_op(&mut group, "one_op", routed, &on_server, &far);
            time_op(
                &mut group,
                "composition",
                op_named(DIRECT, name),
                &on_server,
                &far,
            );
            time_op(&mut group, "flex", routed, &local, &flex);
            group.finish();
        }
    }
    drop(server);
}

#[cfg(not(feature = "remote"))]
fn remote_ops(_: &mut Criterion) {
    eprintln!("remote_ops/*: skipped, build with `--features remote`");
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(1))
        .configure_from_args()
}

criterion_group! {
    name = backends;
    config = config();
    targets = cube, gpu_kernels, gpu_eager, remote, remote_ops
}
criterion_main!(backends);
