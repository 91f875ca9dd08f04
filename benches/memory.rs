//! Peak heap memory of burn-route's fused ops against what a Burn user gets, on Flex (which keeps
//! every tensor buffer on the heap): for each op, the forward pass on `Device::flex()` and the
//! forward and backward pass on `Device::flex().autodiff()` (every float input a
//! `require_grad()` leaf), at 64K and 1M elements, with the inputs of `benches/ops.rs`
//! (`[n / 256, 256]`, `[n / 128, 128]` logits, `[256]` per-feature parameters).
//!
//! A counting global allocator wraps the system's: the figure is the peak of live heap bytes
//! above what was live when the measured call began (the inputs, built before, are not in it;
//! what the call returns and what it frees before returning are). Each measurement is taken
//! three times and the smallest kept (the first call of a kind may grow a pool or a cache), and
//! the output is dropped before the next. Baselines are Burn's own op where Burn 0.23 has one
//! (`module::layer_norm`, `activation::softmax`, `log_softmax`, `gelu`, `silu`), else the
//! composition `burn::nn` writes (`RmsNorm`'s), as `benches/ops.rs` has them.
//!
//! Then a training step of a small transformer-style block (embedding, attention scores through
//! `softmax_last`, `rms_norm`, a SwiGLU MLP, `layer_norm`, `bias_gelu`, and the output projection
//! with the loss: `linear_cross_entropy`, against Burn's matmul and cross-entropy; batch 32,
//! sequence 16, width 64): forward, backward and a plain SGD update, written with
//! burn-route's fused ops and with Burn's ops and compositions, each without and with
//! `gradient_checkpointing()`; the peak is above the step's start (the parameters live before).
//!
//! Last, `linear_cross_entropy` at 1,024 rows, 512 features and 32,768 classes against
//! `burn::nn::Linear` and cross-entropy: peak heap and a median of three wall times, the loss
//! alone and with the gradients.
//!
//! The per-op table is measured in `memory/per_op.rs`; the allocator, the training step and
//! `linear_cross_entropy` are here.
//!
//! Run: `cargo bench --bench memory` (prints Markdown tables; BENCHMARKS.md has the figures).

mod common;
#[path = "common/flex.rs"]
mod flex;
#[path = "memory/per_op.rs"]
mod per_op;
#[path = "common/memory.rs"]
mod shared;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use burn_tensor::{Device, Int, Tensor, TensorData};
use flex::float;
use shared::{Block, Model, kib};

/// The system allocator, counting live bytes and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to `System` unchanged; only counters are updated beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            grow(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            grow(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grow(new_size);
        }
        new
    }
}

fn grow(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The peak heap bytes above the start of `run` on inputs from `setup` (built before the
/// start), the smallest of three runs.
fn peak<I, O>(setup: impl Fn() -> I, run: impl Fn(I) -> O) -> usize {
    (0..3)
        .map(|_| {
            let inputs = setup();
            let start = LIVE.load(Ordering::Relaxed);
            PEAK.store(start, Ordering::Relaxed);
            let out = run(inputs);
            let peak = PEAK.load(Ordering::Relaxed) - start;
            drop(out);
            peak
        })
        .min()
        .expect("three runs")
}

// --- A training step of a small transformer-style block (`common/memory.rs`). ---

/// The peak heap bytes of one training step above its start (the parameters live before it),
/// the smallest of three steps after two warm-up steps.
fn step_peak(device: &Device, model: Model) -> usize {
    let ids = |offset: usize| shared::ids(offset, device);
    let mut block = Some(Block::new(device));
    for _ in 0..2 {
        block = Some(block.take().expect("a block").step(ids(3), ids(4), model));
    }
    (0..3)
        .map(|_| {
            let (tokens, targets) = (ids(3), ids(4));
            let current = block.take().expect("a block");
            let start = LIVE.load(Ordering::Relaxed);
            PEAK.store(start, Ordering::Relaxed);
            let next = current.step(tokens, targets, model);
            let peak = PEAK.load(Ordering::Relaxed) - start;
            block = Some(next);
            peak
        })
        .min()
        .expect("three steps")
}

/// Where a training step's heap goes, above its start: the peak during the forward pass, what
/// is held once the loss exists (the graph the backward pass reads), the peak during the
/// backward pass and what is held after it (the gradients); the smallest of three steps after
/// two warm-up steps, each figure on its own.
fn step_phases(device: &Device, model: Model) -> [usize; 4] {
    let ids = |offset: usize| shared::ids(offset, device);
    let mut block = Block::new(device);
    for _ in 0..2 {
        block = block.step(ids(3), ids(4), model);
    }
    let mut best = [usize::MAX; 4];
    for _ in 0..3 {
        let (tokens, targets) = (ids(3), ids(4));
        let start = LIVE.load(Ordering::Relaxed);
        PEAK.store(start, Ordering::Relaxed);
        let loss = block.loss(tokens, targets, model);
        let forward = PEAK.load(Ordering::Relaxed) - start;
        let held = LIVE.load(Ordering::Relaxed) - start;
        PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
        let grads = loss.backward();
        let backward = PEAK.load(Ordering::Relaxed) - start;
        let after = LIVE.load(Ordering::Relaxed) - start;
        drop(grads);
        for (b, v) in best.iter_mut().zip([forward, held, backward, after]) {
            *b = (*b).min(v);
        }
    }
    best
}

fn training_phases() {
    println!();
    println!(
        "| training step, KiB above its start | checkpointing | forward peak | held after the forward pass | backward peak | gradients |"
    );
    println!("|---|---|---:|---:|---:|---:|");
    let plain = Device::flex().autodiff();
    let checkpointed = Device::flex().autodiff().gradient_checkpointing();
    for (name, model) in shared::MODELS {
        for (mode, device) in [("without", &plain), ("with", &checkpointed)] {
            let [f, h, b, g] = step_phases(device, model);
            println!(
                "| {name} | {mode} | {} | {} | {} | {} |",
                kib(f),
                kib(h),
                kib(b),
                kib(g)
            );
        }
    }
}

/// The median wall time of a training step (forward, backward, update) after two warm-up steps.
fn step_time(device: &Device, model: Model) -> std::time::Duration {
    let ids = |offset: usize| shared::ids(offset, device);
    let mut block = Some(Block::new(device));
    for _ in 0..2 {
        block = Some(block.take().expect("a block").step(ids(3), ids(4), model));
    }
    let mut times: Vec<_> = (0..9)
        .map(|_| {
            let (tokens, targets) = (ids(3), ids(4));
            let current = block.take().expect("a block");
            let start = std::time::Instant::now();
            block = Some(current.step(tokens, targets, model));
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

/// The step time of each model without checkpointing: the smallest of six medians
/// ([`step_time`]), the models measured in turns so that a slow spell of the machine falls on
/// all of them.
fn step_times() {
    println!("| training step | step time without checkpointing (smallest of 6 medians of 9) |");
    println!("|---|---:|");
    let plain = Device::flex().autodiff();
    let mut best = [std::time::Duration::MAX; shared::MODELS.len()];
    for _ in 0..6 {
        for (best, (_, model)) in best.iter_mut().zip(shared::MODELS) {
            *best = (*best).min(step_time(&plain, model));
        }
    }
    for (best, (name, _)) in best.iter().zip(shared::MODELS) {
        println!("| {name} | {:.2} ms |", best.as_secs_f64() * 1e3);
    }
}

fn training_step() {
    println!();
    println!(
        "| training step | without checkpointing, KiB | with `gradient_checkpointing()`, KiB | with / without | step time without checkpointing (median of 9) |"
    );
    println!("|---|---:|---:|---:|---:|");
    let plain = Device::flex().autodiff();
    let checkpointed = Device::flex().autodiff().gradient_checkpointing();
    for (name, model) in shared::MODELS {
        let without = step_peak(&plain, model);
        let with = step_peak(&checkpointed, model);
        #[allow(clippy::cast_precision_loss)]
        let ratio = with as f64 / without as f64;
        let took = step_time(&plain, model);
        println!(
            "| {name} | {} | {} | {ratio:.2}x | {:.2} ms |",
            kib(without),
            kib(with),
            took.as_secs_f64() * 1e3
        );
    }
}

/// The median of three wall times of `run` on inputs from `setup` (built before the clock).
fn time<I, O>(setup: impl Fn() -> I, run: impl Fn(I) -> O) -> std::time::Duration {
    let mut times: Vec<_> = (0..3)
        .map(|_| {
            let inputs = setup();
            let start = std::time::Instant::now();
            let out = run(inputs);
            let took = start.elapsed();
            drop(out);
            took
        })
        .collect();
    times.sort();
    times[1]
}

/// `linear_cross_entropy` against `burn::nn::Linear` + cross-entropy at [`flex::LCE`]: peak
/// heap and time, the loss alone and with the gradients of `x`, the weight and the bias.
fn linear_cross_entropy() {
    let (x, w, b, t) = flex::lce_inputs();
    let plain = Device::flex();
    let autodiff = Device::flex().autodiff();
    println!();
    println!(
        "| linear_cross_entropy, {} x {} x {} | burn-route, KiB | Burn, KiB | ratio | burn-route, ms | Burn, ms | ratio |",
        flex::LCE.0,
        flex::LCE.1,
        flex::LCE.2
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (pass, device, tracked) in [
        ("loss", &plain, false),
        ("loss + gradients", &autodiff, true),
    ] {
        let setup = || {
            let f = |d: &TensorData| {
                let t = float::<2>(d, device);
                if tracked { t.require_grad() } else { t }
            };
            let bias = float::<1>(&b, device);
            let bias = if tracked { bias.require_grad() } else { bias };
            (
                f(&x),
                f(&w),
                bias,
                Tensor::<1, Int>::from_data(t.clone(), device),
            )
        };
        let run = |fused: bool| {
            move |(x, w, b, t): (Tensor<2>, Tensor<2>, Tensor<1>, Tensor<1, Int>)| {
                let loss = if fused {
                    flex::linear_ce_route(x, w, b, t)
                } else {
                    flex::linear_ce_burn(x, w, b, t)
                };
                if tracked {
                    Some(loss.backward())
                } else {
                    drop(loss);
                    None
                }
            }
        };
        let (ours, burn) = (peak(setup, run(true)), peak(setup, run(false)));
        let (ours_t, burn_t) = (time(setup, run(true)), time(setup, run(false)));
        #[allow(clippy::cast_precision_loss)]
        let ratio = ours as f64 / burn as f64;
        println!(
            "| {pass} | {} | {} | {ratio:.2}x | {:.0} | {:.0} | {:.2}x |",
            kib(ours),
            kib(burn),
            ours_t.as_secs_f64() * 1e3,
            burn_t.as_secs_f64() * 1e3,
            ours_t.as_secs_f64() / burn_t.as_secs_f64()
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`. `-- step` prints only the training step's two tables
    // (seconds, where every table takes minutes), `-- times` only the step times, measured
    // in turns.
    if std::env::args().any(|a| a == "times") {
        step_times();
        return;
    }
    if std::env::args().any(|a| a == "step") {
        training_step();
        training_phases();
        return;
    }
    per_op::table();
    training_step();
    training_phases();
    linear_cross_entropy();
}
