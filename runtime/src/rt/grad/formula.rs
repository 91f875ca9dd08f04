//! What the generated backward passes' formulas call besides backend primitives: the values
//! they read (plain arguments as numbers, an incoming gradient read more than once), and the
//! formula functions with no primitive of their own (comparisons as masks, `relu`'s gate,
//! `select`, reductions over a dimension a formula names, number-first arithmetic).
//!
//! Re-exported by [`grad`](super), which generated code names `rt::__private::grad`.

use burn_backend::tensor::{BoolTensor, FloatTensor};
use burn_backend::{
    Backend, BoolDType, FloatDType, Scalar, TensorMetadata, get_or_init_device_settings,
};

/// A clone of `value`, for what both the kernel and the backward pass take by value (clippy
/// would flag `.clone()` on the `Copy` types most plain arguments are).
pub fn keep<T: Clone>(value: &T) -> T {
    T::clone(value)
}

/// A tensor that several of a backward pass's formulas read (the incoming gradient of an op
/// with two inputs): each read but the last gets a clone, and the last read of the last
/// formula that runs gets the tensor itself, so that its primitive can work in place.
#[derive(Debug)]
pub struct Reused<T>(Option<T>);

/// What [`Reused`] says when read after it was given away: a generator bug.
const GIVEN: &str = "burn-route: a generated backward pass read a tensor after its last read \
     (please report this as a burn-route bug)";

impl<T: Clone> Reused<T> {
    /// Holds `value` for the formulas.
    pub fn new(value: T) -> Self {
        Self(Some(value))
    }

    /// A clone, for a read another read of the same formula follows.
    pub fn get(&self) -> T {
        self.0.clone().expect(GIVEN)
    }

    /// The last read of a formula: a clone when `more` (a later formula that reads it runs),
    /// the value itself otherwise.
    pub fn give(&mut self, more: bool) -> T {
        if more {
            self.get()
        } else {
            self.0.take().expect(GIVEN)
        }
    }
}

/// A number a formula reads: the op's numeric plain arguments.
pub trait Number: Copy {
    /// The value as an `f64`.
    fn value(self) -> f64;
}

macro_rules! numbers {
    ($($t:ty),*) => {$(
        impl Number for $t {
            #[allow(clippy::cast_precision_loss, clippy::cast_lossless)]
            fn value(self) -> f64 {
                self as f64
            }
        }
    )*};
}
// Core's numbers, the plain types the generator lets a formula read.
burn_route_core::number_types!(numbers);

/// `value` as a formula's number.
pub fn number<T: Number>(value: &T) -> f64 {
    value.value()
}

/// A scalar operand of a backend primitive.
pub fn scalar(value: f64) -> Scalar {
    Scalar::from(value)
}

fn bool_dtype<B: Backend>(like: &FloatTensor<B>) -> BoolDType {
    get_or_init_device_settings::<B>(&like.device()).bool_dtype
}

fn as_float<B: Backend>(mask: BoolTensor<B>, like: FloatDType) -> FloatTensor<B> {
    B::bool_into_float(mask, like)
}

/// How a formula compares: the `gt`, `ge`, `lt` and `le` functions.
#[derive(Clone, Copy, Debug)]
pub enum Compare {
    /// `>`.
    Greater,
    /// `>=`.
    GreaterEqual,
    /// `<`.
    Lower,
    /// `<=`.
    LowerEqual,
}

fn compare_mask<B: Backend>(lhs: FloatTensor<B>, rhs: f64, how: Compare) -> BoolTensor<B> {
    let dtype = bool_dtype::<B>(&lhs);
    let rhs = scalar(rhs);
    match how {
        Compare::Greater => B::float_greater_elem(lhs, rhs, dtype),
        Compare::GreaterEqual => B::float_greater_equal_elem(lhs, rhs, dtype),
        Compare::Lower => B::float_lower_elem(lhs, rhs, dtype),
        Compare::LowerEqual => B::float_lower_equal_elem(lhs, rhs, dtype),
    }
}

/// `1` where `lhs` compares to the number `rhs` as `how` says, `0` elsewhere.
pub fn compare<B: Backend>(lhs: FloatTensor<B>, rhs: f64, how: Compare) -> FloatTensor<B> {
    let dtype = FloatDType::from(lhs.dtype());
    as_float::<B>(compare_mask::<B>(lhs, rhs, how), dtype)
}

/// `1` where `lhs` compares to the tensor `rhs` as `how` says, `0` elsewhere.
pub fn compare_tensors<B: Backend>(
    lhs: FloatTensor<B>,
    rhs: FloatTensor<B>,
    how: Compare,
) -> FloatTensor<B> {
    compare::<B>(B::float_sub(lhs, rhs), 0.0, how)
}

/// `relu_mask(x)`: `0` where `x <= 0`, `1` elsewhere, NaN included: the gradient passes
/// where Burn's relu backward passes it (its mask is `output <= 0`, false for NaN).
pub fn relu_mask<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let dtype = FloatDType::from(x.dtype());
    let blocked = compare_mask::<B>(x, 0.0, Compare::LowerEqual);
    as_float::<B>(B::bool_not(blocked), dtype)
}

/// `value * relu_mask(mask)`, which a formula's product becomes: Burn's `relu_backward`
/// (one masked pass on backends with their own, Flex's among them) when the two tensors have
/// one shape, else the product, which broadcasts. The two differ only where `value` is
/// infinite and `mask <= 0`: the masked pass gives 0 there, the product NaN.
pub fn relu_gate<B: Backend>(mask: FloatTensor<B>, value: FloatTensor<B>) -> FloatTensor<B> {
    if mask.shape() == value.shape() {
        B::relu_backward(mask, value)
    } else {
        B::float_mul(value, relu_mask::<B>(mask))
    }
}

/// One side of `where`: a tensor or a number.
#[derive(Debug)]
pub enum Operand<B: Backend> {
    /// A tensor.
    Tensor(FloatTensor<B>),
    /// A number.
    Number(f64),
}

/// `where(cond, a, b)`: `a` where `cond` is not zero, `b` elsewhere.
pub fn select<B: Backend>(cond: FloatTensor<B>, a: Operand<B>, b: Operand<B>) -> FloatTensor<B> {
    let float = FloatDType::from(cond.dtype());
    let shape = cond.shape();
    let device = cond.device();
    let mask = B::float_not_equal_elem(cond, scalar(0.0), bool_dtype_of::<B>(&device));
    let base = match b {
        Operand::Tensor(b) => b,
        Operand::Number(b) => B::float_full(shape, scalar(b), &device, float),
    };
    match a {
        Operand::Tensor(a) => B::float_mask_where(base, mask, a),
        Operand::Number(a) => B::float_mask_fill(base, mask, scalar(a)),
    }
}

fn bool_dtype_of<B: Backend>(device: &B::Device) -> BoolDType {
    get_or_init_device_settings::<B>(device).bool_dtype
}

/// `dim` of a tensor of rank `rank`, counting from the end when negative; `formula` is
/// `op `NAME`, input `X`: FORMULA`, for the message.
///
/// # Panics
///
/// When `dim` is out of range: the formula names a dimension the tensor does not have.
pub fn dim(dim: i64, rank: usize, formula: &str) -> usize {
    let resolved = if dim < 0 { rank as i64 + dim } else { dim };
    assert!(
        (0..rank as i64).contains(&resolved),
        "the backward formula of {formula} names dimension {dim}, but the tensor it reduces has \
         rank {rank}. Fix: name a dimension in -{rank}..{rank} (negative counts from the end). \
         See {}",
        burn_route_core::errors::link("backward-gradient-shape")
    );
    resolved as usize
}

/// `sum_dim(x, dim)`: the sum over `dim`, kept with size 1.
pub fn sum_dim<B: Backend>(x: FloatTensor<B>, at: i64, formula: &str) -> FloatTensor<B> {
    let d = dim(at, x.shape().num_dims(), formula);
    B::float_sum_dim(x, d)
}

/// `mean_dim(x, dim)`: the mean over `dim`, kept with size 1.
pub fn mean_dim<B: Backend>(x: FloatTensor<B>, at: i64, formula: &str) -> FloatTensor<B> {
    let d = dim(at, x.shape().num_dims(), formula);
    B::float_mean_dim(x, d)
}

/// `dim_size(x, dim)`: the size of dimension `dim` of `x`, as a formula's number.
///
/// # Panics
///
/// As [`dim`]: when `x` has no such dimension.
pub fn dim_size<B: Backend>(x: FloatTensor<B>, at: i64, formula: &str) -> f64 {
    let shape = x.shape();
    shape[dim(at, shape.num_dims(), formula)] as f64
}

/// `number - x`.
pub fn rsub<B: Backend>(number: f64, x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_add_scalar(B::float_neg(x), scalar(number))
}

/// `number / x`.
pub fn rdiv<B: Backend>(number: f64, x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_mul_scalar(B::float_recip(x), scalar(number))
}

/// `powf(number, x)`: `number` to the power of each element.
pub fn rpow<B: Backend>(number: f64, x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_exp(B::float_mul_scalar(x, scalar(number.ln())))
}
