/// The build-time part's introduction: how diagnostics read, for those without a section.
pub const MANIFEST: &str = "build-time-manifest-errors";
/// `missing [routing] table`.
pub const MISSING_ROUTING: &str = "manifest-missing-routing";
/// A TOML syntax error (a duplicate key included).
pub const SYNTAX: &str = "manifest-syntax";
/// `unknown key`.
pub const UNKNOWN_KEY: &str = "manifest-unknown-key";
/// `... must be ..., found ...`.
pub const WRONG_TYPE: &str = "manifest-wrong-type";
/// `missing key`.
pub const MISSING_KEY: &str = "manifest-missing-key";
/// `... has both ... and ...`.
pub const CONFLICTING_ARG_KINDS: &str = "manifest-conflicting-arg-kinds";
/// `... needs tensor, type or device = true`.
pub const MISSING_ARG_KIND: &str = "manifest-missing-arg-kind";
/// `... only applies to tensors`.
pub const TENSOR_ONLY_KEY: &str = "manifest-tensor-only-key";
/// `device = false declares nothing`.
pub const DEVICE_FALSE: &str = "manifest-device-false";
/// `rank ... is out of range`.
pub const RANK_RANGE: &str = "manifest-rank-range";
/// `the manifest is not UTF-8`.
pub const NOT_UTF8: &str = "manifest-not-utf8";
/// `... and N more errors`.
pub const TOO_MANY: &str = "manifest-too-many";
/// `unknown tensor kind`.
pub const UNKNOWN_KIND: &str = "manifest-unknown-kind";
/// `unknown container`.
pub const UNKNOWN_CONTAINER: &str = "manifest-unknown-container";
/// `duplicate op name`.
pub const DUPLICATE_OP: &str = "manifest-duplicate-op";
/// `unknown backend`.
pub const UNKNOWN_BACKEND: &str = "manifest-unknown-backend";
/// `unknown autodiff policy`.
pub const UNKNOWN_POLICY: &str = "manifest-unknown-policy";
/// `duplicate input name`.
pub const DUPLICATE_INPUT: &str = "manifest-duplicate-input";
/// `... name ... is not a Rust identifier` / `... is not snake_case` / other name rules.
pub const NOT_IDENTIFIER: &str = "manifest-not-identifier";
/// `... is a Rust keyword` / `... is a name of Rust's prelude` / `... is a generic parameter`.
pub const KEYWORD: &str = "manifest-keyword";
/// `backend ... is listed twice`.
pub const BACKEND_TWICE: &str = "manifest-backend-twice";
/// `backend ... already has its cfg in routing.backends`.
pub const BACKEND_CFG_INHERITED: &str = "manifest-backend-cfg-inherited";
/// `empty backend list`.
pub const EMPTY_BACKENDS: &str = "manifest-empty-backends";
/// `op ... is ... but has no float tensor input`.
pub const POLICY_NEEDS_FLOAT: &str = "manifest-policy-needs-float";
/// `op ... has no tensor and no device input`.
pub const NO_TENSOR_INPUT: &str = "manifest-no-tensor-input";
/// `... starts with __, which is reserved for the generator's own names`.
pub const RESERVED_INPUT: &str = "manifest-reserved-input";
/// `... is not a Rust type`.
pub const BAD_TYPE: &str = "manifest-bad-type";
/// `... is not a cfg predicate`.
pub const BAD_CFG: &str = "manifest-bad-cfg";
/// `composite ... is not a Rust path` / `... has generic arguments` / `... is a single name`.
pub const BAD_COMPOSITE: &str = "manifest-bad-composite";
/// Output `shape` / `dtype`: `... is not an input of op ...` and the rest.
pub const OUTPUT_METADATA: &str = "manifest-output-metadata";
/// `op ... is routed to Cube with a kernel of its own, but cannot run lazily on Fusion<B>`.
pub const CUBE_METADATA: &str = "manifest-cube-metadata";
/// `a borrowed vec of tensors is not supported`.
pub const BORROWED_VEC: &str = "manifest-borrowed-vec";
/// `more than one device input`.
pub const DEVICE_TWICE: &str = "manifest-device-twice";
/// `op name ... collides with the generated try_...`.
pub const TRY_COLLISION: &str = "manifest-try-collision";
/// `empty output tuple`.
pub const EMPTY_TUPLE: &str = "manifest-empty-tuple";
/// `autodiff_trait must differ from trait`.
pub const AUTODIFF_TRAIT_SAME: &str = "manifest-autodiff-trait-same";
/// `autodiff_trait names a trait that is not generated` / `backward_bounds bounds nothing`.
pub const ROUTING_KEY_UNUSED: &str = "manifest-routing-key-unused";
/// `rank name ... is also the name of a generated trait`.
pub const INPUT_NAME_SCOPE: &str = "manifest-input-name-scope";
/// `plain type ...` (not in scope, lifetimes, unsized, `_`, `impl`, `!`, `Self`).
pub const PLAIN_TYPE_SCOPE: &str = "manifest-plain-type-scope";
/// `doc contains ...` / `doc opens a code fence that it never closes`.
pub const DOC_TEXT: &str = "manifest-doc-text";
/// `... is not a cfg predicate: expected a string literal`.
pub const CFG_SHAPE: &str = "manifest-cfg-shape";
/// `backend ... has a different cfg here than where it was first listed`.
pub const BACKEND_CFG_CONFLICT: &str = "manifest-backend-cfg-conflict";
/// `op ... is async, but ...` / `... of async op ... borrows`.
pub const ASYNC: &str = "manifest-async";
/// A backward pass's keys: `backward` (formulas or a function), `save`, `checkpoint`,
/// `no_gradient`.
pub const BACKWARD: &str = "manifest-backward";
/// An `[op.check]` table.
pub const OP_CHECK: &str = "manifest-op-check";
/// A `[[type]]` entry, or a declared type's use by an op.
pub const DECLARED_TYPE: &str = "manifest-declared-type";
/// An input's shape contract (`shape = { RULE = "other" }`).
pub const SHAPE_CONTRACT: &str = "manifest-shape-contract";
/// How an op runs on Remote (`remote`), and what running it there as one operation needs.
pub const REMOTE: &str = "manifest-remote";
/// The float dtypes an op's kernels take (`dtypes`), and what runs for the others
/// (`other_dtypes`).
pub const DTYPES: &str = "manifest-dtypes";

/// The section of the manifest area a key is in, for a diagnostic without a section of its
/// own: a backward pass's keys, `[op.check]`, `[[type]]`, an input's shape contract.
pub fn of_area(key: &str) -> Option<&'static str> {
    let op_key = key
        .strip_prefix("op[")
        .and_then(|rest| rest.split_once("].").map(|(_, key)| key));
    if key.starts_with("type[") {
        return Some(DECLARED_TYPE);
    }
    let op_key = op_key?;
    let first = op_key.split(['.', '[']).next().unwrap_or("");
    match first {
        "backward" | "save" | "checkpoint" | "no_gradient" => Some(BACKWARD),
        "check" => Some(OP_CHECK),
        "remote" => Some(REMOTE),
        "fusion" => Some(CUBE_METADATA),
        "inputs" if op_key.contains(".shape") => Some(SHAPE_CONTRACT),
        _ => None,
    }
}
/// `the generated code would define ... twice`.
pub const NAME_CLASH: &str = "manifest-name-clash";
/// [`crate::Error::Io`]: reading the manifest or writing a generated file failed.
pub const BUILD_IO: &str = "build-io";
/// [`crate::Error::Config`]: an invalid `Builder` option.
pub const BUILD_CONFIG: &str = "build-config";

/// Every anchor above (what the tests check against the error reference).
#[cfg(test)]
pub const ALL: &[&str] = &[
    MANIFEST,
    MISSING_ROUTING,
    SYNTAX,
    UNKNOWN_KEY,
    WRONG_TYPE,
    MISSING_KEY,
    CONFLICTING_ARG_KINDS,
    MISSING_ARG_KIND,
    TENSOR_ONLY_KEY,
    DEVICE_FALSE,
    RANK_RANGE,
    NOT_UTF8,
    TOO_MANY,
    UNKNOWN_KIND,
    UNKNOWN_CONTAINER,
    DUPLICATE_OP,
    UNKNOWN_BACKEND,
    UNKNOWN_POLICY,
    DUPLICATE_INPUT,
    NOT_IDENTIFIER,
    KEYWORD,
    BACKEND_TWICE,
    BACKEND_CFG_INHERITED,
    EMPTY_BACKENDS,
    POLICY_NEEDS_FLOAT,
    NO_TENSOR_INPUT,
    RESERVED_INPUT,
    BAD_TYPE,
    BAD_CFG,
    BAD_COMPOSITE,
    OUTPUT_METADATA,
    CUBE_METADATA,
    BORROWED_VEC,
    DEVICE_TWICE,
    TRY_COLLISION,
    EMPTY_TUPLE,
    AUTODIFF_TRAIT_SAME,
    ROUTING_KEY_UNUSED,
    INPUT_NAME_SCOPE,
    PLAIN_TYPE_SCOPE,
    DOC_TEXT,
    CFG_SHAPE,
    BACKEND_CFG_CONFLICT,
    ASYNC,
    NAME_CLASH,
    BACKWARD,
    OP_CHECK,
    DECLARED_TYPE,
    SHAPE_CONTRACT,
    REMOTE,
    BUILD_IO,
    BUILD_CONFIG,
];

#[cfg(test)]
mod tests {
    use super as page;

    #[test]
    fn every_linked_page_exists_in_the_error_reference() {
        for anchor in page::ALL {
            assert!(
                burn_route_core::errors::section(anchor).is_some(),
                "diagnostics link `{anchor}`, which the error reference does not define"
            );
        }
    }
}
