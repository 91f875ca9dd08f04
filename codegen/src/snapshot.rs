//! Checked-in copies of the generated files, and the test helper that keeps them fresh.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use similar::TextDiff;

use crate::emit::File;
use crate::write::write_if_changed;

/// Compares `files` with the copies in `dir`.
///
/// With `bless`, stale or missing copies are rewritten and the check passes. Without it, any
/// difference fails with a unified diff per file and the command that blesses them.
///
/// # Errors
///
/// A message with the diffs, or the I/O error that prevented the check or the bless.
pub fn check(files: &[File], dir: &Path, bless: bool, bless_command: &str) -> Result<(), String> {
    let mut report = String::new();
    for file in files {
        let path = dir.join(file.name);
        let old = fs::read_to_string(&path).unwrap_or_default();
        if old == file.contents {
            continue;
        }
        if bless {
            write_if_changed(&path, &file.contents)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            continue;
        }
        let diff = TextDiff::from_lines(&old, &file.contents);
        let shown = path.display().to_string();
        let _ = write!(
            report,
            "{}",
            diff.unified_diff().context_radius(3).header(
                &format!("{shown} (checked in)"),
                &format!("{shown} (fresh render)")
            )
        );
    }
    if report.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{report}\nThe checked-in generated files in {} are stale (diff above).\nRe-run with `{bless_command}` to rewrite them, then review and commit the result.",
        dir.display()
    ))
}
