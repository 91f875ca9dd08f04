//! What the manifest-wide rules see ([`Context`]) and their type: shared by [`super::rules`] and
//! [`super::asynchrony`], which depend on this module and not on each other.

use std::ops::Range;

use super::lower::Routing;
use crate::diag::{Diagnostic, LineIndex};
use crate::ir::Op;
use crate::model::{Manifest, OpSpec};

/// What manifest-wide rules see.
pub(super) struct Context<'a, 'm> {
    pub manifest: &'a Manifest,
    pub ops: &'a [(&'m OpSpec, Op)],
    pub lines: &'a LineIndex,
    pub routing: Option<&'a Routing>,
    /// Span and key of the main trait's name.
    pub trait_key: &'a (Range<usize>, String),
    /// The declared types that lowered.
    pub types: &'a [crate::ir::TypeDef],
}

/// A rule about the whole manifest.
pub(super) type ManifestRule = fn(&Context<'_, '_>) -> Vec<Diagnostic>;
