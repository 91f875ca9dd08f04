//! The generator behind `burn-route`: reads an `ops.toml` manifest of routed tensor ops and
//! writes readable Rust modules that route each op through Burn's `Dispatch` backend.
//!
//! The pipeline runs in one direction: [`parse`] (TOML → [`model`], with spans) →
//! [`validate`] (every rule, all errors collected → [`ir`]) → [`emit`] (formatted text, straight
//! from the IR) → [`mod@write`] (atomic, only when changed).
//!
//! A build script needs one call:
//!
//! ```no_run
//! // in build.rs's `fn main`:
//! burn_route_codegen::Builder::new("ops.toml").build_script();
//! ```
//!
//! and the crate includes the three files from `OUT_DIR` as sibling modules (the trait module
//! name is [`Builder::trait_module`]'s default, `super::ops`):
//!
//! ```ignore
//! pub mod ops { include!(concat!(env!("OUT_DIR"), "/routed_ops.rs")); }
//! pub mod dispatch { include!(concat!(env!("OUT_DIR"), "/routed_dispatch.rs")); }
//! pub mod tensor { include!(concat!(env!("OUT_DIR"), "/routed_tensor.rs")); }
//! ```

mod canon;
pub mod diag;
pub mod emit;
pub mod ir;
pub mod model;
pub mod parse;
pub mod schema;
pub mod snapshot;
pub mod validate;
pub mod write;

use std::fmt;
use std::path::{Path, PathBuf};

pub use diag::{Diagnostic, Report};
pub use emit::File;
pub use write::WriteOutcome;

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
            Self::Config(msg) => write!(f, "burn-route-codegen: {msg}"),
            Self::Io { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for Error {}

/// Owns every generator option. Start with [`Builder::new`], adjust, then call
/// [`Builder::build_script`] from a build script, or [`Builder::render`] / [`Builder::write`].
#[derive(Clone, Debug)]
pub struct Builder {
    manifest: PathBuf,
    manifest_name: Option<String>,
    out_dir: Option<PathBuf>,
    runtime_path: String,
    trait_module: String,
    dispatch_module: String,
    regenerate: String,
    trait_name: Option<String>,
    modules: Vec<Module>,
    snapshot_dir: Option<PathBuf>,
}

/// A generated module (file) that [`Builder::modules`] can select.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Module {
    /// `routed_ops.rs`: the extension traits.
    Ops,
    /// `routed_dispatch.rs`: `impl Trait for Dispatch` and the `try_` functions.
    Dispatch,
    /// `routed_tensor.rs`: the `Tensor<D>`-level functions.
    Tensor,
}

impl Module {
    /// The file this module is written to.
    pub fn file_name(self) -> &'static str {
        match self {
            Self::Ops => emit::OPS_FILE,
            Self::Dispatch => emit::DISPATCH_FILE,
            Self::Tensor => emit::TENSOR_FILE,
        }
    }
}

impl Builder {
    /// A builder for the manifest at `manifest` (relative paths are relative to the current
    /// directory, which for a build script is the package root).
    pub fn new(manifest: impl Into<PathBuf>) -> Self {
        Self {
            manifest: manifest.into(),
            manifest_name: None,
            out_dir: None,
            runtime_path: "::burn_route::rt".to_owned(),
            trait_module: "super::ops".to_owned(),
            dispatch_module: "super::dispatch".to_owned(),
            regenerate: "bless the snapshot with `UPDATE_GENERATED=1 cargo test`".to_owned(),
            trait_name: None,
            modules: vec![Module::Ops, Module::Dispatch, Module::Tensor],
            snapshot_dir: None,
        }
    }

    /// Where [`Builder::write`] puts the files. Defaults to `$OUT_DIR`.
    #[must_use]
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.out_dir = Some(dir.into());
        self
    }

    /// The path generated code uses for the runtime support module. Defaults to
    /// `::burn_route::rt`; `burn-route` itself uses `crate::rt`.
    #[must_use]
    pub fn runtime_path(mut self, path: impl Into<String>) -> Self {
        self.runtime_path = path.into();
        self
    }

    /// The path, as seen from the generated dispatch and tensor modules, of the module that
    /// includes the generated traits. Defaults to `super::ops`.
    #[must_use]
    pub fn trait_module(mut self, path: impl Into<String>) -> Self {
        self.trait_module = path.into();
        self
    }

    /// The path, as seen from the generated tensor module, of the module that includes the
    /// generated dispatch file (its `try_` functions). Defaults to `super::dispatch`.
    #[must_use]
    pub fn dispatch_module(mut self, path: impl Into<String>) -> Self {
        self.dispatch_module = path.into();
        self
    }

    /// How the manifest is named in diagnostics, docs and runtime messages. Defaults to the
    /// manifest path as given to [`Builder::new`].
    #[must_use]
    pub fn manifest_name(mut self, name: impl Into<String>) -> Self {
        self.manifest_name = Some(name.into());
        self
    }

    /// Overrides `routing.trait`: the main trait and the names derived from it (per-backend and
    /// composite traits, and the autodiff trait unless the manifest names it).
    #[must_use]
    pub fn trait_name(mut self, name: impl Into<String>) -> Self {
        self.trait_name = Some(name.into());
        self
    }

    /// Which modules to generate (all three by default). The tensor module calls the dispatch
    /// module and the dispatch module implements the traits, so a crate that drops one provides
    /// it some other way.
    #[must_use]
    pub fn modules(mut self, modules: &[Module]) -> Self {
        self.modules = modules.to_vec();
        self
    }

    /// Where the checked-in copies of the generated files live, for
    /// [`Builder::check_snapshot`].
    #[must_use]
    pub fn snapshot_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.snapshot_dir = Some(dir.into());
        self
    }

    /// Compares a fresh render with the snapshot directory: `Err` with a unified diff and
    /// `bless_command` when they differ. With `bless`, rewrites stale copies instead — unless the
    /// manifest has errors, in which case nothing is written.
    ///
    /// # Errors
    ///
    /// The render's error, a missing snapshot directory option, or the diff report.
    pub fn check_snapshot(&self, bless: bool, bless_command: &str) -> Result<(), String> {
        let dir = self
            .snapshot_dir
            .as_ref()
            .ok_or("no snapshot directory: call `snapshot_dir(..)`")?;
        let files = self.render().map_err(|e| e.to_string())?;
        snapshot::check(&files, dir, bless, bless_command)
    }

    /// The regenerate hint written in each file's header.
    #[must_use]
    pub fn regenerate_hint(mut self, hint: impl Into<String>) -> Self {
        self.regenerate = hint.into();
        self
    }

    fn display_name(&self) -> String {
        self.manifest_name
            .clone()
            .unwrap_or_else(|| self.manifest.display().to_string())
    }

    fn config(&self) -> Result<emit::EmitConfig, Error> {
        let parse_path = |what: &str, value: &str| {
            syn::parse_str::<syn::Path>(value)
                .map(|path| canon::path_text(&path))
                .map_err(|e| Error::Config(format!("{what} `{value}` is not a Rust path: {e}")))
        };
        Ok(emit::EmitConfig {
            runtime: parse_path("runtime path", &self.runtime_path)?,
            trait_module: parse_path("trait module", &self.trait_module)?,
            dispatch_module: parse_path("dispatch module", &self.dispatch_module)?,
            regenerate: self.regenerate.clone(),
        })
    }

    /// Renders the files from manifest text, without touching the file system.
    ///
    /// # Errors
    ///
    /// [`Error::Manifest`] with every problem in the manifest, or [`Error::Config`].
    pub fn render_str(&self, source: &str) -> Result<Vec<File>, Error> {
        let config = self.config()?;
        let ir = self.lower(source)?;
        let mut files = emit::emit(&ir, &config);
        files.retain(|f| self.modules.iter().any(|m| m.file_name() == f.name));
        Ok(files)
    }

    /// Kernel stubs for the manifest text: every `impl` the crate writes by hand (each trait for
    /// each of its backends, and the `Autodiff<B, C>` impls of differentiable ops), with
    /// `todo!()` bodies. A starting point to copy, not a generated module.
    ///
    /// # Errors
    ///
    /// As [`Builder::render_str`].
    pub fn skeleton_str(&self, source: &str) -> Result<String, Error> {
        let config = self.config()?;
        let ir = self.lower(source)?;
        Ok(emit::skeleton(&ir, &config))
    }

    /// [`Builder::skeleton_str`] for the manifest file.
    ///
    /// # Errors
    ///
    /// As [`Builder::render`].
    pub fn skeleton(&self) -> Result<String, Error> {
        self.skeleton_str(&self.read_manifest()?)
    }

    /// Parses and validates manifest text into the IR, with every problem in one report.
    fn lower(&self, source: &str) -> Result<ir::Ir, Error> {
        let name = self.display_name();
        let report = |diagnostics| {
            Error::Manifest(Report {
                file: name.clone(),
                source: source.to_owned(),
                diagnostics,
            })
        };
        // Validation also runs on what parsed, so one pass reports every problem.
        let (manifest, mut diagnostics) = parse::parse(source);
        match validate::validate(&manifest, &name, source) {
            Ok(mut ir) if diagnostics.is_empty() => {
                if let Some(new) = &self.trait_name {
                    rename_main_trait(&mut ir, new);
                }
                Ok(ir)
            }
            Ok(_) => Err(report(diagnostics)),
            Err(more) => {
                diagnostics.extend(more);
                if diagnostics.is_empty() {
                    return Err(Error::Config(
                        "validation failed without a diagnostic (a generator bug)".to_owned(),
                    ));
                }
                diagnostics.sort_by(|a, b| (a.span.start, &a.key).cmp(&(b.span.start, &b.key)));
                diagnostics.dedup();
                Err(report(diagnostics))
            }
        }
    }

    fn read_manifest(&self) -> Result<String, Error> {
        std::fs::read_to_string(&self.manifest).map_err(|source| Error::Io {
            path: self.manifest.clone(),
            source,
        })
    }

    /// Reads the manifest and renders the files in memory.
    ///
    /// # Errors
    ///
    /// As [`Builder::render_str`], plus [`Error::Io`] when the manifest cannot be read.
    pub fn render(&self) -> Result<Vec<File>, Error> {
        self.render_str(&self.read_manifest()?)
    }

    /// Renders and writes every file into the output directory (atomically, and only the files
    /// whose content changed). Returns each path with what was done to it.
    ///
    /// # Errors
    ///
    /// As [`Builder::render`]; [`Error::Config`] when no output directory is set and `OUT_DIR`
    /// is unset; [`Error::Io`] when a write fails (earlier files keep their previous content).
    pub fn write(&self) -> Result<Vec<(PathBuf, WriteOutcome)>, Error> {
        let out_dir = match &self.out_dir {
            Some(dir) => dir.clone(),
            None => std::env::var_os("OUT_DIR")
                .map(PathBuf::from)
                .ok_or_else(|| {
                    Error::Config(
                        "no output directory: call `out_dir(..)` or run from a build script"
                            .to_owned(),
                    )
                })?,
        };
        let files = self.render()?;
        files
            .iter()
            .map(|file| {
                let path = out_dir.join(file.name);
                write::write_if_changed(&path, &file.contents)
                    .map(|outcome| (path.clone(), outcome))
                    .map_err(|source| Error::Io { path, source })
            })
            .collect()
    }

    /// Runs the generator from a build script: declares the manifest as the only input besides
    /// `build.rs` (`cargo::rerun-if-changed`), writes the files to `OUT_DIR`, and reports every
    /// problem rendered like rustc (message, `--> file:LINE:COL`, the source line with a caret
    /// under the offending key or value, `help:` with the fix) as `cargo::error=` lines. Cargo
    /// then fails the build with those messages; nothing panics.
    pub fn build_script(&self) {
        let stdout = std::io::stdout();
        self.build_script_to(&mut stdout.lock());
    }

    /// [`Builder::build_script`], writing the cargo instructions to `out`. Returns whether the
    /// files were generated.
    pub fn build_script_to(&self, out: &mut impl std::io::Write) -> bool {
        let mut lines = vec![
            format!("cargo::rerun-if-changed={}", self.manifest.display()),
            "cargo::rerun-if-changed=build.rs".to_owned(),
        ];
        let result = self.write();
        if let Err(err) = &result {
            // Cargo takes one line per instruction: each line of the rustc-style rendering
            // becomes its own `cargo::error=` (blank separator lines are dropped).
            lines.extend(
                rendered_lines(err)
                    .into_iter()
                    .map(|line| format!("cargo::error={line}")),
            );
        }
        for line in lines {
            // Cargo reads these from stdout; a closed stdout leaves nothing to report to.
            let _ = writeln!(out, "{line}");
        }
        result.is_ok()
    }

    /// The manifest path this builder reads.
    pub fn manifest_path(&self) -> &Path {
        &self.manifest
    }
}

/// Renames the main trait and every trait named after it.
fn rename_main_trait(ir: &mut ir::Ir, new: &str) {
    let old = std::mem::replace(&mut ir.trait_name, new.to_owned());
    if ir.autodiff_trait == format!("{old}Autodiff") {
        ir.autodiff_trait = format!("{new}Autodiff");
    }
    for group in &mut ir.groups {
        if let Some(rest) = group.name.strip_prefix(&old) {
            group.name = format!("{new}{rest}");
        }
        group.autodiff_name = if group.name == *new {
            ir.autodiff_trait.clone()
        } else {
            format!("{}Autodiff", group.name)
        };
    }
}

/// Every problem rendered like rustc ([`Diagnostic::render_snippet`]), as non-blank lines.
pub fn rendered_lines(err: &Error) -> Vec<String> {
    let text = match err {
        Error::Manifest(report) => report
            .diagnostics
            .iter()
            .map(|d| d.render_snippet(&report.file, &report.source))
            .collect::<Vec<_>>()
            .join("\n"),
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
