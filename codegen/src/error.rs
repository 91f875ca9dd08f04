//! What a render reports when it fails ([`Error`]), and the two ways to print it.

use std::fmt;
use std::path::PathBuf;

use crate::diag::{self, Report};

/// Why a render failed.
#[derive(Debug)]
pub enum Error {
    /// The manifest has problems; the report lists every one.
    Manifest(Report),
    /// A builder option is invalid.
    Config(String),
    /// Reading the manifest or writing an output failed.
    Io {
        /// The file involved.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Manifest(report) => report.fmt(f),
            Self::Config(msg) => write!(
                f,
                "burn-route-codegen: {msg}. See {}",
                burn_route_core::errors::link(diag::page::BUILD_CONFIG)
            ),
            Self::Io { path, source } => write!(
                f,
                "{}: {source}. See {}",
                path.display(),
                burn_route_core::errors::link(diag::page::BUILD_IO)
            ),
        }
    }
}

impl std::error::Error for Error {}

/// Every problem rendered like rustc ([`crate::Diagnostic::render_snippet`]), as non-blank lines.
pub fn rendered_lines(err: &Error) -> Vec<String> {
    let text = match err {
        Error::Manifest(report) => report.snippets().join("\n"),
        other => other.to_string(),
    };
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

/// One line per problem: `file:LINE:COL: `key`: message; help: fix`.
pub fn error_lines(err: &Error) -> Vec<String> {
    match err {
        Error::Manifest(report) => report.lines(),
        other => vec![other.to_string()],
    }
}
