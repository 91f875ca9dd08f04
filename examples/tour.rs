//! A tour of every op in `ops.toml`: each one on Flex without autodiff, then on an autodiff Flex
//! device with gradients, and what each autodiff policy does with a tracked input.
//!
//! Run it with `cargo run --example tour`.

use burn_route::{add_relu, argmax_last, dispatch, round_half_even, scale};
use burn_tensor::{Device, Int, Tensor};

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
    let halves = Tensor::<1>::from_data([0.5, 1.5, 2.5, -0.5, -1.5, 2.4], &device);
    println!(
        "round_half_even({:?}) = {:?}",
        values(&halves),
        values(&round_half_even(halves.clone()))
    );

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
}
