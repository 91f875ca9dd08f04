#![cfg(feature = "wgpu")]
//! The forms of `tests/eager/ops.toml` compiled against the real runtime and run on Cube: ops
//! with kernels of their own and no output metadata. With fusion off they run like any Cube
//! kernel; with fusion on (`Cube` is `Fusion<CubeBackend>`) each call reads its inputs from the
//! fusion stream, runs the kernel at once and hands its outputs back, between Burn ops queued
//! before and after it. Their outputs must be what Flex computes.

use crate::common;

use crate::common::{ints, values};
use burn_tensor::{Bool, Device, Int, Tensor};

/// The generated modules, as a crate of your own includes them.
#[allow(dead_code)]
mod eager {
    pub mod ops {
        include!("../eager/generated/routed_ops.rs");
    }
    pub mod dispatch {
        include!("../eager/generated/routed_dispatch.rs");
    }
    pub mod tensor {
        include!("../eager/generated/routed_tensor.rs");
    }
}

/// The kernels (shared with `benches/backends.rs`).
#[path = "../eager/kernels.rs"]
mod kernels;

fn gpu() -> Device {
    Device::wgpu(crate::adapter::device_kind())
}

type Outputs = (
    Tensor<2>,
    (Tensor<2, Int>, Option<Tensor<2, Bool>>),
    Vec<Tensor<2>>,
    usize,
);

/// The call between Burn ops: its inputs are results still queued in the fusion stream, and
/// its outputs feed later ops before anything is read.
fn run_forms(device: &Device, with_opt: bool) -> (Outputs, Tensor<2>) {
    let x = Tensor::<2>::from_data([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device);
    let b = Tensor::<2>::from_data([[0.5, 0.5, 0.5], [1.0, 1.0, 1.0]], device);
    let opt = with_opt.then(|| x.clone() * 10.0);
    let bopt = x.clone() * 100.0;
    let xs = vec![x.clone().neg(), x.clone() * 0.5];
    let mask = x.clone().greater_elem(2.5);
    let x = x.exp().log();
    let out = eager::tensor::forms(x, &b, opt, Some(&bopt), xs, mask, 150.0, &[1, 2]);
    // Burn ops on the outputs and on a borrowed input, after the call.
    let later = (out.0.clone() * 2.0 + b).sum_dim(1);
    (out, later)
}

#[test]
fn every_eager_form_gives_the_flex_outputs() {
    for with_opt in [true, false] {
        let ((sum, (above, mask), pieces, count), later) = run_forms(&gpu(), with_opt);
        let ((f_sum, (f_above, f_mask), f_pieces, f_count), f_later) =
            run_forms(&Device::flex(), with_opt);
        common::assert_close(&values(&sum), &values(&f_sum), 1e-3, "sum");
        common::assert_close(&values(&later), &values(&f_later), 1e-3, "later");
        assert_eq!(ints(&above), ints(&f_above));
        assert!(ints(&above).contains(&1) && ints(&above).contains(&0));
        assert_eq!(mask.is_some(), with_opt);
        if let (Some(m), Some(fm)) = (mask, f_mask) {
            let read = |t: Tensor<2, Bool>| t.into_data().convert::<bool>().try_to_vec::<bool>();
            assert_eq!(read(m).unwrap(), read(fm).unwrap());
        }
        assert_eq!((count, f_count), (2, 2));
        for (p, fp) in pieces.iter().zip(&f_pieces) {
            assert_eq!(p.dims(), fp.dims());
            common::assert_close(&values(p), &values(fp), 1e-5, "piece");
        }
    }
}

#[test]
fn eager_ops_routed_by_device_or_returning_numbers() {
    let out = eager::tensor::filled(3, 1.5, &gpu());
    assert_eq!(out.device(), gpu());
    assert_eq!(values(&(out * 2.0)), [3.0, 3.0, 3.0]);
    let x = Tensor::<2>::from_data([[1.0, -2.0], [3.0, 0.5]], &gpu());
    // Queued work before the call: its plain output must see it.
    let total = eager::tensor::total(&(x.clone() * 2.0));
    assert!((total - 5.0).abs() < 1e-5, "{total}");
    // The borrowed input is still usable.
    assert_eq!(values(&x), [1.0, -2.0, 3.0, 0.5]);
}

/// The eager form of burn-route's `rms_norm` kernel (no output metadata) gives the lazy op's
/// values, inside a chain of Burn ops.
#[test]
fn an_eager_kernel_matches_its_lazy_form() {
    let x = Tensor::<2>::from_data([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]], &gpu());
    let w = Tensor::<1>::from_data([1.0, 0.5, 2.0], &gpu());
    let eager = eager::tensor::rms_norm(x.clone() * 2.0 + 1.0, w.clone(), 1e-5) * 3.0;
    let lazy = burn_route::rms_norm(x * 2.0 + 1.0, w, 1e-5) * 3.0;
    common::assert_close(&values(&eager), &values(&lazy), 1e-5, "eager against lazy");
}
