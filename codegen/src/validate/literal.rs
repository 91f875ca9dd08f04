//! Whether a literal the manifest writes as Rust (an `args` value of the op check) has the type
//! of the plain input it is for: the generated code passes it as written, so `1.5` for a
//! `usize`, `2` for an `f32` or `"a"` for a `String` would fail to compile there, inside
//! generated code, instead of here at the manifest's line.
//!
//! Only literals (optionally negated) against primitive types, `String` and `&str` are judged;
//! any other expression or type is left to the compiler.

use burn_route_core::primitive::{SIGNED, UNSIGNED, is_float};
use syn::{Expr, ExprLit, ExprUnary, Lit, Type, UnOp};

/// The kind of value a plain type takes a literal of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Takes {
    Float,
    Signed,
    Unsigned,
    Bool,
    Char,
    /// `String`: a string literal is a `&str`, not a `String`.
    Owned,
    /// `&str`.
    Str,
    /// An array, a tuple or one of std's containers (`Vec`, `Option`, `Box`, ...): no literal
    /// is one.
    Compound,
}

/// std's generic containers, which no literal is.
const CONTAINERS: &[&str] = &[
    "Vec", "Option", "Box", "Rc", "Arc", "VecDeque", "HashMap", "BTreeMap", "HashSet", "BTreeSet",
];

/// What `ty` takes a literal of, when it is a type this module judges.
fn takes(ty: &str) -> Option<Takes> {
    match syn::parse_str::<Type>(ty).ok()? {
        Type::Reference(r) => match &*r.elem {
            Type::Path(p) if p.path.is_ident("str") => Some(Takes::Str),
            _ => None,
        },
        Type::Array(_) | Type::Tuple(_) => Some(Takes::Compound),
        Type::Path(p)
            if p.qself.is_none()
                && p.path.segments.last().is_some_and(|s| {
                    !s.arguments.is_empty() && CONTAINERS.contains(&s.ident.to_string().as_str())
                }) =>
        {
            Some(Takes::Compound)
        }
        Type::Path(p) if p.qself.is_none() => {
            let name = p.path.get_ident()?.to_string();
            let name = name.as_str();
            if is_float(name) {
                Some(Takes::Float)
            } else if SIGNED.contains(&name) || name == "i128" {
                Some(Takes::Signed)
            } else if UNSIGNED.contains(&name) || name == "u128" {
                Some(Takes::Unsigned)
            } else {
                match name {
                    "bool" => Some(Takes::Bool),
                    "char" => Some(Takes::Char),
                    "String" => Some(Takes::Owned),
                    _ => None,
                }
            }
        }
        _ => None,
    }
}

/// `(what the literal is, help)` when `expr` is a literal that `ty` does not take; `None` when
/// it fits, or when it is not a literal or `ty` not a type judged here.
pub(super) fn mismatch(expr: &Expr, ty: &str) -> Option<(String, String)> {
    let takes = takes(ty)?;
    let (negative, lit) = match expr {
        Expr::Lit(ExprLit { lit, .. }) => (false, lit),
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_),
            expr,
            ..
        }) => match &**expr {
            Expr::Lit(ExprLit { lit, .. }) => (true, lit),
            _ => return None,
        },
        _ => return None,
    };
    let example = match takes {
        Takes::Float => "`0.5`".to_owned(),
        Takes::Signed | Takes::Unsigned => "`2`".to_owned(),
        Takes::Bool => "`true` or `false`".to_owned(),
        Takes::Char => "`'a'`".to_owned(),
        Takes::Owned => "`\"text\".to_owned()` (in TOML, `'\"text\".to_owned()'`)".to_owned(),
        Takes::Str => "`\"text\"` (in TOML, `'\"text\"'`)".to_owned(),
        Takes::Compound => "`vec![1, 2]`, `Some(0.5)`, `[1.0, 2.0]`".to_owned(),
    };
    let wrong = |what: &str| {
        Some((
            what.to_owned(),
            format!("write a `{ty}` value, e.g. {example}"),
        ))
    };
    match (lit, takes) {
        (Lit::Float(f), Takes::Float) => suffix(f.suffix(), ty),
        // `2f32`: an integer with a float suffix is a float literal.
        (Lit::Int(i), Takes::Float) if !i.suffix().is_empty() => suffix(i.suffix(), ty),
        (Lit::Int(i), Takes::Float) => Some((
            "is an integer literal".to_owned(),
            format!(
                "write it as a float (Rust takes no integer literal for one): `{}{}.0`",
                if negative { "-" } else { "" },
                i.base10_digits()
            ),
        )),
        (Lit::Int(i), Takes::Signed | Takes::Unsigned) => {
            if let Some(problem) = suffix(i.suffix(), ty) {
                return Some(problem);
            }
            if negative && takes == Takes::Unsigned {
                return Some((
                    "is negative".to_owned(),
                    format!("write a value of `{ty}`, which has no negative values"),
                ));
            }
            fits(i, negative, ty)
        }
        (Lit::Float(_), Takes::Signed | Takes::Unsigned) => wrong("is a float literal"),
        (Lit::Bool(_), Takes::Bool) if !negative => None,
        (Lit::Char(_), Takes::Char) if !negative => None,
        (Lit::Str(_), Takes::Str) if !negative => None,
        (Lit::Str(s), Takes::Owned) if !negative => Some((
            "is a string literal (a `&str`)".to_owned(),
            format!(
                "make it owned: `{:?}.to_owned()` (in TOML, `'{:?}.to_owned()'`)",
                s.value(),
                s.value()
            ),
        )),
        (Lit::Str(_), _) => wrong("is a string literal"),
        (Lit::Bool(_), _) => wrong("is a `bool` literal"),
        (Lit::Char(_), _) => wrong("is a `char` literal"),
        (Lit::Int(_), _) => wrong("is an integer literal"),
        (Lit::Float(_), _) => wrong("is a float literal"),
        _ => wrong("is a literal of another type"),
    }
}

/// A literal suffix (`1u8`, `0.5f64`) that names another type than `ty`.
fn suffix(suffix: &str, ty: &str) -> Option<(String, String)> {
    (!suffix.is_empty() && suffix != ty).then(|| {
        (
            format!("has the suffix `{suffix}`"),
            format!("drop the suffix, or write `{ty}`'s"),
        )
    })
}

/// An integer literal out of `ty`'s range.
fn fits(lit: &syn::LitInt, negative: bool, ty: &str) -> Option<(String, String)> {
    let (min, max): (i128, u128) = match ty {
        "i8" => (i8::MIN.into(), 127),
        "i16" => (i16::MIN.into(), 32_767),
        "i32" => (i32::MIN.into(), 2_147_483_647),
        // `isize` and `usize` as 64 bits: the op check runs on the machine that builds it.
        "i64" | "isize" => (i64::MIN.into(), 9_223_372_036_854_775_807),
        "i128" => (i128::MIN, i128::MAX.unsigned_abs()),
        "u8" => (0, u8::MAX.into()),
        "u16" => (0, u16::MAX.into()),
        "u32" => (0, u32::MAX.into()),
        "u64" | "usize" => (0, u64::MAX.into()),
        _ => (0, u128::MAX),
    };
    let in_range = match lit.base10_parse::<u128>() {
        Ok(magnitude) if negative => magnitude <= min.unsigned_abs(),
        Ok(magnitude) => magnitude <= max,
        Err(_) => false,
    };
    (!in_range).then(|| {
        (
            "is out of its range".to_owned(),
            format!("write a value from {min} to {max}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(expr: &str, ty: &str) -> Option<String> {
        mismatch(&syn::parse_str(expr).expect("an expression"), ty).map(|(what, _)| what)
    }

    #[test]
    fn literals_of_the_inputs_type_pass() {
        for (expr, ty) in [
            ("0.5", "f32"),
            ("-1.5e3", "f64"),
            ("2f32", "f32"),
            ("2", "usize"),
            ("-3", "i8"),
            ("255", "u8"),
            ("-128", "i8"),
            ("true", "bool"),
            ("'x'", "char"),
            ("\"a\"", "&str"),
            ("\"a\"", "&'static str"),
            ("\"a\".to_owned()", "String"),
            ("vec![1, 2]", "Vec<u8>"),
            ("vec![0.5]", "Vec<f32>"),
            ("Some(1)", "Option<usize>"),
            ("N", "usize"),
        ] {
            assert_eq!(judge(expr, ty), None, "{expr} for {ty}");
        }
    }

    #[test]
    fn literals_of_another_type_are_named() {
        for (expr, ty, what) in [
            ("1.5", "usize", "is a float literal"),
            ("2", "f32", "is an integer literal"),
            ("42", "&str", "is an integer literal"),
            ("\"abc\"", "String", "is a string literal (a `&str`)"),
            ("\"abc\"", "u8", "is a string literal"),
            ("1u8", "usize", "has the suffix `u8`"),
            ("0.5f64", "f32", "has the suffix `f64`"),
            ("-1", "usize", "is negative"),
            ("256", "u8", "is out of its range"),
            ("-129", "i8", "is out of its range"),
            ("1", "bool", "is an integer literal"),
            ("'a'", "&str", "is a `char` literal"),
            ("\"abc\"", "Vec<u8>", "is a string literal"),
            ("0.5", "Option<f32>", "is a float literal"),
            ("1", "[f32; 2]", "is an integer literal"),
        ] {
            assert_eq!(judge(expr, ty).as_deref(), Some(what), "{expr} for {ty}");
        }
    }
}
