//! The generator behind `burn-route`: reads an `ops.toml` manifest of routed tensor ops and
//! writes readable Rust modules that route each op through Burn's `Dispatch` backend.
//!
//! The pipeline runs in one direction behind [`Builder`]: parse (TOML → the manifest's model,
//! with spans) → validate (every rule, all errors collected → the IR) → emit (formatted text,
//! straight from the IR) → write (atomic, only when changed). Each run has one diagnostics
//! context, which every stage pushes its problems and warnings into and which orders the
//! report. The stages are private; the workspace's benchmarks and its op-reference test reach
//! them through [`stages`], which is not a stable API. [`keys`] (the manifest's keys) and
//! `schema` (its JSON Schema) are public for tools.
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

#![warn(missing_docs)]

mod canon;
mod cargo;
mod diag;
mod emit;
mod error;
mod formula;
mod ir;
pub mod keys;
mod markdown;
mod model;
mod names;
mod parse;
#[cfg(feature = "schema")]
pub mod schema;
#[cfg(feature = "snapshot")]
pub mod snapshot;
mod validate;
mod write;

/// The generator's stages, for this workspace's benchmarks (each stage timed on its own) and
/// the op-reference test (which reads the IR): not a stable API, and not for build scripts,
/// which use [`Builder`].
#[doc(hidden)]
pub mod stages {
    pub use crate::diag::SHOWN;
    pub use crate::emit::{EmitConfig, emit};
    /// The IR validation produces and the emitters read.
    pub mod ir {
        pub use crate::ir::*;
    }
    use crate::diag::{Diagnostic, Diagnostics};
    pub use crate::model::Manifest;

    /// Parses manifest text: the model, and every problem found, in a report's order.
    pub fn parse(source: &str) -> (Manifest, Vec<Diagnostic>) {
        let mut diags = Diagnostics::new();
        let manifest = crate::parse::parse(source, &mut diags);
        (manifest, diags.errors())
    }

    /// Checks a parsed manifest and lowers it. `manifest_name` is how runtime messages name the
    /// file; `source` is its text (for line numbers).
    ///
    /// # Errors
    ///
    /// Every problem found, in a report's order.
    pub fn validate(
        manifest: &Manifest,
        manifest_name: &str,
        source: &str,
    ) -> Result<ir::Ir, Vec<Diagnostic>> {
        let mut diags = Diagnostics::new();
        let options = crate::validate::Options {
            manifest_name,
            trait_name: None,
            op_check: false,
        };
        crate::validate::validate(manifest, &options, source, &mut diags)
            .ok_or_else(|| diags.errors())
    }
}

use std::path::{Path, PathBuf};

pub use cargo::{check_cfg_lines, runtime_cfg_lines, undeclared_features};
use diag::Diagnostics;
pub use diag::{Diagnostic, Report};
pub use emit::{CHECK_FILE, DISPATCH_FILE, File, OPS_FILE, TENSOR_FILE};
pub use error::{Error, error_lines, rendered_lines};
pub use write::WriteOutcome;

/// Owns every generator option. Start with [`Builder::new`], adjust, then call
/// [`Builder::build_script`] from a build script, or [`Builder::render`] / [`Builder::write`].
///
/// Rendering a manifest held in a string, and what an invalid one reports:
///
/// ```
/// use burn_route_codegen::{Builder, error_lines};
///
/// let manifest = r#"
/// [routing]
/// trait = "MyOps"
/// backends = ["Flex"]
///
/// [[op]]
/// name = "double"
/// autodiff = "differentiable"
/// inputs = [{ name = "x", tensor = "float" }]
/// output = { tensor = "float" }
/// backward = { x = "2 * grad" }
/// "#;
/// let files = Builder::new("ops.toml").render_str(manifest)?;
/// let names: Vec<&str> = files.iter().map(|f| f.name).collect();
/// assert_eq!(names, ["routed_ops.rs", "routed_dispatch.rs", "routed_tensor.rs"]);
/// assert!(files[0].contents.contains("pub trait MyOps"));
///
/// let typo = manifest.replace("\"float\" }]", "\"flaot\" }]");
/// let err = Builder::new("ops.toml").render_str(&typo).unwrap_err();
/// assert_eq!(
///     error_lines(&err),
///     ["ops.toml:9:34: `op[0].inputs[0].tensor`: unknown tensor kind `flaot`; help: did you \
///       mean `float`? tensor kinds: float, int, bool, quantized"]
/// );
/// # Ok::<(), burn_route_codegen::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Builder {
    manifest: PathBuf,
    manifest_name: Option<String>,
    out_dir: Option<PathBuf>,
    runtime_path: String,
    /// Whether [`Builder::runtime_path`] set it (else a build script picks it from the crate's
    /// dependencies).
    runtime_path_set: bool,
    trait_module: String,
    dispatch_module: String,
    regenerate: String,
    trait_name: Option<String>,
    modules: Vec<Module>,
    #[cfg(feature = "snapshot")]
    snapshot_dir: Option<PathBuf>,
    /// The crate under test of the op check (`op_check`), as a path from outside it.
    op_check: Option<String>,
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
            runtime_path: names::RUNTIME_PATH.to_owned(),
            runtime_path_set: false,
            trait_module: "super::ops".to_owned(),
            dispatch_module: "super::dispatch".to_owned(),
            regenerate: "the build script (`burn_route_codegen::Builder`) regenerates this file"
                .to_owned(),
            trait_name: None,
            modules: vec![Module::Ops, Module::Dispatch, Module::Tensor],
            #[cfg(feature = "snapshot")]
            snapshot_dir: None,
            op_check: None,
        }
    }

    /// Also writes the op check, `routed_check.rs`: one `#[test]` per op that checks its values
    /// on every compiled backend, its autodiff policy and its gradients against finite
    /// differences (`burn_route_runtime::check`). Include it from one test file of the crate:
    /// `include!(concat!(env!("OUT_DIR"), "/routed_check.rs"));`.
    ///
    /// It calls the ops through the crate's `dispatch` module (`your_crate::dispatch`, the
    /// layout the guide shows); [`Builder::op_check_crate`] names another crate path.
    #[must_use]
    pub fn op_check(mut self) -> Self {
        if self.op_check.is_none() {
            let name = std::env::var("CARGO_PKG_NAME").unwrap_or_default();
            self.op_check = Some(format!("::{}", name.replace('-', "_")));
        }
        self
    }

    /// [`Builder::op_check`] for the generated modules at `path`: a crate (`::my_ops`) or a
    /// module (`::my_ops::routed`) whose `dispatch` module has the routed functions and whose
    /// `ops` module the declared types. A path starting with `crate::` is a check compiled
    /// inside that crate (included from one of its own modules): the manifest's `crate::`
    /// paths are then left as they are.
    #[must_use]
    pub fn op_check_crate(mut self, path: impl Into<String>) -> Self {
        self.op_check = Some(path.into());
        self
    }

    /// Where [`Builder::write`] puts the files. Defaults to `$OUT_DIR`.
    #[must_use]
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.out_dir = Some(dir.into());
        self
    }

    /// The path generated code uses for the runtime support module. Defaults to
    /// `::burn_route_runtime::rt` (the `burn-route-runtime` crate); `burn-route` itself uses
    /// `crate::rt`, its re-export. Left unset, [`Builder::build_script`] takes
    /// `::burn_route::rt` for a crate whose `Cargo.toml` depends on `burn-route` and not on
    /// `burn-route-runtime` (as crates did before the runtime was a crate of its own).
    #[must_use]
    pub fn runtime_path(mut self, path: impl Into<String>) -> Self {
        self.runtime_path = path.into();
        self.runtime_path_set = true;
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
    #[cfg(feature = "snapshot")]
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
    #[cfg(feature = "snapshot")]
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
            let path = syn::parse_str::<syn::Path>(value)
                .map_err(|e| Error::Config(format!("{what} `{value}` is not a Rust path: {e}")))?;
            if path
                .segments
                .iter()
                .any(|s| !matches!(s.arguments, syn::PathArguments::None))
            {
                return Err(Error::Config(format!(
                    "{what} `{value}` has generic arguments; a module path has none"
                )));
            }
            Ok(canon::path_text(&path))
        };
        // Text that generated comments, docs and string literals carry: one line of plain text.
        let plain_text = |what: &str, value: &str| match value
            .chars()
            .find(|c| c.is_control() || validate::text::is_bidi(*c))
        {
            Some(c) => Err(Error::Config(format!(
                "{what} `{}` contains U+{:04X}; it is written into generated comments and must be one line of plain text",
                value.escape_debug(),
                u32::from(c)
            ))),
            None => Ok(()),
        };
        plain_text("manifest name", &self.display_name())?;
        plain_text("regenerate hint", &self.regenerate)?;
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
        self.render_in(source, &mut Diagnostics::new())
    }

    /// [`Builder::render_str`] as a step of a run whose diagnostics are `diags`.
    fn render_in(&self, source: &str, diags: &mut Diagnostics) -> Result<Vec<File>, Error> {
        let config = self.config()?;
        let ir = self.lower(source, diags)?;
        let mut files = emit::emit(&ir, &config);
        files.retain(|f| self.modules.iter().any(|m| m.file_name() == f.name));
        files.extend(self.check_file(&ir));
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
        let ir = self.lower(source, &mut Diagnostics::new())?;
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

    /// Parses and validates manifest text into the IR, pushing every problem and warning into
    /// the run's `diags`; its errors, when it has any, become one report.
    fn lower(&self, source: &str, diags: &mut Diagnostics) -> Result<ir::Ir, Error> {
        let name = self.display_name();
        // Validation also runs on what parsed, so one pass reports every problem.
        let manifest = parse::parse(source, diags);
        let options = validate::Options {
            manifest_name: &name,
            trait_name: self.trait_name.as_deref(),
            op_check: self.op_check.is_some(),
        };
        let ir = validate::validate(&manifest, &options, source, diags);
        if diags.has_errors() {
            return Err(Error::Manifest(diags.report(&name, source)));
        }
        ir.ok_or_else(|| {
            Error::Config("validation failed without a diagnostic (a generator bug)".to_owned())
        })
    }

    fn read_manifest(&self) -> Result<String, Error> {
        let bytes = std::fs::read(&self.manifest).map_err(|source| Error::Io {
            path: self.manifest.clone(),
            source,
        })?;
        String::from_utf8(bytes).map_err(|err| {
            // TOML is UTF-8: a positioned manifest error, like any other.
            let at = err.utf8_error().valid_up_to();
            let byte = err.as_bytes()[at];
            let source = String::from_utf8_lossy(err.as_bytes()).into_owned();
            Error::Manifest(Report {
                file: self.display_name(),
                source,
                diagnostics: vec![
                    // The invalid byte reads as U+FFFD in `source`.
                    Diagnostic::new(
                        at..at + char::REPLACEMENT_CHARACTER.len_utf8(),
                        "<encoding>",
                        format!("the manifest is not UTF-8: byte 0x{byte:02X} cannot start or continue a character"),
                    )
                    .page(diag::page::NOT_UTF8)
                    .help("save the file as UTF-8, which TOML requires"),
                ],
            })
        })
    }

    /// The run's warnings (a declared type no op uses, ...) as a report, when it has any.
    fn warning_report(&self, diags: &Diagnostics, source: &str) -> Option<Report> {
        diags.warning_report(&self.display_name(), source)
    }

    /// [`Builder::render`], with the manifest's warnings (problems that still generate, such as
    /// a declared type no op uses) as a report when it has any.
    ///
    /// # Errors
    ///
    /// As [`Builder::render`].
    pub fn render_with_warnings(&self) -> Result<(Vec<File>, Option<Report>), Error> {
        let source = self.read_manifest()?;
        let mut diags = Diagnostics::new();
        let files = self.render_in(&source, &mut diags)?;
        Ok((files, self.warning_report(&diags, &source)))
    }

    /// [`Builder::write`], with the manifest's warnings as [`Builder::render_with_warnings`]
    /// returns them.
    ///
    /// # Errors
    ///
    /// As [`Builder::write`].
    #[allow(clippy::type_complexity)]
    pub fn write_with_warnings(
        &self,
    ) -> Result<(Vec<(PathBuf, WriteOutcome)>, Option<Report>), Error> {
        let mut diags = Diagnostics::new();
        let (_, source, written) = self.write_files(&mut diags)?;
        Ok((written, self.warning_report(&diags, &source)))
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
        self.write_files(&mut Diagnostics::new())
            .map(|(_, _, written)| written)
    }

    /// [`Builder::write`] as a step of a run whose diagnostics are `diags`: the IR, the manifest
    /// text it was read from, and what was done to each file.
    #[allow(clippy::type_complexity)]
    fn write_files(
        &self,
        diags: &mut Diagnostics,
    ) -> Result<(ir::Ir, String, Vec<(PathBuf, WriteOutcome)>), Error> {
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
        let source = self.read_manifest()?;
        let config = self.config()?;
        let ir = self.lower(&source, diags)?;
        let mut files = emit::emit(&ir, &config);
        files.retain(|f| self.modules.iter().any(|m| m.file_name() == f.name));
        if let Some(file) = self.check_file(&ir) {
            files.push(file);
        }
        let written = files
            .iter()
            .map(|file| {
                let path = out_dir.join(file.name);
                write::write_if_changed(&path, &file.contents)
                    .map(|outcome| (path.clone(), outcome))
                    .map_err(|source| Error::Io { path, source })
            })
            .collect::<Result<_, _>>()?;
        Ok((ir, source, written))
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
        if !self.runtime_path_set
            && let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR")
            && let Ok(text) = std::fs::read_to_string(Path::new(&dir).join("Cargo.toml"))
            && let Some(path) = cargo::runtime_of_dependencies(&text)
        {
            return self.clone().runtime_path(path).build_script_to(out);
        }
        let mut lines = vec![
            format!("cargo::rerun-if-changed={}", self.manifest.display()),
            "cargo::rerun-if-changed=build.rs".to_owned(),
        ];
        lines.extend(runtime_cfg_lines(|key| std::env::var(key).ok()));
        let mut failed_features = false;
        // The run's one diagnostics context: the manifest's problems and warnings, then the
        // check of its cfgs against Cargo.toml.
        let mut diags = Diagnostics::new();
        let result = self.write_files(&mut diags);
        if let Ok((ir, source, _)) = &result {
            lines.extend(check_cfg_lines(ir));
            // Warnings: the files are generated, and cargo shows each line.
            if let Some(report) = self.warning_report(&diags, source) {
                lines.extend(
                    report
                        .snippets()
                        .join("\n")
                        .lines()
                        .filter(|line| !line.trim().is_empty())
                        .map(|line| format!("cargo::warning={line}")),
                );
            }
            if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
                let cargo_toml = std::fs::read_to_string(Path::new(&dir).join("Cargo.toml"));
                if let Ok(text) = cargo_toml {
                    // rustc would only warn (`unexpected_cfgs`), and the route would silently
                    // never be compiled in: an error.
                    cargo::check_features(ir, &text, source, &mut diags);
                    failed_features = diags.has_errors();
                    let report = diags.report(&self.display_name(), source);
                    lines.extend(
                        report
                            .snippets()
                            .join("\n")
                            .lines()
                            .filter(|line| !line.trim().is_empty())
                            .map(|line| format!("cargo::error={line}")),
                    );
                }
            }
        }
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
        result.is_ok() && !failed_features
    }

    /// The op check's file, when [`Builder::op_check`] asked for it.
    fn check_file(&self, ir: &ir::Ir) -> Option<File> {
        let crate_path = self.op_check.clone()?;
        let config =
            emit::check::CheckConfig::new(crate_path, &self.trait_module, &self.runtime_path);
        Some(File {
            name: emit::CHECK_FILE,
            contents: emit::check::emit(ir, &config, &self.regenerate),
        })
    }

    /// The manifest path this builder reads.
    pub fn manifest_path(&self) -> &Path {
        &self.manifest
    }
}

/// The one bless switch of the snapshot and fixture tests (the checked-in renders, the UI
/// fixtures, the schema, the docs' listings): `BLESS=1` rewrites what they compare with; any
/// other value, or none, only compares.
pub fn bless_requested() -> bool {
    std::env::var_os("BLESS").is_some_and(|v| v == "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_script_reports_an_unused_declared_type_as_cargo_warnings() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = dir.path().join("ops.toml");
        let source = "[routing]\ntrait = \"MyOps\"\nbackends = [\"Flex\"]\n\n[[type]]\nname = \"Pair\"\nfields = [{ name = \"x\", tensor = \"float\" }]\n\n[[op]]\nname = \"double\"\ninputs = [{ name = \"x\", tensor = \"float\" }]\noutput = { tensor = \"float\" }\n";
        std::fs::write(&manifest, source).unwrap();
        let out = dir.path().join("out");
        let builder = Builder::new(&manifest)
            .manifest_name("ops.toml")
            .out_dir(&out);
        let mut stdout = Vec::new();
        assert!(
            builder.build_script_to(&mut stdout),
            "a warning still generates"
        );
        let stdout = String::from_utf8(stdout).unwrap();
        let warnings: Vec<&str> = stdout
            .lines()
            .filter(|l| l.starts_with("cargo::warning="))
            .collect();
        assert_eq!(
            warnings,
            [
                "cargo::warning=warning: type `Pair` is used by no op",
                "cargo::warning= --> ops.toml:6:8",
                "cargo::warning=  |",
                "cargo::warning=6 | name = \"Pair\"",
                "cargo::warning=  |        ^^^^^^ `type[0]`",
                "cargo::warning=  |",
                "cargo::warning=  = help: use it in an op's `inputs` or `output` (`type = \"Pair\"`), or remove it",
                "cargo::warning=  = note: see https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#manifest-declared-type",
            ]
        );
        assert!(!stdout.contains("cargo::error="), "{stdout}");
        assert!(
            std::fs::read_dir(&out).unwrap().next().is_some(),
            "the files are written"
        );
    }
}
