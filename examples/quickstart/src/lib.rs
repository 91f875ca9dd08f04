//! `leaky_relu`, routed by the code `build.rs` generates from `ops.toml`.

/// The `MyOps` trait: one method per op, implemented by each backend.
pub mod ops {
    include!(concat!(env!("OUT_DIR"), "/routed_ops.rs"));
}

/// `impl MyOps for Dispatch`, and the fallible `try_` functions.
pub mod dispatch {
    include!(concat!(env!("OUT_DIR"), "/routed_dispatch.rs"));
}

/// The functions on `Tensor<D>`: `leaky_relu` and `try_leaky_relu`.
pub mod tensor {
    include!(concat!(env!("OUT_DIR"), "/routed_tensor.rs"));
}

mod kernels;

pub use tensor::*;

#[cfg(test)]
mod tests {
    use burn_route_runtime::rt::{Device, Tensor};

    #[test]
    fn values_and_gradient() {
        let x = Tensor::<1>::from_data([-2.0, 3.0], &Device::flex().autodiff()).require_grad();
        let y = super::leaky_relu(x.clone(), 0.1);
        assert_eq!(y.to_data().try_to_vec::<f32>().unwrap(), [-0.2, 3.0]);

        let grads = y.sum().backward();
        let dx = x
            .grad(&grads)
            .unwrap()
            .into_data()
            .try_to_vec::<f32>()
            .unwrap();
        assert_eq!(dx, [0.1, 1.0]);
    }
}
