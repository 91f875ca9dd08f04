//! The op-check runtime (`burn_route::check`) on this crate's own ops: passing checks for each
//! policy and for int inputs and outputs, and failing checks whose messages name the op, the
//! check, the input or output and the worst element.

use crate::common::panic_message;
use burn_route::check::{self, Args, Input, Op, Policy, Value};
use burn_route::dispatch;
#[cfg(feature = "autodiff")]
use burn_route::rt::RouteError;
use burn_route::rt::{Device, Int, Tensor};

fn assert_mentions(message: &str, parts: &[&str]) {
    let link = format!("See {}", burn_route::errors::link("op-check-failed"));
    assert!(
        message.ends_with(&link),
        "expected the message to end with {link:?}:\n{message}"
    );
    for part in parts {
        assert!(
            message.contains(part),
            "expected the message to mention {part:?}:\n{message}"
        );
    }
}

#[test]
fn add_relu_passes() {
    let op = Op::new("add_relu", Policy::Differentiable)
        .input(Input::float("lhs", &[2, 3]).range(-2.0, 2.0))
        .input(Input::float("rhs", &[2, 3]))
        .output_shape(0, &[2, 3]);
    check::run(&op, |args: &mut Args| {
        let out = dispatch::try_add_relu(args.float(0), args.float(1))?;
        Ok(vec![Value::float(out)])
    });
}

#[test]
fn argmax_last_passes_as_detach_with_an_int_output() {
    let op = Op::new("argmax_last", Policy::Detach)
        .input(Input::float("x", &[3, 4]))
        .output_shape(0, &[3, 1]);
    check::run(&op, |args| {
        let out = dispatch::try_argmax_last(&args.float(0))?;
        Ok(vec![Value::int(out)])
    });
}

#[test]
fn round_half_even_passes_as_reject() {
    let op = Op::new("round_half_even", Policy::Reject).input(Input::float("x", &[2, 5]));
    check::run(&op, |args| {
        Ok(vec![Value::float(dispatch::try_round_half_even(
            args.float(0),
        )?)])
    });
}

#[test]
fn swiglu_passes() {
    let op = Op::new("swiglu", Policy::Differentiable)
        .input(Input::float("gate", &[3, 4]))
        .input(Input::float("up", &[3, 4]))
        .output_shape(0, &[3, 4]);
    check::run(&op, |args| {
        Ok(vec![Value::float(dispatch::try_swiglu(
            args.float(0),
            args.float(1),
        )?)])
    });
}

#[test]
fn cross_entropy_logits_passes_with_int_targets() {
    let op = Op::new("cross_entropy_logits", Policy::Differentiable)
        .input(Input::float("logits", &[2, 3]))
        .input(Input::int("targets", &[2]).range(0.0, 3.0))
        .output_shape(0, &[1]);
    check::run(&op, |args| {
        let loss = dispatch::try_cross_entropy_logits(args.float(0), args.int(1))?;
        Ok(vec![Value::float(loss)])
    });
}

/// Optional and `Vec` inputs, a plain argument and a `Vec` output.
#[test]
fn optional_and_vec_inputs_pass() {
    let op = Op::new("axpby", Policy::Differentiable)
        .input(Input::float("x", &[2, 3]))
        .input(Input::optional_float("y", &[2, 3]));
    check::run(&op, |args| {
        let out = dispatch::try_axpby(args.float(0), args.optional_float(1), 0.5, -2.0)?;
        Ok(vec![Value::float(out), Value::plain()])
    });

    let op = Op::new("sum_all", Policy::Differentiable)
        .input(Input::floats("xs", &[&[2, 2], &[2, 2], &[2, 2]]))
        .output_shape(0, &[2, 2]);
    check::run(&op, |args| {
        Ok(vec![Value::float(dispatch::try_sum_all(args.floats(0))?)])
    });

    let op = Op::new("split_last", Policy::Differentiable)
        .input(Input::float("x", &[2, 5]))
        .output_shape(0, &[2, 2])
        .output_shape(1, &[2, 3]);
    check::run(&op, |args| {
        Ok(vec![Value::floats(dispatch::try_split_last(
            args.float(0),
            vec![2, 3],
        )?)])
    });
}

/// A bool input and a detached op with a float and an int output.
#[test]
fn masked_fill_count_passes_with_a_bool_input() {
    let op = Op::new("masked_fill_count", Policy::Detach)
        .input(Input::float("x", &[2, 3]))
        .input(Input::bool("mask", &[2, 3]))
        .output_shape(1, &[1]);
    check::run(&op, |args| {
        let (out, count) = dispatch::try_masked_fill_count(args.float(0), &args.bool(1), 7.0)?;
        Ok(vec![Value::float(out), Value::int(count)])
    });
}

/// Two outputs, one of them a bool mask (compared exactly, across backends too).
#[test]
fn dropout_passes_with_a_bool_output() {
    let op = Op::new("dropout", Policy::Differentiable)
        .input(Input::float("x", &[4, 8]))
        .output_shape(0, &[4, 8])
        .output_shape(1, &[4, 8]);
    check::run(&op, |args| {
        let (out, keep) = dispatch::try_dropout(args.float(0), 0.25, 7)?;
        Ok(vec![Value::float(out), Value::bool(keep)])
    });
}

/// Inside `[lo, hi]` the straight-through gradient is the true one, so the check passes; a
/// range that crosses the bounds is where it differs from finite differences.
#[test]
fn clamp_ste_passes_inside_its_bounds() {
    let op = Op::new("clamp_ste", Policy::Differentiable)
        .input(Input::float("x", &[2, 3]).range(-0.4, 0.4));
    check::run(&op, |args| {
        Ok(vec![Value::float(dispatch::try_clamp_ste(
            args.float(0),
            -0.5,
            0.5,
        )?)])
    });
}

#[cfg(feature = "autodiff")]
#[test]
fn a_wrong_gradient_fails_naming_the_input_and_worst_element() {
    let op = Op::new("clamp_ste", Policy::Differentiable).input(Input::float("x", &[2, 3]));
    let message = panic_message(|| {
        check::run(&op, |args| {
            Ok(vec![Value::float(dispatch::try_clamp_ste(
                args.float(0),
                -0.5,
                0.5,
            )?)])
        });
    });
    assert_mentions(
        &message,
        &[
            "op check failed: op `clamp_ste`",
            "gradient check",
            "input `x`",
            "worst element",
            "from autodiff",
            "from finite differences",
            "difference",
            "Fix:",
        ],
    );
    // The error reference shows this failure.
    crate::error_reference::assert_sample(&message);
}

#[cfg(feature = "autodiff")]
#[test]
fn a_wrong_gradient_of_a_vec_element_is_named_by_its_index() {
    // `sum_all` of the elements, but the closure clamps the second one: its gradient (1 from
    // the straight-through estimator) is wrong wherever it is clamped.
    let op = Op::new("sum_all", Policy::Differentiable)
        .input(Input::floats("xs", &[&[3], &[3]]).range(1.0, 2.0));
    let message = panic_message(|| {
        check::run(&op, |args| {
            let mut xs = args.floats(0);
            xs[1] = dispatch::try_clamp_ste(xs[1].clone(), 0.0, 0.5)?;
            Ok(vec![Value::float(dispatch::try_sum_all(xs)?)])
        });
    });
    assert_mentions(
        &message,
        &["op `sum_all`", "input `xs[1]`", "worst element"],
    );
}

#[test]
fn compare_names_the_output_and_worst_element() {
    let flex = Device::flex();
    let rounded = |values: [f32; 4]| -> Vec<Value> {
        let x = Tensor::<1>::from_data(values, &flex).into_dispatch();
        vec![Value::float(
            dispatch::try_round_half_even(x).expect("routes"),
        )]
    };
    let expected = rounded([0.5, 1.5, 2.5, -0.4]);
    check::compare(
        "round_half_even",
        "kernel vs composition",
        &expected,
        &expected,
        0.0,
    );
    let message = panic_message(|| {
        let actual = rounded([0.5, 1.5, 3.5, -0.4]);
        check::compare(
            "round_half_even",
            "kernel vs composition",
            &actual,
            &expected,
            1e-4,
        );
    });
    assert_mentions(
        &message,
        &[
            "op check failed: op `round_half_even`, kernel vs composition",
            "output 0 differs",
            "worst element 2 (index [2])",
            "got 4, expected 2",
            "difference",
            "Fix:",
        ],
    );
}

#[test]
fn compare_checks_ints_exactly_and_leaf_counts() {
    let flex = Device::flex();
    let ints = |v: [i64; 3]| Value::int(Tensor::<1, Int>::from_data(v, &flex).into_dispatch());
    check::compare(
        "argmax_last",
        "ints",
        &[ints([0, 1, 2])],
        &[ints([0, 1, 2])],
        0.0,
    );
    let message = panic_message(|| {
        check::compare(
            "argmax_last",
            "ints",
            &[ints([0, 5, 2])],
            &[ints([0, 1, 2])],
            0.0,
        );
    });
    assert_mentions(
        &message,
        &["output 0 differs", "worst element 1", "got 5, expected 1"],
    );
    let message = panic_message(|| {
        check::compare("argmax_last", "ints", &[], &[ints([0, 1, 2])], 0.0);
    });
    assert_mentions(&message, &["got 0 output leaves", "expected 1"]);
}

#[test]
fn compare_checks_the_variants_of_enum_outputs() {
    let flex = Device::flex();
    let ints = |v: [i64; 2]| Value::int(Tensor::<1, Int>::from_data(v, &flex).into_dispatch());
    check::compare(
        "pick",
        "variants",
        &[Value::variant("Dense"), ints([1, 2])],
        &[Value::variant("Dense"), ints([1, 2])],
        0.0,
    );
    let message = panic_message(|| {
        check::compare(
            "pick",
            "variants",
            &[Value::variant("Empty"), ints([1, 2])],
            &[Value::variant("Dense"), ints([1, 2])],
            0.0,
        );
    });
    assert_mentions(
        &message,
        &[
            "op check failed: op `pick`, variants",
            "output 0 is variant `Empty`, expected variant `Dense`",
        ],
    );
    // A variant with tensors against one without: the leaf counts differ, and both lists are
    // shown with the variants.
    let message = panic_message(|| {
        check::compare(
            "pick",
            "variants",
            &[Value::variant("Empty")],
            &[Value::variant("Dense"), ints([1, 2])],
            0.0,
        );
    });
    assert_mentions(
        &message,
        &[
            "got 1 output leaves [output 0 (variant `Empty`)]",
            "expected 2 [output 0 (variant `Dense`), output 1 (int)]",
        ],
    );
}

#[test]
fn a_wrong_output_shape_fails() {
    let op = Op::new("add_relu", Policy::Differentiable)
        .input(Input::float("lhs", &[2, 3]))
        .input(Input::float("rhs", &[2, 3]))
        .output_shape(0, &[3, 2]);
    let message = panic_message(|| {
        check::run(&op, |args| {
            Ok(vec![Value::float(dispatch::try_add_relu(
                args.float(0),
                args.float(1),
            )?)])
        });
    });
    assert_mentions(
        &message,
        &[
            "op `add_relu`",
            "output shapes",
            "output leaf 0",
            "[2, 3]",
            "[3, 2]",
        ],
    );
}

#[test]
fn a_declared_output_dtype_is_checked_in_every_call() {
    // `dtype = "x"` on an op that returns int indices: every call returns an int tensor, never
    // the float input's dtype.
    let op = Op::new("argmax_last", Policy::Detach)
        .input(Input::float("x", &[3, 4]))
        .output_dtype(0, check::OutputDtype::Input("x"));
    let message = panic_message(|| {
        check::run(&op, |args| {
            Ok(vec![Value::int(dispatch::try_argmax_last(&args.float(0))?)])
        });
    });
    assert_mentions(
        &message,
        &[
            "op `argmax_last`",
            "values on Flex",
            "output leaf 0 (output 0) has dtype",
            "but the manifest declares input `x`'s dtype, f32",
        ],
    );
    // `dtype = "default"`: the device's default int dtype, which it is.
    let op = Op::new("argmax_last", Policy::Detach)
        .input(Input::float("x", &[3, 4]))
        .output_dtype(0, check::OutputDtype::Default);
    check::run(&op, |args| {
        Ok(vec![Value::int(dispatch::try_argmax_last(&args.float(0))?)])
    });
}

#[cfg(feature = "autodiff")]
#[test]
fn a_wrong_policy_fails() {
    // `round_half_even` refuses tracked inputs: declared `detach`, its check fails there.
    let op = Op::new("round_half_even", Policy::Detach).input(Input::float("x", &[3]));
    let message = panic_message(|| {
        check::run(&op, |args| {
            Ok(vec![Value::float(dispatch::try_round_half_even(
                args.float(0),
            )?)])
        });
    });
    assert_mentions(
        &message,
        &[
            "op `round_half_even`",
            "policy detach",
            "autodiff float input reached concrete dispatch",
        ],
    );

    // `add_relu` accepts them: declared `reject`, its check fails there.
    let op = Op::new("add_relu", Policy::Reject)
        .input(Input::float("lhs", &[3]))
        .input(Input::float("rhs", &[3]));
    let message = panic_message(|| {
        check::run(&op, |args| {
            Ok(vec![Value::float(dispatch::try_add_relu(
                args.float(0),
                args.float(1),
            )?)])
        });
    });
    assert_mentions(
        &message,
        &["op `add_relu`", "policy reject", "returned `Ok`"],
    );
}

#[test]
fn an_error_of_the_op_fails_with_its_message() {
    // `rhs` cannot broadcast with `lhs`: the shape-contract error, reported by the check.
    let op = Op::new("add_relu", Policy::Differentiable)
        .input(Input::float("lhs", &[2, 3]))
        .input(Input::float("rhs", &[2, 4]));
    let message = panic_message(|| {
        check::run(&op, |args| {
            Ok(vec![Value::float(dispatch::try_add_relu(
                args.float(0),
                args.float(1),
            )?)])
        });
    });
    assert_mentions(
        &message,
        &[
            "op `add_relu`",
            "values on Flex",
            "the op returned an error",
            "`rhs`",
        ],
    );
}

#[test]
fn a_misread_input_names_the_accessor_to_use() {
    let op = Op::new("cross_entropy_logits", Policy::Differentiable)
        .input(Input::float("logits", &[2, 3]))
        .input(Input::int("targets", &[2]).range(0.0, 3.0));
    let message = panic_message(|| {
        check::run(&op, |args| {
            let loss = dispatch::try_cross_entropy_logits(args.float(0), args.float(1))?;
            Ok(vec![Value::float(loss)])
        });
    });
    assert_mentions(
        &message,
        &[
            "op `cross_entropy_logits`",
            "`Args::float(1)`",
            "`targets`",
            "`Args::int(1)`",
        ],
    );
}

#[cfg(feature = "autodiff")]
#[test]
fn a_missing_gradient_fails_unless_marked() {
    // The closure ignores `unused`: it gets no gradient.
    let declare = |unused: Input| {
        Op::new("scale", Policy::Differentiable)
            .input(Input::float("x", &[4]))
            .input(unused)
    };
    let op_fn = |args: &mut Args| -> Result<Vec<Value>, RouteError> {
        let _ = args.float(1);
        Ok(vec![Value::float(dispatch::try_scale(args.float(0), 3.0)?)])
    };
    let message = panic_message(|| check::run(&declare(Input::float("unused", &[4])), op_fn));
    assert_mentions(
        &message,
        &[
            "op `scale`",
            "input `unused`",
            "no gradient",
            "no_gradient()",
        ],
    );
    check::run(&declare(Input::float("unused", &[4]).no_gradient()), op_fn);
}

#[test]
fn specs_and_device_describe_the_inputs() {
    let op = Op::new("add_relu", Policy::Differentiable)
        .input(Input::float("lhs", &[2, 3]))
        .input(Input::float("rhs", &[1, 3]))
        .gradients(false);
    check::run(&op, |args| {
        assert_eq!(args.spec(0).shape.as_slice(), &[2, 3]);
        assert_eq!(args.spec(1).shape.as_slice(), &[1, 3]);
        assert_eq!(args.specs(1).len(), 1);
        let _ = args.device();
        Ok(vec![Value::float(dispatch::try_add_relu(
            args.float(0),
            args.float(1),
        )?)])
    });
}

#[test]
fn a_panic_inside_the_op_names_the_check() {
    // A target outside `0..classes` makes the kernel panic.
    let op = Op::new("cross_entropy_logits", Policy::Differentiable)
        .input(Input::float("logits", &[2, 3]))
        .input(Input::int("targets", &[2]).range(3.0, 5.0));
    let message = panic_message(|| {
        check::run(&op, |args| {
            let loss = dispatch::try_cross_entropy_logits(args.float(0), args.int(1))?;
            Ok(vec![Value::float(loss)])
        });
    });
    assert_mentions(
        &message,
        &[
            "op `cross_entropy_logits`",
            "values on Flex",
            "the check closure panicked",
        ],
    );
}

/// `run_on` compares on extra devices; the closure here computes something else off plain Flex
/// (on the untracked autodiff device it is given), so the comparison fails there.
#[cfg(feature = "autodiff")]
#[test]
fn a_value_that_differs_on_another_device_fails_naming_it() {
    let op = Op::new("scale", Policy::Differentiable).input(Input::float("x", &[2, 2]));
    let wrong_off_flex = |args: &mut Args| -> Result<Vec<Value>, RouteError> {
        let alpha = if args.device().is_autodiff() {
            3.5
        } else {
            3.0
        };
        Ok(vec![Value::float(dispatch::try_scale(
            args.float(0),
            alpha,
        )?)])
    };
    let message = panic_message(|| {
        check::run_on(&op, &[Device::flex().autodiff()], wrong_off_flex);
    });
    assert_mentions(
        &message,
        &[
            "op `scale`",
            "against Flex",
            "output 0 differs",
            "worst element",
            "got",
            "expected",
        ],
    );
    // Flex itself as the extra device agrees.
    check::run_on(&op, &[Device::flex()], |args| {
        Ok(vec![Value::float(dispatch::try_scale(args.float(0), 3.0)?)])
    });
}

/// The values through a loopback burn-remote server, passed to `run_on` (`BURN_ROUTE_CHECK_REMOTE`
/// names a server `run` connects to by itself).
#[cfg(feature = "remote")]
use crate::loopback;

#[cfg(feature = "remote")]
#[test]
fn ops_check_through_a_remote_device() {
    let server = loopback::LoopbackServer::start();
    let op = Op::new("swiglu", Policy::Differentiable)
        .input(Input::float("gate", &[3, 4]))
        .input(Input::float("up", &[3, 4]));
    check::run_on(&op, &[server.device()], |args| {
        Ok(vec![Value::float(dispatch::try_swiglu(
            args.float(0),
            args.float(1),
        )?)])
    });
    let op = Op::new("argmax_last", Policy::Detach).input(Input::float("x", &[3, 4]));
    check::run_on(&op, &[server.device()], |args| {
        Ok(vec![Value::int(dispatch::try_argmax_last(&args.float(0))?)])
    });
}
