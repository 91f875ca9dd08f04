//! Where every error burn-route reports is explained: the runtime's routing errors and the
//! generator's manifest diagnostics, one section each.
//!
//! Every message ends with a link to its section here, for the version of the crates that
//! reported it ([`link`]); `burn-route-codegen explain ANCHOR` prints a section offline
//! ([`section`]), as `rustc --explain` does.
//!
//! The reference itself is the rest of this page.
//!
// The page's text, shown by rustdoc (on docs.rs, and by `cargo doc` offline). Its Rust examples
// call burn-route's ops, which this crate cannot build: they are compiled and run as doctests of
// `examples/training` (its `src/lib.rs` includes this page), not as this crate's doctests.
#![cfg_attr(not(doctest), doc = include_str!("errors.md"))]

use core::fmt;

/// The reference's source: Markdown, with an `<a id="ANCHOR"></a>` line before each section.
pub const TEXT: &str = include_str!("errors.md");

/// The address of this page on docs.rs, for this crate's version.
pub const PAGE: &str = concat!(
    "https://docs.rs/burn-route-core/",
    env!("CARGO_PKG_VERSION"),
    "/burn_route_core/errors/index.html"
);

/// The link to section `anchor` of this page: `Display` prints `PAGE#anchor`.
///
/// ```
/// use burn_route_core::errors;
///
/// assert!(errors::section("tracked-input").is_some());
/// assert_eq!(
///     errors::link("tracked-input").to_string(),
///     format!("{}#tracked-input", errors::PAGE)
/// );
/// ```
pub const fn link(anchor: &'static str) -> Link {
    Link(anchor)
}

/// A section of this page; see [`link`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link(&'static str);

impl Link {
    /// The section's anchor (`tracked-input`).
    pub const fn anchor(self) -> &'static str {
        self.0
    }
}

impl fmt::Display for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PAGE}#{}", self.0)
    }
}

const ANCHOR_OPEN: &str = "<a id=\"";
const ANCHOR_CLOSE: &str = "\"></a>";

/// The sample messages of the page's runtime part ("Runtime routing errors"): each line of its
/// `text` blocks, in the page's order. The runtime's tests require them to be its messages.
pub fn runtime_samples() -> impl Iterator<Item = &'static str> {
    let start = TEXT
        .find("\n# Runtime routing errors")
        .expect("the page has a runtime part");
    let end = TEXT
        .find("\n# Build-time manifest errors")
        .expect("the page has a build-time part");
    TEXT[start..end]
        .lines()
        .scan(false, |in_sample, line| {
            Some(match line.trim_end() {
                "```text" => {
                    *in_sample = true;
                    None
                }
                "```" => {
                    *in_sample = false;
                    None
                }
                sample if *in_sample && !sample.is_empty() => Some(sample),
                _ => None,
            })
        })
        .flatten()
}

/// Every section's anchor, in the page's order.
pub fn anchors() -> impl Iterator<Item = &'static str> {
    TEXT.lines().filter_map(anchor_of)
}

fn anchor_of(line: &str) -> Option<&str> {
    line.trim()
        .strip_prefix(ANCHOR_OPEN)?
        .strip_suffix(ANCHOR_CLOSE)
}

/// Section `anchor` of the page, as Markdown: from its heading to the next section's anchor
/// (or the next part's `# ` heading). `None` when the page has no such section.
pub fn section(anchor: &str) -> Option<&'static str> {
    let mut start = None;
    let mut offset = 0;
    for line in TEXT.split_inclusive('\n') {
        let here = offset;
        offset += line.len();
        match start {
            None => {
                if anchor_of(line) == Some(anchor) {
                    start = Some(offset);
                }
            }
            // The section's own heading may be a part's `# `.
            Some(from) if from == here => {}
            Some(from) => {
                let text = line.trim_end();
                if anchor_of(text).is_some() || (text.starts_with("# ") && !in_fence(TEXT, here)) {
                    return Some(TEXT[from..here].trim_end());
                }
            }
        }
    }
    start.map(|from| TEXT[from..].trim_end())
}

/// Whether byte `at` of `text` is inside a fenced code block (where a `# ` line is a comment).
fn in_fence(text: &str, at: usize) -> bool {
    text[..at]
        .lines()
        .filter(|line| line.trim_start().starts_with("```"))
        .count()
        % 2
        == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_anchor_has_a_section_with_a_heading() {
        let anchors: Vec<&str> = anchors().collect();
        assert!(anchors.len() > 40, "{anchors:?}");
        for anchor in &anchors {
            let text = section(anchor).unwrap_or_else(|| panic!("no section `{anchor}`"));
            assert!(text.starts_with('#'), "`{anchor}` starts with {text:.40}");
            assert!(
                !text.contains(ANCHOR_OPEN),
                "`{anchor}` runs into the next section"
            );
        }
        let mut sorted = anchors.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), anchors.len(), "an anchor is defined twice");
    }

    #[test]
    fn a_section_ends_before_the_next_one() {
        let text = section("tracked-input").expect("section");
        assert!(text.starts_with("## `autodiff float input reached concrete dispatch`"));
        assert!(text.contains("**How to fix**"));
        assert!(!text.contains("only float tensors may use an autodiff primitive`\n"));
        assert_eq!(section("no-such-error"), None);
    }

    #[test]
    fn the_link_names_this_version() {
        assert_eq!(
            link("shape-contract").to_string(),
            format!(
                "https://docs.rs/burn-route-core/{}/burn_route_core/errors/index.html#shape-contract",
                env!("CARGO_PKG_VERSION")
            )
        );
    }
}
