//! Forward values of every op on Flex, against the same computation written with Burn's
//! `Tensor` API, on contiguous and strided inputs.

use crate::common::{Rng, assert_close, ints, tensor, values};
use burn_route::{add_relu, argmax_last, round_half_even, scale};
use burn_tensor::activation::relu;
use burn_tensor::{Device, Tensor};

#[test]
fn add_relu_matches_relu_of_sum() {
    let device = Device::flex();
    let mut rng = Rng::new(1);
    for shape in [[1, 1], [3, 5], [64, 33]] {
        let n = shape[0] * shape[1];
        let lhs = tensor(&rng.vec(n, -2.0, 2.0), shape, &device);
        let rhs = tensor(&rng.vec(n, -2.0, 2.0), shape, &device);
        let expected = relu(lhs.clone() + rhs.clone());
        assert_close(
            &values(&add_relu(lhs, rhs)),
            &values(&expected),
            0.0,
            "add_relu",
        );
    }
}

#[test]
fn add_relu_exact_values_and_strided_and_broadcast_inputs() {
    let device = Device::flex();
    let lhs = Tensor::<2>::from_data([[1.0, -2.0], [3.0, -4.0]], &device);
    let rhs = Tensor::<2>::from_data([[0.5, 1.0], [-4.0, 5.0]], &device);
    assert_eq!(
        values(&add_relu(lhs.clone(), rhs.clone())),
        [1.5, 0.0, 0.0, 1.0]
    );
    // A transposed (strided) view takes the fallback path and must agree.
    let t = add_relu(lhs.clone().transpose(), rhs.clone());
    assert_eq!(values(&t), values(&relu(lhs.clone().transpose() + rhs)));
    // Broadcasting a row over the batch.
    let row = Tensor::<2>::from_data([[10.0, -10.0]], &device);
    assert_eq!(values(&add_relu(lhs, row)), [11.0, 0.0, 13.0, 0.0]);
}

#[test]
fn scale_matches_mul_scalar() {
    let device = Device::flex();
    let mut rng = Rng::new(2);
    let x = tensor(&rng.vec(24, -3.0, 3.0), [2, 3, 4], &device);
    for alpha in [0.0, -1.5, 2.0, 1e-3] {
        assert_close(
            &values(&scale(x.clone(), alpha)),
            &values(&x.clone().mul_scalar(alpha)),
            0.0,
            "scale",
        );
    }
    // Shared buffer: the kernel must not write into the caller's tensor.
    let before = values(&x);
    let _scaled = scale(x.clone(), 3.0);
    assert_eq!(values(&x), before);
    // Strided.
    let t = x.clone().swap_dims(0, 2);
    assert_eq!(values(&scale(t.clone(), 2.0)), values(&t.mul_scalar(2.0)));
}

#[test]
fn argmax_last_matches_burn_and_keeps_the_dim() {
    let device = Device::flex();
    let x = Tensor::<2>::from_data(
        [
            [1.0, 5.0, 5.0, -1.0],
            [-3.0, -2.0, -9.0, -2.5],
            [0.0, 0.0, 0.0, 0.0],
        ],
        &device,
    );
    let idx = argmax_last(&x);
    assert_eq!(idx.dims(), [3, 1]);
    // Same dtype as Burn's own argmax (the device's default int dtype).
    assert_eq!(idx.dtype(), x.clone().argmax(1).dtype());
    // Ties go to the first index.
    assert_eq!(ints(&idx), [1, 1, 0]);
    assert_eq!(ints(&idx), ints(&x.clone().argmax(1)));
    // The borrowed input is still usable and unchanged.
    assert_eq!(values(&x)[1], 5.0);
    let mut rng = Rng::new(3);
    let y = tensor(&rng.vec(5 * 7 * 9, -1.0, 1.0), [5, 7, 9], &device);
    assert_eq!(ints(&argmax_last(&y)), ints(&y.clone().argmax(2)));
    let strided = y.clone().swap_dims(1, 2);
    assert_eq!(ints(&argmax_last(&strided)), ints(&strided.argmax(2)));
}

#[test]
fn round_half_even_rounds_ties_to_even() {
    let device = Device::flex();
    let x = Tensor::<1>::from_data([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, 2.6, -7.0], &device);
    assert_eq!(
        values(&round_half_even(x.clone())),
        [0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 2.0, 3.0, -7.0]
    );
    assert_eq!(values(&round_half_even(x.clone())), values(&x.round()));
}
