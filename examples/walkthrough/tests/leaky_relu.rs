//! `leaky_relu`'s values and gradient, on Flex and (with `--features wgpu`) on Cube.

use burn_route_runtime::rt::{Device, Tensor};
use my_ops_gpu::leaky_relu;

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().unwrap()
}

fn values_and_gradient_on(device: &Device) {
    let x = Tensor::<1>::from_data([-2.0, 3.0], &device.clone().autodiff()).require_grad();
    let y = leaky_relu(x.clone(), 0.1);
    assert_eq!(values(y.clone()), [-0.2, 3.0]);
    let grads = y.sum().backward();
    assert_eq!(values(x.grad(&grads).unwrap()), [0.1, 1.0]);
}

#[test]
fn values_and_gradient_on_flex() {
    values_and_gradient_on(&Device::flex());
}

/// On a machine without a GPU, wgpu runs on a CPU adapter (lavapipe).
#[cfg(feature = "wgpu")]
#[test]
fn values_and_gradient_on_cube() {
    values_and_gradient_on(&Device::wgpu(burn_route_runtime::check::wgpu_adapter()));
}
