//! The three routes the benchmark compares (direct Flex call, burn-route's generated routing,
//! Burn's `#[backend_extension]` routing) return the same values, at both levels. Burn's route
//! needs the `bench` feature (the `burn` facade); without it the other two are still checked.

#[cfg(feature = "bench")]
use burn_route_compare::extension::{self, BurnOps};
use burn_route_compare::ops::CompareOps;
use burn_route_compare::{dispatch, tensor};
use burn_route_runtime::rt::{Device, Dispatch, DispatchTensor, Flex, Tensor};

const VALUES: [f32; 16] = [
    -8.0, -7.5, -3.25, -1.0, -0.5, -0.0, 0.0, 0.25, 1.0, 1.5, 2.0, 3.0, 4.5, 100.0, 1e-3, -1e6,
];

fn input() -> Tensor<1> {
    Tensor::<1>::from_data(VALUES, &Device::flex())
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().unwrap()
}

fn dispatch_values(t: DispatchTensor) -> Vec<f32> {
    values(Tensor::<1>::from_dispatch(t))
}

#[test]
fn the_three_dispatch_routes_agree() {
    let direct = <Flex as CompareOps>::identity(input().try_into_primitive::<Flex>().unwrap());
    let direct = values(Tensor::<1>::from_primitive::<Flex>(direct));
    let ours = dispatch_values(<Dispatch as CompareOps>::identity(input().into_dispatch()));
    let ours_try = dispatch_values(dispatch::try_identity(input().into_dispatch()).unwrap());

    assert_eq!(direct, VALUES);
    assert_eq!(ours, direct);
    assert_eq!(ours_try, direct);
    #[cfg(feature = "bench")]
    assert_eq!(
        dispatch_values(<Dispatch as BurnOps>::identity(input().into_dispatch())),
        direct
    );
}

#[test]
fn the_three_tensor_routes_agree() {
    let direct = Tensor::<1>::from_primitive::<Flex>(<Flex as CompareOps>::identity(
        input().try_into_primitive::<Flex>().unwrap(),
    ));
    let direct = values(direct);
    let ours = values(tensor::identity(input()));
    let ours_try = values(tensor::try_identity(input()).unwrap());

    assert_eq!(direct, VALUES);
    assert_eq!(ours, direct);
    assert_eq!(ours_try, direct);
    #[cfg(feature = "bench")]
    assert_eq!(values(extension::identity(input())), direct);
}

/// On an autodiff device both routes reach their `Autodiff<B, C>` kernel, whose backward pass
/// hands the incoming gradient through unchanged.
#[cfg(feature = "autodiff")]
#[test]
fn both_routes_pass_the_gradient_through() {
    type Route = fn(Tensor<1>) -> Tensor<1>;
    #[cfg(feature = "bench")]
    let routes: [(&str, Route); 2] = [
        ("burn-route", tensor::identity::<1>),
        ("backend_extension", extension::identity::<1>),
    ];
    #[cfg(not(feature = "bench"))]
    let routes: [(&str, Route); 1] = [("burn-route", tensor::identity::<1>)];
    for (name, route) in routes {
        let x = Tensor::<1>::from_data(VALUES, &Device::flex().autodiff()).require_grad();
        let y = route(x.clone());
        assert!(y.is_tracked(), "{name}: the output carries the graph");
        assert_eq!(values(y.clone()), VALUES, "{name}");
        let grads = y.mul_scalar(3.0).sum().backward();
        assert_eq!(values(x.grad(&grads).unwrap()), [3.0; 16], "{name}");
    }
}
