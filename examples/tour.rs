//! A tour of every op in `ops.toml`: each one on Flex without autodiff, then on an autodiff Flex
//! device with gradients, and what each autodiff policy does with a tracked input.
//!
//! Run it with `cargo run --example tour`.

use burn_route::{
    add_relu, argmax_last, axpby, dequantize_relu, dispatch, iota, masked_fill_count, nan_to_num,
    round_half_even, scale, softplus, split_last, sum_all,
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
}
