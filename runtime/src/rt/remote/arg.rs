//! Plain arguments as the scalars of a custom operation, encoded exactly and decoded on the
//! server ([`Arg`]).

use super::*;

/// A plain argument as the scalars of a custom operation, losslessly: `f64` and `u64` exact,
/// an `Option` as its presence and then its value, a `Vec` as its length and then its items.
pub trait Arg: Sized {
    /// Appends the value's scalars.
    fn encode(&self, out: &mut Vec<ScalarIr>);
    /// Reads a value back, or `None` when the scalars are not one.
    fn decode(scalars: &mut Scalars<'_>) -> Option<Self>;
}

/// The scalars of a custom operation, read in the order they were written.
#[derive(Debug)]
pub struct Scalars<'a> {
    rest: core::slice::Iter<'a, ScalarIr>,
}

impl<'a> Scalars<'a> {
    /// Reads `scalars` from the start.
    pub fn new(scalars: &'a [ScalarIr]) -> Self {
        Self {
            rest: scalars.iter(),
        }
    }

    fn next(&mut self) -> Option<&'a ScalarIr> {
        self.rest.next()
    }

    /// Whether every scalar was read.
    pub fn is_empty(&self) -> bool {
        self.rest.len() == 0
    }
}

macro_rules! float_arg {
    ($($t:ty),*) => {$(
        impl Arg for $t {
            fn encode(&self, out: &mut Vec<ScalarIr>) {
                out.push(ScalarIr::Float(f64::from(*self)));
            }
            #[allow(clippy::cast_possible_truncation)]
            fn decode(scalars: &mut Scalars<'_>) -> Option<Self> {
                // Exact: the value was widened from this type.
                match scalars.next()? {
                    ScalarIr::Float(x) => Some(*x as $t),
                    _ => None,
                }
            }
        }
    )*};
}
// Core's floats.
burn_route_core::float_types!(float_arg);

macro_rules! int_arg {
    ($variant:ident, $wide:ty: $($t:ty),*) => {$(
        impl Arg for $t {
            fn encode(&self, out: &mut Vec<ScalarIr>) {
                #[allow(clippy::cast_lossless, clippy::cast_possible_wrap)]
                out.push(ScalarIr::$variant(*self as $wide));
            }
            fn decode(scalars: &mut Scalars<'_>) -> Option<Self> {
                match scalars.next()? {
                    ScalarIr::$variant(x) => <$t>::try_from(*x).ok(),
                    _ => None,
                }
            }
        }
    )*};
}
macro_rules! signed_arg {
    ($($t:ty),*) => { int_arg!(Int, i64: $($t),*); };
}
macro_rules! unsigned_arg {
    ($($t:ty),*) => { int_arg!(UInt, u64: $($t),*); };
}
// Core's integers, the plain types the generator lets a Remote call carry.
burn_route_core::signed_types!(signed_arg);
burn_route_core::unsigned_types!(unsigned_arg);

impl Arg for bool {
    fn encode(&self, out: &mut Vec<ScalarIr>) {
        out.push(ScalarIr::Bool(*self));
    }
    fn decode(scalars: &mut Scalars<'_>) -> Option<Self> {
        match scalars.next()? {
            ScalarIr::Bool(x) => Some(*x),
            _ => None,
        }
    }
}

impl Arg for char {
    fn encode(&self, out: &mut Vec<ScalarIr>) {
        out.push(ScalarIr::UInt(u64::from(u32::from(*self))));
    }
    fn decode(scalars: &mut Scalars<'_>) -> Option<Self> {
        match scalars.next()? {
            ScalarIr::UInt(x) => char::from_u32(u32::try_from(*x).ok()?),
            _ => None,
        }
    }
}

impl Arg for String {
    fn encode(&self, out: &mut Vec<ScalarIr>) {
        out.push(ScalarIr::UInt(self.chars().count() as u64));
        for c in self.chars() {
            c.encode(out);
        }
    }
    fn decode(scalars: &mut Scalars<'_>) -> Option<Self> {
        let len = usize::decode(scalars)?;
        // No allocation from an untrusted length: each char takes one scalar.
        if len > scalars.rest.len() {
            return None;
        }
        (0..len).map(|_| char::decode(scalars)).collect()
    }
}

impl<T: Arg> Arg for Option<T> {
    fn encode(&self, out: &mut Vec<ScalarIr>) {
        out.push(ScalarIr::Bool(self.is_some()));
        if let Some(value) = self {
            value.encode(out);
        }
    }
    fn decode(scalars: &mut Scalars<'_>) -> Option<Self> {
        if bool::decode(scalars)? {
            Some(Some(T::decode(scalars)?))
        } else {
            Some(None)
        }
    }
}

impl<T: Arg> Arg for Vec<T> {
    fn encode(&self, out: &mut Vec<ScalarIr>) {
        out.push(ScalarIr::UInt(self.len() as u64));
        for item in self {
            item.encode(out);
        }
    }
    fn decode(scalars: &mut Scalars<'_>) -> Option<Self> {
        let len = usize::decode(scalars)?;
        // No allocation from an untrusted length: each item takes at least one scalar.
        if len > scalars.rest.len() {
            return None;
        }
        (0..len).map(|_| T::decode(scalars)).collect()
    }
}

impl<T: Arg, const N: usize> Arg for [T; N] {
    fn encode(&self, out: &mut Vec<ScalarIr>) {
        for item in self {
            item.encode(out);
        }
    }
    fn decode(scalars: &mut Scalars<'_>) -> Option<Self> {
        let items: Vec<T> = (0..N).map(|_| T::decode(scalars)).collect::<Option<_>>()?;
        items.try_into().ok()
    }
}

macro_rules! tuple_arg {
    ($($name:ident),*) => {
        impl<$($name: Arg),*> Arg for ($($name,)*) {
            #[allow(non_snake_case)]
            fn encode(&self, out: &mut Vec<ScalarIr>) {
                let ($($name,)*) = self;
                $($name.encode(out);)*
            }
            fn decode(scalars: &mut Scalars<'_>) -> Option<Self> {
                Some(($($name::decode(scalars)?,)*))
            }
        }
    };
}
tuple_arg!(A);
tuple_arg!(A, B);
tuple_arg!(A, B, C);
tuple_arg!(A, B, C, D);
