//! [`Manifest`] → [`Ir`], with every problem collected before failing.
//!
//! Two stages, each readable on its own:
//!
//! - `lower`: each value to its IR form (names, kinds, types, cfgs, docs), one op at a time.
//!   Names are checked by [`crate::names`], plain types by `types`, doc text by `text`.
//! - `rules`: the rules that relate values to each other, one named function each, all of one
//!   signature (`context::ManifestRule`), listed where they are defined: `rules::MANIFEST_RULES`,
//!   `generated_names::MANIFEST_RULES`, `contracts::MANIFEST_RULES`,
//!   `asynchrony::MANIFEST_RULES`, `fusion::MANIFEST_RULES`, `dtypes::MANIFEST_RULES`,
//!   `remote::MANIFEST_RULES`, `effect::MANIFEST_RULES` and `plain::MANIFEST_RULES`.
//!
//! Builder options that change names (the trait override) enter here like manifest values, so
//! they meet the same rules.

mod asynchrony;
mod backward;
mod check;
mod context;
mod contracts;
mod dtypes;
mod effect;
mod fusion;
mod generated_names;
mod gradients;
mod linear;
mod literal;
mod lower;
mod plain;
mod remote;

pub(crate) use lower::is_well_known_cfg;
mod ranks;
mod rules;
pub(crate) mod text;
mod types;

use crate::diag::{Diagnostics, LineIndex, Stage};
use crate::ir::Ir;
use crate::model::Manifest;

/// What validation needs besides the manifest.
#[derive(Clone, Copy, Debug)]
pub struct Options<'a> {
    /// How runtime messages and docs name the manifest file.
    pub manifest_name: &'a str,
    /// `Builder::trait_name`: replaces `routing.trait` (and the names derived from it).
    pub trait_name: Option<&'a str>,
    /// Whether the op check is written (`Builder::op_check`): what it needs is checked too.
    pub op_check: bool,
}

/// Checks `manifest` and lowers it, pushing every problem found (and every warning) into
/// `diags`. `source` is its text (for line numbers). The IR when the run has no error, parsing's
/// included.
pub fn validate(
    manifest: &Manifest,
    options: &Options<'_>,
    source: &str,
    diags: &mut Diagnostics,
) -> Option<Ir> {
    diags.enter(Stage::Validate);
    let lines = LineIndex::new(source);
    let lowered = lower::lower(manifest, options, source, &lines, diags);
    let cx = context::Context {
        manifest,
        ops: &lowered.ops,
        lines: &lines,
        routing: lowered.routing.as_ref(),
        trait_key: &lowered.trait_key,
        types: &lowered.declared.defs,
        op_check: options.op_check,
    };
    for rule in rules::MANIFEST_RULES
        .iter()
        .chain(generated_names::MANIFEST_RULES)
        .chain(contracts::MANIFEST_RULES)
        .chain(asynchrony::MANIFEST_RULES)
        .chain(fusion::MANIFEST_RULES)
        .chain(dtypes::MANIFEST_RULES)
        .chain(remote::MANIFEST_RULES)
        .chain(effect::MANIFEST_RULES)
        .chain(plain::MANIFEST_RULES)
    {
        diags.extend(rule(&cx));
    }
    let used = rules::declared_uses(&lowered.ops);
    let warnings = lower::unused(manifest, &lowered.declared, &used)
        .into_iter()
        .chain(remote::hand_written_warnings(&cx))
        .chain(fusion::eager_warnings(&cx))
        .chain(gradients::no_gradient_warnings(&cx))
        .chain(gradients::no_float_output_warnings(&cx));
    for warning in warnings {
        diags.warn(warning);
    }
    match lowered.routing {
        Some(routing) if !diags.has_errors() && lowered.complete => Some(lower::finish(
            routing,
            lowered.ops,
            options,
            lowered.defaults,
            lowered.declared,
        )),
        _ => None,
    }
}
