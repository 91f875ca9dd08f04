//! The ops of `ops.toml` over declared types: `affine` (a struct in), `moments` (a struct out)
//! and `fill_where` (an enum in). Values against Burn's `Tensor` API on Flex, gradients through
//! the declared types' fields against finite differences, and errors naming the field path.
//! (`tests/integration/parity.rs` runs them on Cube and Remote against Flex.)

use crate::common;

use crate::common::{Rng, assert_close, tensor, values};
use burn_route::rt::{BackendId, InputName, Malformed, RouteError, TensorKind};
use burn_route::{Affine, Fill, Moments, affine, fill_where, moments, try_affine};
use burn_tensor::{Bool, Device, Tensor};

#[test]
fn affine_scales_and_shifts_with_broadcasting() {
    let device = Device::flex();
    let x = tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3], &device);
    let scale = tensor(&[2.0, 0.5, -1.0], [1, 3], &device);
    let shift = tensor(&[10.0, 20.0], [2, 1], &device);
    let out = affine(
        x.clone(),
        Affine {
            scale: scale.clone(),
            shift: Some(shift.clone()),
        },
    );
    assert_eq!(values(&out), values(&(x.clone() * scale.clone() + shift)));
    assert_eq!(values(&out), [12.0, 11.0, 7.0, 28.0, 22.5, 14.0]);
    let out = affine(
        x.clone(),
        Affine {
            scale: scale.clone(),
            shift: None,
        },
    );
    assert_eq!(values(&out), values(&(x * scale)));
}

#[test]
fn moments_are_the_mean_and_biased_variance_of_the_last_dimension() {
    let device = Device::flex();
    let x = tensor(&[1.0, 2.0, 3.0, 4.0, -1.0, 1.0, -1.0, 1.0], [2, 4], &device);
    let Moments { mean, variance } = moments(x.clone());
    assert_eq!(mean.dims(), [2, 1]);
    assert_eq!(variance.dims(), [2, 1]);
    assert_eq!(values(&mean), [2.5, 0.0]);
    assert_eq!(values(&variance), [1.25, 1.0]);
    let burn_mean = x.clone().mean_dim(1);
    let burn_var = (x - burn_mean.clone()).powf_scalar(2.0).mean_dim(1);
    assert_close(&values(&variance), &values(&burn_var), 1e-6, "variance");
}

#[test]
fn fill_where_writes_each_kind_of_fill() {
    let device = Device::flex();
    let x = tensor(&[1.0, 2.0, 3.0, 4.0], [2, 2], &device);
    let mask = Tensor::<2, Bool>::from_data([[true, false], [false, true]], &device);
    assert_eq!(
        values(&fill_where(x.clone(), &mask, Fill::Zero)),
        [0.0, 2.0, 3.0, 0.0]
    );
    assert_eq!(
        values(&fill_where(x.clone(), &mask, Fill::Value(-7.5))),
        [-7.5, 2.0, 3.0, -7.5]
    );
    // `From` broadcasts a `[1, 2]` row.
    let from = tensor(&[10.0, 20.0], [1, 2], &device);
    assert_eq!(
        values(&fill_where(x, &mask, Fill::From(from))),
        [10.0, 2.0, 3.0, 20.0]
    );
}

/// `d/dv sum(w * f(v))` by central differences, for `f` of one flat input.
fn numeric(f: &dyn Fn(&[f32]) -> Vec<f32>, at: &[f32], weights: &[f32]) -> Vec<f32> {
    common::finite_difference(
        |v| {
            f(v).iter()
                .zip(weights.iter().cycle())
                .map(|(o, w)| f64::from(o * w))
                .sum()
        },
        at,
        1e-2,
    )
}

#[cfg(feature = "autodiff")]
#[test]
fn gradients_flow_through_declared_fields() {
    let device = Device::flex();
    let ad = device.clone().autodiff();
    let mut rng = Rng::new(7);
    let (xv, sv, hv) = (
        rng.vec(6, -2.0, 2.0),
        rng.vec(3, 0.5, 1.5),
        rng.vec(2, -1.0, 1.0),
    );
    let w = rng.vec(6, -1.0, 1.0);
    let loss_weights = tensor(&w, [2, 3], &ad);

    // affine: into x, p.scale and p.shift, each summed back to its own shape.
    let x = tensor(&xv, [2, 3], &ad).require_grad();
    let scale = tensor(&sv, [1, 3], &ad).require_grad();
    let shift = tensor(&hv, [2, 1], &ad).require_grad();
    let out = affine(
        x.clone(),
        Affine {
            scale: scale.clone(),
            shift: Some(shift.clone()),
        },
    );
    let g = (out * loss_weights.clone()).sum().backward();
    let run = |x: &[f32], s: &[f32], h: &[f32]| {
        values(&affine(
            tensor(x, [2, 3], &device),
            Affine {
                scale: tensor(s, [1, 3], &device),
                shift: Some(tensor(h, [2, 1], &device)),
            },
        ))
    };
    let tol = 2e-2;
    assert_close(
        &values(&x.grad(&g).expect("x")),
        &numeric(&|v| run(v, &sv, &hv), &xv, &w),
        tol,
        "affine d/dx",
    );
    let scale_grad = scale.grad(&g).expect("p.scale");
    assert_eq!(scale_grad.dims(), [1, 3]);
    assert_close(
        &values(&scale_grad),
        &numeric(&|v| run(&xv, v, &hv), &sv, &w),
        tol,
        "affine d/dp.scale",
    );
    assert_close(
        &values(&shift.grad(&g).expect("p.shift")),
        &numeric(&|v| run(&xv, &sv, v), &hv, &w),
        tol,
        "affine d/dp.shift",
    );

    // moments: back into x from both fields of the output.
    let x = tensor(&xv, [2, 3], &ad).require_grad();
    let m = moments(x.clone());
    let g = (m.mean * 0.5 + m.variance * 2.0).sum().backward();
    let run = |v: &[f32]| {
        let m = moments(tensor(v, [2, 3], &device));
        values(&(m.mean * 0.5 + m.variance * 2.0))
    };
    assert_close(
        &values(&x.grad(&g).expect("x")),
        &numeric(&run, &xv, &[1.0]),
        tol,
        "moments d/dx",
    );

    // fill_where: into x where the mask is clear, into a `Fill::From` row where it is set.
    let x = tensor(&xv, [2, 3], &ad).require_grad();
    let from = tensor(&sv, [1, 3], &ad).require_grad();
    let mask = x.clone().greater_elem(0.0);
    let out = fill_where(x.clone(), &mask, Fill::From(from.clone()));
    let g = (out * loss_weights).sum().backward();
    let mask_values: Vec<bool> = xv.iter().map(|v| *v > 0.0).collect();
    let expected_x: Vec<f32> = mask_values
        .iter()
        .zip(&w)
        .map(|(m, w)| if *m { 0.0 } else { *w })
        .collect();
    assert_close(&values(&x.grad(&g).expect("x")), &expected_x, 1e-6, "d/dx");
    let mut expected_from = vec![0.0; 3];
    for (i, (m, w)) in mask_values.iter().zip(&w).enumerate() {
        if *m {
            expected_from[i % 3] += w;
        }
    }
    assert_close(
        &values(&from.grad(&g).expect("Fill::From")),
        &expected_from,
        1e-6,
        "d/dFill::From",
    );
}

/// A field of the wrong kind is named by its path in the op's error.
#[test]
fn a_malformed_field_is_named_by_its_path() {
    let device = Device::flex();
    let x = tensor(&[1.0, 2.0], [1, 2], &device);
    let err = burn_route::dispatch::try_affine(
        x.clone().into_dispatch(),
        burn_route::AffinePrimitive {
            scale: x.clone().into_dispatch(),
            shift: Some(x.clone().int().into_dispatch()),
        },
    )
    .unwrap_err();
    assert_eq!(
        err,
        RouteError::Malformed {
            op: "affine",
            input: InputName::new("p.shift"),
            backend: BackendId::Flex,
            problem: Malformed::WrongKind {
                expected: TensorKind::Float,
                found: "Int",
            },
        }
    );
    // The `Tensor<D>`-level `try_` twin accepts the well-formed value.
    let ok = try_affine(
        x.clone(),
        Affine {
            scale: x.clone(),
            shift: None,
        },
    );
    assert_eq!(values(&ok.expect("well-formed")), [1.0, 4.0]);
}
