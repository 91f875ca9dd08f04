//! The words an `ops.toml` manifest and burn-route's runtime share, defined once: the backend
//! selectors ([`BackendId`]), the autodiff policies ([`Policy`]), the tensor kinds
//! ([`TensorKind`]), the float dtypes ([`FloatDtype`]) and the shape contracts ([`ShapeRule`]).
//!
//! The generator (`burn-route-codegen`) parses and documents manifest keys with
//! [`Policy::key`], [`ShapeRule::key`], ...; the code it writes names the same values as Rust
//! paths ([`Policy::variant`], ...), which `burn-route-runtime` re-exports from here. No
//! dependencies, `no_std`: it builds in a moment in every build script.
//!
//! The Rust primitive types the manifest's plain types name, grouped by what burn-route does
//! with each, are in [`primitive`].
//!
//! It also holds the error reference ([`errors`]), which every runtime message and manifest
//! diagnostic links for this version, and which `burn-route-codegen explain` prints offline.

#![warn(missing_docs)]
#![cfg_attr(not(test), no_std)]

use core::fmt;

/// Declares a fieldless enum whose variants each have a manifest key, with `ALL`, `key`,
/// `variant` and `from_key`.
macro_rules! vocabulary {
    (
        $(#[$meta:meta])*
        $name:ident { $( $(#[$vmeta:meta])* $variant:ident = $key:literal, )+ }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every value, in the order the manifest reference lists them.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// Every value as the manifest writes it, in the order of [`Self::ALL`].
            pub const KEYS: &'static [&'static str] = &[$($key),+];

            /// The value as the manifest writes it.
            pub const fn key(self) -> &'static str {
                match self {
                    $( Self::$variant => $key, )+
                }
            }

            /// The variant's name, as generated code writes the value (`Type::Variant`).
            pub const fn variant(self) -> &'static str {
                match self {
                    $( Self::$variant => stringify!($variant), )+
                }
            }

            /// The value a manifest key names, if any.
            pub fn from_key(key: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|value| value.key() == key)
            }
        }
    };
}

vocabulary! {
    /// An op's autodiff policy: what routing does with a float input that autodiff tracks
    /// (the manifest's `autodiff` key).
    Policy {
        /// Tracked floats route to the op's `Autodiff<B, C>` kernel.
        Differentiable = "differentiable",
        /// Tracked floats are detached; the op runs concretely and its outputs are untracked.
        Detach = "detach",
        /// A tracked float input is an error.
        Reject = "reject",
    }
}

vocabulary! {
    /// The kind of a tensor input or output (the manifest's `float`, `int`, ...).
    TensorKind {
        /// Floating point.
        Float = "float",
        /// Integer.
        Int = "int",
        /// Boolean.
        Bool = "bool",
        /// Quantized float.
        Quantized = "quantized",
    }
}

/// A backend: one the manifest's `backends` list can name (a selector), or, at run time, a
/// `Dispatch` backend that burn-route does not route to ([`BackendId::Other`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BackendId {
    /// Burn's pure-Rust CPU backend.
    Flex,
    /// The cubecl backend (wgpu or CUDA), `Fusion<CubeBackend>` when fusion is on.
    Cube,
    /// Burn's remote backend: devices served by another process or machine.
    Remote,
    /// At run time, a backend this build of burn-route does not route to. No manifest names it.
    Other,
}

impl BackendId {
    /// Every selector a manifest can name, in the order the manifest reference lists them.
    pub const ALL: &'static [Self] = &[Self::Flex, Self::Cube, Self::Remote];

    /// Every selector as the manifest writes it, in the order of [`Self::ALL`].
    pub const KEYS: &'static [&'static str] = &["Flex", "Cube", "Remote"];

    /// The selector as the manifest and Rust paths write it (`Other` for [`BackendId::Other`]).
    pub const fn key(self) -> &'static str {
        self.variant()
    }

    /// The variant's name, as generated code writes the value (`BackendId::Flex`).
    pub const fn variant(self) -> &'static str {
        match self {
            Self::Flex => "Flex",
            Self::Cube => "Cube",
            Self::Remote => "Remote",
            Self::Other => "Other",
        }
    }

    /// The selector a manifest names, if any.
    pub fn from_key(key: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|value| value.key() == key)
    }

    /// The cfg its routes are compiled under when the manifest gives it none: for the backends
    /// that only some builds of burn-route-runtime have ([`route_cfg`]).
    pub const fn route_cfg(self) -> Option<&'static str> {
        match self {
            Self::Flex | Self::Other => None,
            Self::Cube => Some(route_cfg::CUBE),
            Self::Remote => Some(route_cfg::REMOTE),
        }
    }

    /// This backend's bit in a set of backends (none for [`BackendId::Other`]).
    pub const fn bit(self) -> u8 {
        match self {
            Self::Flex => 1,
            Self::Cube => 2,
            Self::Remote => 4,
            Self::Other => 0,
        }
    }
}

/// What holds the tensor(s) of an argument, field or output: the manifest's `container` key
/// (absent: one tensor), and the type of the op's parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Container {
    /// Exactly one tensor (no `container` key).
    One,
    /// `Option<tensor>` (`container = "option"`): checked present, and absent once.
    Option,
    /// `Vec<tensor>` (`container = "vec"`).
    Vec,
}

impl Container {
    /// The values the `container` key takes, in the order of the manifest reference.
    pub const KEYS: &'static [&'static str] = &["option", "vec"];

    /// The `container` value that names it (`None` for [`Container::One`], the key's absence).
    pub const fn key(self) -> Option<&'static str> {
        match self {
            Self::One => None,
            Self::Option => Some("option"),
            Self::Vec => Some("vec"),
        }
    }

    /// The container a `container` value names, if any.
    pub fn from_key(key: &str) -> Option<Self> {
        [Self::Option, Self::Vec]
            .into_iter()
            .find(|c| c.key() == Some(key))
    }
}

impl TensorKind {
    /// How the op check (`burn_route_runtime::check`) names what builds, takes or compares a
    /// tensor value of this kind in `container`: `float`, `optional_int`, `bools` (its `Input`
    /// and `Value` constructors and its `Args` accessors, which the generated check calls and
    /// the check's messages print). `None` for a quantized tensor, which the check does not
    /// build.
    pub const fn check_name(self, container: Container) -> Option<&'static str> {
        Some(match (container, self) {
            (Container::One, Self::Float) => "float",
            (Container::One, Self::Int) => "int",
            (Container::One, Self::Bool) => "bool",
            (Container::Option, Self::Float) => "optional_float",
            (Container::Option, Self::Int) => "optional_int",
            (Container::Option, Self::Bool) => "optional_bool",
            (Container::Vec, Self::Float) => "floats",
            (Container::Vec, Self::Int) => "ints",
            (Container::Vec, Self::Bool) => "bools",
            (_, Self::Quantized) => return None,
        })
    }
}

/// The cfgs generated routes are compiled under by default, which the generator's build script
/// (`Builder::build_script`) sets from burn-route-runtime's features.
pub mod route_cfg {
    /// Autodiff routing: the runtime's `autodiff` feature.
    pub const AUTODIFF: &str = "burn_route_autodiff";
    /// The routes to Cube: its `wgpu` or `cuda` feature.
    pub const CUBE: &str = "burn_route_cube";
    /// The routes to Remote: its `remote` feature.
    pub const REMOTE: &str = "burn_route_remote";
    /// Every one, for `cargo::rustc-check-cfg`.
    pub const ALL: &[&str] = &[AUTODIFF, CUBE, REMOTE];

    /// The runtime feature that turns `cfg` on, as a message names it; `None` for a cfg that
    /// is not one of these.
    pub fn feature(cfg: &str) -> Option<&'static str> {
        match cfg {
            AUTODIFF => Some("autodiff"),
            CUBE => Some("wgpu` or `cuda"),
            REMOTE => Some("remote"),
            _ => None,
        }
    }
}

impl fmt::Display for BackendId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Other => "a backend burn-route does not support",
            selector => selector.key(),
        })
    }
}

vocabulary! {
    /// One kind of shape contract: how an input's shape must relate to another input's
    /// (the manifest's `shape = { same_as = "x" }`), checked before any kernel runs.
    ShapeRule {
        /// `same_as`: exactly the other input's shape.
        SameAs = "same_as",
        /// `broadcast_to`: the other input's rank, each dimension equal to the other's or 1.
        BroadcastTo = "broadcast_to",
        /// `broadcast_with`: the other input's rank, each pair of dimensions equal or one of
        /// them 1 (Burn's broadcasting for binary ops).
        BroadcastWith = "broadcast_with",
        /// `last_dim_of`: one dimension, the size of the other input's last dimension (a
        /// per-feature parameter).
        LastDimOf = "last_dim_of",
        /// `leading_dims_of`: the other input's shape without its last dimension (one entry
        /// per row, such as class targets).
        LeadingDimsOf = "leading_dims_of",
    }
}

vocabulary! {
    /// A float dtype an op's kernels take (the manifest's `dtypes`).
    FloatDtype {
        /// 32-bit float.
        F32 = "f32",
        /// 16-bit float.
        F16 = "f16",
        /// bfloat16.
        Bf16 = "bf16",
        /// 64-bit float.
        F64 = "f64",
        /// f32 storage with relaxed arithmetic on some GPUs.
        Flex32 = "flex32",
    }
}

impl FloatDtype {
    /// Its bit in a set of float dtypes (the runtime's op facts hold the dtypes an op's kernels
    /// take as such a set).
    pub const fn bit(self) -> u8 {
        match self {
            Self::F64 => 1,
            Self::F32 => 1 << 1,
            Self::Flex32 => 1 << 2,
            Self::F16 => 1 << 3,
            Self::Bf16 => 1 << 4,
        }
    }

    /// Its variant of Burn's `FloatDType` (and `DType`).
    pub const fn burn_variant(self) -> &'static str {
        match self {
            Self::F32 => "F32",
            Self::F16 => "F16",
            Self::Bf16 => "BF16",
            Self::F64 => "F64",
            Self::Flex32 => "Flex32",
        }
    }
}

impl ShapeRule {
    /// The one shape the rule allows against `reference`, when it fixes one (`same_as`,
    /// `last_dim_of`, `leading_dims_of`; the broadcast rules allow several).
    pub fn implied(self, reference: &[usize]) -> Option<&[usize]> {
        match self {
            Self::SameAs => Some(reference),
            Self::LastDimOf => reference.last().map(core::slice::from_ref),
            Self::LeadingDimsOf => reference.split_last().map(|(_, leading)| leading),
            Self::BroadcastTo | Self::BroadcastWith => None,
        }
    }

    /// Whether `shape` meets the rule against `reference`.
    pub fn holds(self, shape: &[usize], reference: &[usize]) -> bool {
        let same_rank = shape.len() == reference.len();
        match self {
            Self::SameAs => shape == reference,
            Self::BroadcastTo => {
                same_rank && shape.iter().zip(reference).all(|(&d, &r)| d == r || d == 1)
            }
            Self::BroadcastWith => {
                same_rank
                    && shape
                        .iter()
                        .zip(reference)
                        .all(|(&d, &r)| d == r || d == 1 || r == 1)
            }
            Self::LastDimOf => reference.last().is_some_and(|&last| shape == [last]),
            Self::LeadingDimsOf => reference
                .split_last()
                .is_some_and(|(_, leading)| shape == leading),
        }
    }
}

/// Manifest words print as the manifest writes them (`differentiable`, `same_as`, `Flex`).
macro_rules! display_key {
    ($($name:ident),+) => {$(
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.key())
            }
        }
    )+};
}

display_key!(Policy, TensorKind, ShapeRule, FloatDtype);

/// How a backward kernel's deferred operation names the gradient of input `x` among its outputs
/// in messages: `gradient of x`. The generator writes the name; the runtime's output-metadata
/// error reads the prefix to give a gradient's fix.
pub const GRADIENT_OF: &str = "gradient of ";

/// FNV-1a over `text`: the hash of an op's declaration that the generator writes into the op's
/// Remote operation id, and that the Remote runtime compares in its handshake. One function for
/// both sides, which must agree; stable across builds and platforms.
pub const fn hash(text: &str) -> u64 {
    let bytes = text.as_bytes();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    hash
}

pub mod errors;
pub mod primitive;

#[cfg(test)]
mod tests {
    #[test]
    fn float_dtype_bits_are_distinct() {
        let mut seen = 0u8;
        for dtype in super::FloatDtype::ALL {
            assert_eq!(dtype.bit().count_ones(), 1, "{dtype}");
            assert_eq!(seen & dtype.bit(), 0, "{dtype} shares a bit");
            seen |= dtype.bit();
        }
    }

    use super::*;

    #[test]
    fn keys_round_trip() {
        for &p in Policy::ALL {
            assert_eq!(Policy::from_key(p.key()), Some(p));
        }
        for &k in TensorKind::ALL {
            assert_eq!(TensorKind::from_key(k.key()), Some(k));
        }
        for &b in BackendId::ALL {
            assert_eq!(BackendId::from_key(b.key()), Some(b));
        }
        for &r in ShapeRule::ALL {
            assert_eq!(ShapeRule::from_key(r.key()), Some(r));
        }
        assert_eq!(Policy::KEYS, ["differentiable", "detach", "reject"]);
        assert!(
            BackendId::ALL
                .iter()
                .map(|b| b.key())
                .eq(BackendId::KEYS.iter().copied())
        );
        assert_eq!(Policy::from_key("Differentiable"), None);
        assert_eq!(ShapeRule::SameAs.variant(), "SameAs");
        assert_eq!(BackendId::Remote.to_string(), "Remote");
        assert_eq!(BackendId::from_key("Other"), None);
    }

    #[test]
    fn rules_accept_exactly_their_shapes() {
        use ShapeRule::*;
        assert!(SameAs.holds(&[2, 4], &[2, 4]));
        assert!(!SameAs.holds(&[1, 4], &[2, 4]));
        assert!(BroadcastTo.holds(&[1, 4], &[2, 4]));
        assert!(!BroadcastTo.holds(&[2, 4], &[1, 4]));
        assert!(!BroadcastTo.holds(&[4], &[2, 4]));
        assert!(BroadcastWith.holds(&[2, 1], &[1, 4]));
        assert!(!BroadcastWith.holds(&[2, 3], &[2, 4]));
        assert!(LastDimOf.holds(&[4], &[2, 3, 4]));
        assert_eq!(LastDimOf.implied(&[2, 3, 4]), Some(&[4][..]));
        assert_eq!(LeadingDimsOf.implied(&[2, 3, 4]), Some(&[2, 3][..]));
        assert_eq!(SameAs.implied(&[2, 3]), Some(&[2, 3][..]));
        assert_eq!(BroadcastTo.implied(&[2, 3]), None);
        assert_eq!(LastDimOf.implied(&[]), None);
        assert!(!LastDimOf.holds(&[1], &[2, 4]));
        assert!(!LastDimOf.holds(&[4], &[]));
        assert!(LeadingDimsOf.holds(&[2, 3], &[2, 3, 4]));
        assert!(!LeadingDimsOf.holds(&[3], &[2, 4]));
    }
}
