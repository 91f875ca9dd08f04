//! Writing generated files: atomically, and only when the content changed.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

/// What writing a generated file did (`write_if_changed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The file already had exactly this content; it was not touched (its mtime is unchanged).
    Unchanged,
    /// The file was created or replaced.
    Written,
}

/// Writes `contents` to `path` unless the file already holds exactly that. The new content goes
/// to a temporary file in the same directory first and is renamed over `path`, so readers never
/// see a half-written file and a failure leaves the previous file intact.
///
/// # Errors
///
/// Any I/O error creating, writing or renaming the file.
pub fn write_if_changed(path: &Path, contents: &str) -> io::Result<WriteOutcome> {
    if fs::read(path).is_ok_and(|old| old == contents.as_bytes()) {
        return Ok(WriteOutcome::Unchanged);
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let file_name = path
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{file_name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = fs::File::create(&tmp)?;
        file.write_all(contents.as_bytes())?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map(|()| WriteOutcome::Written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn unchanged_content_keeps_the_file_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.rs");
        assert_eq!(write_if_changed(&path, "x").unwrap(), WriteOutcome::Written);
        let before = fs::metadata(&path).unwrap().modified().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(
            write_if_changed(&path, "x").unwrap(),
            WriteOutcome::Unchanged
        );
        assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), before);
        assert_eq!(write_if_changed(&path, "y").unwrap(), WriteOutcome::Written);
        assert_eq!(fs::read_to_string(&path).unwrap(), "y");
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
