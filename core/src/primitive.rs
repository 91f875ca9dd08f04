//! Rust's primitive types, as the manifest's plain types name them (`f32`, `usize`, `bool`),
//! grouped by what each part of burn-route does with them: the numbers a backward formula
//! reads, the scalars a deferred `Fusion<B>` operation records, the scalars a Remote call
//! encodes exactly, the names a generated module has in scope.
//!
//! The groups are written once, as type lists in the `#[doc(hidden)]` macros of this module,
//! exported at the crate root: `burn_route_core::float_types!(m)`, `signed_types!(m)`,
//! `unsigned_types!(m)` and `number_types!(m)` call the macro `m` (a name in scope where they
//! are called) with the group's types, `m! { f32, f64 }`. The name lists below are made from
//! the same macros, so the generator's checks (by name) and the runtime's trait impls (by type)
//! read one definition; `number_types!` and [`ALL`] repeat the groups, and a unit test keeps
//! them equal.

/// Calls `$callback!` with the float primitives, as types: `f32, f64`.
#[doc(hidden)]
#[macro_export]
macro_rules! float_types {
    ($callback:ident) => {
        $callback! { f32, f64 }
    };
}

/// Calls `$callback!` with the signed integer primitives of at most 64 bits, as types.
#[doc(hidden)]
#[macro_export]
macro_rules! signed_types {
    ($callback:ident) => {
        $callback! { i8, i16, i32, i64, isize }
    };
}

/// Calls `$callback!` with the unsigned integer primitives of at most 64 bits, as types.
#[doc(hidden)]
#[macro_export]
macro_rules! unsigned_types {
    ($callback:ident) => {
        $callback! { u8, u16, u32, u64, usize }
    };
}

/// Calls `$callback!` with the numbers: the floats, then the signed and unsigned integers of
/// at most 64 bits (what a backward formula reads as a number, converted to `f64`).
#[doc(hidden)]
#[macro_export]
macro_rules! number_types {
    ($callback:ident) => {
        $callback! { f32, f64, i8, i16, i32, i64, isize, u8, u16, u32, u64, usize }
    };
}

macro_rules! names {
    ($($t:ident),*) => {
        &[$(stringify!($t)),*]
    };
}

/// `f32`, `f64`.
pub const FLOATS: &[&str] = float_types!(names);

/// The signed integers of at most 64 bits.
pub const SIGNED: &[&str] = signed_types!(names);

/// The unsigned integers of at most 64 bits.
pub const UNSIGNED: &[&str] = unsigned_types!(names);

/// The numbers a backward formula may read (converted to `f64`), in the order messages list
/// them: [`FLOATS`], [`SIGNED`], [`UNSIGNED`].
pub const NUMBERS: &[&str] = number_types!(names);

/// The 128-bit integers: primitives, but no formula, Fusion scalar or Remote scalar takes them.
pub const WIDE: &[&str] = &["i128", "u128"];

/// Every primitive type's name, `str` included.
pub const ALL: &[&str] = &[
    "bool", "char", "str", "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64",
    "u128", "usize", "f32", "f64",
];

/// Whether `ty` names a primitive type.
pub fn is_primitive(ty: &str) -> bool {
    ALL.contains(&ty)
}

/// Whether `ty` names a sized primitive type (every one but `str`).
pub fn is_sized(ty: &str) -> bool {
    ty != "str" && is_primitive(ty)
}

/// Whether `ty` is one of [`NUMBERS`].
pub fn is_number(ty: &str) -> bool {
    NUMBERS.contains(&ty)
}

/// Whether `ty` is one of [`FLOATS`].
pub fn is_float(ty: &str) -> bool {
    FLOATS.contains(&ty)
}

/// Whether `ty` is an integer of at most 64 bits ([`SIGNED`] or [`UNSIGNED`]).
pub fn is_integer(ty: &str) -> bool {
    SIGNED.contains(&ty) || UNSIGNED.contains(&ty)
}

/// Whether a deferred `Fusion<B>` operation records `ty` as one of Burn's scalars: a number or
/// `bool`.
pub fn is_fusion_scalar(ty: &str) -> bool {
    is_number(ty) || ty == "bool"
}

/// Whether a Remote call's scalars carry `ty` exactly on its own: a number, `bool` or `char`
/// (containers of them are the Remote argument encoding's business).
pub fn is_remote_scalar(ty: &str) -> bool {
    is_number(ty) || ty == "bool" || ty == "char"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_groups_are_primitives_and_add_up() {
        let mut numbers: Vec<&str> = FLOATS.to_vec();
        numbers.extend(SIGNED);
        numbers.extend(UNSIGNED);
        assert_eq!(numbers, NUMBERS);
        for ty in NUMBERS.iter().chain(WIDE) {
            assert!(is_sized(ty), "{ty}");
        }
        let mut counted: Vec<&str> = NUMBERS.to_vec();
        counted.extend(WIDE);
        counted.extend(["bool", "char", "str"]);
        counted.sort_unstable();
        let mut all = ALL.to_vec();
        all.sort_unstable();
        assert_eq!(counted, all, "every primitive is in one group");
    }
}
